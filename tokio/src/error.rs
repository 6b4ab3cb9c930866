//! Why a bridge call returned no value: [`JoinError`].

use std::any::Any;
use std::fmt;
use std::io;

use coro_runtime::WaitError;

/// Why [`JoinHandle::join`](crate::JoinHandle::join) (or [`run`](crate::run))
/// returned no value.
///
/// Only the calling green thread sees it: a future that panics or is
/// cancelled on the bridge leaves the bridge, its other tasks and the coro
/// runtime running.
///
/// As an `io::Error` (`?` in a function that returns `io::Result`), a cut
/// wait keeps its [`WaitError`] (a timeout is `ErrorKind::TimedOut`), an
/// unavailable bridge keeps its own error, and the others are
/// `ErrorKind::Other`.
///
/// # Examples
///
/// ```
/// coro::run(|| {
///     let err = coro::tokio::run(async { panic!("no such row") }).unwrap_err();
///     assert!(err.is_panic());
///     assert_eq!(err.panic_message(), Some("no such row"));
///     assert_eq!(err.to_string(), "future on the tokio bridge panicked: no such row");
/// });
/// ```
pub enum JoinError {
    /// The future panicked on the bridge; this is the panic's payload (the
    /// panic was reported on the worker thread by the panic hook, as any
    /// panic is).
    Panicked(Box<dyn Any + Send + 'static>),
    /// The task was stopped before it finished: by
    /// [`JoinHandle::abort`](crate::JoinHandle::abort), or by the bridge
    /// shutting down ([`shutdown`](crate::shutdown), process exit).
    Cancelled,
    /// The wait of the calling green thread was cut short (an enclosing
    /// [`with_timeout`](coro_runtime::with_timeout) deadline passed, a
    /// [`CancelScope`](coro_runtime::CancelScope) was cancelled, the thread
    /// was [interrupted](coro_runtime::Coro::interrupt), its runtime is
    /// shutting down). The task was aborted: its future is dropped on the
    /// tokio side, and its output, if it came meanwhile, with it.
    Wait(WaitError),
    /// The bridge's runtime could not run the future: it could not be
    /// started (the configuration was refused, no thread could be
    /// created) or it was [shut down](crate::shutdown) (`NotConnected`).
    /// The future was dropped without being polled.
    Unavailable(io::Error),
}

impl JoinError {
    /// `true` if the future panicked.
    pub fn is_panic(&self) -> bool {
        matches!(self, JoinError::Panicked(_))
    }

    /// The panic message if the future panicked with a string (as
    /// `panic!` does).
    pub fn panic_message(&self) -> Option<&str> {
        match self {
            JoinError::Panicked(p) => p
                .downcast_ref::<&'static str>()
                .copied()
                .or_else(|| p.downcast_ref::<String>().map(String::as_str)),
            _ => None,
        }
    }

    /// The error of a finished tokio task that did not return a value.
    pub(crate) fn from_tokio(e: tokio::task::JoinError) -> JoinError {
        match e.try_into_panic() {
            Ok(payload) => JoinError::Panicked(payload),
            Err(_) => JoinError::Cancelled,
        }
    }
}

impl fmt::Debug for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JoinError::Panicked(_) => f
                .debug_tuple("Panicked")
                .field(&self.panic_message().unwrap_or("<non-string payload>"))
                .finish(),
            JoinError::Cancelled => f.write_str("Cancelled"),
            JoinError::Wait(e) => f.debug_tuple("Wait").field(e).finish(),
            JoinError::Unavailable(e) => f.debug_tuple("Unavailable").field(e).finish(),
        }
    }
}

impl fmt::Display for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JoinError::Panicked(_) => match self.panic_message() {
                Some(m) => write!(f, "future on the tokio bridge panicked: {m}"),
                None => f.write_str("future on the tokio bridge panicked"),
            },
            JoinError::Cancelled => f.write_str(
                "task on the tokio bridge was cancelled (aborted, or the bridge shut down)",
            ),
            JoinError::Wait(e) => write!(f, "wait for the tokio bridge stopped: {e}"),
            JoinError::Unavailable(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for JoinError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            JoinError::Wait(e) => Some(e),
            JoinError::Unavailable(e) => e.source(),
            JoinError::Panicked(_) | JoinError::Cancelled => None,
        }
    }
}

impl From<WaitError> for JoinError {
    fn from(e: WaitError) -> JoinError {
        JoinError::Wait(e)
    }
}

impl From<JoinError> for io::Error {
    /// A cut wait as its [`WaitError`] (`TimedOut` for a deadline), an
    /// unavailable bridge as its error, the rest as `ErrorKind::Other`.
    fn from(e: JoinError) -> io::Error {
        match e {
            JoinError::Wait(w) => w.into(),
            JoinError::Unavailable(e) => e,
            // The payload of a panic is not `Sync`: its message is kept.
            other => io::Error::other(other.to_string()),
        }
    }
}
