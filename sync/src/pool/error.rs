//! [`PoolError`]: why [`Pool::get`](crate::Pool::get) returned no connection.

use std::fmt;
use std::io;

use coro_runtime::WaitError;

/// Why [`Pool::get`](crate::Pool::get) returned no connection.
#[derive(Debug)]
#[non_exhaustive]
pub enum PoolError<E> {
    /// The pool's `connection_timeout` passed before a connection was free
    /// or established.
    Timeout,
    /// Waiting was cut short by an interrupt, by an enclosing `with_timeout`
    /// (passed on unchanged, so that scope converts it), or by shutdown.
    Wait(WaitError),
    /// The manager failed to open a connection.
    Connect(E),
    /// The pool was [closed](crate::Pool::close).
    Closed,
}

impl<E: fmt::Display> fmt::Display for PoolError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PoolError::Timeout => f.write_str("timed out waiting for a pooled connection"),
            PoolError::Wait(e) => write!(f, "waiting for a pooled connection stopped: {e}"),
            PoolError::Connect(e) => write!(f, "cannot open a pooled connection: {e}"),
            PoolError::Closed => f.write_str("the connection pool is closed"),
        }
    }
}

impl<E: std::error::Error + 'static> std::error::Error for PoolError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            PoolError::Wait(e) => Some(e),
            PoolError::Connect(e) => Some(e),
            PoolError::Timeout | PoolError::Closed => None,
        }
    }
}

impl<E: std::error::Error + Send + Sync + 'static> From<PoolError<E>> for io::Error {
    fn from(e: PoolError<E>) -> io::Error {
        match e {
            PoolError::Timeout => io::Error::new(io::ErrorKind::TimedOut, PoolError::<E>::Timeout),
            PoolError::Wait(w) => w.into(),
            PoolError::Connect(c) => io::Error::other(c),
            PoolError::Closed => {
                io::Error::new(io::ErrorKind::NotConnected, PoolError::<E>::Closed)
            }
        }
    }
}
