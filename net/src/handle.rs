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
//! to type (binding and connecting, accepting, sending to an address,
//! closing) stays in the type's own file.
//!
//! | macro | gives | used by |
//! |---|---|---|
//! | `handle!` | `from_std`, `try_clone`, `is_closed`, `take_error`; `AsRawFd`, `AsFd`, `Debug` | every socket type |
//! | `addrs!` | `local_addr`, `peer_addr` | every type but the listeners |
//! | `shutdown!` | `shutdown` | `TcpStream`, `UnixStream`, `UnixDatagram` |
//! | `timeouts!` | `set_read_timeout`, `set_write_timeout`, `read_timeout`, `write_timeout` | every type but the listeners (`UnixDatagram`: the setters only) |
//! | `ttl!` | `set_ttl`, `ttl` | the TCP and UDP types |
//! | `stream_io!` | `Read` and `Write` for `T` and `&T` | `TcpStream`, `UnixStream` |
//! | `sendfile!` | `sendfile`, `sendfile_all` | `TcpStream`, `UnixStream` |
//! | `datagram_io!` | `send`, `recv`, `recv_from` | `UdpSocket`, `UnixDatagram` |
//! | `incoming!` | `incoming` and its iterator `Incoming` | `TcpListener`, `UnixListener` |

/// The methods and impls every socket type `$t` has: `from_std`, the
/// crate's constructor `from_mio`, `try_clone`, `is_closed`, `take_error`,
/// `AsRawFd`, `AsFd` and `Debug` (the inner socket's). `$std` is the std
/// module with the socket type of the same name (`std::net` or
/// `std::os::unix::net`); mio's is always `mio::net::$t`.
macro_rules! handle {
    ($t:ident, $($std:ident)::+) => {
        $crate::handle::handle!(
            @impl $t,
            $($std::)+$t,
            mio::net::$t,
            concat!("[`", $(stringify!($std), "::",)+ stringify!($t), "`]")
        );
    };
    (@impl $t:ident, $std:path, $mio:path, $std_link:expr) => {
        impl $t {
            #[doc = concat!("Wraps a ", $std_link, ", switching it to non-blocking mode.")]
            ///
            /// # Errors
            ///
            /// If the socket cannot be made non-blocking or registered.
            ///
            /// # Panics
            ///
            /// Outside a green thread.
            pub fn from_std(socket: $std) -> std::io::Result<$t> {
                $crate::source::need_runtime(concat!(stringify!($t), "::from_std"));
                socket.set_nonblocking(true)?;
                $t::from_mio(<$mio>::from_std(socket))
            }

            /// Registers an already non-blocking mio socket.
            pub(crate) fn from_mio(socket: $mio) -> std::io::Result<$t> {
                Ok($t {
                    inner: std::rc::Rc::new($crate::source::Source::new(socket)?),
                })
            }

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

/// `local_addr` and `peer_addr` for `$t`, whose addresses are `$addr`.
macro_rules! addrs {
    ($t:ident, $addr:ty) => {
        impl $t {
            /// The local address of this socket.
            ///
            /// # Errors
            ///
            /// As `getsockname`.
            pub fn local_addr(&self) -> std::io::Result<$addr> {
                self.inner.get().local_addr()
            }

            /// The address of the connected peer.
            ///
            /// # Errors
            ///
            /// `NotConnected` if there is none (never connected, or the
            /// connection is gone); otherwise as `getpeername`.
            pub fn peer_addr(&self) -> std::io::Result<$addr> {
                self.inner.get().peer_addr()
            }
        }
    };
}
pub(crate) use addrs;

/// `shutdown` for a socket type `$t` that std gives one (streams, Unix
/// datagram sockets).
macro_rules! shutdown {
    ($t:ident) => {
        impl $t {
            /// Shuts down the read half, the write half or both (never
            /// blocks).
            ///
            /// # Errors
            ///
            /// As `shutdown(2)` (`NotConnected` if the peer is gone).
            pub fn shutdown(&self, how: std::net::Shutdown) -> std::io::Result<()> {
                self.inner.get().shutdown(how)
            }
        }
    };
}
pub(crate) use shutdown;

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
            #[track_caller]
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                self.inner.read_buf(concat!(stringify!($t), "::read"), buf)
            }

            #[track_caller]
            fn read_vectored(
                &mut self,
                bufs: &mut [std::io::IoSliceMut<'_>],
            ) -> std::io::Result<usize> {
                self.inner
                    .read_bufs(concat!(stringify!($t), "::read_vectored"), bufs)
            }
        }

        impl std::io::Write for &$t {
            #[track_caller]
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                self.inner
                    .write_buf(concat!(stringify!($t), "::write"), buf)
            }

            #[track_caller]
            fn write_vectored(&mut self, bufs: &[std::io::IoSlice<'_>]) -> std::io::Result<usize> {
                self.inner
                    .write_bufs(concat!(stringify!($t), "::write_vectored"), bufs)
            }

            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }

        impl std::io::Read for $t {
            #[track_caller]
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                std::io::Read::read(&mut &*self, buf)
            }

            #[track_caller]
            fn read_vectored(
                &mut self,
                bufs: &mut [std::io::IoSliceMut<'_>],
            ) -> std::io::Result<usize> {
                std::io::Read::read_vectored(&mut &*self, bufs)
            }
        }

        impl std::io::Write for $t {
            #[track_caller]
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                std::io::Write::write(&mut &*self, buf)
            }

            #[track_caller]
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

/// `send`, `recv` and `recv_from` for a datagram socket type `$t` whose
/// addresses are `$addr` (`send_to`, which takes an address of its own
/// kind, stays with the type).
macro_rules! datagram_io {
    ($t:ident, $addr:ty) => {
        impl $t {
            /// Sends `buf` as one datagram to the connected peer; returns the
            /// bytes sent.
            ///
            /// # Errors
            ///
            /// `NotConnected`-like errors from the OS if not connected;
            /// otherwise as [`send_to`](Self::send_to).
            #[track_caller]
            pub fn send(&self, buf: &[u8]) -> std::io::Result<usize> {
                self.inner
                    .write(concat!(stringify!($t), "::send"), |s| s.send(buf))
            }

            /// Receives one datagram from the connected peer; returns its
            /// length. A datagram longer than `buf` is truncated.
            ///
            /// # Errors
            ///
            /// As [`recv_from`](Self::recv_from).
            #[track_caller]
            pub fn recv(&self, buf: &mut [u8]) -> std::io::Result<usize> {
                self.inner
                    .read(concat!(stringify!($t), "::recv"), |s| s.recv(buf))
            }

            /// Receives one datagram; returns its length and sender. A
            /// datagram longer than `buf` is truncated.
            ///
            /// # Errors
            ///
            /// The `recvfrom` error; a timeout or an interruption;
            /// `NotConnected` after [`close`](Self::close).
            #[track_caller]
            pub fn recv_from(&self, buf: &mut [u8]) -> std::io::Result<(usize, $addr)> {
                self.inner
                    .read(concat!(stringify!($t), "::recv_from"), |s| s.recv_from(buf))
            }
        }
    };
}
pub(crate) use datagram_io;

/// `incoming` for a listener type `$l` whose `accept` returns a `$stream`,
/// and its iterator, `Incoming`, defined where the macro is called.
macro_rules! incoming {
    ($l:ident, $stream:ident) => {
        impl $l {
            /// An iterator over incoming connections: each item is
            /// [`accept`](Self::accept)'s result without the address.
            ///
            /// # When it ends
            ///
            /// * **The listener is [closed](Self::close)** (from any
            ///   handle, also while it waits): it returns `None`.
            /// * **The calling green thread's wait is cut short**: the
            ///   deadline of an enclosing `with_timeout` or cancel scope
            ///   passed, the scope was cancelled, the thread was
            ///   interrupted, the runtime is shutting down (or the thread
            ///   may not block here, inside `no_suspend`). It yields
            ///   that error once (an `io::Error` wrapping a
            ///   [`WaitError`](coro_runtime::WaitError)), so the loop can
            ///   say why it stopped, and then returns `None`. After a
            ///   deadline every accept would fail at once: a loop that
            ///   skips errors would spin instead of ending.
            ///
            /// Other errors are items and the iterator goes on:
            /// `ECONNABORTED` concerns one connection, and `EMFILE` calls
            /// for a back-off (see the type's docs). An error that comes
            /// at once spends selfishness, so a loop that skips them still
            /// lets the other green threads run. Once it returned `None`
            /// it always does (it is fused); call `incoming` again to
            /// accept under a new deadline.
            ///
            /// # Examples
            ///
            /// A loop that skips errors ends when its deadline passes
            /// (shown with a `TcpListener`; every listener's `Incoming`
            /// ends the same way):
            ///
            /// ```
            /// use std::time::Duration;
            /// use coro::net::TcpListener;
            ///
            /// coro::run(|| -> std::io::Result<()> {
            ///     let listener = TcpListener::bind("127.0.0.1:0")?;
            ///     let mut skipped = Vec::new();
            ///     let r = coro::with_timeout(Duration::from_millis(20), || {
            ///         for stream in listener.incoming() {
            ///             match stream {
            ///                 Ok(stream) => drop(stream), // serve it
            ///                 Err(e) => skipped.push(e),  // log it, go on
            ///             }
            ///         }
            ///     });
            ///     assert_eq!(r, Err(coro::Timeout));
            ///     // The deadline's error came once, then the loop ended.
            ///     assert_eq!(skipped.len(), 1);
            ///     assert_eq!(skipped[0].kind(), std::io::ErrorKind::TimedOut);
            ///     Ok(())
            /// })
            /// .unwrap();
            /// ```
            pub fn incoming(&self) -> Incoming<'_> {
                Incoming {
                    listener: self,
                    ended: false,
                }
            }
        }

        #[doc = concat!("The iterator of [`", stringify!($l), "::incoming`].")]
        ///
        /// It ends when the listener is closed and, after yielding the
        /// error once, when the calling thread's wait is cut short (a
        /// deadline passed, a cancel, an interrupt, shutdown); see
        #[doc = concat!("[`", stringify!($l), "::incoming`].")]
        #[derive(Debug)]
        pub struct Incoming<'a> {
            /// The listener accepted on.
            listener: &'a $l,
            /// It returned `None` or yielded a cut-short wait's error: it
            /// returns `None` from now on.
            ended: bool,
        }

        impl Iterator for Incoming<'_> {
            type Item = std::io::Result<$stream>;

            #[track_caller]
            fn next(&mut self) -> Option<std::io::Result<$stream>> {
                if self.ended || self.listener.is_closed() {
                    self.ended = true;
                    return None;
                }
                match self.listener.accept() {
                    Ok((s, _)) => Some(Ok(s)),
                    Err(_) if self.listener.is_closed() => {
                        self.ended = true;
                        None
                    }
                    Err(e) => {
                        // The wait was cut short: level-triggered, every
                        // later accept would fail at once.
                        self.ended = coro_runtime::WaitError::from_io(&e).is_some();
                        Some(Err(e))
                    }
                }
            }
        }

        impl std::iter::FusedIterator for Incoming<'_> {}
    };
}
pub(crate) use incoming;

/// `sendfile` and `sendfile_all` for a stream socket type `$t` (see
/// `sendfile.rs`).
macro_rules! sendfile {
    ($t:ident) => {
        impl $t {
            /// Sends up to `len` bytes of `file`, starting at `offset`, to
            /// the socket without copying them through user space
            /// (`sendfile(2)` on Linux); returns the count, like
            /// [`write`](std::io::Write::write): at least one byte unless
            /// the file ends at `offset` or `len` is 0. The file's own
            /// position does not move, so one `File` can feed many sockets.
            ///
            /// Only this green thread waits while the socket buffer is full;
            /// a transfer that needs no waiting spends selfishness, and the
            /// write timeout and an enclosing `with_timeout` apply as to a
            /// write. On systems other than Linux the bytes go through a
            /// buffer (`pread`, then a write).
            ///
            /// # Errors
            ///
            /// As a write; `InvalidInput` for an offset beyond the largest
            /// file offset, and the OS error for a file that cannot be sent
            /// from (`EINVAL` for a directory or a socket).
            pub fn sendfile(
                &self,
                file: &std::fs::File,
                offset: u64,
                len: usize,
            ) -> std::io::Result<usize> {
                $crate::sendfile::sendfile(
                    &self.inner,
                    concat!(stringify!($t), "::sendfile"),
                    file,
                    offset,
                    len,
                )
            }

            /// [`sendfile`](Self::sendfile) until `len` bytes are sent or
            /// the file ends; returns the count sent (short of `len` only at
            /// end of file), like [`write_all`](std::io::Write::write_all)
            /// for a file region.
            ///
            /// # Errors
            ///
            /// As [`sendfile`](Self::sendfile); after an error, an unknown
            /// part of the region may have been sent (as with `write_all`):
            /// call `sendfile` in a loop to keep count.
            ///
            /// # Examples
            ///
            /// ```
            /// use std::io::Read;
            /// use coro::net::UnixStream;
            ///
            /// coro::run(|| -> std::io::Result<()> {
            ///     let path = std::env::temp_dir().join(format!("coro-sendfile-doc-{}", std::process::id()));
            ///     std::fs::write(&path, b"header|body")?;
            ///     let file = std::fs::File::open(&path)?;
            ///     let (a, mut b) = UnixStream::pair()?;
            ///     assert_eq!(a.sendfile_all(&file, 7, 100)?, 4); // "body", then EOF
            ///     drop(a);
            ///     let mut got = String::new();
            ///     b.read_to_string(&mut got)?;
            ///     assert_eq!(got, "body");
            ///     std::fs::remove_file(&path)
            /// })
            /// .unwrap();
            /// ```
            pub fn sendfile_all(
                &self,
                file: &std::fs::File,
                offset: u64,
                len: u64,
            ) -> std::io::Result<u64> {
                $crate::sendfile::sendfile_all(
                    &self.inner,
                    concat!(stringify!($t), "::sendfile_all"),
                    file,
                    offset,
                    len,
                )
            }
        }
    };
}
pub(crate) use sendfile;
