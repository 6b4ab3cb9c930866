//! Which scheduler runs on this OS thread, and which green thread it is running.
//!
//! One thread-local pointer, set by `Runtime::block_on` for the duration of
//! the run. Everything that needs "the current runtime" goes through here, so
//! a call made outside a runtime panics with one clear message instead of
//! hanging.
//!
//! # The invariants the unsafe code of the runtime rests on
//!
//! 1. **Tasks are resumed and unwound only by their own scheduler, with its
//!    runtime current.** `block_on` sets [`CURRENT`] before any green thread
//!    runs, and its `Shutdown` guard finishes every green thread (resuming
//!    each to unwind it: `runtime::shutdown`) before its `Exit` guard resets
//!    the pointer, on every path including a panic of the loop.
//!    `Scheduler::resume` sets `current` for exactly one resume. `Drop for
//!    Task` leaks, rather than unwinds, a coroutine that escaped this.
//! 2. **No panic ever leaves a coroutine.** `spawn::entry` runs everything
//!    after a thread starts under `catch_unwind`; `Scheduler::resume`
//!    catches anything that would still cross the stack switch.
//! 3. **A task is only woken by the runtime that owns it.** Tasks and I/O
//!    registrations carry their runtime's id; `task::make_ready` and
//!    `Registration::wait` refuse any other.
//!
//! 4. **A parked thread's live stack is left alone.** Safe code may lend a
//!    green thread's locals to OS threads (`std::thread::scope`) and to
//!    sibling green threads (`coro::scope`) while it parks, so by default
//!    the runtime only gives back the pages below a parked thread's stack
//!    pointer, where no live frame is (`stack::copy::trim_below_sp`). The
//!    runtime's own pointers into a thread's stack are its `yielder`, used
//!    by the thread itself while it runs, and `coro::scope`'s erased
//!    borrows, which hold the owner's `ThreadStack::pin`. Copying a whole
//!    stack out to the heap (`stack::copy::copy_out`) happens only under
//!    the `unsafe` opt-in `RuntimeBuilder::idle_stack_copy_out`, whose
//!    caller promises that nothing outside the runtime borrows a green
//!    thread's stack across a park.
//!
//! So while a green thread runs, [`CURRENT`] points at its own live
//! scheduler, and that scheduler's `current` at its own live task: what the
//! `unsafe` blocks below (and the yielder in `crate::kernel::suspend::suspend`) rely on.

use std::cell::Cell;
use std::ptr;
use std::rc::Rc;

use crate::kernel::sched::Scheduler;
use crate::kernel::task::Task;

thread_local! {
    /// # Invariant
    /// Null, or a pointer to the `Scheduler` of the runtime that is inside
    /// `block_on` on this OS thread. `block_on` sets it before it runs any
    /// green thread and resets it (to its previous value) from a guard, after
    /// every green thread has finished, on every path out (return or
    /// unwind); the scheduler is boxed, so it does not move meanwhile.
    static CURRENT: Cell<*const Scheduler> = const { Cell::new(ptr::null()) };
}

/// Sets the current scheduler; returns the previous pointer.
pub(crate) fn enter(s: *const Scheduler) -> *const Scheduler {
    CURRENT.with(|c| c.replace(s))
}

/// The current scheduler pointer (null outside a runtime).
#[inline(always)]
pub(crate) fn sched_ptr() -> *const Scheduler {
    CURRENT.with(|c| c.get())
}

/// Runs `f` with the current scheduler, or returns `None` outside a runtime.
#[inline(always)]
pub(crate) fn try_with_sched<R>(f: impl FnOnce(&Scheduler) -> R) -> Option<R> {
    let p = sched_ptr();
    if p.is_null() {
        return None;
    }
    // SAFETY: by the invariant on CURRENT, a non-null pointer refers to a live
    // scheduler that stays put until block_on returns, and block_on has not
    // returned: it is below us on this OS thread's own stack, or we run on a
    // green stack (or in the signal handler) that block_on's scheduler
    // resumed and that cannot outlive it (its threads are all finished or
    // leaked, never resumed again, before it returns). Only shared
    // references are made.
    Some(f(unsafe { &*p }))
}

/// Runs `f` with the current scheduler.
///
/// # Panics
///
/// Outside a runtime, with a message that names `what` (the call made).
#[inline(always)]
#[track_caller]
pub(crate) fn with_sched<R>(what: &str, f: impl FnOnce(&Scheduler) -> R) -> R {
    match try_with_sched(f) {
        Some(r) => r,
        None => no_runtime(what),
    }
}

#[cold]
#[track_caller]
pub(crate) fn no_runtime(what: &str) -> ! {
    panic!(
        "coro: {what} needs a coro runtime, but none runs on this OS thread \
         (call it from inside coro::run / Runtime::block_on)"
    )
}

/// Runs `f` with the running green thread.
///
/// # Panics
///
/// Outside a runtime, or from the scheduler itself (no green thread running).
#[inline(always)]
#[track_caller]
pub(crate) fn with_current<R>(what: &str, f: impl FnOnce(&Scheduler, &Task) -> R) -> R {
    // SAFETY: the references are used only inside `f`, within this call
    // from the running green thread, as `current_unbound` requires.
    let (s, t) = unsafe { current_unbound(what) };
    f(s, t)
}

/// The running scheduler and green thread, for the few hot paths that must
/// be inlined into their callers whole (a closure passed to
/// [`with_current`] may stay out of line; see `crate::kernel::suspend::park_named`).
///
/// # Panics
///
/// As [`with_current`].
///
/// # Safety
///
/// The caller uses the references only within its own call from the
/// running green thread (across a suspend of that thread is fine: its
/// scheduler lives until `block_on` returns, which is after every thread
/// finished, and the thread table holds the task while it is suspended),
/// as the closure of [`with_current`] would.
#[inline(always)]
#[track_caller]
pub(crate) unsafe fn current_unbound<'a>(what: &str) -> (&'a Scheduler, &'a Task) {
    let p = sched_ptr();
    if p.is_null() {
        no_runtime(what);
    }
    // SAFETY: see `try_with_sched`; the lifetime is the caller's promise.
    let s = unsafe { &*p };
    let t = s.current.get();
    if t.is_null() {
        panic!("coro: {what} must be called from a green thread, not from the scheduler itself");
    }
    // SAFETY: `current` is non-null only while the scheduler resumes that
    // task (set and reset around the resume in `Scheduler::resume`, which
    // catches any unwind), and the scheduler holds an `Rc` to it for the
    // whole resume. Callers keep the `&Task` across a suspend (`park_as`):
    // then the task table's `Rc` keeps it alive until `Scheduler::finish`,
    // which only runs once the coroutine has returned or has been leaked,
    // and a leaked coroutine is never resumed, so no frame holding the
    // reference runs after that. The lifetime is the caller's promise.
    (s, unsafe { &*t })
}

/// Runs `f` with the running green thread, or returns `None` where none
/// runs (outside a runtime, or in the scheduler itself).
#[inline(always)]
pub(crate) fn try_with_current<R>(f: impl FnOnce(&Scheduler, &Task) -> R) -> Option<R> {
    try_with_sched(|s| {
        let t = s.current.get();
        // SAFETY: as in `current_unbound`.
        (!t.is_null()).then(|| f(s, unsafe { &*t }))
    })
    .flatten()
}

/// The id of the green thread `s` is resuming, 0 when none is (the
/// scheduler itself runs).
#[inline(always)]
pub(crate) fn current_id_of(s: &Scheduler) -> u64 {
    let t = s.current.get();
    if t.is_null() {
        return 0;
    }
    // SAFETY: as in `current_unbound`: `current` is non-null only while
    // the scheduler resumes that task and holds an `Rc` to it.
    unsafe { (*t).id }
}

/// An `Rc` to the running green thread.
#[track_caller]
pub(crate) fn current_task_rc(what: &str) -> Rc<Task> {
    with_current(what, |_, t| {
        let t: *const Task = t;
        // SAFETY: `current` is `Rc::as_ptr` of the `Rc<Task>` the scheduler
        // holds for the whole resume (`Scheduler::resume`), so `t` points
        // into a live `Rc` allocation; counting one more strong reference
        // before `from_raw` makes the result an owned clone of it. (This
        // skips the thread table's lookup, a cache miss with many threads.)
        unsafe {
            Rc::increment_strong_count(t);
            Rc::from_raw(t)
        }
    })
}
