//! Stream sockets as async I/O objects, on coro's own reactor: the polling
//! core every adapter shares, and the adapters themselves behind cargo
//! features (`futures-io`, `tokio-io`, `hyper`).
//!
//! # Design
//!
//! A socket is registered with the reactor once, when it is made; the
//! blocking calls and these polling ones share that registration and its
//! readiness flags. A poll tries the syscall when its direction may be
//! ready; on `EWOULDBLOCK` it clears the flag and asks the registration to
//! keep the task's `Waker` ([`Registration::poll_ready`]), which the next
//! event wakes. Nothing here parks: the future's executor
//! ([`coro::future::block_on`](coro_runtime::future::block_on) on a green
//! thread) decides what pending means.
//!
//! A poll that does I/O without returning `Pending` spends selfishness as a
//! blocking socket call does, so a connection future that keeps finding
//! data cannot starve the other green threads: it is switched out in the
//! middle of its poll, which a green thread may be.

#[cfg(feature = "hyper")]
pub mod hyper_rt;

#[cfg(any(feature = "futures-io", feature = "tokio-io", feature = "hyper"))]
mod poll {
    use std::io;
    use std::os::fd::AsFd;
    use std::task::{ready, Context, Poll};

    use coro_runtime::Direction;

    use crate::source::Source;

    #[cfg(any(feature = "futures-io", feature = "tokio-io", feature = "hyper"))]
    impl<S: mio::event::Source> Source<S> {
        /// Polls `op` (a non-blocking syscall in `dir`) until it stops saying
        /// `EWOULDBLOCK`. Reads are not tried while the read flag is clear
        /// (see [`Registration::io`](coro_runtime::Registration::io)).
        pub(crate) fn poll_io<R>(
            &self,
            dir: Direction,
            cx: &mut Context<'_>,
            mut op: impl FnMut(&S) -> io::Result<R>,
        ) -> Poll<io::Result<R>> {
            loop {
                if dir == Direction::Read || self.is_closed() {
                    ready!(self.reg().poll_ready(dir, cx))?;
                }
                match op(self.get()) {
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        self.clear(dir);
                        ready!(self.reg().poll_ready(dir, cx))?;
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    r => {
                        if coro_runtime::in_green_thread() {
                            coro_runtime::try_selfish();
                        }
                        return Poll::Ready(r);
                    }
                }
            }
        }

        /// Polls a read into `buf`.
        pub(crate) fn poll_read_buf(
            &self,
            cx: &mut Context<'_>,
            buf: &mut [u8],
        ) -> Poll<io::Result<usize>>
        where
            for<'a> &'a S: io::Read,
        {
            if buf.is_empty() {
                return Poll::Ready(Ok(0));
            }
            self.poll_io(Direction::Read, cx, |mut s| io::Read::read(&mut s, buf))
        }

        /// Polls a write of `buf`.
        pub(crate) fn poll_write_buf(
            &self,
            cx: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>>
        where
            for<'a> &'a S: io::Write,
        {
            self.poll_io(Direction::Write, cx, |mut s| io::Write::write(&mut s, buf))
        }

        /// Polls a gathering write of `bufs`.
        pub(crate) fn poll_write_bufs(
            &self,
            cx: &mut Context<'_>,
            bufs: &[io::IoSlice<'_>],
        ) -> Poll<io::Result<usize>>
        where
            for<'a> &'a S: io::Write,
        {
            self.poll_io(Direction::Write, cx, |mut s| {
                io::Write::write_vectored(&mut s, bufs)
            })
        }

        /// Shuts the write half down (the peer reads EOF); never waits.
        pub(crate) fn shutdown_write(&self) -> io::Result<()>
        where
            S: AsFd,
        {
            match socket2::SockRef::from(self.get()).shutdown(std::net::Shutdown::Write) {
                Err(e) if e.kind() == io::ErrorKind::NotConnected => Ok(()),
                r => r,
            }
        }
    }
}

/// The async I/O traits for stream socket `$t` (a handle around
/// `inner: Rc<Source<_>>`), each behind its cargo feature.
macro_rules! async_io {
    ($t:ident) => {
        #[cfg(feature = "futures-io")]
        impl futures_io::AsyncRead for $t {
            fn poll_read(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                buf: &mut [u8],
            ) -> std::task::Poll<std::io::Result<usize>> {
                self.inner.poll_read_buf(cx, buf)
            }
        }

        #[cfg(feature = "futures-io")]
        impl futures_io::AsyncWrite for $t {
            fn poll_write(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                buf: &[u8],
            ) -> std::task::Poll<std::io::Result<usize>> {
                self.inner.poll_write_buf(cx, buf)
            }

            fn poll_write_vectored(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                bufs: &[std::io::IoSlice<'_>],
            ) -> std::task::Poll<std::io::Result<usize>> {
                self.inner.poll_write_bufs(cx, bufs)
            }

            fn poll_flush(
                self: std::pin::Pin<&mut Self>,
                _: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                std::task::Poll::Ready(Ok(()))
            }

            fn poll_close(
                self: std::pin::Pin<&mut Self>,
                _: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                std::task::Poll::Ready(self.inner.shutdown_write())
            }
        }

        #[cfg(feature = "tokio-io")]
        impl tokio::io::AsyncRead for $t {
            fn poll_read(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                buf: &mut tokio::io::ReadBuf<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                // Zeroes the unfilled part once: the buffer remembers what
                // it has initialized, so a reused buffer pays it once.
                let dst = buf.initialize_unfilled();
                let n = std::task::ready!(self.inner.poll_read_buf(cx, dst))?;
                buf.advance(n);
                std::task::Poll::Ready(Ok(()))
            }
        }

        #[cfg(feature = "tokio-io")]
        impl tokio::io::AsyncWrite for $t {
            fn poll_write(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                buf: &[u8],
            ) -> std::task::Poll<std::io::Result<usize>> {
                self.inner.poll_write_buf(cx, buf)
            }

            fn poll_write_vectored(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                bufs: &[std::io::IoSlice<'_>],
            ) -> std::task::Poll<std::io::Result<usize>> {
                self.inner.poll_write_bufs(cx, bufs)
            }

            fn is_write_vectored(&self) -> bool {
                true
            }

            fn poll_flush(
                self: std::pin::Pin<&mut Self>,
                _: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                std::task::Poll::Ready(Ok(()))
            }

            fn poll_shutdown(
                self: std::pin::Pin<&mut Self>,
                _: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                std::task::Poll::Ready(self.inner.shutdown_write())
            }
        }

        #[cfg(feature = "hyper")]
        impl hyper::rt::Read for $t {
            fn poll_read(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                buf: hyper::rt::ReadBufCursor<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                $crate::compat::hyper_rt::poll_read(&self.inner, cx, buf)
            }
        }

        #[cfg(feature = "hyper")]
        impl hyper::rt::Write for $t {
            fn poll_write(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                buf: &[u8],
            ) -> std::task::Poll<std::io::Result<usize>> {
                self.inner.poll_write_buf(cx, buf)
            }

            fn poll_write_vectored(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                bufs: &[std::io::IoSlice<'_>],
            ) -> std::task::Poll<std::io::Result<usize>> {
                self.inner.poll_write_bufs(cx, bufs)
            }

            fn is_write_vectored(&self) -> bool {
                true
            }

            fn poll_flush(
                self: std::pin::Pin<&mut Self>,
                _: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                std::task::Poll::Ready(Ok(()))
            }

            fn poll_shutdown(
                self: std::pin::Pin<&mut Self>,
                _: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                std::task::Poll::Ready(self.inner.shutdown_write())
            }
        }
    };
}
pub(crate) use async_io;
