//! The public surface the socket types share, written once: every socket
//! type is a handle `inner: Rc<Source<_>>`, and these macros give it the
//! methods and trait impls that only delegate to that core.
//!
//! # Design
//!
//! The methods stay inherent, as std's are (no trait to import), so macros
//! rather than a trait write them. Each macro emits its own `impl` block,
//! which rustdoc lists with the type's other methods; the docs are written
//! for every type at once and link through `Self::`. What differs from type
//! to type (connecting, accepting, sending and receiving, closing, the
//! address type) stays in the type's own file.
//!
//! | macro | gives | used by |
//! |---|---|---|
//! | `handle!` | `try_clone`, `is_closed`, `take_error`; `AsRawFd`, `AsFd`, `Debug` | every socket type |
//! | `timeouts!` | `set_read_timeout`, `set_write_timeout`, `read_timeout`, `write_timeout` | streams, datagram sockets |
//! | `ttl!` | `set_ttl`, `ttl` | the TCP and UDP types |
//! | `stream_io!` | `Read` and `Write` for `T` and `&T` | `TcpStream`, `UnixStream` |

/// The methods and impls every socket type `$t` has: `try_clone`,
/// `is_closed`, `take_error`, `AsRawFd`, `AsFd` and `Debug` (the inner
/// socket's).
macro_rules! handle {
    ($t:ident) => {
        impl $t {
            /// Another handle to the same socket (not a `dup` of the fd),
            /// usable from another green thread of this runtime. Green
            /// threads waiting on the socket in the same direction queue in
            /// order: a readiness event wakes them all, they retry in the
            /// order they started waiting, and those that find nothing left
            /// wait again.
            ///
            /// # Errors
            ///
            /// Never; a `Result` to match std.
            pub fn try_clone(&self) -> std::io::Result<$t> {
                Ok($t {
                    inner: self.inner.clone(),
                })
            }

            /// Whether [`close`](Self::close) was called on this socket
            /// (through any handle).
            pub fn is_closed(&self) -> bool {
                self.inner.is_closed()
            }

            /// Takes the pending socket error (`SO_ERROR`), if any.
            ///
            /// # Errors
            ///
            /// As `getsockopt`.
            pub fn take_error(&self) -> std::io::Result<Option<std::io::Error>> {
                self.inner.get().take_error()
            }
        }

        impl std::os::fd::AsRawFd for $t {
            fn as_raw_fd(&self) -> std::os::fd::RawFd {
                std::os::fd::AsRawFd::as_raw_fd(self.inner.get())
            }
        }

        impl std::os::fd::AsFd for $t {
            fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
                std::os::fd::AsFd::as_fd(self.inner.get())
            }
        }

        impl std::fmt::Debug for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                std::fmt::Debug::fmt(&*self.inner, f)
            }
        }
    };
}
pub(crate) use handle;

/// The per-call timeouts of std's sockets for `$t`: `set_read_timeout`,
/// `set_write_timeout` and, unless `$t: setters only`, the getters
/// `read_timeout` and `write_timeout`.
macro_rules! timeouts {
    ($t:ident) => {
        $crate::handle::timeouts!($t: setters only);

        impl $t {
            /// The read timeout set by
            /// [`set_read_timeout`](Self::set_read_timeout).
            ///
            /// # Errors
            ///
            /// Never; a `Result` to match std.
            pub fn read_timeout(&self) -> std::io::Result<Option<std::time::Duration>> {
                Ok(self.inner.read_timeout())
            }

            /// The write timeout set by
            /// [`set_write_timeout`](Self::set_write_timeout).
            ///
            /// # Errors
            ///
            /// Never; a `Result` to match std.
            pub fn write_timeout(&self) -> std::io::Result<Option<std::time::Duration>> {
                Ok(self.inner.write_timeout())
            }
        }
    };
    ($t:ident: setters only) => {
        impl $t {
            /// Sets a deadline for each read-side call on this socket (a
            /// read, receive or peek, through any handle), like std's; past
            /// it the call fails with `TimedOut`. `None` removes it. An
            /// enclosing `with_timeout` still applies too.
            ///
            /// # Errors
            ///
            /// `InvalidInput` for `Some(Duration::ZERO)`, as std.
            pub fn set_read_timeout(
                &self,
                timeout: Option<std::time::Duration>,
            ) -> std::io::Result<()> {
                self.inner.set_read_timeout(timeout)
            }

            /// Sets a deadline for each write-side call (a write or send), as
            /// [`set_read_timeout`](Self::set_read_timeout) does for reads.
            ///
            /// # Errors
            ///
            /// `InvalidInput` for `Some(Duration::ZERO)`, as std.
            pub fn set_write_timeout(
                &self,
                timeout: Option<std::time::Duration>,
            ) -> std::io::Result<()> {
                self.inner.set_write_timeout(timeout)
            }
        }
    };
}
pub(crate) use timeouts;

/// `IP_TTL` for `$t`: `set_ttl` and `ttl`. `$what` ends the setter's
/// summary line, saying which packets the value applies to.
macro_rules! ttl {
    ($t:ident, $what:literal) => {
        impl $t {
            #[doc = concat!("Sets `IP_TTL`, the time-to-live of ", $what, ".")]
            ///
            /// # Errors
            ///
            /// As `setsockopt`.
            pub fn set_ttl(&self, ttl: u32) -> std::io::Result<()> {
                self.inner.get().set_ttl(ttl)
            }

            /// The `IP_TTL` value.
            ///
            /// # Errors
            ///
            /// As `getsockopt`.
            pub fn ttl(&self) -> std::io::Result<u32> {
                self.inner.get().ttl()
            }
        }
    };
}
pub(crate) use ttl;

/// `Read` and `Write` for a stream socket type `$t` and for `&$t` (std's
/// shape: both the owned and the shared handle read and write). The impls
/// for `&$t` do the work, through `Source`'s stream calls; those for `$t`
/// forward to them.
macro_rules! stream_io {
    ($t:ident) => {
        impl std::io::Read for &$t {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                self.inner.read_buf(buf)
            }

            fn read_vectored(
                &mut self,
                bufs: &mut [std::io::IoSliceMut<'_>],
            ) -> std::io::Result<usize> {
                self.inner.read_bufs(bufs)
            }
        }

        impl std::io::Write for &$t {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                self.inner.write_buf(buf)
            }

            fn write_vectored(&mut self, bufs: &[std::io::IoSlice<'_>]) -> std::io::Result<usize> {
                self.inner.write_bufs(bufs)
            }

            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }

        impl std::io::Read for $t {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                std::io::Read::read(&mut &*self, buf)
            }

            fn read_vectored(
                &mut self,
                bufs: &mut [std::io::IoSliceMut<'_>],
            ) -> std::io::Result<usize> {
                std::io::Read::read_vectored(&mut &*self, bufs)
            }
        }

        impl std::io::Write for $t {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                std::io::Write::write(&mut &*self, buf)
            }

            fn write_vectored(&mut self, bufs: &[std::io::IoSlice<'_>]) -> std::io::Result<usize> {
                std::io::Write::write_vectored(&mut &*self, bufs)
            }

            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
    };
}
pub(crate) use stream_io;
