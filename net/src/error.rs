//! Error helpers: telling resource exhaustion (out of fds) apart from other
//! socket errors, so an accept loop knows when to back off.

use std::io;

/// Whether `err` says the process or system ran out of file descriptors or
/// socket memory (`EMFILE`, `ENFILE`, `ENOBUFS`, `ENOMEM`).
///
/// An accept loop that gets such an error from
/// [`TcpListener::accept`](crate::TcpListener::accept) must back off (sleep,
/// let connections finish) instead of retrying at once: the pending
/// connection stays queued and the listener stays readable, so an immediate
/// retry fails again and spins. See [`TcpListener`](crate::TcpListener) for a
/// loop.
///
/// # Examples
///
/// ```
/// let e = std::io::Error::from_raw_os_error(libc::EMFILE);
/// assert!(coro::net::is_fd_exhaustion(&e));
/// assert!(!coro::net::is_fd_exhaustion(&std::io::ErrorKind::TimedOut.into()));
/// ```
pub fn is_fd_exhaustion(err: &io::Error) -> bool {
    matches!(
        err.raw_os_error(),
        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
    )
}
