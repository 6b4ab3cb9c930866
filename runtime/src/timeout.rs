//! `with_timeout` scopes and `no_suspend` regions.
//!
//! # Design
//!
//! A scope is an entry on the running task's scope stack: its deadline in
//! ticks and three flags. Entering and leaving a scope whose closure never
//! blocks costs a clock read and a push and pop: no timer is created. Only when
//! the task parks does the earliest unexpired scope get a timer entry (or
//! expire on the spot if its deadline has passed). When that timer fires the
//! scope is marked *expired* and the task, if parked, is woken; from then on
//! every blocking call inside the scope fails with `TimedOut` (level-triggered)
//! and the error is *delivered* to the scope whose deadline passed first. On
//! exit, a scope returns `Err(Timeout)` exactly when a blocking call reported
//! its own expiry, so nested scopes each convert only their own timeout and
//! a result that completed before anything saw the deadline is never thrown
//! away. A scope that leaves with its timer still pending marks that entry
//! stale (see `timer`).

use std::time::Duration;

use crate::clock;
use crate::context;
use crate::error::Timeout;
use crate::task::Scope;

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
/// # use coro_runtime as coro;
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
pub fn with_timeout<R>(d: Duration, f: impl FnOnce() -> R) -> Result<R, Timeout> {
    let deadline = clock::now()
        .ticks()
        .saturating_add(clock::duration_to_ticks(d));
    let id = context::with_current("coro::with_timeout", |_, t| {
        let id = t.scope_seq.get() + 1;
        t.scope_seq.set(id);
        t.scopes.borrow_mut().push(Scope {
            id,
            deadline,
            expired: false,
            delivered: false,
            registered: false,
        });
        id
    });
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
    fn exit(self) -> Scope {
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

fn pop_scope(id: u64) -> Scope {
    context::with_current("with_timeout", |s, t| {
        let scope = {
            let mut scopes = t.scopes.borrow_mut();
            let i = scopes
                .iter()
                .rposition(|sc| sc.id == id)
                .expect("with_timeout scope stack out of order");
            scopes.remove(i)
        };
        if scope.expired {
            t.expired_scopes.set(t.expired_scopes.get() - 1);
        } else if scope.registered {
            s.timers.borrow_mut().cancel_one();
        }
        scope
    })
}

/// Runs `f` in a region where blocking is refused: a blocking call inside
/// returns [`WaitError::SuspendForbidden`](crate::WaitError) at once and is
/// logged. Use it around code that must not suspend (work done from `Drop`,
/// code holding a borrow that another thread would need).
///
/// Blocking while a green thread unwinds from a panic is refused the same way.
/// [`yield_now`](crate::yield_now) does nothing there, and the forced yield
/// of [`try_selfish`](crate::try_selfish) is put off until after the region.
///
/// # Panics
///
/// Outside a green thread.
///
/// # Examples
///
/// ```
/// # use coro_runtime as coro;
/// use std::time::Duration;
/// coro::run(|| {
///     let r = coro::no_suspend(|| coro::sleep(Duration::from_millis(1)));
///     assert_eq!(r, Err(coro::WaitError::SuspendForbidden));
/// });
/// ```
pub fn no_suspend<R>(f: impl FnOnce() -> R) -> R {
    struct Region;
    impl Drop for Region {
        fn drop(&mut self) {
            context::with_current("no_suspend", |_, t| {
                t.no_suspend.set(t.no_suspend.get() - 1)
            });
        }
    }
    context::with_current("coro::no_suspend", |_, t| {
        t.no_suspend.set(t.no_suspend.get() + 1)
    });
    let _region = Region;
    f()
}
