//! Socket details on the BSDs and macOS: `getpeereid`, `SO_NOSIGPIPE`,
//! `IOV_MAX`, the portable file transfer (see the parent module for the
//! items every backend has).

use std::io;
use std::os::fd::RawFd;

#[cfg(feature = "backdoor")]
use super::Credentials;

pub(crate) use super::portable::sendfile;

/// `IOV_MAX`, the figure std uses here.
pub(crate) const MAX_IOV: usize = libc::IOV_MAX as usize;

/// The peer's credentials: `getpeereid`, and on macOS `LOCAL_PEERPID` for
/// the pid (none if the OS does not say).
#[cfg(feature = "backdoor")]
pub(crate) fn peer_credentials(fd: RawFd) -> io::Result<Credentials> {
    let mut uid: libc::uid_t = 0;
    let mut gid: libc::gid_t = 0;
    // SAFETY: both out-pointers are valid and writable; the caller keeps
    // the fd open for the call.
    if unsafe { libc::getpeereid(fd, &mut uid, &mut gid) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(Credentials {
        uid,
        pid: peer_pid(fd),
    })
}

/// The peer's pid (`LOCAL_PEERPID`), if the OS tells.
#[cfg(target_vendor = "apple")]
fn peer_pid(fd: RawFd) -> Option<i32> {
    let mut pid: libc::pid_t = 0;
    let mut len = std::mem::size_of::<libc::pid_t>() as libc::socklen_t;
    // SAFETY: `pid` is a valid, writable pid_t and `len` holds its size, as
    // LOCAL_PEERPID requires; the caller keeps the fd open for the call.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_LOCAL,
            libc::LOCAL_PEERPID,
            (&mut pid as *mut libc::pid_t).cast(),
            &mut len,
        )
    };
    (r == 0).then_some(pid)
}

/// The BSDs' `getpeereid` gives no pid.
#[cfg(not(target_vendor = "apple"))]
fn peer_pid(_fd: RawFd) -> Option<i32> {
    None
}

/// Sets `SO_NOSIGPIPE`: a write to a stream socket whose peer is gone
/// fails with `EPIPE`, whatever the process does with `SIGPIPE`.
pub(crate) fn no_sigpipe(fd: RawFd) -> io::Result<()> {
    let on: libc::c_int = 1;
    // SAFETY: `on` is a valid c_int for the option's value and its size is
    // passed; the caller keeps the fd open for the call.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_NOSIGPIPE,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
