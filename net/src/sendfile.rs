//! Zero-copy transfer from a file to a stream socket: `sendfile` and
//! `sendfile_all` for [`TcpStream`](crate::TcpStream) and
//! [`UnixStream`](crate::UnixStream) (Linux: `sendfile(2)`; other systems:
//! `pread` into a buffer, then a write; see `sys`).
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
use crate::sys;

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
