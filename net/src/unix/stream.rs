//! [`UnixStream`]: a connected Unix-domain stream socket whose blocking
//! calls suspend only the calling green thread.

use std::io;
use std::os::unix::net::SocketAddr;
use std::path::Path;
use std::rc::Rc;
use std::time::Duration;

use coro_runtime::Direction;

use crate::source::Source;

/// A Unix-domain stream socket, with the API of
/// [`std::os::unix::net::UnixStream`].
///
/// It behaves as [`TcpStream`](crate::TcpStream) does: calls suspend only
/// the calling green thread, immediate successes spend selfishness, every
/// call honours `with_timeout` and interrupts, `try_clone` shares the socket,
/// two waiters on one direction queue in order, and
/// [`close`](UnixStream::close) wakes waiters at once with `NotConnected`.
/// `Read` and `Write` are implemented for `UnixStream` and `&UnixStream`.
///
/// # Examples
///
/// ```
/// use std::io::{Read, Write};
/// use coro::net::UnixStream;
///
/// coro::run(|| -> std::io::Result<()> {
///     let (mut a, mut b) = UnixStream::pair()?;
///     a.write_all(b"hi")?;
///     let mut buf = [0; 2];
///     b.read_exact(&mut buf)?;
///     assert_eq!(&buf, b"hi");
///     Ok(())
/// })
/// .unwrap();
/// ```
pub struct UnixStream {
    /// The shared socket; `try_clone` handles point at the same one.
    inner: Rc<Source<mio::net::UnixStream>>,
}

impl UnixStream {
    /// Connects to the socket at `path`. If the listener's queue is full the
    /// green thread sleeps briefly and retries, so an enclosing
    /// `with_timeout` bounds it.
    ///
    /// # Errors
    ///
    /// `InvalidInput` for a path too long for a socket address; the
    /// `connect` error (`NotFound`, `ConnectionRefused`); a timeout or an
    /// interruption.
    ///
    /// # Panics
    ///
    /// Outside a green thread.
    #[track_caller]
    pub fn connect<P: AsRef<Path>>(path: P) -> io::Result<UnixStream> {
        crate::source::need_runtime("UnixStream::connect");
        let addr = SocketAddr::from_pathname(path)?;
        let mut backoff = Duration::from_micros(100);
        loop {
            match mio::net::UnixStream::connect_addr(&addr) {
                Ok(s) => {
                    let stream = UnixStream::from_mio(s)?;
                    // Linux completes at once; elsewhere wait for the result.
                    if stream.inner.get().peer_addr().is_err() {
                        stream.inner.wait(Direction::Write, "UnixStream::connect")?;
                        if let Some(e) = stream.inner.get().take_error()? {
                            return Err(e);
                        }
                    }
                    return Ok(stream);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    coro_runtime::sleep(backoff)?;
                    backoff = (backoff * 2).min(Duration::from_millis(50));
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// A connected pair of sockets.
    ///
    /// # Errors
    ///
    /// As `socketpair(2)` (`EMFILE`, ...).
    #[track_caller]
    pub fn pair() -> io::Result<(UnixStream, UnixStream)> {
        crate::source::need_runtime("UnixStream::pair");
        let (a, b) = mio::net::UnixStream::pair()?;
        Ok((UnixStream::from_mio(a)?, UnixStream::from_mio(b)?))
    }

    /// Shuts the socket down, wakes every green thread waiting on it with a
    /// `NotConnected` error and fails later calls. Idempotent; the fd is
    /// released when the last handle drops.
    pub fn close(&self) {
        self.inner.shutdown_and_close();
    }

    /// The local address of this socket.
    ///
    /// # Errors
    ///
    /// As `getsockname`.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.get().local_addr()
    }

    /// The address of the connected peer.
    ///
    /// # Errors
    ///
    /// `NotConnected` if there is none (never connected, or the
    /// connection is gone); otherwise as `getpeername`.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.inner.get().peer_addr()
    }

    /// Shuts down the read half, the write half or both (never blocks).
    ///
    /// # Errors
    ///
    /// As `shutdown(2)` (`NotConnected` if the peer is gone).
    pub fn shutdown(&self, how: std::net::Shutdown) -> io::Result<()> {
        self.inner.get().shutdown(how)
    }
}

// The methods and impls every socket type shares: see `handle.rs`.
crate::handle::handle!(UnixStream, std::os::unix::net);
crate::handle::timeouts!(UnixStream);
crate::handle::stream_io!(UnixStream);
crate::compat::async_io!(UnixStream);
crate::handle::sendfile!(UnixStream);
