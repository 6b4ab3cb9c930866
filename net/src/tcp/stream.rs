//! [`TcpStream`]: a TCP connection whose blocking calls suspend only the
//! calling green thread.

use std::io;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use coro_runtime::Direction;

use crate::lookup::{each_addr, ToSocketAddrs};
use crate::source::Source;

/// A TCP connection between a local and a remote socket, with the API of
/// [`std::net::TcpStream`].
///
/// Reads and writes look blocking but suspend only the calling green thread:
/// the socket is non-blocking, and on `EWOULDBLOCK` the thread parks until the
/// runtime's reactor reports readiness. A call that succeeds at once spends
/// one unit of the thread's selfishness budget (see
/// [`try_selfish`](coro_runtime::try_selfish)), so a writer on a fast link
/// yields to the others now and then. Every call honours an enclosing
/// [`with_timeout`](coro_runtime::with_timeout) and
/// [`Coro::interrupt`](coro_runtime::Coro::interrupt).
///
/// `Read` and `Write` are implemented for `TcpStream` and for `&TcpStream`,
/// so `BufReader`, `read_exact`, `write_all`, rustls' `StreamOwned` and the
/// like work unchanged.
///
/// # Sharing between green threads
///
/// [`try_clone`](TcpStream::try_clone) returns a second handle to the same
/// socket (`&TcpStream` or an `Rc` works too), so one green thread can read
/// while another writes; tokio's shapes are here as well:
/// [`split`](TcpStream::split) (borrowed halves) and
/// [`into_split`](TcpStream::into_split) (owned halves; dropping the write
/// half shuts the writing direction down). When two green threads wait on the same direction
/// they **queue in order**: a readiness event wakes all of them, they retry
/// in the order they started waiting, and those that find nothing left wait
/// again. Nobody is forgotten and nobody gets an error for sharing.
///
/// # Closing
///
/// Rust's borrows mean a stream cannot be dropped while another green thread
/// uses it; use [`close`](TcpStream::close) instead. It shuts the connection
/// down, wakes every green thread waiting on the socket at once with a
/// `NotConnected` error that says the socket was closed, and makes every later
/// call fail the same way. The fd is released when the last handle drops; a
/// new socket that gets the same fd number never sees the old socket's
/// readiness (the reactor's tokens carry a generation).
///
/// # Errors
///
/// Every call returns `std::io::Result`. A deadline of an enclosing
/// `with_timeout` (or of [`set_read_timeout`](TcpStream::set_read_timeout))
/// is `ErrorKind::TimedOut`; an interrupt is `ErrorKind::Other` wrapping
/// [`WaitError::Interrupted`](coro_runtime::WaitError) (never
/// `ErrorKind::Interrupted`, which `read_exact` and `write_all` would retry
/// forever).
///
/// # Examples
///
/// ```
/// use std::io::{Read, Write};
/// use coro::net::{TcpListener, TcpStream};
///
/// coro::run(|| -> std::io::Result<()> {
///     let listener = TcpListener::bind("127.0.0.1:0")?;
///     let addr = listener.local_addr()?;
///     let server = coro::spawn(move || -> std::io::Result<()> {
///         let (mut s, _) = listener.accept()?;
///         let mut buf = [0; 5];
///         s.read_exact(&mut buf)?;
///         s.write_all(&buf)
///     });
///     let mut c = TcpStream::connect(addr)?;
///     c.write_all(b"hello")?;
///     let mut back = String::new();
///     c.read_to_string(&mut back)?;
///     assert_eq!(back, "hello");
///     server.join().unwrap()
/// })
/// .unwrap();
/// ```
pub struct TcpStream {
    /// The shared socket; clones from `try_clone` point at the same one.
    pub(super) inner: Rc<Source<mio::net::TcpStream>>,
}

impl TcpStream {
    /// Opens a TCP connection to `addr`, trying each resolved address in
    /// turn (host names are resolved on the blocking-offload pool).
    ///
    /// The connect is non-blocking: it starts, the green thread waits for the
    /// socket to become writable, then `SO_ERROR` says how it went. So an
    /// enclosing `with_timeout` bounds it.
    ///
    /// # Errors
    ///
    /// The connect error of the last address tried (`ConnectionRefused`,
    /// ...); `TimedOut` or an interruption if the wait was cut short;
    /// `InvalidInput` for a malformed address.
    ///
    /// # Panics
    ///
    /// Outside a green thread.
    #[track_caller]
    pub fn connect<A: ToSocketAddrs>(addr: A) -> io::Result<TcpStream> {
        crate::source::need_runtime("TcpStream::connect");
        each_addr(addr, connect_one)
    }

    /// Opens a connection to `addr` with a deadline, as std's
    /// `connect_timeout` (the same as `connect` inside `with_timeout`).
    ///
    /// # Errors
    ///
    /// As [`connect`](TcpStream::connect); `TimedOut` past `timeout`;
    /// `InvalidInput` for a zero timeout.
    #[track_caller]
    pub fn connect_timeout(addr: &SocketAddr, timeout: Duration) -> io::Result<TcpStream> {
        crate::source::need_runtime("TcpStream::connect_timeout");
        crate::source::check_timeout(Some(timeout))?;
        crate::source::timed(Some(timeout), || connect_one(*addr))
    }

    /// Closes the stream for every handle: shuts the connection down, wakes
    /// every green thread waiting on it with a `NotConnected` error, and
    /// fails every later call the same way. Idempotent. The fd is released
    /// when the last handle drops.
    ///
    /// ```
    /// use std::io::Read;
    /// use std::time::Duration;
    /// use coro::net::{TcpListener, TcpStream};
    ///
    /// coro::run(|| -> std::io::Result<()> {
    ///     let l = TcpListener::bind("127.0.0.1:0")?;
    ///     let c = TcpStream::connect(l.local_addr()?)?;
    ///     let reader = c.try_clone()?;
    ///     let h = coro::spawn(move || (&reader).read(&mut [0; 8]));
    ///     coro::sleep(Duration::from_millis(5)).unwrap();
    ///     c.close(); // the reader wakes at once
    ///     let err = h.join().unwrap().unwrap_err();
    ///     assert_eq!(err.kind(), std::io::ErrorKind::NotConnected);
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn close(&self) {
        self.inner.shutdown_and_close();
    }

    /// Reads without removing the data from the queue.
    ///
    /// # Errors
    ///
    /// As [`Read::read`](std::io::Read::read).
    #[track_caller]
    pub fn peek(&self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        self.inner.read("TcpStream::peek", |s| s.peek(buf))
    }

    /// Sets `TCP_NODELAY` (disables Nagle's algorithm when `true`).
    ///
    /// # Errors
    ///
    /// As `setsockopt`.
    pub fn set_nodelay(&self, nodelay: bool) -> io::Result<()> {
        self.inner.get().set_nodelay(nodelay)
    }

    /// Whether `TCP_NODELAY` is set.
    ///
    /// # Errors
    ///
    /// As `getsockopt`.
    pub fn nodelay(&self) -> io::Result<bool> {
        self.inner.get().nodelay()
    }

    /// Waits until the socket is readable (data, EOF or an error pending).
    ///
    /// # Errors
    ///
    /// A timeout, an interruption, or `NotConnected` after `close`.
    #[track_caller]
    pub fn wait_readable(&self) -> io::Result<()> {
        self.inner.wait(Direction::Read, "TcpStream::wait_readable")
    }

    /// Waits until the socket is writable.
    ///
    /// # Errors
    ///
    /// As [`wait_readable`](TcpStream::wait_readable).
    #[track_caller]
    pub fn wait_writable(&self) -> io::Result<()> {
        self.inner
            .wait(Direction::Write, "TcpStream::wait_writable")
    }
}

/// Connects to one address: start, wait writable, check `SO_ERROR`.
fn connect_one(addr: SocketAddr) -> io::Result<TcpStream> {
    let stream = TcpStream::from_mio(mio::net::TcpStream::connect(addr)?)?;
    loop {
        stream.inner.wait(Direction::Write, "TcpStream::connect")?;
        if let Some(e) = stream.inner.get().take_error()? {
            return Err(e);
        }
        match stream.inner.get().peer_addr() {
            Ok(_) => return Ok(stream),
            // Not connected yet: a spurious wake-up; wait for the next event.
            Err(e) if e.kind() == io::ErrorKind::NotConnected => {
                stream.inner.clear(Direction::Write);
            }
            Err(e) => return Err(e),
        }
    }
}

// The methods and impls every socket type shares: see `handle.rs`.
crate::handle::handle!(TcpStream, std::net);
crate::handle::addrs!(TcpStream, SocketAddr);
crate::handle::shutdown!(TcpStream);
crate::handle::timeouts!(TcpStream);
crate::handle::ttl!(TcpStream, "the packets this socket sends");
crate::handle::stream_io!(TcpStream);
crate::compat::async_io!(TcpStream);
crate::handle::sendfile!(TcpStream);
