//! What sockets do differently from one OS to another.
//!
//! Each backend exports the same items:
//!
//! * `MAX_IOV`: the most buffers one `readv`/`writev` takes (std passes at
//!   most this many to the kernel, so a call with more moves at most the
//!   bytes of the first this many);
//! * `peer_credentials(fd) -> io::Result<Credentials>`: the uid (and the
//!   pid, where the OS tells) of a connected Unix socket's peer, as the
//!   kernel recorded them at `connect`;
//! * `no_sigpipe(fd) -> io::Result<()>`: makes a write to a stream socket
//!   whose peer is gone fail with `EPIPE` instead of raising `SIGPIPE`,
//!   where the OS has a socket option for it;
//! * `sendfile(sock, file, offset, len) -> io::Result<usize>`: one transfer
//!   from a file at an offset (the file's position stays) into a
//!   non-blocking stream socket.
//!
//! The backends:
//!
//! * Linux, Android (`linux.rs`): `SO_PEERCRED`, `sendfile(2)`,
//!   `UIO_MAXIOV`. No socket option keeps `SIGPIPE` away: std sends with
//!   `MSG_NOSIGNAL`, and Rust programs start with `SIGPIPE` ignored.
//! * BSD, macOS (`bsd.rs`): `getpeereid` (and `LOCAL_PEERPID` for the pid
//!   on macOS), `SO_NOSIGPIPE` (which macOS does not pass on to accepted
//!   sockets), `IOV_MAX`, and the portable transfer (`portable.rs`:
//!   `pread` into a buffer, then a write), compiled everywhere so that its
//!   tests run on Linux too.

#[cfg(any(test, not(any(target_os = "linux", target_os = "android"))))]
mod portable;

#[cfg(any(target_os = "linux", target_os = "android"))]
mod linux;
#[cfg(all(feature = "backdoor", any(target_os = "linux", target_os = "android")))]
pub(crate) use linux::peer_credentials;
#[cfg(any(target_os = "linux", target_os = "android"))]
pub(crate) use linux::{no_sigpipe, sendfile, MAX_IOV};

#[cfg(all(unix, not(any(target_os = "linux", target_os = "android"))))]
mod bsd;
#[cfg(all(
    feature = "backdoor",
    unix,
    not(any(target_os = "linux", target_os = "android"))
))]
pub(crate) use bsd::peer_credentials;
#[cfg(all(unix, not(any(target_os = "linux", target_os = "android"))))]
pub(crate) use bsd::{no_sigpipe, sendfile, MAX_IOV};

#[cfg(not(unix))]
compile_error!("coro-net supports Unix targets only (Linux; BSD and macOS)");

/// A socket peer's identity (the back door checks who connects).
#[cfg(feature = "backdoor")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Credentials {
    /// Its effective uid.
    pub(crate) uid: u32,
    /// Its process id, where the OS tells.
    pub(crate) pid: Option<i32>,
}
