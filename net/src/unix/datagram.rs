//! [`UnixDatagram`]: a Unix-domain datagram socket whose blocking calls
//! suspend only the calling green thread.

use std::io;
use std::os::unix::net::SocketAddr;
use std::path::Path;
use std::rc::Rc;

use crate::source::Source;

/// A Unix-domain datagram socket, with the API of
/// [`std::os::unix::net::UnixDatagram`].
///
/// As [`UdpSocket`](crate::UdpSocket): receives suspend only this green
/// thread, every call honours `with_timeout` and interrupts, and
/// [`close`](UnixDatagram::close) wakes waiters with `NotConnected`.
///
/// # Examples
///
/// ```
/// use coro::net::UnixDatagram;
///
/// coro::run(|| -> std::io::Result<()> {
///     let (a, b) = UnixDatagram::pair()?;
///     a.send(b"one")?;
///     let mut buf = [0; 8];
///     let n = b.recv(&mut buf)?;
///     assert_eq!(&buf[..n], b"one");
///     Ok(())
/// })
/// .unwrap();
/// ```
pub struct UnixDatagram {
    /// The shared socket; `try_clone` handles point at the same one.
    inner: Rc<Source<mio::net::UnixDatagram>>,
}

impl UnixDatagram {
    /// Creates a socket bound to `path`.
    ///
    /// # Errors
    ///
    /// `InvalidInput` for a path too long; `AddrInUse` if the file exists.
    ///
    /// # Panics
    ///
    /// Outside a green thread.
    #[track_caller]
    pub fn bind<P: AsRef<Path>>(path: P) -> io::Result<UnixDatagram> {
        crate::source::need_runtime("UnixDatagram::bind");
        UnixDatagram::from_mio(mio::net::UnixDatagram::bind(path)?)
    }

    /// Creates a socket bound to no address.
    ///
    /// # Errors
    ///
    /// As `socket(2)`.
    #[track_caller]
    pub fn unbound() -> io::Result<UnixDatagram> {
        crate::source::need_runtime("UnixDatagram::unbound");
        UnixDatagram::from_mio(mio::net::UnixDatagram::unbound()?)
    }

    /// A connected pair of sockets.
    ///
    /// # Errors
    ///
    /// As `socketpair(2)`.
    pub fn pair() -> io::Result<(UnixDatagram, UnixDatagram)> {
        crate::source::need_runtime("UnixDatagram::pair");
        let (a, b) = mio::net::UnixDatagram::pair()?;
        Ok((UnixDatagram::from_mio(a)?, UnixDatagram::from_mio(b)?))
    }

    /// Sets the default peer for `send`/`recv`.
    ///
    /// # Errors
    ///
    /// As `connect(2)`.
    pub fn connect<P: AsRef<Path>>(&self, path: P) -> io::Result<()> {
        self.inner.get().connect(path)
    }

    /// Sends `buf` to the socket at `path`.
    ///
    /// # Errors
    ///
    /// The `sendto` error; a timeout or an interruption.
    #[track_caller]
    pub fn send_to<P: AsRef<Path>>(&self, buf: &[u8], path: P) -> io::Result<usize> {
        let path = path.as_ref();
        self.inner
            .write("UnixDatagram::send_to", |s| s.send_to(buf, path))
    }

    /// Wakes every green thread waiting on the socket with a `NotConnected`
    /// error and fails later calls. Idempotent; the fd is released when the
    /// last handle drops.
    pub fn close(&self) {
        self.inner.close();
    }
}

// The methods and impls every socket type shares: see `handle.rs`.
crate::handle::handle!(UnixDatagram, std::os::unix::net);
crate::handle::addrs!(UnixDatagram, SocketAddr);
crate::handle::shutdown!(UnixDatagram);
crate::handle::datagram_io!(UnixDatagram, SocketAddr);
crate::handle::timeouts!(UnixDatagram: setters only);
