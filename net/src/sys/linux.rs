//! Socket details on Linux and Android: `SO_PEERCRED`, `sendfile(2)`,
//! `UIO_MAXIOV` (see the parent module for the items every backend has).

use std::io;
use std::os::fd::RawFd;

#[cfg(feature = "backdoor")]
use super::Credentials;

/// `UIO_MAXIOV`, the figure std uses here.
pub(crate) const MAX_IOV: usize = libc::UIO_MAXIOV as usize;

/// The peer's credentials (`SO_PEERCRED`).
#[cfg(feature = "backdoor")]
pub(crate) fn peer_credentials(fd: RawFd) -> io::Result<Credentials> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` is a valid, writable ucred and `len` holds its size, as
    // SO_PEERCRED requires; the caller keeps the fd open for the call.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(Credentials {
        uid: cred.uid,
        pid: Some(cred.pid),
    })
}

/// Nothing to set: Linux has no socket option against `SIGPIPE` (see the
/// parent module).
#[inline]
pub(crate) fn no_sigpipe(_fd: RawFd) -> io::Result<()> {
    Ok(())
}

/// `sendfile(2)` from `file` at `offset` (the file position is left
/// alone) into the non-blocking socket `sock`.
pub(crate) fn sendfile(
    sock: RawFd,
    file: RawFd,
    offset: libc::off_t,
    len: usize,
) -> io::Result<usize> {
    let mut off = offset;
    // SAFETY: the caller keeps both fds open for the call; `off` is a live
    // local the kernel reads and updates; `len` is a count, not a buffer
    // length, so no memory of ours is touched.
    let n = unsafe { libc::sendfile(sock, file, &mut off, len) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}
