//! [`Fd`]: any other file descriptor (a pipe, an eventfd, a signalfd, a
//! character device, a socket made elsewhere) registered with the runtime,
//! with [`Fd::wait_readable`] / [`Fd::wait_writable`] and retrying
//! [`Fd::read_with`] / [`Fd::write_with`].

use std::fmt;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};

use coro_runtime::Direction;

use crate::source::Source;

/// A file descriptor registered with the current runtime's reactor.
///
/// `T` must own its descriptor or borrow it for as long as the `Fd` lives
/// (`T: AsFd`: an `OwnedFd`, a `File`, a pipe end, a `BorrowedFd<'_>`): the
/// descriptor stays open while it is registered, so dropping the `Fd`
/// deregisters that descriptor and never another one that reused its number.
/// A bare number does not qualify:
///
/// ```compile_fail
/// use std::os::fd::AsRawFd;
/// coro::run(|| {
///     let (r, _w) = std::io::pipe().unwrap();
///     let _fd = coro::net::Fd::new(r.as_raw_fd()); // a RawFd owns nothing
/// });
/// ```
///
/// [`Fd::new`] puts the descriptor in non-blocking mode (this changes the
/// open file description, which a `dup` or a parent process may share: a
/// terminal on stdin, say) and registers it for readability and writability.
/// Then:
///
/// * [`read_with`](Fd::read_with) / [`write_with`](Fd::write_with) run a
///   non-blocking operation on the inner value, waiting for readiness while
///   it says `WouldBlock`: the way to do I/O;
/// * [`wait_readable`](Fd::wait_readable) / [`wait_writable`](Fd::wait_writable)
///   suspend this green thread until the reactor has reported readiness since
///   the last `WouldBlock` (they may return when no data is left: after a
///   `WouldBlock` of your own call [`clear_readable`](Fd::clear_readable) /
///   [`clear_writable`](Fd::clear_writable), or use `read_with`);
/// * `Read`/`Write` are implemented when `&T` implements them (a
///   `std::io::PipeReader`, a `File`).
///
/// Like the sockets, every wait honours `with_timeout` and interrupts,
/// [`close`](Fd::close) wakes waiters at once with `NotConnected`, and a
/// new `Fd` whose descriptor reuses an old number never sees the old one's
/// readiness. Dropping an `Fd` deregisters it, then drops `T` (which closes
/// the descriptor if `T` owns it).
///
/// # Examples
///
/// ```
/// use std::io::{Read, Write};
/// use coro::net::Fd;
///
/// coro::run(|| -> std::io::Result<()> {
///     let (r, mut w) = std::io::pipe()?;
///     let r = Fd::new(r)?;
///     let reader = coro::spawn(move || {
///         let mut s = String::new();
///         (&r).read_to_string(&mut s).map(|_| s)
///     });
///     w.write_all(b"through a pipe")?;
///     drop(w);
///     assert_eq!(reader.join().unwrap()?, "through a pipe");
///     Ok(())
/// })
/// .unwrap();
/// ```
pub struct Fd<T: AsFd> {
    /// The registered descriptor; `None` only while `into_inner` or `drop`
    /// takes it out.
    inner: Option<Source<Raw<T>>>,
}

/// Adapts any `AsRawFd` to a mio source.
struct Raw<T>(T);

impl<T: AsFd> crate::source::Socket for Raw<T> {}

impl<T: AsFd> mio::event::Source for Raw<T> {
    fn register(
        &mut self,
        registry: &mio::Registry,
        token: mio::Token,
        interests: mio::Interest,
    ) -> io::Result<()> {
        mio::unix::SourceFd(&self.0.as_fd().as_raw_fd()).register(registry, token, interests)
    }

    fn reregister(
        &mut self,
        registry: &mio::Registry,
        token: mio::Token,
        interests: mio::Interest,
    ) -> io::Result<()> {
        mio::unix::SourceFd(&self.0.as_fd().as_raw_fd()).reregister(registry, token, interests)
    }

    fn deregister(&mut self, registry: &mio::Registry) -> io::Result<()> {
        mio::unix::SourceFd(&self.0.as_fd().as_raw_fd()).deregister(registry)
    }
}

impl<T: AsFd> Fd<T> {
    /// Makes `inner`'s descriptor non-blocking and registers it with the
    /// current runtime.
    ///
    /// # Errors
    ///
    /// If `fcntl` fails, or the descriptor cannot be registered (`EPERM`
    /// for a regular file, which epoll does not support).
    ///
    /// # Panics
    ///
    /// Outside a green thread.
    #[track_caller]
    pub fn new(inner: T) -> io::Result<Fd<T>> {
        crate::source::need_runtime("Fd::new");
        set_nonblocking(inner.as_fd().as_raw_fd())?;
        Ok(Fd {
            inner: Some(Source::new(Raw(inner))?),
        })
    }

    fn src(&self) -> &Source<Raw<T>> {
        self.inner.as_ref().expect("Fd used after into_inner")
    }

    /// The wrapped value.
    pub fn get_ref(&self) -> &T {
        &self.src().get().0
    }

    /// Deregisters the descriptor and gives the value back (still in
    /// non-blocking mode). Green threads waiting on it wake with
    /// `NotConnected`.
    ///
    /// # Errors
    ///
    /// If deregistering fails; the value is then dropped.
    pub fn into_inner(mut self) -> io::Result<T> {
        let src = self.inner.take().expect("Fd used after into_inner");
        Ok(src.into_inner()?.0)
    }

    /// Suspends this green thread until the descriptor is readable (see the
    /// type's docs for when that can be spurious).
    ///
    /// # Errors
    ///
    /// A timeout, an interruption, or `NotConnected` after `close`.
    pub fn wait_readable(&self) -> io::Result<()> {
        self.src().wait(Direction::Read, "Fd::wait_readable")
    }

    /// Suspends this green thread until the descriptor is writable.
    ///
    /// # Errors
    ///
    /// As [`wait_readable`](Fd::wait_readable).
    pub fn wait_writable(&self) -> io::Result<()> {
        self.src().wait(Direction::Write, "Fd::wait_writable")
    }

    /// Forgets readability: call it after your own read said `WouldBlock`,
    /// so the next `wait_readable` waits for a new event.
    pub fn clear_readable(&self) {
        self.src().clear(Direction::Read)
    }

    /// Forgets writability, as [`clear_readable`](Fd::clear_readable).
    pub fn clear_writable(&self) {
        self.src().clear(Direction::Write)
    }

    /// Runs a non-blocking read-side operation on the inner value until it
    /// does not say `WouldBlock`, waiting for readability in between. An
    /// immediate success spends one unit of selfishness.
    ///
    /// # Errors
    ///
    /// `f`'s error; a timeout, an interruption, `NotConnected` after `close`.
    pub fn read_with<R>(&self, mut f: impl FnMut(&T) -> io::Result<R>) -> io::Result<R> {
        self.src().read("Fd::read_with", |raw| f(&raw.0))
    }

    /// As [`read_with`](Fd::read_with), for write-side operations.
    ///
    /// # Errors
    ///
    /// As `read_with`.
    pub fn write_with<R>(&self, mut f: impl FnMut(&T) -> io::Result<R>) -> io::Result<R> {
        self.src().write("Fd::write_with", |raw| f(&raw.0))
    }

    /// Wakes every green thread waiting on the descriptor with a
    /// `NotConnected` error and fails later waits. Idempotent; the
    /// descriptor stays open until the `Fd` drops.
    pub fn close(&self) {
        self.src().close()
    }

    /// Whether [`close`](Fd::close) was called.
    pub fn is_closed(&self) -> bool {
        self.src().is_closed()
    }
}

fn set_nonblocking(fd: RawFd) -> io::Result<()> {
    // SAFETY: fcntl with F_GETFL/F_SETFL reads and writes only the flags of
    // `fd`, which the caller's value keeps open for the duration of the call;
    // an invalid fd yields EBADF, reported below.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    if flags & libc::O_NONBLOCK == 0 {
        // SAFETY: as above.
        if unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

impl<T: AsFd> Drop for Fd<T> {
    fn drop(&mut self) {
        if let Some(src) = self.inner.take() {
            // Deregister explicitly: `T` may not own the descriptor (or it
            // may be dup'ed), so closing it need not remove it from epoll.
            // Without a runtime (dropped after it ended) there is nothing to
            // deregister from.
            if coro_runtime::in_green_thread() {
                let _ = src.into_inner();
            }
        }
    }
}

impl<T: AsFd> Read for Fd<T>
where
    for<'a> &'a T: Read,
{
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        (&*self).read(buf)
    }
}

impl<T: AsFd> Read for &Fd<T>
where
    for<'a> &'a T: Read,
{
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        self.read_with(|mut t| t.read(buf))
    }
}

impl<T: AsFd> Write for Fd<T>
where
    for<'a> &'a T: Write,
{
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        (&*self).write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        (&*self).flush()
    }
}

impl<T: AsFd> Write for &Fd<T>
where
    for<'a> &'a T: Write,
{
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.write_with(|mut t| t.write(buf))
    }

    fn flush(&mut self) -> io::Result<()> {
        self.write_with(|mut t| t.flush())
    }
}

impl<T: AsFd> AsRawFd for Fd<T> {
    fn as_raw_fd(&self) -> RawFd {
        self.get_ref().as_fd().as_raw_fd()
    }
}

impl<T: AsFd> AsFd for Fd<T> {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.get_ref().as_fd()
    }
}

impl<T: AsFd + fmt::Debug> fmt::Debug for Fd<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Fd")
            .field("inner", &self.inner.as_ref().map(|s| &s.get().0))
            .finish()
    }
}
