//! Error types of the runtime: why a blocking call stopped, misuse of
//! `unpark`, a `with_timeout` deadline, a cancel scope's own cancellation,
//! and the outcome of a join.
//!
//! Every operation that can suspend returns a `Result`. Its error says *why* it
//! stopped early ([`WaitError`]); code that speaks `std::io` gets the same
//! reasons through `From<WaitError> for io::Error`, with timeouts as
//! [`io::ErrorKind::TimedOut`] and interruptions and cancellations as
//! distinct [`io::ErrorKind::Other`] errors (never
//! [`io::ErrorKind::Interrupted`], which `read_exact` and `write_all` would
//! retry forever).

use std::any::Any;
use std::fmt;
use std::io;

use crate::kernel::panic_hook;
use crate::kernel::task::ThreadState;

/// Why a blocking call returned without completing.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
///
/// coro::run(|| {
///     let r = coro::with_timeout(Duration::ZERO, || coro::sleep(Duration::from_secs(5)));
///     assert!(r.is_err()); // the outer scope converted the inner `WaitError::TimedOut`
/// });
/// ```
///
/// # New reasons
///
/// Later versions may add reasons, so a `match` outside this crate needs a
/// `_` arm:
///
/// ```compile_fail
/// let name = match coro::WaitError::TimedOut {
///     coro::WaitError::TimedOut => "timed out",
///     coro::WaitError::Cancelled => "cancelled",
///     coro::WaitError::Interrupted => "interrupted",
///     coro::WaitError::SuspendForbidden => "forbidden",
/// };
/// assert_eq!(name, "timed out");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WaitError {
    /// The deadline of an enclosing [`with_timeout`](crate::with_timeout) or
    /// [`CancelScope`](crate::CancelScope) has passed. The scope stays
    /// expired: every later blocking call inside it fails the same way until
    /// the scope returns.
    TimedOut,
    /// An enclosing [`CancelScope`](crate::CancelScope) (or the scope of a
    /// [`coro::scope`](crate::scope) this thread runs in) was
    /// [cancelled](crate::CancelScope::cancel). Level-triggered like
    /// `TimedOut`. As an `io::Error` its kind is `Other`: std's retry loops
    /// stop on it.
    Cancelled,
    /// [`Coro::interrupt`](crate::Coro::interrupt) was called on this green
    /// thread, or the runtime is shutting down and is stopping its threads.
    Interrupted,
    /// The call would have suspended where suspending is not allowed: while the
    /// green thread is unwinding from a panic (a destructor that blocks) or
    /// inside [`no_suspend`](crate::no_suspend). The runtime also logs it.
    SuspendForbidden,
}

impl WaitError {
    /// The error that wrapped `self` in an `io::Error`; `None` for other errors.
    ///
    /// ```
    /// use coro::WaitError;
    /// let e: std::io::Error = WaitError::Interrupted.into();
    /// assert_eq!(WaitError::from_io(&e), Some(WaitError::Interrupted));
    /// ```
    pub fn from_io(err: &io::Error) -> Option<WaitError> {
        err.get_ref()?.downcast_ref::<WaitError>().copied()
    }
}

impl fmt::Display for WaitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            WaitError::TimedOut => "operation timed out (with_timeout deadline passed)",
            WaitError::Cancelled => "operation cancelled (an enclosing cancel scope was cancelled)",
            WaitError::Interrupted => "green thread interrupted",
            WaitError::SuspendForbidden => {
                "blocking call refused: suspending is not allowed here (unwinding or no_suspend region)"
            }
        })
    }
}

impl std::error::Error for WaitError {}

impl From<WaitError> for io::Error {
    fn from(e: WaitError) -> io::Error {
        let kind = match e {
            WaitError::TimedOut => io::ErrorKind::TimedOut,
            WaitError::Interrupted | WaitError::Cancelled | WaitError::SuspendForbidden => {
                io::ErrorKind::Other
            }
        };
        io::Error::new(kind, e)
    }
}

/// Returned by [`with_timeout`](crate::with_timeout) when its own deadline
/// passed and the closure saw it (a blocking call inside returned
/// [`WaitError::TimedOut`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Timeout;

impl fmt::Display for Timeout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("deadline elapsed")
    }
}

impl std::error::Error for Timeout {}

impl From<Timeout> for io::Error {
    fn from(_: Timeout) -> io::Error {
        io::Error::new(io::ErrorKind::TimedOut, Timeout)
    }
}

/// Returned by [`CancelScope::run`](crate::CancelScope::run) when a blocking
/// call inside reported the scope's own cancellation (see
/// [`CancelScope::cancelled_caught`](crate::CancelScope::cancelled_caught)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Cancelled {
    deadline: bool,
}

impl Cancelled {
    pub(crate) fn new(deadline: bool) -> Cancelled {
        Cancelled { deadline }
    }

    /// Whether it was the scope's deadline that passed (otherwise
    /// [`cancel`](crate::CancelScope::cancel) was called).
    pub fn deadline_passed(&self) -> bool {
        self.deadline
    }
}

impl fmt::Display for Cancelled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.deadline {
            "cancel scope's deadline passed"
        } else {
            "cancel scope was cancelled"
        })
    }
}

impl std::error::Error for Cancelled {}

impl From<Cancelled> for WaitError {
    /// `TimedOut` for a deadline, `Cancelled` for a cancel.
    fn from(c: Cancelled) -> WaitError {
        if c.deadline {
            WaitError::TimedOut
        } else {
            WaitError::Cancelled
        }
    }
}

impl From<Cancelled> for io::Error {
    /// `TimedOut` for a deadline, `Other` for a cancel (never `Interrupted`).
    fn from(c: Cancelled) -> io::Error {
        let kind = if c.deadline {
            io::ErrorKind::TimedOut
        } else {
            io::ErrorKind::Other
        };
        io::Error::new(kind, c)
    }
}

/// Scheduling a green thread that is already scheduled, running or dead.
///
/// Returned by [`Coro::unpark`](crate::Coro::unpark) (and by
/// [`Coro::interrupt`](crate::Coro::interrupt) for a dead thread). It is
/// usually the symptom of a race in the caller: use a primitive from
/// `coro::sync` instead of raw park/unpark.
///
/// # Examples
///
/// ```
/// use coro::{ScheduleState, ThreadState};
///
/// coro::run(|| {
///     let e = coro::current().unpark().unwrap_err();
///     assert_eq!(e.state(), ScheduleState::Thread(ThreadState::Running));
///     assert_eq!(e.to_string(), format!("cannot schedule green thread #{}: it is running", e.id()));
/// });
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleError {
    pub(crate) id: u64,
    pub(crate) state: ScheduleState,
}

impl ScheduleError {
    /// Id of the green thread that could not be scheduled.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Why it could not be: the state it was in, or that it belongs to a
    /// runtime that is not running on this OS thread.
    pub fn state(&self) -> ScheduleState {
        self.state
    }
}

impl fmt::Display for ScheduleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "cannot schedule green thread #{}: it is {}",
            self.id, self.state
        )
    }
}

impl std::error::Error for ScheduleError {}

/// Where the target of a failed [`unpark`](crate::Coro::unpark) or
/// [`interrupt`](crate::Coro::interrupt) stood ([`ScheduleError::state`]).
///
/// Its `Display` completes the sentence "the thread is ...": `ready`,
/// `running`, or `owned by a runtime that is not running on this OS thread`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ScheduleState {
    /// The thread is in this state, which cannot take the wake-up:
    /// [`New`](ThreadState::New) or [`Ready`](ThreadState::Ready) (already
    /// scheduled), [`Running`](ThreadState::Running) or
    /// [`Dead`](ThreadState::Dead).
    Thread(ThreadState),
    /// The thread is parked, but in a runtime that is not running on this OS
    /// thread: only its own runtime may schedule it.
    ForeignRuntime,
}

impl fmt::Display for ScheduleState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ScheduleState::Thread(s) => fmt::Display::fmt(s, f),
            ScheduleState::ForeignRuntime => {
                f.write_str("owned by a runtime that is not running on this OS thread")
            }
        }
    }
}

/// Why [`JoinHandle::join`](crate::JoinHandle::join) returned no value.
#[non_exhaustive]
pub enum JoinError {
    /// The green thread panicked; this is the panic payload, as from
    /// `std::thread::JoinHandle::join`.
    Panicked(Box<dyn Any + Send + 'static>),
    /// The joined thread was stopped by runtime shutdown before it finished.
    Cancelled,
    /// Waiting for it stopped early (timeout, interruption).
    Wait(WaitError),
}

impl JoinError {
    /// `true` if the joined thread panicked.
    pub fn is_panic(&self) -> bool {
        matches!(self, JoinError::Panicked(_))
    }

    /// The panic message if the payload is a string.
    pub fn panic_message(&self) -> Option<&str> {
        match self {
            JoinError::Panicked(p) => panic_hook::payload_str(&**p),
            _ => None,
        }
    }
}

impl fmt::Debug for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JoinError::Panicked(p) => f
                .debug_tuple("Panicked")
                .field(&panic_hook::payload_message(&**p))
                .finish(),
            JoinError::Cancelled => f.write_str("Cancelled"),
            JoinError::Wait(e) => f.debug_tuple("Wait").field(e).finish(),
        }
    }
}

impl fmt::Display for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JoinError::Panicked(_) => match self.panic_message() {
                Some(m) => write!(f, "green thread panicked: {m}"),
                None => f.write_str("green thread panicked"),
            },
            JoinError::Cancelled => f.write_str("green thread was cancelled by runtime shutdown"),
            JoinError::Wait(e) => write!(f, "join stopped: {e}"),
        }
    }
}

impl std::error::Error for JoinError {}

impl From<WaitError> for JoinError {
    fn from(e: WaitError) -> JoinError {
        JoinError::Wait(e)
    }
}
