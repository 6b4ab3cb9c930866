//! Zero-copy transfer from a file to a stream socket: `sendfile` and
//! `sendfile_all` for [`TcpStream`](crate::TcpStream) and
//! [`UnixStream`](crate::UnixStream) (Linux: `sendfile(2)`; other systems:
//! `pread` into a buffer, then a write).
//!
//! # Design
//!
//! A transfer is one write-side operation of the socket's `Source`, so it
//! behaves as `write` does: on `EWOULDBLOCK` the green thread parks until
//! the socket is writable, a transfer that succeeds without waiting spends
//! selfishness, and the socket's write timeout and an enclosing
//! `with_timeout` bound each wait. The file offset is passed explicitly, so
//! the file's own position never moves and one `File` can feed many sockets.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

use crate::source::Source;

/// Largest count handed to one `sendfile(2)` (Linux transfers at most this
/// much per call anyway).
const MAX_CHUNK: usize = 0x7fff_f000;

/// One transfer of up to `len` bytes of `file` at `offset` into the socket,
/// waiting until the socket takes at least one byte; returns the count
/// (0 at end of file or for `len == 0`).
pub(crate) fn sendfile<S>(
    src: &Source<S>,
    what: &'static str,
    file: &File,
    offset: u64,
    len: usize,
) -> io::Result<usize>
where
    S: mio::event::Source + AsRawFd,
{
    if len == 0 {
        return Ok(0);
    }
    let off = check_offset(offset)?;
    let len = len.min(MAX_CHUNK);
    let fd = file.as_raw_fd();
    src.write_stream(what, len, |s| sys::sendfile(s.as_raw_fd(), fd, off, len))
}

/// [`sendfile`] until `len` bytes are sent or the file ends; returns the
/// count.
pub(crate) fn sendfile_all<S>(
    src: &Source<S>,
    what: &'static str,
    file: &File,
    offset: u64,
    len: u64,
) -> io::Result<u64>
where
    S: mio::event::Source + AsRawFd,
{
    let mut sent = 0u64;
    while sent < len {
        let chunk = usize::try_from(len - sent).unwrap_or(usize::MAX);
        let at = offset.checked_add(sent).ok_or_else(too_far)?;
        match sendfile(src, what, file, at, chunk)? {
            0 => break,
            n => sent += n as u64,
        }
    }
    Ok(sent)
}

fn check_offset(offset: u64) -> io::Result<libc::off_t> {
    libc::off_t::try_from(offset).map_err(|_| too_far())
}

fn too_far() -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        "coro-net: sendfile offset is beyond the largest file offset",
    )
}

#[cfg(target_os = "linux")]
mod sys {
    use std::io;
    use std::os::fd::RawFd;

    /// `sendfile(2)` from `file` at `offset` (the file position is left
    /// alone) into the non-blocking socket `sock`.
    pub(super) fn sendfile(
        sock: RawFd,
        file: RawFd,
        offset: libc::off_t,
        len: usize,
    ) -> io::Result<usize> {
        let mut off = offset;
        // SAFETY: both fds are open for the duration of the call (the
        // socket is owned by the caller's `Source`, the file is borrowed);
        // `off` is a live local the kernel reads and updates; `len` is a
        // count, not a buffer length, so no memory of ours is touched.
        let n = unsafe { libc::sendfile(sock, file, &mut off, len) };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod sys {
    use std::fs::File;
    use std::io;
    use std::mem::ManuallyDrop;
    use std::os::fd::{FromRawFd, RawFd};
    use std::os::unix::fs::FileExt;

    /// The portable form: read at `offset` into a buffer, then one
    /// non-blocking write of what was read. Bytes read but not written are
    /// read again by the next call (the caller advances by what was sent).
    pub(super) fn sendfile(
        sock: RawFd,
        file: RawFd,
        offset: libc::off_t,
        len: usize,
    ) -> io::Result<usize> {
        let mut buf = vec![0u8; len.min(64 * 1024)];
        // SAFETY: `file` is an open fd borrowed for this call; ManuallyDrop
        // keeps the temporary `File` from closing it.
        let f = ManuallyDrop::new(unsafe { File::from_raw_fd(file) });
        let n = f.read_at(&mut buf, offset as u64)?;
        if n == 0 {
            return Ok(0);
        }
        // SAFETY: `buf[..n]` is initialised memory we own; `sock` is open.
        let w = unsafe { libc::write(sock, buf.as_ptr().cast(), n) };
        if w < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(w as usize)
        }
    }
}
