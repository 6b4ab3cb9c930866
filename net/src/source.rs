//! The shared core of every socket type: a mio source plus its reactor
//! registration, and the try / wait / retry loop that turns a non-blocking
//! syscall into a call that suspends only the calling green thread.
//!
//! # Design
//!
//! Every socket type is a thin handle around `Rc<Source<S>>`, so
//! `try_clone` gives a second handle to the *same* socket (one registration,
//! one fd) that another green thread of the same runtime can use. The
//! public methods that only delegate to the `Source` are written once, by
//! the macros of `handle.rs`.
//!
//! An operation runs as in Shrapnel, through the runtime's
//! [`Registration::io`]: try the syscall; on `EWOULDBLOCK` clear the
//! direction's readiness flag and park until the reactor sets it again, then
//! retry; a call that succeeds without waiting spends one unit of
//! selfishness. Stream reads and writes go through
//! [`Registration::io_stream`], which also treats a short count as "drained"
//! and so saves the syscall that would only say `EWOULDBLOCK`: always for
//! writes, for reads only on TCP streams (registered for urgent-data events,
//! see [`Socket`]) until their first urgent data. A vectored call counts
//! only the buffers the kernel takes (`IOV_MAX`), so a capped one is full.
//!
//! [`Source::close`] marks the registration closed: every green thread parked
//! on it wakes at once with [`closed_error`], and every later call fails the
//! same way. The fd itself is released when the last handle drops.

use std::cell::Cell;
use std::io;
use std::time::Duration;

use coro_runtime::{Direction, Interest, Registration};

/// A mio source registered with the current runtime.
pub(crate) struct Source<S: mio::event::Source> {
    /// Readiness flags and the parked waiters of `io`.
    ///
    /// Declared before `io` so that the registration is closed (waking any
    /// waiter) before the fd closes.
    reg: Registration,
    /// The non-blocking socket; its fd is owned here.
    io: S,
    /// `set_read_timeout`: a deadline for each read-side call; `None` waits
    /// forever (or until an enclosing `with_timeout`).
    read_timeout: Cell<Option<Duration>>,
    /// `set_write_timeout`, the same for write-side calls.
    write_timeout: Cell<Option<Duration>>,
}

/// How a socket type registers with the reactor.
pub(crate) trait Socket: mio::event::Source + Sized {
    /// Registers the socket for reads and writes.
    fn register_with_runtime(&mut self) -> io::Result<Registration> {
        Registration::new(self, Interest::READABLE | Interest::WRITABLE)
    }
}

/// A TCP stream also asks for urgent-data events, so that a short read can
/// count as drained until the first urgent mark
/// ([`Registration::new_tcp_stream`]).
impl Socket for mio::net::TcpStream {
    fn register_with_runtime(&mut self) -> io::Result<Registration> {
        Registration::new_tcp_stream(self, Interest::READABLE | Interest::WRITABLE)
    }
}

impl Socket for mio::net::TcpListener {}
impl Socket for mio::net::UdpSocket {}
/// Not the TCP rule: a Unix stream read stops at an `SCM_RIGHTS` boundary
/// with more queued behind it, and no event says so.
impl Socket for mio::net::UnixStream {}
impl Socket for mio::net::UnixListener {}
impl Socket for mio::net::UnixDatagram {}

/// The most buffers one `readv`/`writev` takes: std passes at most this
/// many to the kernel (`UIO_MAXIOV` on Linux), so a call with more moves
/// at most the bytes of the first this many.
#[cfg(any(target_os = "linux", target_os = "android"))]
const MAX_IOV: usize = libc::UIO_MAXIOV as usize;
/// Elsewhere std asks `sysconf(_SC_IOV_MAX)`; 16 is its floor (POSIX's
/// `_XOPEN_IOV_MAX`). Only the write side's short-count rule uses the
/// figure there, and a smaller one is only a missed saving.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
const MAX_IOV: usize = 16;

/// The bytes a vectored call on `lens` can move at most: the lengths of
/// the buffers the kernel takes.
fn vectored_len(lens: impl Iterator<Item = usize>) -> usize {
    lens.take(MAX_IOV).sum()
}

impl<S: mio::event::Source> Source<S> {
    /// Registers `io` (already non-blocking) for reads and writes.
    pub(crate) fn new(mut io: S) -> io::Result<Source<S>>
    where
        S: Socket,
    {
        let reg = io.register_with_runtime()?;
        Ok(Source {
            reg,
            io,
            read_timeout: Cell::new(None),
            write_timeout: Cell::new(None),
        })
    }

    /// The reactor registration (readiness flags, waiters).
    #[cfg(any(feature = "futures-io", feature = "tokio-io", feature = "hyper"))]
    pub(crate) fn reg(&self) -> &Registration {
        &self.reg
    }

    /// The socket itself, for syscalls that never block.
    pub(crate) fn get(&self) -> &S {
        &self.io
    }

    /// Runs a read-side operation (read, recv, accept, peek) to completion;
    /// `what` names the public call (for the panic outside a runtime).
    #[track_caller]
    pub(crate) fn read<R>(
        &self,
        what: &'static str,
        op: impl FnMut(&S) -> io::Result<R>,
    ) -> io::Result<R> {
        match self.read_timeout.get() {
            None => self.run(Direction::Read, what, op),
            t => timed(t, || self.run(Direction::Read, what, op)),
        }
    }

    /// Runs a write-side operation (write, send) to completion.
    #[track_caller]
    pub(crate) fn write<R>(
        &self,
        what: &'static str,
        op: impl FnMut(&S) -> io::Result<R>,
    ) -> io::Result<R> {
        match self.write_timeout.get() {
            None => self.run(Direction::Write, what, op),
            t => timed(t, || self.run(Direction::Write, what, op)),
        }
    }

    /// Sets the per-call read timeout (`None`: none). Zero is `InvalidInput`.
    pub(crate) fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        check_timeout(t)?;
        self.read_timeout.set(t);
        Ok(())
    }

    /// Sets the per-call write timeout (`None`: none). Zero is `InvalidInput`.
    pub(crate) fn set_write_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        check_timeout(t)?;
        self.write_timeout.set(t);
        Ok(())
    }

    /// The per-call read timeout.
    pub(crate) fn read_timeout(&self) -> Option<Duration> {
        self.read_timeout.get()
    }

    /// The per-call write timeout.
    pub(crate) fn write_timeout(&self) -> Option<Duration> {
        self.write_timeout.get()
    }

    #[track_caller]
    fn run<R>(
        &self,
        dir: Direction,
        what: &'static str,
        mut op: impl FnMut(&S) -> io::Result<R>,
    ) -> io::Result<R> {
        if !coro_runtime::in_green_thread() {
            return self.outside(what, || op(&self.io));
        }
        self.reg.io(dir, || op(&self.io))
    }

    #[track_caller]
    fn run_stream(
        &self,
        dir: Direction,
        what: &'static str,
        len: usize,
        mut op: impl FnMut(&S) -> io::Result<usize>,
    ) -> io::Result<usize> {
        if !coro_runtime::in_green_thread() {
            return self.outside(what, || op(&self.io));
        }
        let timeout = match dir {
            Direction::Read => self.read_timeout.get(),
            Direction::Write => self.write_timeout.get(),
        };
        match timeout {
            // Called here, not in a closure, so that the caller's location
            // reaches the wait (`#[track_caller]`).
            None => self.reg.io_stream(dir, len, || op(&self.io)),
            t => timed(t, || self.reg.io_stream(dir, len, || op(&self.io))),
        }
    }

    /// An operation where no green thread runs (a socket that outlived its
    /// runtime): it works if it need not wait, as std's would; a wait
    /// panics, naming the call.
    #[cold]
    #[track_caller]
    fn outside<R>(&self, what: &str, mut op: impl FnMut() -> io::Result<R>) -> io::Result<R> {
        if self.reg.is_closed() {
            return Err(closed_error());
        }
        loop {
            match op() {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => panic!(
                    "coro: {what} would block, and that needs a green thread of the runtime \
                     that made this socket (call it inside coro::run / Runtime::block_on)"
                ),
                r => return r,
            }
        }
    }

    /// `Read::read` for a stream socket.
    #[track_caller]
    pub(crate) fn read_buf(&self, what: &'static str, buf: &mut [u8]) -> io::Result<usize>
    where
        for<'a> &'a S: io::Read,
    {
        if buf.is_empty() {
            return Ok(0);
        }
        let len = buf.len();
        self.run_stream(Direction::Read, what, len, |mut s| {
            io::Read::read(&mut s, buf)
        })
    }

    /// `Read::read_vectored` for a stream socket.
    #[track_caller]
    pub(crate) fn read_bufs(
        &self,
        what: &'static str,
        bufs: &mut [io::IoSliceMut<'_>],
    ) -> io::Result<usize>
    where
        for<'a> &'a S: io::Read,
    {
        let len = vectored_len(bufs.iter().map(|b| b.len()));
        if len == 0 {
            return Ok(0);
        }
        self.run_stream(Direction::Read, what, len, |mut s| {
            io::Read::read_vectored(&mut s, bufs)
        })
    }

    /// A write-side stream operation that moves up to `len` bytes (a
    /// `sendfile`): as [`write_buf`](Source::write_buf) without a buffer.
    #[track_caller]
    pub(crate) fn write_stream(
        &self,
        what: &'static str,
        len: usize,
        op: impl FnMut(&S) -> io::Result<usize>,
    ) -> io::Result<usize> {
        self.run_stream(Direction::Write, what, len, op)
    }

    /// `Write::write` for a stream socket.
    #[track_caller]
    pub(crate) fn write_buf(&self, what: &'static str, buf: &[u8]) -> io::Result<usize>
    where
        for<'a> &'a S: io::Write,
    {
        self.run_stream(Direction::Write, what, buf.len(), |mut s| {
            io::Write::write(&mut s, buf)
        })
    }

    /// `Write::write_vectored` for a stream socket.
    #[track_caller]
    pub(crate) fn write_bufs(
        &self,
        what: &'static str,
        bufs: &[io::IoSlice<'_>],
    ) -> io::Result<usize>
    where
        for<'a> &'a S: io::Write,
    {
        let len = vectored_len(bufs.iter().map(|b| b.len()));
        self.run_stream(Direction::Write, what, len, |mut s| {
            io::Write::write_vectored(&mut s, bufs)
        })
    }

    /// Waits until `dir` is ready (or was never found not ready); `what`
    /// names the public call.
    #[track_caller]
    pub(crate) fn wait(&self, dir: Direction, what: &str) -> io::Result<()> {
        if self.reg.is_closed() {
            coro_runtime::failed_at_once();
            return Err(closed_error());
        }
        if !coro_runtime::in_green_thread() && !self.reg.is_ready(dir) {
            need_runtime(what);
        }
        self.reg.wait(dir)
    }

    /// Forgets readiness in `dir` (the caller saw `EWOULDBLOCK`).
    pub(crate) fn clear(&self, dir: Direction) {
        self.reg.clear(dir)
    }

    /// Wakes every waiter with [`closed_error`] and fails later calls.
    pub(crate) fn close(&self) {
        self.reg.close()
    }

    /// [`close`](Source::close), shutting the socket down (both directions)
    /// first unless it was already closed: the peer of a stream sees EOF and
    /// a listener stops listening. A failed `shutdown` (the peer is gone; a
    /// listener on a system where it cannot be shut down) is ignored: the fd
    /// still closes when the last handle drops.
    pub(crate) fn shutdown_and_close(&self)
    where
        S: std::os::fd::AsFd,
    {
        if !self.reg.is_closed() {
            let _ = socket2::SockRef::from(&self.io).shutdown(std::net::Shutdown::Both);
            self.reg.close();
        }
    }

    /// Whether [`close`](Source::close) was called.
    pub(crate) fn is_closed(&self) -> bool {
        self.reg.is_closed()
    }

    /// Takes the socket out, deregistered from the reactor.
    pub(crate) fn into_inner(mut self) -> io::Result<S> {
        self.reg.close();
        self.reg.deregister(&mut self.io)?;
        Ok(self.io)
    }
}

impl<S: mio::event::Source + std::fmt::Debug> std::fmt::Debug for Source<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&self.io, f)
    }
}

/// Panics, naming `call`, where no green thread runs: sockets are made and
/// waited on by green threads of a runtime.
#[track_caller]
pub(crate) fn need_runtime(call: &str) {
    if !coro_runtime::in_green_thread() {
        no_runtime(call);
    }
}

#[cold]
#[track_caller]
fn no_runtime(call: &str) -> ! {
    panic!(
        "coro: {call} needs a coro runtime, but none runs on this OS thread \
         (call it inside coro::run / Runtime::block_on)"
    )
}

/// The error of any call on a socket after [`close`](Source::close).
pub(crate) fn closed_error() -> io::Error {
    io::Error::new(
        io::ErrorKind::NotConnected,
        "coro-net: the socket was closed (close() was called on it or on a clone)",
    )
}

/// Runs `f` under the optional per-socket timeout (`set_read_timeout` and
/// friends), turning an expiry into `ErrorKind::TimedOut`.
pub(crate) fn timed<R>(
    timeout: Option<Duration>,
    f: impl FnOnce() -> io::Result<R>,
) -> io::Result<R> {
    match timeout {
        None => f(),
        Some(d) => match coro_runtime::with_timeout(d, f) {
            Ok(r) => r,
            Err(t) => Err(t.into()),
        },
    }
}

/// Checks a timeout argument the way std does: zero is `InvalidInput`.
pub(crate) fn check_timeout(timeout: Option<Duration>) -> io::Result<()> {
    if timeout == Some(Duration::ZERO) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "coro-net: cannot set a 0 duration timeout",
        ));
    }
    Ok(())
}
