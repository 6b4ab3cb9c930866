//! The scheduler: the ready queue, the loop that drives it, and the suspend
//! points (`park`, `yield_now`) green threads use to give the CPU back.
//!
//! # The loop
//!
//! ```text
//! loop {
//!     fire expired timers          // when the heap's head is due
//!     run the batch                // the threads ready when the pass began,
//!                                  // FIFO, no priorities
//!     poll mio                     // when nothing is ready: block until the
//! }                                // next timer; otherwise every 256 resumes
//! ```
//!
//! A green thread runs until it suspends. `yield_now` puts it at the back of
//! the queue; `park` leaves it off the queue until someone wakes it. Threads
//! made ready during a pass run in the next pass, so a thread that yields in a
//! loop cannot starve the others.
//!
//! # Invariants the unsafe code relies on
//!
//! * **Tasks are resumed and unwound only by their own scheduler, with its
//!   runtime current.** [`Scheduler::resume`] sets `current` for exactly the
//!   duration of a resume and resets it on every path (a panic that would
//!   escape is caught there). Shutdown (`runtime::shutdown`, run by a guard
//!   in `block_on` also when the loop panics) finishes every task before
//!   `block_on` returns; it unwinds a task by resuming it with its unwind
//!   requested: the task raises [`ForcedUnwind`] itself at its next blocking
//!   call (the one it was parked in, usually), so the unwind runs on its own
//!   stack with its runtime current. `Drop for Task` leaks a coroutine that
//!   escaped this rather than unwinding it elsewhere.
//! * **No panic leaves a coroutine** (`spawn::entry` and `resume` catch).
//! * **A task is woken only by the runtime that owns it** (`task::make_ready`).
//!
//! Polling the OS costs a syscall (about as much as 40 switches here), so
//! while threads are ready the loop polls without blocking only every
//! [`POLL_INTERVAL`] resumes (tokio: every 61 ticks). While threads keep
//! yielding, I/O readiness therefore waits at most that many slices; due
//! timers are still checked every pass.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::panic::Location;
use std::panic::{self, AssertUnwindSafe};
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use corosensei::CoroutineResult;
use slab::Slab;

use crate::blocking::BlockingPool;
use crate::cancel;
use crate::clock::{self, Instant};
use crate::context;
use crate::error::WaitError;
use crate::reactor::Reactor;
use crate::stack::{self, StackPool};
use crate::sys::PreciseTimer;
use crate::task::{make_ready, Task, ThreadState};
use crate::timer::{TimerHeap, TimerKind};
use crate::waits::WaitTarget;
use crate::watchdog::Watchdog;

/// Resumes between two non-blocking polls while threads are ready.
pub(crate) const POLL_INTERVAL: u64 = 256;

/// Polls between two looks at whether the clock's rate is due a refinement
/// ([`clock::recalibrate`]), and the least time between refinements.
const RECALIBRATE_POLLS: u64 = 1024;
const RECALIBRATE_INTERVAL: Duration = Duration::from_secs(60);

/// Passes with at least this many ready threads prefetch each next one
/// (see `Scheduler::next_ready`).
const PREFETCH_BATCH: usize = 32;

/// Non-blocking polls between two stack-pool trims while threads keep the
/// loop busy (see `stack`, "What the pool keeps").
const TRIM_POLLS: u64 = 64;

/// Settings a runtime was built with.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub(crate) stack_size: usize,
    pub(crate) stack_guard: usize,
    pub(crate) selfishness: u32,
    pub(crate) latency_warning: Option<Duration>,
    pub(crate) blocking_threads: usize,
    pub(crate) blocking_keep_alive: Duration,
    pub(crate) stack_pool: usize,
    pub(crate) idle_stack_release: Option<Duration>,
    pub(crate) idle_stack_copy_out: bool,
    pub(crate) deadlock_check: Option<Duration>,
    pub(crate) latency_snapshots: Option<Duration>,
}

/// Counters behind [`Stats`](crate::Stats).
#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) switches: Cell<u64>,
    pub(crate) polls: Cell<u64>,
    pub(crate) forced_yields: Cell<u64>,
    pub(crate) spawned: Cell<u64>,
    pub(crate) panicked: Cell<u64>,
    pub(crate) timers_fired: Cell<u64>,
}

/// Ids of runtimes: unique per process, never reused.
static NEXT_RUNTIME_ID: AtomicU64 = AtomicU64::new(1);

/// The panic payload that unwinds a green thread at shutdown (raised by
/// the thread itself, see [`forced_unwind_point`]; `spawn::entry` turns it
/// into `JoinError::Cancelled`).
#[derive(Debug)]
pub(crate) struct ForcedUnwind;

/// Blocking calls refused to a thread being unwound while the OS thread
/// panics before the runtime gives up on it (see [`refusal`]).
const UNWIND_REFUSAL_LIMIT: u32 = 10_000;

/// Everything one runtime owns.
pub(crate) struct Scheduler {
    /// This runtime's id: tasks and I/O registrations record it, and are
    /// only scheduled or waited on while it is the current runtime.
    pub(crate) id: u64,
    pub(crate) config: Config,
    pub(crate) ready: RefCell<VecDeque<Rc<Task>>>,
    /// Every live green thread, by key.
    pub(crate) tasks: RefCell<Slab<Rc<Task>>>,
    /// # Invariant
    /// Null, or the task being resumed (the scheduler holds an `Rc` to it for
    /// the whole resume).
    pub(crate) current: Cell<*const Task>,
    pub(crate) timers: RefCell<TimerHeap>,
    /// The wakers of pending `future::Sleep`s, named by their timer entries.
    pub(crate) timer_wakers: RefCell<crate::future::TimerWakers>,
    pub(crate) reactor: Reactor,
    pub(crate) precise: PreciseTimer,
    pub(crate) stacks: RefCell<StackPool>,
    pub(crate) blocking: BlockingPool,
    /// The `Send` inbox: spawns and wake-ups from other OS threads.
    pub(crate) remote: crate::remote::Remote,
    pub(crate) watchdog: Option<Watchdog>,
    pub(crate) profiler: crate::profile::Profiler,
    /// The flight recorder (always on).
    pub(crate) flight: crate::flight::Recorder,
    pub(crate) counters: Counters,
    pub(crate) next_id: Cell<u64>,
    /// Shutdown is stopping the threads (the main closure returned, or the
    /// loop panicked): blocking calls now fail with `Interrupted`.
    pub(crate) shutting_down: Cell<bool>,
    since_poll: Cell<u64>,
    /// Clock ticks at the loop's last look at the clock (each poll): the
    /// start of a park, without a clock read on the park path.
    pub(crate) coarse_now: Cell<u64>,
    /// Who waits on whom: leak counts, the periodic deadlock check.
    pub(crate) waits: crate::waits::Waits,
}

impl Scheduler {
    pub(crate) fn new(config: Config) -> std::io::Result<Scheduler> {
        let reactor = Reactor::new()?;
        let precise = reactor.registry(PreciseTimer::new)?;
        let blocking = BlockingPool::new(
            config.blocking_threads,
            config.blocking_keep_alive,
            reactor.waker.clone(),
        );
        let watchdog = match config.latency_warning {
            Some(t) => Some(Watchdog::start(t)?),
            None => None,
        };
        let id = NEXT_RUNTIME_ID.fetch_add(1, Ordering::Relaxed);
        Ok(Scheduler {
            id,
            remote: crate::remote::Remote::new(id, reactor.waker.clone()),
            stacks: RefCell::new(StackPool::new(
                config.stack_size,
                config.stack_guard,
                config.stack_pool,
                config.idle_stack_release,
                config.idle_stack_copy_out,
            )),
            config,
            ready: RefCell::new(VecDeque::new()),
            tasks: RefCell::new(Slab::new()),
            current: Cell::new(std::ptr::null()),
            timers: RefCell::new(TimerHeap::default()),
            timer_wakers: RefCell::default(),
            reactor,
            precise,
            blocking,
            watchdog,
            profiler: Default::default(),
            flight: Default::default(),
            counters: Counters::default(),
            next_id: Cell::new(1),
            shutting_down: Cell::new(false),
            since_poll: Cell::new(0),
            coarse_now: Cell::new(clock::now().ticks()),
            waits: Default::default(),
        })
    }

    /// Runs the loop until `main` is dead.
    pub(crate) fn run_until(&self, main: &Rc<Task>) {
        loop {
            self.fire_timers();
            let n = self.ready.borrow().len();
            let prefetch = n >= PREFETCH_BATCH;
            for _ in 0..n {
                let task = self.next_ready(prefetch);
                match task {
                    Some(t) => self.resume(t),
                    None => break,
                }
            }
            if main.state.get() == ThreadState::Dead {
                return;
            }
            let since = self.since_poll.get() + n as u64;
            let idle = self.ready.borrow().is_empty();
            if idle || since >= POLL_INTERVAL {
                self.since_poll.set(0);
                self.poll(idle);
            } else {
                self.since_poll.set(since);
            }
        }
    }

    /// Takes the next ready task; with `prefetch`, starts bringing the ones
    /// after it into the cache while it runs: the task after next's control
    /// block, and the stack top of the next one (whose control block was
    /// asked for one resume earlier). With thousands of threads alive each
    /// resume would otherwise wait on a cold stack (a TLB and cache miss);
    /// with a few, everything is in the cache already and the hints would
    /// only cost.
    #[inline]
    fn next_ready(&self, prefetch: bool) -> Option<Rc<Task>> {
        let mut ready = self.ready.borrow_mut();
        let t = ready.pop_front()?;
        if !prefetch {
            return Some(t);
        }
        if let Some(next) = ready.front() {
            stack::prefetch_stack(next.stack.sp.get());
            if let Some(after) = ready.get(1) {
                let p = Rc::as_ptr(after) as *const i8;
                for off in (0..std::mem::size_of::<Task>()).step_by(64) {
                    stack::prefetch(p.wrapping_add(off));
                }
            }
        }
        Some(t)
    }

    /// Runs passes without blocking until nothing is ready or `max_passes`
    /// ran (used at shutdown).
    pub(crate) fn run_passes(&self, max_passes: usize) {
        for _ in 0..max_passes {
            self.fire_timers();
            let n = self.ready.borrow().len();
            if n == 0 {
                self.poll(false);
                if self.ready.borrow().is_empty() {
                    return;
                }
                continue;
            }
            for _ in 0..n {
                let task = self.ready.borrow_mut().pop_front();
                match task {
                    Some(t) => self.resume(t),
                    None => break,
                }
            }
        }
    }

    /// Resumes one task until it suspends or finishes.
    ///
    /// `current` points at the task for exactly the duration of the resume.
    /// Nothing unwinds out of here: `spawn::entry` catches every panic of the
    /// thread, and whatever would still escape the coroutine is caught here
    /// and counted as that thread's panic (the thread is then finished).
    #[inline]
    pub(crate) fn resume(&self, task: Rc<Task>) {
        if self.profiler.on.get() {
            return crate::profile::resume(self, task);
        }
        self.resume_unprofiled(task)
    }

    /// [`resume`](Self::resume) without the profiler's samples around it.
    #[inline(always)]
    pub(crate) fn resume_unprofiled(&self, task: Rc<Task>) {
        debug_assert_eq!(task.runtime, self.id, "a task resumed by another runtime");
        task.state.set(ThreadState::Running);
        self.current.set(Rc::as_ptr(&task));
        let n = self.counters.switches.get() + 1;
        self.counters.switches.set(n);
        if let Some(w) = &self.watchdog {
            w.shared.slice.store(n, Ordering::Relaxed);
            w.shared.running.store(task.id, Ordering::Relaxed);
        }
        if task.stack.is_copied_out() {
            self.copy_in(&task);
        }
        let result = {
            let mut co = task.coroutine.borrow_mut();
            let co = co.as_mut().expect("ready task has a coroutine");
            panic::catch_unwind(AssertUnwindSafe(|| co.resume(())))
        };
        self.flight.resume_ended(&task, n);
        if let Some(w) = &self.watchdog {
            w.shared.running.store(0, Ordering::Relaxed);
            let hog = w.shared.hog_slice.load(Ordering::Acquire);
            if hog != self.flight.hog_seen.get() {
                crate::flight::hog(self, &task, hog, n);
            }
        }
        self.current.set(std::ptr::null());
        match result {
            Ok(CoroutineResult::Yield(())) => {
                if task.state.get() == ThreadState::Ready {
                    self.ready.borrow_mut().push_back(task);
                }
            }
            Ok(CoroutineResult::Return(())) => self.finish(&task),
            Err(p) => self.escaped(&task, p),
        }
    }

    /// Writes a copied-out thread's stack back before it runs (`stack::copy`).
    #[cold]
    #[inline(never)]
    fn copy_in(&self, task: &Task) {
        stack::copy_in(task);
        let mut stacks = self.stacks.borrow_mut();
        stacks.idle.out = stacks.idle.out.saturating_sub(1);
    }

    /// A panic escaped a task's coroutine (which `entry` is built to
    /// prevent): the coroutine is over; count it as the thread's panic.
    #[cold]
    #[inline(never)]
    fn escaped(&self, task: &Rc<Task>, p: Box<dyn std::any::Any + Send>) {
        self.counters.panicked.set(self.counters.panicked.get() + 1);
        // Its payload's destructor could panic too: leak it.
        std::mem::forget(p);
        self.finish(task);
        crate::panic_hook::caught(|| {
            log::error!(
                target: "coro",
                "green thread #{} '{}': a panic escaped the thread; it is finished",
                task.id,
                task.display_name(),
            )
        });
    }

    /// A task's coroutine returned: recycle its stack and forget it.
    pub(crate) fn finish(&self, task: &Rc<Task>) {
        task.state.set(ThreadState::Dead);
        let co = task.coroutine.borrow_mut().take();
        if let Some(co) = co {
            if co.done() {
                self.stacks.borrow_mut().put(co.into_stack());
            } else {
                // Never dropped unfinished: that would unwind it from here
                // (see `Drop for Task`).
                std::mem::forget(co);
            }
        }
        let key = task.key.get();
        let mut tasks = self.tasks.borrow_mut();
        if tasks.get(key).is_some_and(|t| Rc::ptr_eq(t, task)) {
            tasks.remove(key);
        }
        drop(tasks);
        if self.waits.parked_on_held.get() > 0 {
            crate::waits::thread_finished(self, task.id);
        }
        if let Some(w) = &self.watchdog {
            if task.name.is_some() {
                w.shared
                    .names
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(&task.id);
            }
            w.shared
                .run_ns
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&task.id);
        }
    }

    /// Fires every timer whose deadline has passed, in deadline order.
    pub(crate) fn fire_timers(&self) {
        let mut timers = self.timers.borrow_mut();
        if timers.len() == 0 {
            return;
        }
        let now = clock::now().ticks();
        // Wakers of futures run after the heap is released: they are user
        // code, which may touch the timers.
        let mut wakers = Vec::new();
        let key = crate::flight::key(self);
        self.flight.tick(key, now);
        while let Some(e) = timers.pop_expired(now) {
            if !e.is_live() {
                continue;
            }
            timers.fired();
            self.counters
                .timers_fired
                .set(self.counters.timers_fired.get() + 1);
            match e.kind {
                TimerKind::Wake { .. } => {
                    self.flight.timer(key, e.task.id, 0);
                    e.task.timer_fired.set(true);
                    make_ready(&e.task);
                }
                TimerKind::Scope { id } => {
                    self.flight.timer(key, e.task.id, 1);
                    // A deadline moved later re-arms (see `cancel`).
                    if let Some(d) = cancel::timer_fired(&e.task, id) {
                        timers.insert(d, e.task, TimerKind::Scope { id });
                    }
                }
                TimerKind::Waker { key: slot, seq } => {
                    self.flight.timer(key, 0, 2);
                    wakers.extend(self.timer_wakers.borrow_mut().take(slot, seq));
                }
            }
        }
        drop(timers);
        for w in wakers {
            w.wake();
        }
    }

    /// Polls the reactor; blocks until the next timer (or an event) if `block`.
    fn poll(&self, block: bool) {
        let polls = self.counters.polls.get() + 1;
        self.counters.polls.set(polls);
        let now = clock::now();
        self.coarse_now.set(now.ticks());
        let check_due = self.deadlock_check_due(now.ticks());
        let timeout = if !block {
            if polls.is_multiple_of(TRIM_POLLS) {
                self.stacks_housekeeping(now.ticks());
            }
            Some(Duration::ZERO)
        } else {
            let (sweeping, stacks_due) = self.stacks_housekeeping(now.ticks());
            let next = self.timers.borrow_mut().next_live_deadline();
            if next.is_none() {
                self.check_deadlock();
            }
            // Wake for the next timer, or for the next stack trim or sweep
            // (at once while a sweep pass has threads left to visit).
            let stacks_due = if sweeping {
                Some(now.ticks())
            } else {
                stacks_due
            };
            match next.into_iter().chain(stacks_due).chain(check_due).min() {
                Some(d) => {
                    let d = Instant::from_ticks(d);
                    if d <= now {
                        Some(Duration::ZERO)
                    } else {
                        self.precise.arm(d);
                        self.precise.poll_timeout(d)
                    }
                }
                None => None,
            }
        };
        if polls.is_multiple_of(RECALIBRATE_POLLS) {
            clock::recalibrate(RECALIBRATE_INTERVAL);
        }
        let key = crate::flight::key(self);
        self.flight.tick(key, clock::now().ticks());
        let polled = crate::profile::around_poll(self, block, || self.reactor.poll(timeout));
        let after = clock::now().ticks();
        self.coarse_now.set(after);
        if let Ok(out) = &polled {
            self.flight.poll(key, after, out.events, block);
        }
        match polled {
            Ok(out) => {
                if out.timer {
                    self.precise.fired();
                }
                if out.woken {
                    self.blocking.drain_completions();
                }
                self.remote.drain(self);
            }
            Err(e) => panic!("coro: polling the OS for events failed: {e}"),
        }
    }

    /// Runs the periodic deadlock check when it is due; returns when it is
    /// next due (`None` when it is off).
    fn deadlock_check_due(&self, now: u64) -> Option<u64> {
        let every = self.config.deadlock_check?;
        let next = self.waits.next_check.get();
        if next == 0 || now >= next {
            if next != 0 {
                crate::waits::periodic_check(self);
            }
            let next = now + clock::duration_to_ticks(every);
            self.waits.next_check.set(next);
            return Some(next);
        }
        Some(next)
    }

    /// Trims the stack pool and sweeps idle threads' stacks (see `stack`).
    /// Returns whether a sweep pass has threads left to visit, and when
    /// this is next due.
    fn stacks_housekeeping(&self, now: u64) -> (bool, Option<u64>) {
        let mut stacks = self.stacks.borrow_mut();
        let trim_due = stacks.trim(now);
        let (sweeping, sweep_due) = stacks.idle.step(&self.tasks.borrow(), now);
        (sweeping, trim_due.into_iter().chain(sweep_due).min())
    }

    /// Nothing is ready and no timer is pending: if nothing else can wake
    /// a thread either, every parked thread is leaked (see `asleep`).
    fn check_deadlock(&self) {
        crate::asleep::check(self);
    }

    pub(crate) fn task_rc(&self, t: &Task) -> Rc<Task> {
        self.tasks.borrow()[t.key.get()].clone()
    }
}

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
    if t.yield_refusal_logged.replace(true) {
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
        return park_refused(s, t, e, what, call);
    }
    t.wait_since.set(s.coarse_now.get());
    t.wait_site.set(wait.site);
    // Parks on something held (a lock) are what a finishing holder can
    // leave leaked: `waits::thread_finished` looks only while there are some.
    let held = wait.target.is_some_and(|x| x.holder().is_some());
    if let Some(target) = wait.target {
        t.wait_target.set(Some(target.clone()));
    }
    if held {
        s.waits.parked_on_held.set(s.waits.parked_on_held.get() + 1);
    }
    if wait.thread != 0 {
        t.wait_thread.set(wait.thread);
    }
    park_suspended(t, what);
    if wait.target.is_some() {
        drop(t.wait_target.take());
    }
    if held {
        s.waits.parked_on_held.set(s.waits.parked_on_held.get() - 1);
    }
    if wait.thread != 0 {
        t.wait_thread.set(0);
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
/// must not match the thread's next park.
#[cold]
#[inline(never)]
fn park_refused(
    s: &Scheduler,
    t: &Task,
    e: WaitError,
    what: &'static str,
    call: &'static str,
) -> Result<(), WaitError> {
    if e == WaitError::SuspendForbidden {
        log_forbidden(t, call, what);
    }
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
    if t.unwind_rounds.get() == 0 && !panicking {
        t.unwind_rounds.set(1);
        panic::resume_unwind(Box::new(ForcedUnwind));
    }
    if panicking || t.no_suspend.get() > 0 {
        count_refusal_while_stopping(t);
        return Err(WaitError::Interrupted);
    }
    // The unwind was caught: back to the scheduler, then unwind again.
    t.state.set(ThreadState::Ready);
    suspend(t);
    t.unwind_rounds.set(t.unwind_rounds.get() + 1);
    panic::resume_unwind(Box::new(ForcedUnwind));
}

/// Counts a blocking call refused to a thread that shutdown is stopping and
/// that cannot switch away; aborts, naming the thread, past
/// [`UNWIND_REFUSAL_LIMIT`] rather than spin forever.
#[cold]
fn count_refusal_while_stopping(t: &Task) {
    let n = t.unwind_refusals.get() + 1;
    t.unwind_refusals.set(n);
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
