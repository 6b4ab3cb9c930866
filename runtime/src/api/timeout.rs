//! `with_timeout` / `with_deadline` scopes.
//!
//! # Design
//!
//! A scope is an entry on the running task's scope stack (see `cancel`,
//! which also holds cancel scopes and nurseries there): its deadline in
//! ticks and a few flags. Entering and leaving a scope whose closure never
//! blocks costs a clock read and a push and pop: no timer is created. Only when
//! the task parks does the earliest unexpired scope get a timer entry (or
//! expire on the spot if its deadline has passed). When that timer fires the
//! scope is marked *expired* and the task, if parked, is woken; from then on
//! every blocking call inside the scope fails with `TimedOut` (level-triggered)
//! and the error is *delivered* to the scope whose deadline passed first. On
//! exit, a scope returns `Err(Timeout)` exactly when a blocking call reported
//! its own expiry (also a call of a thread in a `coro::scope` inside it), so
//! nested scopes each convert only their own timeout and a result that
//! completed before anything saw the deadline is never thrown away. A scope
//! that leaves with its timer still pending marks that entry stale (see
//! `timer`).

use std::time::Duration;

use crate::kernel::clock::{self, Instant};
use crate::kernel::context;
use crate::kernel::error::Timeout;
use crate::services::cancel::{self, Left};

/// Runs `f` under a deadline `d` from now.
///
/// If the deadline passes while `f` is blocked (sleeping, parked, joining,
/// waiting on a socket or a primitive), that call returns
/// [`WaitError::TimedOut`](crate::WaitError), and so does **every later
/// blocking call inside `f`** until `f` returns, so code that swallows the
/// error cannot keep blocking. Then `with_timeout` returns `Err(Timeout)` and
/// drops `f`'s result.
///
/// # Nesting
///
/// Each scope converts only its own timeout. If an inner deadline fires, only
/// the inner `with_timeout` returns `Err(Timeout)`; if an outer one fires
/// first, the inner scope returns `f`'s result (which carries the error)
/// unchanged and the outer one converts it.
///
/// `with_timeout(Duration::ZERO, f)` lets `f` run but fails its first
/// blocking call. Timers never fire early; they may fire late.
///
/// # Panics
///
/// Outside a green thread.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use coro::{with_timeout, Timeout, WaitError};
///
/// coro::run(|| {
///     let r = with_timeout(Duration::from_millis(10), || coro::sleep(Duration::from_secs(60)));
///     assert_eq!(r, Err(Timeout));
///
///     // The outer deadline fires first: the inner scope passes the error on.
///     let outer = with_timeout(Duration::from_millis(10), || {
///         let inner = with_timeout(Duration::from_secs(60), || coro::sleep(Duration::from_secs(60)));
///         assert_eq!(inner, Ok(Err(WaitError::TimedOut)));
///     });
///     assert_eq!(outer, Err(Timeout));
/// });
/// ```
#[track_caller]
pub fn with_timeout<R>(d: Duration, f: impl FnOnce() -> R) -> Result<R, Timeout> {
    let deadline = clock::now()
        .ticks()
        .saturating_add(clock::duration_to_ticks(d));
    run_scope("coro::with_timeout", deadline, f)
}

/// Runs `f` under an absolute deadline: [`with_timeout`] with a point in
/// time instead of a duration (a deadline already passed fails the first
/// blocking call inside).
///
/// # Panics
///
/// Outside a green thread.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
///
/// coro::run(|| {
///     // One deadline for several steps, however many there are.
///     let deadline = coro::clock::now() + Duration::from_millis(10);
///     let r = coro::with_deadline(deadline, || -> Result<(), coro::WaitError> {
///         loop {
///             coro::sleep(Duration::from_millis(3))?;
///         }
///     });
///     assert_eq!(r, Err(coro::Timeout));
/// });
/// ```
#[track_caller]
pub fn with_deadline<R>(deadline: Instant, f: impl FnOnce() -> R) -> Result<R, Timeout> {
    run_scope("coro::with_deadline", deadline.ticks(), f)
}

/// The body of [`with_timeout`] and [`with_deadline`]: a scope entry pushed
/// and popped, nothing else unless `f` blocks.
#[inline(always)]
#[track_caller]
fn run_scope<R>(what: &str, deadline: u64, f: impl FnOnce() -> R) -> Result<R, Timeout> {
    let id = context::with_current(what, |_, t| cancel::push_local(t, deadline));
    let guard = ScopeGuard(id);
    let r = f();
    let scope = guard.exit();
    if scope.delivered {
        Err(Timeout)
    } else {
        Ok(r)
    }
}

/// Pops the scope on exit, also when `f` unwinds.
struct ScopeGuard(u64);

impl ScopeGuard {
    fn exit(self) -> Left {
        let s = pop_scope(self.0);
        std::mem::forget(self);
        s
    }
}

impl Drop for ScopeGuard {
    fn drop(&mut self) {
        pop_scope(self.0);
    }
}

fn pop_scope(id: u64) -> Left {
    context::with_current("with_timeout", |s, t| cancel::pop(s, t, id))
}
