//! [`TcpListener`] and its [`TcpListenerBuilder`]: a listening TCP socket
//! whose `accept` suspends only the calling green thread.

use std::io;
use std::net::SocketAddr;
use std::rc::Rc;

use socket2::{Domain, Socket, Type};

use crate::lookup::{each_addr, invalid, ToSocketAddrs};
use crate::source::Source;
use crate::tcp::TcpStream;

/// Listen backlog used by [`TcpListener::bind`] (the kernel caps it at
/// `net.core.somaxconn`).
pub const DEFAULT_BACKLOG: i32 = 1024;

/// A TCP socket server, listening for connections, with the API of
/// [`std::net::TcpListener`].
///
/// [`accept`](TcpListener::accept) suspends only the calling green thread.
/// `SO_REUSEADDR` is on (a restarted server can bind again at once);
/// [`TcpListener::builder`] sets `SO_REUSEPORT` for one listener per core
/// (one runtime per core, each with its own listener on the same port).
///
/// # Running out of file descriptors
///
/// When the process has no fd left (`EMFILE`, or `ENFILE` system-wide),
/// `accept` returns that error: the pending connection stays in the kernel's
/// queue and the listener stays readable. An accept loop must then **back
/// off** (sleep, let connections finish) rather than retry at once, which
/// would spin. [`is_fd_exhaustion`](crate::is_fd_exhaustion) recognises those
/// errors:
///
/// ```no_run
/// use std::time::Duration;
/// use coro::net::{is_fd_exhaustion, TcpListener};
///
/// coro::run(|| -> std::io::Result<()> {
///     let listener = TcpListener::bind("127.0.0.1:7007")?;
///     let mut backoff = Duration::from_millis(5);
///     loop {
///         match listener.accept() {
///             Ok((stream, _peer)) => {
///                 backoff = Duration::from_millis(5);
///                 // Builder::spawn, not coro::spawn: no memory for a stack
///                 // is an error here (the connection is dropped), not a
///                 // panic that kills the accept loop.
///                 if let Err(e) = coro::Builder::new().spawn(move || drop(stream)) {
///                     log::warn!("shedding a connection: {e}");
///                     coro::sleep(backoff).map_err(std::io::Error::from)?;
///                 }
///             }
///             Err(e) if is_fd_exhaustion(&e) => {
///                 log::warn!("accept: {e}; backing off {backoff:?}");
///                 coro::sleep(backoff).map_err(std::io::Error::from)?;
///                 backoff = (backoff * 2).min(Duration::from_secs(1));
///             }
///             Err(e) => return Err(e),
///         }
///     }
/// })
/// .unwrap();
/// ```
///
/// # Closing
///
/// [`close`](TcpListener::close) stops listening and wakes a green thread
/// blocked in `accept` at once with a `NotConnected` error: the way to stop
/// an accept loop from another green thread. [`incoming`](TcpListener::incoming)
/// ends there, so `for s in listener.incoming()` stops as std users expect.
/// It also ends once the accepting thread's wait is cut short (a deadline
/// passed, a cancel, an interrupt, shutdown), after yielding that error
/// once: a loop that skips errors does not spin after a deadline. A loop
/// over `accept` itself must stop on such an error
/// ([`WaitError::from_io`](coro_runtime::WaitError::from_io) recognises it),
/// as the one above does by returning every error it does not handle.
///
/// # Examples
///
/// ```
/// use coro::net::{TcpListener, TcpStream};
///
/// coro::run(|| -> std::io::Result<()> {
///     let listener = TcpListener::bind("127.0.0.1:0")?;
///     let addr = listener.local_addr()?;
///     let client = coro::spawn(move || TcpStream::connect(addr));
///     let (_stream, peer) = listener.accept()?;
///     assert_eq!(peer, client.join().unwrap()?.local_addr()?);
///     Ok(())
/// })
/// .unwrap();
/// ```
pub struct TcpListener {
    /// The shared socket; `try_clone` handles point at the same one.
    inner: Rc<Source<mio::net::TcpListener>>,
}

/// Options for a [`TcpListener`]: `SO_REUSEADDR` (on by default),
/// `SO_REUSEPORT` (off by default) and the listen backlog.
///
/// # Examples
///
/// ```
/// use coro::net::TcpListener;
///
/// coro::run(|| -> std::io::Result<()> {
///     // Two listeners on one port: the kernel spreads connections over them
///     // (one runtime per core would each own one).
///     let a = TcpListener::builder().reuse_port(true).bind("127.0.0.1:0")?;
///     let b = TcpListener::builder().reuse_port(true).bind(a.local_addr()?)?;
///     assert_eq!(a.local_addr()?, b.local_addr()?);
///     Ok(())
/// })
/// .unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct TcpListenerBuilder {
    /// `SO_REUSEADDR`.
    reuse_address: bool,
    /// `SO_REUSEPORT`.
    reuse_port: bool,
    /// The `listen(2)` backlog; positive.
    backlog: i32,
}

impl Default for TcpListenerBuilder {
    fn default() -> Self {
        TcpListenerBuilder {
            reuse_address: true,
            reuse_port: false,
            backlog: DEFAULT_BACKLOG,
        }
    }
}

impl TcpListenerBuilder {
    /// Sets `SO_REUSEADDR` (default `true`).
    pub fn reuse_address(mut self, on: bool) -> Self {
        self.reuse_address = on;
        self
    }

    /// Sets `SO_REUSEPORT` (default `false`): several sockets, typically one
    /// per runtime and core, can then listen on the same address.
    pub fn reuse_port(mut self, on: bool) -> Self {
        self.reuse_port = on;
        self
    }

    /// Sets the listen backlog (default [`DEFAULT_BACKLOG`]); checked at
    /// `bind`, where 0 or less is `InvalidInput`.
    pub fn backlog(mut self, backlog: i32) -> Self {
        self.backlog = backlog;
        self
    }

    /// Creates the listener bound to `addr` (each resolved address is tried
    /// in turn, as std does).
    ///
    /// # Errors
    ///
    /// `InvalidInput` for a malformed address or a backlog below 1; the
    /// `socket`/`bind`/`listen` error of the last address tried
    /// (`AddrInUse`, ...).
    ///
    /// # Panics
    ///
    /// Outside a green thread.
    #[track_caller]
    pub fn bind<A: ToSocketAddrs>(&self, addr: A) -> io::Result<TcpListener> {
        crate::source::need_runtime("TcpListenerBuilder::bind");
        if self.backlog < 1 {
            return Err(invalid(format!(
                "coro-net: listen backlog must be at least 1, not {}",
                self.backlog
            )));
        }
        each_addr(addr, |a| self.bind_one(a))
    }

    fn bind_one(&self, addr: SocketAddr) -> io::Result<TcpListener> {
        let socket = Socket::new(
            Domain::for_address(addr),
            Type::STREAM.nonblocking().cloexec(),
            None,
        )?;
        socket.set_reuse_address(self.reuse_address)?;
        if self.reuse_port {
            socket.set_reuse_port(true)?;
        }
        socket.bind(&addr.into())?;
        socket.listen(self.backlog)?;
        let std: std::net::TcpListener = socket.into();
        TcpListener::from_mio(mio::net::TcpListener::from_std(std))
    }
}

impl TcpListener {
    /// Creates a listener bound to `addr`, with `SO_REUSEADDR` on.
    ///
    /// # Errors
    ///
    /// As [`TcpListenerBuilder::bind`].
    ///
    /// # Panics
    ///
    /// Outside a green thread.
    #[track_caller]
    pub fn bind<A: ToSocketAddrs>(addr: A) -> io::Result<TcpListener> {
        crate::source::need_runtime("TcpListener::bind");
        TcpListenerBuilder::default().bind(addr)
    }

    /// Options beyond [`bind`](TcpListener::bind)'s: `SO_REUSEPORT`, the
    /// backlog.
    pub fn builder() -> TcpListenerBuilder {
        TcpListenerBuilder::default()
    }

    /// Accepts a connection, suspending this green thread until one comes.
    ///
    /// # Errors
    ///
    /// The `accept(2)` error, notably `EMFILE`/`ENFILE` when out of fds (see
    /// the type's docs: back off, do not retry at once); a timeout or an
    /// interruption; `NotConnected` after [`close`](TcpListener::close).
    #[track_caller]
    pub fn accept(&self) -> io::Result<(TcpStream, SocketAddr)> {
        let (s, peer) = self.inner.read("TcpListener::accept", |l| l.accept())?;
        Ok((TcpStream::from_mio(s)?, peer))
    }

    /// Accepts up to `max` connections at once: waits for the first, then
    /// takes those already queued without waiting again. Spends one unit of
    /// selfishness per batch, not per connection.
    ///
    /// # Errors
    ///
    /// `InvalidInput` if `max` is 0. An error of the first `accept` is
    /// returned; an error after some connections were taken (say `EMFILE`)
    /// ends the batch early and comes back from the next call.
    pub fn accept_many(&self, max: usize) -> io::Result<Vec<(TcpStream, SocketAddr)>> {
        if max == 0 {
            return Err(invalid(
                "coro-net: accept_many needs a batch size of at least 1".to_owned(),
            ));
        }
        let mut out = Vec::with_capacity(max.min(64));
        out.push(self.accept()?);
        while out.len() < max {
            match self.inner.get().accept() {
                Ok((s, peer)) => out.push((TcpStream::from_mio(s)?, peer)),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.inner.clear(coro_runtime::Direction::Read);
                    break;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        Ok(out)
    }

    /// The local address (find the port after binding port 0).
    ///
    /// # Errors
    ///
    /// As `getsockname`.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.get().local_addr()
    }

    /// Stops listening (new connections are refused) and wakes every green
    /// thread blocked in `accept` with a `NotConnected` error; later calls
    /// fail the same way. Idempotent. The fd is released when the last
    /// handle drops.
    pub fn close(&self) {
        // Linux stops listening on shutdown; elsewhere it may fail, and the
        // fd closes on drop instead.
        self.inner.shutdown_and_close();
    }
}

// The methods and impls every socket type shares: see `handle.rs`.
crate::handle::handle!(TcpListener, std::net);
crate::handle::incoming!(TcpListener, TcpStream);
crate::handle::ttl!(TcpListener, "the packets of the connections it accepts");
