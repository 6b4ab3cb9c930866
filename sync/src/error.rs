//! Error types of the locks and semaphores: why a `lock`, `read`, `write` or
//! `acquire` did not get what it asked for.
//!
//! Blocking calls fail with the runtime's [`WaitError`] (a timeout, an
//! interrupt, runtime shutdown), wrapped where a call can also fail for a
//! reason of its own (a lock the caller already holds). Channel errors live in
//! `channel::error`.

use std::fmt;
use std::io;

use coro_runtime::WaitError;

/// Why [`Mutex::lock`](crate::Mutex::lock),
/// [`RwLock::read`](crate::RwLock::read) or
/// [`RwLock::write`](crate::RwLock::write) returned without the lock.
///
/// Later versions may add reasons, so a `match` outside this crate needs a
/// `_` arm:
///
/// ```compile_fail
/// use coro::sync::LockError;
///
/// let retry = match LockError::WouldDeadlock {
///     LockError::WouldDeadlock => false,
///     LockError::Wait(_) => true,
/// };
/// assert!(!retry);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LockError {
    /// The calling green thread already holds this lock (for an `RwLock`: in
    /// a mode that makes this request wait for itself). Waiting would hang
    /// forever, so the call fails at once.
    WouldDeadlock,
    /// Waiting was cut short: a timeout, an interrupt, or runtime shutdown.
    Wait(WaitError),
}

impl fmt::Display for LockError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LockError::WouldDeadlock => {
                f.write_str("lock is already held by this green thread (it would wait for itself)")
            }
            LockError::Wait(e) => write!(f, "waiting for the lock stopped: {e}"),
        }
    }
}

impl std::error::Error for LockError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            LockError::Wait(e) => Some(e),
            LockError::WouldDeadlock => None,
        }
    }
}

impl From<WaitError> for LockError {
    fn from(e: WaitError) -> LockError {
        LockError::Wait(e)
    }
}

impl From<LockError> for io::Error {
    fn from(e: LockError) -> io::Error {
        match e {
            LockError::Wait(w) => w.into(),
            LockError::WouldDeadlock => io::Error::new(io::ErrorKind::Deadlock, e),
        }
    }
}

/// Why a `try_lock`, `try_read` or `try_write` failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TryLockError {
    /// The lock is held in a conflicting mode, or other threads are queued
    /// for it ahead of the caller.
    WouldBlock,
}

impl fmt::Display for TryLockError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TryLockError::WouldBlock => {
                f.write_str("try_lock failed because the operation would block")
            }
        }
    }
}

impl std::error::Error for TryLockError {}

/// [`Semaphore::try_acquire`](crate::Semaphore::try_acquire) could not take
/// the permits without waiting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TryAcquireError;

impl fmt::Display for TryAcquireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("not enough permits available without waiting")
    }
}

impl std::error::Error for TryAcquireError {}
