//! Errors of the channel operations. Each error that stops a send hands the
//! value back.

use std::fmt;
use std::io;

use coro_runtime::WaitError;

/// Why [`Sender::send`](crate::Sender::send) did not deliver its value; the
/// value comes back inside.
#[derive(PartialEq, Eq, Clone, Copy)]
#[non_exhaustive]
pub enum SendError<T> {
    /// The [`Receiver`](crate::Receiver) was dropped: nobody will ever receive.
    Disconnected(T),
    /// Waiting for room in the channel was cut short (timeout, interrupt,
    /// shutdown).
    Wait(T, WaitError),
}

impl<T> SendError<T> {
    /// The value that was not sent.
    pub fn into_inner(self) -> T {
        match self {
            SendError::Disconnected(v) | SendError::Wait(v, _) => v,
        }
    }

    /// The reason waiting stopped, if that is why the send failed.
    pub fn wait_error(&self) -> Option<WaitError> {
        match self {
            SendError::Wait(_, e) => Some(*e),
            SendError::Disconnected(_) => None,
        }
    }
}

impl<T> fmt::Debug for SendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SendError::Disconnected(_) => f.write_str("Disconnected(..)"),
            SendError::Wait(_, e) => f.debug_tuple("Wait").field(&"..").field(e).finish(),
        }
    }
}

impl<T> fmt::Display for SendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SendError::Disconnected(_) => {
                f.write_str("sending on a channel whose receiver is gone")
            }
            SendError::Wait(_, e) => write!(f, "waiting to send stopped: {e}"),
        }
    }
}

impl<T> std::error::Error for SendError<T> {}

/// Why [`Sender::try_send`](crate::Sender::try_send) did not deliver its
/// value; the value comes back inside.
#[derive(PartialEq, Eq, Clone, Copy)]
pub enum TrySendError<T> {
    /// The channel is full (or other senders are queued for room).
    Full(T),
    /// The [`Receiver`](crate::Receiver) was dropped.
    Disconnected(T),
}

impl<T> TrySendError<T> {
    /// The value that was not sent.
    pub fn into_inner(self) -> T {
        match self {
            TrySendError::Full(v) | TrySendError::Disconnected(v) => v,
        }
    }
}

impl<T> fmt::Debug for TrySendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TrySendError::Full(_) => f.write_str("Full(..)"),
            TrySendError::Disconnected(_) => f.write_str("Disconnected(..)"),
        }
    }
}

impl<T> fmt::Display for TrySendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TrySendError::Full(_) => f.write_str("sending on a full channel"),
            TrySendError::Disconnected(_) => {
                f.write_str("sending on a channel whose receiver is gone")
            }
        }
    }
}

impl<T> std::error::Error for TrySendError<T> {}

/// Why [`Receiver::try_recv`](crate::Receiver::try_recv) returned no value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TryRecvError {
    /// Nothing is queued now; senders remain.
    Empty,
    /// Nothing is queued and every [`Sender`](crate::Sender) is gone.
    Disconnected,
}

impl fmt::Display for TryRecvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TryRecvError::Empty => f.write_str("receiving on an empty channel"),
            TryRecvError::Disconnected => {
                f.write_str("receiving on an empty channel whose senders are gone")
            }
        }
    }
}

impl std::error::Error for TryRecvError {}

/// Why [`Receiver::recv`](crate::Receiver::recv) returned no value.
///
/// `Disconnected` is std's `RecvError`; `Wait` is the reason a wait of the
/// runtime was cut short.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RecvError {
    /// Every [`Sender`](crate::Sender) is gone and nothing is queued: no
    /// item will ever come.
    Disconnected,
    /// Waiting for an item was cut short (timeout, interrupt, shutdown).
    Wait(WaitError),
}

impl RecvError {
    /// The reason waiting stopped, if that is why the receive failed.
    pub fn wait_error(&self) -> Option<WaitError> {
        match self {
            RecvError::Wait(e) => Some(*e),
            RecvError::Disconnected => None,
        }
    }

    /// Whether every sender is gone (the channel is finished).
    pub fn is_disconnected(&self) -> bool {
        matches!(self, RecvError::Disconnected)
    }
}

impl fmt::Display for RecvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecvError::Disconnected => f.write_str("receiving on a closed channel"),
            RecvError::Wait(e) => write!(f, "waiting to receive stopped: {e}"),
        }
    }
}

impl std::error::Error for RecvError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RecvError::Wait(e) => Some(e),
            RecvError::Disconnected => None,
        }
    }
}

impl From<WaitError> for RecvError {
    fn from(e: WaitError) -> RecvError {
        RecvError::Wait(e)
    }
}

impl From<RecvError> for io::Error {
    /// `Disconnected` becomes `BrokenPipe` (the other end is gone); a wait
    /// error converts as [`WaitError`] does (`TimedOut` for a timeout).
    fn from(e: RecvError) -> io::Error {
        match e {
            RecvError::Wait(w) => w.into(),
            RecvError::Disconnected => io::Error::new(io::ErrorKind::BrokenPipe, e),
        }
    }
}
