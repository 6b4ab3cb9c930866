//! [`GetError`]: why [`GroupPool::get`](super::GroupPool::get) returned no
//! session.

use std::fmt;
use std::io;
use std::rc::Rc;
use std::time::Duration;

use coro_runtime::WaitError;

use super::MAX_ATTEMPTS;

/// Why [`GroupPool::get`](super::GroupPool::get) returned no session.
#[derive(Debug)]
#[non_exhaustive]
pub enum GetError<E> {
    /// The group already has `max_queue` callers waiting.
    QueueFull {
        /// The limit that was reached.
        max_queue: usize,
    },
    /// The spawn this caller started failed (callers that were only
    /// waiting for the group start over instead; see
    /// [`GroupPool::get`](super::GroupPool::get)).
    Spawn(Rc<E>),
    /// The key's spawns keep failing and the pool backs off (see
    /// [`SpawnBackoff`](super::SpawnBackoff)): the caller needed a spawn
    /// and none may start for `retry_in`.
    Backoff {
        /// The last failed spawn's error.
        error: Rc<E>,
        /// Consecutive failed spawns of the key.
        failures: u32,
        /// How long until a spawn may start again.
        retry_in: Duration,
    },
    /// Connecting to a worker failed [`MAX_ATTEMPTS`] times.
    Connect(E),
    /// Waiting was cut short (interrupt, an enclosing `with_timeout`,
    /// shutdown).
    Wait(WaitError),
    /// No green thread could be started for the spawn.
    Thread(io::Error),
}

impl<E> GetError<E> {
    /// The spawn error behind a [`Spawn`](GetError::Spawn) or a
    /// [`Backoff`](GetError::Backoff).
    pub fn spawn_error(&self) -> Option<&E> {
        match self {
            GetError::Spawn(e) | GetError::Backoff { error: e, .. } => Some(e),
            _ => None,
        }
    }
}

impl<E: fmt::Display> fmt::Display for GetError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GetError::QueueFull { max_queue } => {
                write!(
                    f,
                    "the group's wait queue is full ({max_queue} callers waiting)"
                )
            }
            GetError::Spawn(e) => write!(f, "cannot spawn a worker: {e}"),
            GetError::Backoff {
                error,
                failures,
                retry_in,
            } => write!(
                f,
                "cannot spawn a worker: {error} ({failures} failures in a row; next try in {retry_in:.1?})"
            ),
            GetError::Connect(e) => {
                write!(
                    f,
                    "cannot connect to a worker after {MAX_ATTEMPTS} attempts: {e}"
                )
            }
            GetError::Wait(e) => write!(f, "waiting for a worker stopped: {e}"),
            GetError::Thread(e) => write!(f, "cannot start a spawner thread: {e}"),
        }
    }
}

impl<E: std::error::Error + 'static> std::error::Error for GetError<E> {}
