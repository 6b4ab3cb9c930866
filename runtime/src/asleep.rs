//! The runtime-wide deadlock: every green thread parked and nothing left
//! that could ever wake one (Go's "all goroutines are asleep"). Every
//! parked thread is then leaked: each is reported, and the loop stops.
//!
//! # What can wake a parked thread
//!
//! A parked green thread is made ready only by
//!
//! 1. another green thread (an unpark, an interrupt, a primitive handing
//!    it something, a dropped channel end): none can run when the ready
//!    queue is empty and every live thread is parked;
//! 2. a timer: a sleep, a deadline (`with_timeout`, a cancel scope), a
//!    future's `Sleep`;
//! 3. an I/O event (a socket, a signal, any registered fd) on a source
//!    that a green thread waits on now, or whose task waker is stored;
//!    a source nobody waits on can fire but wakes nothing;
//! 4. a blocking-pool job that a live green thread waits for (or waits
//!    for room to submit);
//! 5. another OS thread, through the runtime's `Send` side: a `Handle`
//!    (remote spawns), a `RemoteWaker` (`coro::sync::remote` receivers,
//!    anything built on it), the `Waker` of a `coro::future::block_on`, or
//!    work already in the inbox. Each of those holds the runtime's inbox,
//!    so its reference count says at once whether one exists anywhere. A
//!    waker counts only in the run (`block_on`) that made it: it names a
//!    park of a thread of that run, and none is left after it.
//!
//! Everything else in a runtime is `!Send`, so nothing else on another OS
//! thread can reach a green thread. When none of the five remains, no
//! thread can ever run again, and this holds whoever keeps which handle:
//! it needs no reachability (a channel's sender kept by its own receiver,
//! forgotten with `mem::forget`, or held by another parked thread all end
//! here alike). The check is conservative: anything that *might* wake
//! (a stored waker of any kind, a `Handle` kept but never used) counts,
//! so a report is never false; the price is that a runtime that keeps a
//! wake source alive (a back door listening, a periodic timer) is never
//! found asleep.
//!
//! # Where and at what cost
//!
//! [`check`] runs where the loop is about to block in the poller with no
//! timer pending (`Scheduler::poll`), after the cheap tests (the inbox's
//! count, the blocking pool's waiters) and only then the I/O table, up to
//! its first awaited source. Nothing runs while threads are ready.
//!
//! # What the runtime does then
//!
//! It reports each parked thread not reported before as leaked, once, at
//! WARN (target `coro::leak`, as [`leaks`](crate::leaks) describes),
//! counts it in [`Stats::leaked`](crate::Stats) and lists it in `leaks()`;
//! then it panics with `coro: deadlock: ...` naming the threads, as Go
//! aborts with "all goroutines are asleep - deadlock!". Waiting instead
//! would be a hang for certain: `block_on` can never return (its main
//! thread is one of the parked ones), and nothing outside can change
//! that. The panic leaves `block_on` after its ordinary shutdown (the
//! `on_shutdown` hooks run first and still see the threads in `leaks()`;
//! then every thread is unwound), so the caller may catch it, and a
//! supervisor sees a failed process rather than a silent one.

use crate::sched::Scheduler;
use crate::task::{Task, ThreadState};
use crate::waits;

/// Threads named in the panic message (the rest are counted).
const NAMED: usize = 20;

/// Why each thread is leaked, in its report and in `leaks()`.
pub(crate) const REASON: &str = "nothing in the runtime can wake it: no runnable thread, \
                                 timer, I/O waiter, blocking job or remote handle";

/// The loop is about to block with nothing ready and no timer pending:
/// if nothing else can wake a thread either, reports every parked thread
/// as leaked and panics (see the module docs).
pub(crate) fn check(s: &Scheduler) {
    if !s.ready.borrow().is_empty()
        || s.remote.may_wake()
        || s.blocking.awaited()
        || s.reactor.awaited()
    {
        return;
    }
    let tasks = s.tasks.borrow();
    if tasks.is_empty()
        || tasks
            .iter()
            .any(|(_, t)| t.state.get() != ThreadState::Parked)
    {
        // Not the state this check is for (a thread not parked can still
        // run): say nothing rather than something false.
        return;
    }
    for (_, t) in tasks.iter() {
        if !t.leaked.get() {
            s.waits.asleep.borrow_mut().push((t.id, t.park_gen.get()));
            waits::report_leaked(s, t, REASON, "the runtime stops with a deadlock panic");
        }
    }
    let named: Vec<String> = tasks.iter().take(NAMED).map(|(_, t)| describe(t)).collect();
    let more = tasks.len().saturating_sub(NAMED);
    let n = tasks.len();
    drop(tasks);
    panic!(
        "coro: deadlock: all {n} green threads are parked and nothing can wake them \
         (no runnable thread, timer, I/O waiter, blocking job or remote handle; each is \
         reported as leaked): {}{}",
        named.join(", "),
        if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        }
    );
}

/// `#id 'name' waiting on call at site`, for the panic message.
fn describe(t: &Task) -> String {
    format!(
        "#{} '{}' waiting on {}{}",
        t.id,
        t.display_name(),
        t.waiting_on.get(),
        crate::waits::site_suffix(t)
    )
}
