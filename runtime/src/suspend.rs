//! The suspend points green threads use to give the CPU back: `yield_now`,
//! `park` and its variants (with what the park waits on, for
//! who-waits-on-whom), `sleep`, and the checks every blocking call makes
//! first (interrupts, cancel scopes, shutdown's forced unwind, sections
//! that must not suspend).
//!
//! The scheduler (`sched`) resumes threads; everything here runs on the
//! suspending thread's own stack, up to the switch back to the scheduler
//! in [`suspend`].

use std::panic;
use std::panic::Location;
use std::rc::Rc;
use std::time::Duration;

use crate::cancel;
use crate::clock::{self, Instant};
use crate::context;
use crate::error::WaitError;
use crate::sched::{ForcedUnwind, Scheduler, UNWIND_REFUSAL_LIMIT};
use crate::spin;
use crate::stack;
use crate::task::{Task, ThreadState};
use crate::timer::TimerKind;
use crate::waits::WaitTarget;

/// Suspends the running task; returns when the scheduler resumes it.
#[inline]
fn suspend(t: &Task) {
    let y = t.yielder.get();
    debug_assert!(!y.is_null());
    t.stack.sp.set(stack::stack_pointer());
    // SAFETY: by the invariant on `Task::yielder`, a running task's yielder
    // points at the live `Yielder` on its own stack, and we are that task.
    unsafe { (*y).suspend(()) }
}

/// Gives up the CPU: the running green thread goes to the back of the ready
/// queue and the others ready now run first.
///
/// It is not a blocking call: it neither fails nor reports timeouts or
/// interrupts (a pending one stays for the next blocking call).
///
/// Where the thread may not switch (inside [`no_suspend`](crate::no_suspend),
/// or in a destructor running while the thread unwinds) it does nothing and
/// logs a warning, once per thread. So a loop that waits for another thread
/// with `yield_now` must not run there: it would spin.
///
/// # Panics
///
/// Outside a green thread.
///
/// # Examples
///
/// ```
/// use std::cell::RefCell;
/// use std::rc::Rc;
///
/// coro::run(|| {
///     let log = Rc::new(RefCell::new(Vec::new()));
///     let l = log.clone();
///     let h = coro::spawn(move || l.borrow_mut().push("spawned"));
///     log.borrow_mut().push("main");
///     coro::yield_now();
///     h.join().unwrap();
///     assert_eq!(*log.borrow(), ["main", "spawned"]);
/// });
/// ```
#[inline]
#[track_caller]
pub fn yield_now() {
    context::with_current("coro::yield_now", |_, t| {
        if may_suspend(t) {
            t.state.set(ThreadState::Ready);
            suspend(t);
        } else {
            yield_refused(t);
        }
    })
}

/// Reports a `yield_now` where the thread may not switch.
#[cold]
#[inline(never)]
fn yield_refused(t: &Task) {
    if t.unwinding.get() {
        // Shutdown is unwinding this thread: a yield is where it unwinds.
        let _ = forced_unwind_point(t);
        return;
    }
    if t.tail_to_fill().yield_refusal_logged.replace(true) {
        return;
    }
    log::warn!(
        target: "coro",
        "green thread #{} '{}' called yield_now {}; ignored (a destructor must not switch threads; further refusals of this thread are not logged)",
        t.id,
        t.display_name(),
        why_not_suspend(t),
    );
}

/// The yield a blocking call makes between two of its own tries
/// (`future::block_on` when the future woke itself): the thread goes to
/// the back of the ready queue, as with [`yield_now`], after the checks of
/// a park. An interrupt, a passed deadline or a cancellation, or shutdown
/// ends the call with its error; where the thread may not switch (inside
/// [`no_suspend`](crate::no_suspend), or while it unwinds) the call fails
/// with [`WaitError::SuspendForbidden`], logged naming `call`, as a park
/// there does: a yield refused there would leave the caller spinning.
#[inline]
#[track_caller]
pub(crate) fn yield_in(what: &'static str, call: &'static str) -> Result<(), WaitError> {
    // SAFETY: `s` and `t` are used only inside this call of the running
    // thread, across its suspend (see `context::current_unbound`).
    let (s, t) = unsafe { context::current_unbound(call) };
    // The deadline of an enclosing scope is armed here as for a park: a
    // caller that only ever yields must see it pass too.
    if let Err(e) = check(s, t).and_then(|()| cancel::arm(s, t)) {
        // Read here, not in a closure: only here is it the caller's.
        return park_refused(s, t, e, what, call, Location::caller());
    }
    t.state.set(ThreadState::Ready);
    suspend(t);
    Ok(())
}

/// Whether the running task may switch away now: not inside a `no_suspend`
/// region, not unwinding from a panic, and not asked to unwind by shutdown.
/// While a green thread unwinds no other may run: the panic state is per OS
/// thread, and a switch in the middle of an unwind can abort the process.
#[inline]
fn may_suspend(t: &Task) -> bool {
    t.no_suspend.get() == 0 && !t.unwinding.get() && !std::thread::panicking()
}

/// Why [`may_suspend`] said no, for messages.
fn why_not_suspend(t: &Task) -> &'static str {
    if t.no_suspend.get() > 0 {
        "inside a no_suspend region"
    } else {
        "while unwinding"
    }
}

/// Spends one unit of the running thread's selfishness budget; when it runs
/// out, the thread is forcibly yielded to the back of the ready queue and the
/// budget refills.
///
/// I/O code calls this after each operation that succeeded without blocking
/// (the sockets of `coro::net` do), so a sender on a fast link cannot starve
/// the others. Any real block refills the budget too. Returns whether it
/// yielded.
///
/// Where the thread may not switch (inside
/// [`no_suspend`](crate::no_suspend), or in a destructor running while it
/// unwinds) the yield is put off: the budget stays empty and the first later
/// `try_selfish` where the thread may switch yields.
///
/// # Panics
///
/// Outside a green thread.
#[inline]
#[track_caller]
pub fn try_selfish() -> bool {
    context::with_current("coro::try_selfish", spend_selfishness)
}

/// [`try_selfish`] for the runtime's own I/O paths: does nothing (and
/// returns `false`) where no green thread runs, e.g. on a socket that
/// outlived its runtime, where failing after the syscall would lose its
/// result. One thread-local lookup, as `try_selfish`.
#[inline]
pub(crate) fn try_selfish_if_green() -> bool {
    context::try_with_current(spend_selfishness).unwrap_or(false)
}

/// Spends one unit of `t`'s budget; at zero yields (or, where `t` may not
/// switch, puts the yield off). Returns whether it yielded.
#[inline]
fn spend_selfishness(s: &Scheduler, t: &Task) -> bool {
    let left = t.selfish_left.get().saturating_sub(1);
    if left == 0 && !may_suspend(t) {
        t.selfish_left.set(0);
        if t.unwinding.get() {
            // Where a forced yield would be, shutdown's unwind is.
            let _ = forced_unwind_point(t);
        }
        false
    } else if left == 0 {
        t.selfish_left.set(t.selfish_max.get());
        s.counters
            .forced_yields
            .set(s.counters.forced_yields.get() + 1);
        t.state.set(ThreadState::Ready);
        suspend(t);
        true
    } else {
        t.selfish_left.set(left);
        false
    }
}

/// Suspends the running green thread until [`Coro::unpark`](crate::Coro::unpark)
/// (or a timeout, or an interrupt) wakes it.
///
/// This is the building block of every primitive: register yourself
/// somewhere, then park; the primitive unparks you. A park can return `Ok`
/// without the condition you wait for being true (an unrelated `unpark`), so
/// check it in a loop.
///
/// # Errors
///
/// * [`WaitError::Interrupted`]: an interrupt was pending or arrived (it wins
///   over a wake that arrived first), or the runtime is shutting down.
/// * [`WaitError::TimedOut`]: an enclosing `with_timeout` deadline passed.
/// * [`WaitError::SuspendForbidden`]: called while unwinding or inside
///   [`no_suspend`](crate::no_suspend).
///
/// # Panics
///
/// Outside a green thread (in a plain OS thread, or with no runtime).
#[inline]
#[track_caller]
pub fn park() -> Result<(), WaitError> {
    park_named("park", "coro::park")
}

/// [`park`], recording `what` the thread waits on for [`threads`](crate::threads).
#[inline]
#[track_caller]
pub fn park_as(what: &'static str) -> Result<(), WaitError> {
    park_named(what, "coro::park_as")
}

/// [`park_as`]; `call` names the public call in the panic outside a green
/// thread. Inlined into its callers down to the stack switch: the thread
/// returns from the switch into its own code without first returning
/// through runtime frames, whose return addresses the CPU's return
/// predictor no longer holds after another thread ran (each such return
/// mispredicts; BENCHMARKS.md, "Park/unpark").
#[cfg_attr(not(debug_assertions), inline(always))]
#[track_caller]
fn park_named(what: &'static str, call: &'static str) -> Result<(), WaitError> {
    park_waiting(what, call, Wait::default())
}

/// What a park waits for, beyond its `what`: recorded in the task for the
/// length of the park (see `waits`).
#[derive(Default)]
pub(crate) struct Wait<'a> {
    /// The object it is parked on.
    pub(crate) target: Option<&'a Rc<WaitTarget>>,
    /// The green thread it joins (0: none).
    pub(crate) thread: u64,
    /// The caller of the blocking call.
    pub(crate) site: Option<&'static Location<'static>>,
}

/// [`park_named`] recording `wait`.
#[cfg_attr(not(debug_assertions), inline(always))]
#[track_caller]
pub(crate) fn park_waiting(
    what: &'static str,
    call: &'static str,
    wait: Wait<'_>,
) -> Result<(), WaitError> {
    // SAFETY: `s` and `t` are used only inside this call of the running
    // thread, across its suspend (see `context::current_unbound`).
    let (s, t) = unsafe { context::current_unbound(call) };
    if let Err(e) = check(s, t).and_then(|()| cancel::arm(s, t)) {
        // Read here, not in a closure: only here is it the caller's.
        let site = wait.site.unwrap_or(Location::caller());
        return park_refused(s, t, e, what, call, site);
    }
    t.wait_since.set(s.coarse_now.get());
    t.wait_site.set(wait.site);
    // Parks on something held (a lock) are what a finishing holder can
    // leave leaked: `waits::thread_finished` looks only while there are some.
    let held = wait.target.is_some_and(|x| x.holder().is_some());
    if let Some(target) = wait.target {
        t.tail_to_fill().wait_target.set(Some(target.clone()));
    }
    if held {
        s.waits.parked_on_held.set(s.waits.parked_on_held.get() + 1);
    }
    // The thread it joins is in the tail only for the length of the park
    // (reset below, before a forced unwind can start): nothing to mark.
    if wait.thread != 0 {
        t.tail.wait_thread.set(wait.thread);
    }
    park_suspended(t, what);
    if wait.target.is_some() {
        drop(t.tail.wait_target.take());
    }
    if held {
        s.waits.parked_on_held.set(s.waits.parked_on_held.get() - 1);
    }
    if wait.thread != 0 {
        t.tail.wait_thread.set(0);
    }
    check(s, t)
}

/// Parks the running green thread on `target`, a primitive other threads
/// hold (see [`WaitTarget`]): as [`park_as`], and while it is parked
/// [`threads`](crate::threads) shows what it waits on, who holds it and
/// since when, and [`deadlocks`](crate::deadlocks) follows it. `site` is
/// the caller of the blocking call (`Location::caller()` of a
/// `#[track_caller]` function).
///
/// # Errors
///
/// As [`park`].
///
/// # Panics
///
/// Outside a green thread.
///
/// # Examples
///
/// ```
/// use std::panic::Location;
///
/// coro::run(|| {
///     let gate = coro::WaitTarget::new("Gate");
///     let g = gate.clone();
///     let me = coro::current();
///     let waiter = coro::spawn(move || coro::park_on(&g, "Gate::wait", Location::caller()));
///     coro::yield_now(); // it parks
///     gate.set_holder(me.id());
///     let t = coro::threads().into_iter().find(|t| t.id == waiter.thread().id()).unwrap();
///     let w = t.wait.unwrap();
///     assert_eq!((w.kind, w.holder), ("Gate", Some(me.id())));
///     waiter.thread().unpark().unwrap();
///     waiter.join().unwrap().unwrap();
/// });
/// ```
#[inline]
#[track_caller]
pub fn park_on(
    target: &Rc<WaitTarget>,
    what: &'static str,
    site: &'static Location<'static>,
) -> Result<(), WaitError> {
    park_waiting(
        what,
        "coro::park_on",
        Wait {
            target: Some(target),
            thread: 0,
            site: Some(site),
        },
    )
}

/// A park that is over before it began: a waiter or a timer made for it
/// must not match the thread's next park. `site` is the caller of the
/// blocking call, for the warning about a thread that keeps calling
/// (`spin`).
#[cold]
#[inline(never)]
fn park_refused(
    s: &Scheduler,
    t: &Task,
    e: WaitError,
    what: &'static str,
    call: &'static str,
    site: &'static Location<'static>,
) -> Result<(), WaitError> {
    if e == WaitError::SuspendForbidden {
        log_forbidden(t, call, what);
    }
    spin::refused(s, t, e, what, site);
    t.park_gen.set(t.park_gen.get() + 1);
    failed_at_once(s, t);
    Err(e)
}

/// Suspends the running task `t` as parked on `what` until it is woken,
/// and ends the park (its generation, its selfishness budget).
#[cfg_attr(not(debug_assertions), inline(always))]
fn park_suspended(t: &Task, what: &'static str) {
    t.waiting_on.set(what);
    t.state.set(ThreadState::Parked);
    suspend(t);
    t.park_gen.set(t.park_gen.get() + 1);
    t.waiting_on.set("");
    t.leaked.set(false);
    t.selfish_left.set(t.selfish_max.get());
}

/// Parks the running thread until it is woken, with none of [`park_as`]'s
/// checks: no interrupt, shutdown, cancellation or deadline refuses or ends
/// it. Only `coro::scope`'s final wait uses it: it must not return while
/// the scope's threads live, and handles interrupts and cancellation itself
/// (see `scope`). The wake-ups it gets (its last thread ending, an
/// interrupt, a cancellation it ignores) are for it to sort out.
///
/// It is no unwind point: when shutdown resumes the thread to unwind it,
/// it returns, and the thread raises `ForcedUnwind` at its next blocking
/// call after the scope (or, should its threads still live, parks again
/// until shutdown leaks it: see `scope`). `scope` starts only where the
/// thread may switch (not in `no_suspend`, not while the OS thread panics),
/// so the switch here is always allowed.
pub(crate) fn park_unchecked(what: &'static str) {
    context::with_current("coro::scope", |_, t| park_suspended(t, what))
}

/// Whether the running task may block now; consumes a pending interrupt.
#[inline]
fn check(s: &Scheduler, t: &Task) -> Result<(), WaitError> {
    // The common case in a few loads; the reasons (and the logging, whose
    // formatting would keep this from being inlined) are out of line.
    if t.interrupted.get() || s.shutting_down.get() || t.cancel.pending.get() || !may_suspend(t) {
        return refusal(s, t);
    }
    Ok(())
}

/// A blocking call failed without waiting: it spends selfishness as a call
/// that succeeded without waiting does, so a loop that ignores the error
/// yields every few calls instead of starving the other threads.
#[inline]
fn failed_at_once(s: &Scheduler, t: &Task) {
    spend_selfishness(s, t);
}

/// [`failed_at_once`] for the runtime's I/O paths that fail before parking
/// (a closed socket); nothing outside a green thread.
#[inline]
pub(crate) fn failed_at_once_if_green() {
    context::try_with_current(failed_at_once);
}

/// Why the running task may not block now ([`check`]'s slow path).
#[cold]
#[inline(never)]
fn refusal(s: &Scheduler, t: &Task) -> Result<(), WaitError> {
    if t.unwinding.get() {
        return forced_unwind_point(t);
    }
    if t.interrupted.get() {
        t.interrupted.set(false);
        return Err(WaitError::Interrupted);
    }
    if s.shutting_down.get() {
        if !may_suspend(t) {
            // It cannot yield either (`block_on` called while the OS thread
            // panics): an error loop here would spin forever.
            count_refusal_while_stopping(t);
        }
        return Err(WaitError::Interrupted);
    }
    if t.cancel.pending.get() {
        if let Some(e) = cancel::deliver(s, t) {
            return Err(e);
        }
    }
    if !may_suspend(t) {
        // Logged by the park that was refused, which knows the call.
        return Err(WaitError::SuspendForbidden);
    }
    Ok(())
}

/// Logs a blocking call refused because the thread may not suspend here,
/// naming the thread, the call and what it would have waited on.
#[cold]
#[inline(never)]
fn log_forbidden(t: &Task, call: &str, what: &str) {
    log::error!(
        target: "coro",
        "green thread #{} '{}' tried to block in {call} (waiting on {what}) {}; refused \
         (a destructor must not block: defer the work, e.g. on coro::sync::Deferred)",
        t.id,
        t.display_name(),
        why_not_suspend(t),
    );
}

/// A blocking call or yield of a thread that shutdown asked to unwind: the
/// thread unwinds from here (raises [`ForcedUnwind`]), on its own stack.
///
/// * The first time, the thread is at an ordinary call (shutdown resumed it
///   from the park it was in, or it reached its next blocking call): it
///   raises, unless it is already unwinding from a panic of its own (a
///   destructor that blocks), where a second panic would abort the process.
/// * Inside that unwind (its destructors run) the call fails with
///   `Interrupted`.
/// * After user code caught the unwind and went on (no panic in flight any
///   more), the thread goes back to the scheduler, which either resumes it
///   (it raises again: its destructors run again) or, after a few rounds,
///   leaks it (see `runtime::unwind`).
/// * A thread that keeps blocking while the OS thread panics (`block_on`
///   called from a destructor during a panic) cannot be told from one inside
///   its unwind, and cannot be switched away from safely; after
///   [`UNWIND_REFUSAL_LIMIT`] refused calls the process is aborted with a
///   message naming it, rather than spinning forever.
#[cold]
#[inline(never)]
fn forced_unwind_point(t: &Task) -> Result<(), WaitError> {
    let panicking = std::thread::panicking();
    if t.tail.unwind_rounds.get() == 0 && !panicking {
        t.tail_to_fill().unwind_rounds.set(1);
        panic::resume_unwind(Box::new(ForcedUnwind));
    }
    if panicking || t.no_suspend.get() > 0 {
        count_refusal_while_stopping(t);
        return Err(WaitError::Interrupted);
    }
    // The unwind was caught: back to the scheduler, then unwind again.
    t.state.set(ThreadState::Ready);
    suspend(t);
    let rounds = t.tail_to_fill().unwind_rounds.get() + 1;
    t.tail.unwind_rounds.set(rounds);
    panic::resume_unwind(Box::new(ForcedUnwind));
}

/// Counts a blocking call refused to a thread that shutdown is stopping and
/// that cannot switch away; aborts, naming the thread, past
/// [`UNWIND_REFUSAL_LIMIT`] rather than spin forever.
#[cold]
fn count_refusal_while_stopping(t: &Task) {
    let n = t.tail_to_fill().unwind_refusals.get() + 1;
    t.tail.unwind_refusals.set(n);
    if n >= UNWIND_REFUSAL_LIMIT {
        eprintln!(
            "coro: green thread #{} '{}' keeps blocking while the runtime shuts down and \
             cannot yield ({n} refused calls; it ignores the errors in a loop); aborting",
            t.id,
            t.display_name(),
        );
        std::process::abort();
    }
}

/// Suspends the running thread until `deadline`.
///
/// Timers never fire early but may fire late (by the time the loop takes to
/// come round; see BENCHMARKS.md for the measured overshoot).
///
/// A deadline that has already passed still goes through the timer heap: the
/// thread yields, and due timers fire in deadline order, so a thread whose
/// sleep is due never runs ahead of one whose earlier deadline has not fired
/// yet. It is a blocking call like any other: an expired `with_timeout` scope
/// or a pending interrupt makes it fail, also for `sleep(Duration::ZERO)`.
///
/// # Errors
///
/// As [`park`]: a timeout of an enclosing scope or an interrupt ends the sleep
/// early.
///
/// # Panics
///
/// Outside a green thread.
#[track_caller]
pub fn sleep_until(deadline: Instant) -> Result<(), WaitError> {
    sleep_until_named(deadline, "coro::sleep_until")
}

/// [`sleep_until`]; `call` names the public call in the panic outside a
/// green thread.
#[track_caller]
fn sleep_until_named(deadline: Instant, call: &str) -> Result<(), WaitError> {
    let t = context::current_task_rc(call);
    loop {
        let gen = t.park_gen.get();
        t.timer_fired.set(false);
        context::with_sched(call, |s| {
            s.timers
                .borrow_mut()
                .insert(deadline.ticks(), t.clone(), TimerKind::Wake { gen })
        });
        let r = park_as("sleep");
        let fired = t.timer_fired.get();
        if !fired {
            // Woken otherwise (or the park failed): our entry stays in the
            // heap, and can never fire (the park generation moved on).
            context::with_sched(call, |s| s.timers.borrow_mut().cancel_one());
        }
        r?;
        if fired || clock::now() >= deadline {
            return Ok(());
        }
    }
}

/// Suspends the running green thread for at least `d`.
///
/// # Errors
///
/// As [`park`]: a timeout of an enclosing scope or an interrupt ends the
/// sleep early.
///
/// # Panics
///
/// Outside a green thread.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// coro::run(|| {
///     let t = coro::clock::now();
///     coro::sleep(Duration::from_millis(5)).unwrap();
///     assert!(t.elapsed() >= Duration::from_millis(5));
/// });
/// ```
#[track_caller]
pub fn sleep(d: Duration) -> Result<(), WaitError> {
    sleep_until_named(clock::now() + d, "coro::sleep")
}
