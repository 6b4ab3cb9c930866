//! Spin warnings: a green thread that keeps making blocking calls after its
//! wait was cut short, each refused at once, is named with the call site,
//! as the watchdog names a thread that runs too long.
//!
//! # Design
//!
//! A deadline that passed, a cancelled scope and runtime shutdown are
//! level-triggered: every later blocking call inside fails at once. A loop
//! that skips errors (`loop { if let Err(e) = l.accept() { log(e); continue
//! } }`) then never waits again, and spins until the scope ends (which it
//! may never do). Selfishness keeps the other threads running; this names
//! the spinning one.
//!
//! Only refused calls are counted, in `suspend`'s cold path: a call that
//! waits or succeeds costs nothing more. A thread's *streak* is the number
//! of blocking calls refused in a row because its wait was cut short,
//! with no park that really suspended in between and no cancelled scope
//! left in between. Every park bumps the thread's `park_gen`, refused or
//! not, so a refusal that finds `park_gen` where the previous refusal left
//! it knows no other park came between ([`Streak::gen`]); leaving a
//! cancelled scope, a slow path already, resets the streak ([`left_cut_short_scope`]).
//! When a streak reaches [`SPIN_LIMIT`] the thread is warned about once
//! (at WARN, target `coro`) and counted in
//! [`Stats::spin_warnings`](crate::Stats).
//!
//! # Why correct code is never warned about
//!
//! Code that stops at the first error it did not expect refuses one call.
//! Code that waits for something after a timeout was caught (a fresh
//! scope, an interrupt consumed) ends the streak with its park. A loop that
//! polls with a zero timeout (`loop { with_timeout(ZERO, || rx.recv()) }`)
//! leaves a cancelled scope each time round. What reaches [`SPIN_LIMIT`]
//! is ten thousand blocking calls in a row, each failing at once with the
//! same cut-short error, none of them waiting: a loop that ignores the
//! error it keeps getting.

use std::cell::Cell;
use std::panic::Location;

use crate::error::WaitError;
use crate::sched::Scheduler;
use crate::task::Task;

/// How many blocking calls in a row may fail at once, without waiting,
/// because the green thread's wait was cut short (a deadline passed, its
/// cancel scope was cancelled, an interrupt, runtime shutdown) before the
/// thread is named in a warning.
///
/// The warning goes through `log` at WARN (target `coro`) with the
/// thread's id and name, the error and the call site of the last call
/// (the caller of the public blocking call: coro's calls are
/// `#[track_caller]`), and is counted in
/// [`Stats::spin_warnings`](crate::Stats), once per run of such calls. A
/// call that really waits, or leaving a cancelled scope, ends the run, so
/// code that catches a timeout and goes on is never named. A loop that
/// skips the error it keeps getting (`loop { if l.accept().is_err() {
/// continue } }` after a deadline) is, within milliseconds: it would spin
/// until its scope ends, which may be never.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
///
/// coro::run(|| {
///     let _ = coro::with_timeout(Duration::ZERO, || {
///         for _ in 0..coro::SPIN_LIMIT {
///             // Skips the error it keeps getting: spins.
///             let _ = coro::sleep(Duration::from_secs(1));
///         }
///     });
///     assert_eq!(coro::stats().spin_warnings, 1);
/// });
/// ```
pub const SPIN_LIMIT: u32 = 10_000;

/// A thread's run of refused blocking calls (a field of the task's tail).
#[derive(Default)]
pub(crate) struct Streak {
    /// The task's `park_gen` just after the last refused call: a refusal
    /// that finds it unchanged follows the last one with no park between.
    pub(crate) gen: Cell<u64>,
    /// Refused calls in the current run.
    pub(crate) count: Cell<u32>,
}

impl Streak {
    /// Whether it holds what `Streak::default()` holds.
    pub(crate) fn is_empty(&self) -> bool {
        self.gen.get() == 0 && self.count.get() == 0
    }
}

/// A blocking call of `t` is refused at once with `err` (before the park
/// generation moves on for it); `site` is its caller, `what` what it would
/// have waited on. Counts the streak; warns when it reaches [`SPIN_LIMIT`].
#[cold]
pub(crate) fn refused(
    s: &Scheduler,
    t: &Task,
    err: WaitError,
    what: &str,
    site: &'static Location<'static>,
) {
    if err == WaitError::SuspendForbidden {
        // Logged on every call already (`suspend::log_forbidden`).
        return;
    }
    let streak = &t.tail_to_fill().spin;
    let gen = t.park_gen.get();
    let count = if streak.gen.get() == gen {
        streak.count.get().saturating_add(1)
    } else {
        1
    };
    streak.count.set(count);
    streak.gen.set(gen + 1);
    if count == SPIN_LIMIT {
        s.counters
            .spin_warnings
            .set(s.counters.spin_warnings.get() + 1);
        log::warn!(target: "coro", "{}", warning_text(t, err, what, site));
    }
}

/// The running thread `t` left a scope that was cancelled or shielded:
/// a refusal after this is a new run.
#[inline]
pub(crate) fn left_cut_short_scope(t: &Task) {
    t.tail.spin.count.set(0);
}

/// The warning for `t`, whose [`SPIN_LIMIT`]th call in a row at `site` was
/// refused with `err`.
fn warning_text(t: &Task, err: WaitError, what: &str, site: &Location<'_>) -> String {
    format!(
        "green thread #{} '{}' spins: {SPIN_LIMIT} blocking calls in a row failed at once \
         without waiting ({err}), the last at {site} (waiting on {what}); a loop that skips \
         errors must stop on a coro::WaitError (coro::WaitError::from_io for an io::Error): \
         every later call fails the same way until the scope ends",
        t.id,
        t.display_name(),
    )
}
