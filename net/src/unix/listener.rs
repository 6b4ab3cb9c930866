//! [`UnixListener`]: a listening Unix-domain socket whose `accept` suspends
//! only the calling green thread.

use std::io;
use std::os::unix::net::SocketAddr;
use std::path::Path;
use std::rc::Rc;

use crate::source::Source;
use crate::unix::UnixStream;

/// A Unix-domain socket server, with the API of
/// [`std::os::unix::net::UnixListener`].
///
/// As [`TcpListener`](crate::TcpListener): `accept` suspends only this green
/// thread, returns `EMFILE` when out of fds (back off, see
/// [`is_fd_exhaustion`](crate::is_fd_exhaustion)), and
/// [`close`](UnixListener::close) wakes a blocked acceptor with
/// `NotConnected` and ends [`incoming`](UnixListener::incoming), which also
/// ends once the accepting thread's wait is cut short (a deadline passed, a
/// cancel, an interrupt, shutdown) after yielding that error once. The
/// socket file is not removed on drop (as std).
///
/// # Examples
///
/// ```
/// use coro::net::{UnixListener, UnixStream};
///
/// coro::run(|| -> std::io::Result<()> {
///     let dir = std::env::temp_dir().join(format!("coro-doc-{}", std::process::id()));
///     std::fs::create_dir_all(&dir)?;
///     let path = dir.join("sock");
///     let listener = UnixListener::bind(&path)?;
///     let p = path.clone();
///     let client = coro::spawn(move || UnixStream::connect(p));
///     let (_server_side, _addr) = listener.accept()?;
///     client.join().unwrap()?;
///     std::fs::remove_dir_all(&dir)
/// })
/// .unwrap();
/// ```
pub struct UnixListener {
    /// The shared socket; `try_clone` handles point at the same one.
    inner: Rc<Source<mio::net::UnixListener>>,
}

impl UnixListener {
    /// Creates a listener bound to `path`.
    ///
    /// # Errors
    ///
    /// `InvalidInput` for a path too long; `AddrInUse` if the file exists.
    ///
    /// # Panics
    ///
    /// Outside a green thread.
    #[track_caller]
    pub fn bind<P: AsRef<Path>>(path: P) -> io::Result<UnixListener> {
        crate::source::need_runtime("UnixListener::bind");
        UnixListener::from_mio(mio::net::UnixListener::bind(path)?)
    }

    /// Accepts a connection, suspending this green thread until one comes.
    ///
    /// # Errors
    ///
    /// The `accept` error (`EMFILE`...); a timeout or an interruption;
    /// `NotConnected` after `close`.
    #[track_caller]
    pub fn accept(&self) -> io::Result<(UnixStream, SocketAddr)> {
        let (s, addr) = self.inner.read("UnixListener::accept", |l| l.accept())?;
        Ok((UnixStream::from_mio(s)?, addr))
    }

    /// The local address.
    ///
    /// # Errors
    ///
    /// As `getsockname`.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.get().local_addr()
    }

    /// Wakes every green thread blocked in `accept` with a `NotConnected`
    /// error and fails later calls. Idempotent; the fd is released when the
    /// last handle drops.
    pub fn close(&self) {
        self.inner.close();
    }
}

// The methods and impls every socket type shares: see `handle.rs`.
crate::handle::handle!(UnixListener, std::os::unix::net);
crate::handle::incoming!(UnixListener, UnixStream);
