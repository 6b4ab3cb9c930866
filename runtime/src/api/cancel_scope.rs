//! [`CancelScope`]: Trio's cancel scope in coro's shapes (explicit cancel,
//! shielding, a deadline that can be read and moved). The mechanics are in
//! `cancel`; this is the handle users hold.

use std::fmt;
use std::rc::Rc;
use std::time::Duration;

use crate::kernel::clock::{self, Instant};
use crate::kernel::context;
use crate::kernel::error::Cancelled;
use crate::services::cancel::{self, Cause, Deadline, Phase, Shared, NO_DEADLINE};

/// A region of code that can be cancelled as a whole: explicitly, from
/// inside or from another green thread, or when its deadline passes.
///
/// Create it, hand clones of it to whoever may cancel it, then enter it
/// once with [`run`](CancelScope::run). [`with_timeout`](crate::with_timeout)
/// is the simplest use: a scope with a deadline, entered at once.
///
/// # Semantics
///
/// * **Level-triggered.** Once the scope is cancelled (by [`cancel`], or by
///   its deadline passing), the blocking call in progress inside it fails at
///   once, and so does every later one until `run` returns: sleeps, parks,
///   joins, every primitive of `coro::sync`, socket calls, blocking-pool
///   jobs. A cancel fails them with [`WaitError::Cancelled`](crate::WaitError)
///   (an [`io::Error`](std::io::Error) of kind `Other` for sockets, never
///   `Interrupted`, which std's retry loops would retry); a deadline with
///   [`WaitError::TimedOut`](crate::WaitError) (`io::ErrorKind::TimedOut`).
///   Code between blocking calls is never stopped.
/// * **Nesting.** A failed call reports to the cancelled scope around it
///   that was cancelled first (the outermost on ties). Only that scope's
///   `run` converts it (returns `Err(Cancelled)`); the scopes in between
///   return the closure's value (which carries the error) unchanged.
/// * **Threads.** A [`coro::scope`](crate::scope) opened inside puts its
///   threads inside too: cancelling this scope reaches them, and the
///   nurseries they open, wherever they are blocked.
/// * **Shield.** A [shielded](CancelScope::set_shield) scope is not reached
///   by the cancels and deadlines of the scopes around it (its own still
///   apply, and so do the scopes inside it). Lowering the shield while an
///   outer cancel is pending delivers it at the next blocking call.
///   [`Coro::interrupt`](crate::Coro::interrupt) is not a cancellation: it
///   targets a thread, not a scope, and reaches it inside any shield; so does
///   runtime shutdown, which interrupts every thread.
///
/// [`cancel`]: CancelScope::cancel
///
/// # `!Send`
///
/// A scope lives on its runtime's OS thread (its handles are `Rc`s).
///
/// ```compile_fail
/// fn send<T: Send>() {}
/// send::<coro::CancelScope>();
/// ```
///
/// # Examples
///
/// Cancel from another green thread:
///
/// ```
/// use std::time::Duration;
/// use coro::{CancelScope, WaitError};
///
/// coro::run(|| {
///     let scope = CancelScope::new();
///     let handle = scope.clone();
///     let canceller = coro::spawn(move || handle.cancel());
///     let r = scope.run(|| {
///         let first = coro::sleep(Duration::from_secs(60)); // cancelled
///         let second = coro::sleep(Duration::from_secs(60)); // fails at once
///         (first, second)
///     });
///     assert!(r.is_err()); // this scope caught its own cancellation
///     assert!(scope.cancel_called() && scope.cancelled_caught());
///     canceller.join().unwrap();
///
///     // An outer cancel passes through an inner scope unchanged.
///     let outer = CancelScope::new();
///     let r = outer.run(|| {
///         let inner = CancelScope::new().run(|| {
///             outer.cancel();
///             coro::sleep(Duration::from_secs(60))
///         });
///         assert_eq!(inner, Ok(Err(WaitError::Cancelled)));
///     });
///     assert!(r.is_err() && outer.cancelled_caught());
/// });
/// ```
///
/// A cleanup that must still talk to a server while everything around it is
/// cancelled gets a shield (and its own deadline):
///
/// ```
/// use std::time::Duration;
/// use coro::{CancelScope, WaitError};
///
/// coro::run(|| {
///     let r = coro::with_timeout(Duration::from_millis(5), || {
///         let _ = coro::sleep(Duration::from_secs(60)); // the timeout fires
///         // Outside a shield, the cleanup fails at once too.
///         assert_eq!(coro::sleep(Duration::from_millis(1)), Err(WaitError::TimedOut));
///         let goodbye = CancelScope::after(Duration::from_secs(5))
///             .shielded()
///             .run(|| coro::sleep(Duration::from_millis(1))); // "say goodbye"
///         assert_eq!(goodbye, Ok(Ok(())));
///     });
///     assert_eq!(r, Err(coro::Timeout));
/// });
/// ```
#[derive(Clone)]
pub struct CancelScope {
    pub(crate) shared: Rc<Shared>,
}

impl CancelScope {
    /// A scope without a deadline.
    pub fn new() -> CancelScope {
        CancelScope::with(Deadline::None)
    }

    /// A scope whose deadline is `d` after it is entered.
    pub fn after(d: Duration) -> CancelScope {
        CancelScope::with(Deadline::After(d))
    }

    /// A scope with an absolute deadline.
    pub fn at(deadline: Instant) -> CancelScope {
        CancelScope::with(Deadline::At(deadline.ticks()))
    }

    fn with(deadline: Deadline) -> CancelScope {
        CancelScope {
            shared: Rc::new(Shared::new(deadline)),
        }
    }

    /// Turns the shield on (see [`set_shield`](CancelScope::set_shield)) and
    /// returns the scope, for `CancelScope::after(d).shielded().run(f)`.
    pub fn shielded(self) -> CancelScope {
        self.set_shield(true);
        self
    }

    /// Runs `f` inside the scope.
    ///
    /// Returns `Err(Cancelled)`, dropping `f`'s value, exactly when a
    /// blocking call inside reported this scope's own cancellation (see
    /// [`cancelled_caught`](CancelScope::cancelled_caught)); otherwise `f`'s
    /// value, which may carry the errors of cancellations that belong to
    /// scopes further out.
    ///
    /// # Panics
    ///
    /// If the scope was entered before (a scope is entered once), or outside
    /// a green thread.
    #[track_caller]
    pub fn run<R>(&self, f: impl FnOnce() -> R) -> Result<R, Cancelled> {
        let id = context::with_current("coro::CancelScope::run", |s, t| {
            cancel::enter(&s.task_rc(t), &self.shared)
        });
        /// Leaves the scope also when `f` unwinds.
        struct Exit<'a>(&'a Shared, u64);
        impl Drop for Exit<'_> {
            fn drop(&mut self) {
                context::with_current("CancelScope::run", |s, t| {
                    cancel::exit(s, t, self.0, self.1)
                });
            }
        }
        let exit = Exit(&self.shared, id);
        let r = f();
        drop(exit);
        match self.shared.cancelled.get() {
            Some(cause) if self.shared.caught.get() => Err(Cancelled::new(cause.deadline)),
            _ => Ok(r),
        }
    }

    /// Cancels the scope: the blocking call in progress inside it (on every
    /// thread inside it) fails, and so does every later one until the scope
    /// is left.
    ///
    /// Idempotent. Allowed before the scope is entered (its first blocking
    /// call fails), inside it, from another green thread, and after it was
    /// left (then it only sets [`cancel_called`](CancelScope::cancel_called)).
    pub fn cancel(&self) {
        let sh = &self.shared;
        if sh.cancelled.get().is_some() {
            return;
        }
        let cause = Cause {
            at: clock::now().ticks(),
            deadline: false,
        };
        sh.cancelled.set(Some(cause));
        if sh.phase.get() == Phase::Entered {
            cancel::cancel_entered(sh, cause);
        }
    }

    /// Whether the scope was cancelled: [`cancel`](CancelScope::cancel)
    /// was called or its deadline passed. It does not say whether the code
    /// inside noticed (a cancel after its last blocking call changes
    /// nothing there); see [`cancelled_caught`](CancelScope::cancelled_caught).
    ///
    /// # Latching
    ///
    /// As in Trio, once cancelled, always cancelled: a deadline that has
    /// passed (before the scope was left) cancels the scope for good, so
    /// moving the deadline later afterwards, or removing it, does not make
    /// this `false` again (and a scope not entered yet is entered
    /// cancelled).
    pub fn cancel_called(&self) -> bool {
        self.latch_expired()
    }

    /// Latches an expired deadline into a cancellation (see
    /// [`cancel_called`](CancelScope::cancel_called), "Latching"); returns
    /// whether the scope is cancelled.
    fn latch_expired(&self) -> bool {
        let sh = &self.shared;
        if sh.cancelled.get().is_some() {
            return true;
        }
        if sh.phase.get() == Phase::Exited {
            return false;
        }
        let Deadline::At(d) = sh.deadline.get() else {
            return false;
        };
        if d > clock::now().ticks() {
            return false;
        }
        let cause = Cause {
            at: d,
            deadline: true,
        };
        sh.cancelled.set(Some(cause));
        if sh.phase.get() == Phase::Entered {
            cancel::cancel_entered(sh, cause);
        }
        true
    }

    /// Whether a blocking call inside the scope failed because of this
    /// scope's cancellation (so [`run`](CancelScope::run) returned
    /// `Err(Cancelled)`). Known once the scope was left; `false` before.
    pub fn cancelled_caught(&self) -> bool {
        self.shared.caught.get()
    }

    /// The scope's absolute deadline, if it has one. A relative deadline
    /// ([`CancelScope::after`]) becomes absolute when the scope is entered;
    /// before that this is `None`.
    pub fn deadline(&self) -> Option<Instant> {
        match self.shared.deadline.get() {
            Deadline::At(d) => Some(Instant::from_ticks(d)),
            Deadline::None | Deadline::After(_) => None,
        }
    }

    /// Sets (or, with `None`, removes) the scope's deadline: earlier or
    /// later, before entry, inside, or from another green thread.
    ///
    /// A thread blocked inside the scope is woken at the new deadline (at
    /// once if it has passed). Moving a deadline leaves no stale timer in
    /// the runtime's heap beyond its usual bounded slack (see
    /// [`Stats::timer_heap_len`](crate::Stats)).
    ///
    /// A deadline that has already passed stays a cancellation: moving it
    /// later does not un-cancel the scope (see
    /// [`cancel_called`](CancelScope::cancel_called), "Latching").
    pub fn set_deadline(&self, deadline: Option<Instant>) {
        self.latch_expired();
        let ticks = deadline.map_or(NO_DEADLINE, Instant::ticks);
        let sh = &self.shared;
        sh.deadline.set(if ticks == NO_DEADLINE {
            Deadline::None
        } else {
            Deadline::At(ticks)
        });
        if sh.phase.get() == Phase::Entered {
            cancel::set_deadline_entered(sh, ticks);
        }
    }

    /// Whether the shield is on.
    pub fn shield(&self) -> bool {
        self.shared.shield.get()
    }

    /// Turns the shield on or off, before entry or while inside. While it
    /// is on, cancellations and deadlines of the scopes around this one do
    /// not reach the code inside (those of this scope and the scopes inside
    /// it still do). Turning it off while an outer scope is cancelled makes
    /// the next blocking call inside fail (a thread blocked inside is woken).
    pub fn set_shield(&self, on: bool) {
        let sh = &self.shared;
        sh.shield.set(on);
        if sh.phase.get() == Phase::Entered {
            cancel::set_shield_entered(sh, on);
        }
    }
}

impl Default for CancelScope {
    fn default() -> CancelScope {
        CancelScope::new()
    }
}

impl fmt::Debug for CancelScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sh = &self.shared;
        f.debug_struct("CancelScope")
            .field("phase", &sh.phase.get())
            .field("deadline", &self.deadline())
            .field("shield", &sh.shield.get())
            .field("cancel_called", &self.cancel_called())
            .field("cancelled_caught", &sh.caught.get())
            .finish()
    }
}
