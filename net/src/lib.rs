//! Non-blocking sockets for coro green threads, with the shapes of `std::net`.
//!
//! [`TcpListener`], [`TcpStream`], [`UdpSocket`], [`UnixListener`],
//! [`UnixStream`] and [`UnixDatagram`] have the methods of their
//! `std::net` / `std::os::unix::net` namesakes, so blocking-style code moves
//! over by changing an import; [`Fd`] does the same for any other file
//! descriptor (pipes, eventfds). A call that would block suspends only the
//! calling green thread. Every call returns `std::io::Result`; bad arguments
//! are `ErrorKind::InvalidInput`.
//!
//! # Implementation
//!
//! Shrapnel's "non-blocking sockets": every socket is non-blocking and
//! registered (edge-triggered) with the runtime's mio reactor. A call tries
//! the syscall; on `EWOULDBLOCK` it clears the readiness flag and parks the
//! green thread, which the scheduler loop wakes when `epoll` (kqueue on BSD
//! and macOS) reports readiness; then it retries. A call that succeeds at
//! once spends one unit of the thread's *selfishness*
//! ([`coro_runtime::try_selfish`]): when the budget runs out the thread
//! yields to the back of the ready queue, so a sender on a fast link cannot
//! starve the others; so does a call that fails at once (a closed socket,
//! `EMFILE`), so a loop that skips errors cannot starve them either, and
//! `incoming()` ends once its listener is closed or the accepting thread's
//! wait is cut short (a deadline passed, a cancel, an interrupt, shutdown:
//! it yields that error once, then ends), so such a loop does not spin
//! after a deadline. Waits honour `with_timeout` (→ `ErrorKind::TimedOut`)
//! and `Coro::interrupt` (→ `ErrorKind::Other` wrapping
//! [`WaitError`](coro_runtime::WaitError), never `ErrorKind::Interrupted`).
//! Host names are resolved on the runtime's blocking-offload pool
//! ([`lookup_host`]). Unix signals arrive through a self-pipe registered the
//! same way ([`signal::Signals`]).
//!
//! Sockets are `!Send`: they belong to the runtime (OS thread) that made
//! them. `try_clone` returns another handle to the same socket for another
//! green thread; `close` wakes every green thread waiting on it at once.
//!
//! # Cargo features
//!
//! The `coro-rt` facade forwards them; its crate docs say what each pulls
//! in. On by default:
//!
//! * `signal`: Unix signals as a blocking-style stream ([`signal`]).
//!
//! Off by default:
//!
//! * `dns`: the stub DNS resolver ([`dns`]).
//! * `backdoor`: the back door console ([`backdoor`]).
//!
//! The async adapters, off by default, make [`TcpStream`] and
//! [`UnixStream`] an async I/O object on the same reactor registration as
//! their blocking calls (`compat`), for futures run by
//! `coro::future::block_on`:
//!
//! * `futures-io`: `futures_io::AsyncRead` / `AsyncWrite`.
//! * `tokio-io`: tokio's `AsyncRead` / `AsyncWrite` (its io traits only;
//!   no tokio runtime), for tokio-postgres, tokio-util codecs, ...
//! * `hyper`: hyper 1.x `rt::Read` / `rt::Write`, and `CoroTimer`
//!   (`hyper::rt::Timer` on coro's timers) and `CoroExecutor`
//!   (`hyper::rt::Executor`: each future a green thread).
//!
//! # Examples
//!
//! An echo server and a client in one runtime:
//!
//! ```
//! use std::io::{Read, Write};
//! use coro::net::{TcpListener, TcpStream};
//!
//! coro::run(|| -> std::io::Result<()> {
//!     let listener = TcpListener::bind("127.0.0.1:0")?;
//!     let addr = listener.local_addr()?;
//!     coro::spawn(move || -> std::io::Result<()> {
//!         for stream in listener.incoming() {
//!             let mut stream = stream?;
//!             // Builder::spawn: out of memory for a stack is an error to
//!             // handle (the connection is dropped), not a panic that would
//!             // kill this accept loop.
//!             let handler = coro::Builder::new().spawn(move || {
//!                 let mut buf = [0; 1024];
//!                 while let Ok(n @ 1..) = stream.read(&mut buf) {
//!                     if stream.write_all(&buf[..n]).is_err() {
//!                         break;
//!                     }
//!                 }
//!             });
//!             if let Err(e) = handler {
//!                 eprintln!("connection shed: {e}");
//!                 coro::sleep(std::time::Duration::from_millis(10))?;
//!             }
//!         }
//!         Ok(()) // incoming() ends when the listener is closed or the wait is cut short
//!     });
//!     let mut c = TcpStream::connect(addr)?;
//!     c.write_all(b"echo")?;
//!     let mut buf = [0; 4];
//!     c.read_exact(&mut buf)?;
//!     assert_eq!(&buf, b"echo");
//!     Ok(())
//! })
//! .unwrap();
//! ```
//!
//! For an accept loop that survives running out of file descriptors and
//! out of memory for green threads, see [`TcpListener`] and
//! `examples/lib.rs` (`accept_loop`, used by `examples/echo.rs`).
//!
//! [`dns`] (feature `dns`) is a stub DNS resolver on green threads (MX,
//! TXT, PTR and addresses, with a cache), for what the system resolver
//! behind [`lookup_host`] cannot do.
//!
//! [`backdoor`] (feature `backdoor`) serves a console into the running
//! process on a Unix socket, for its owner only.

#![warn(missing_docs, missing_debug_implementations, rust_2018_idioms)]
#![warn(clippy::undocumented_unsafe_blocks)]
#![doc(test(attr(deny(warnings))))]
#![cfg_attr(docsrs, feature(doc_cfg))]

#[cfg(feature = "backdoor")]
#[cfg_attr(docsrs, doc(cfg(feature = "backdoor")))]
pub mod backdoor;
mod compat;
#[cfg(feature = "dns")]
#[cfg_attr(docsrs, doc(cfg(feature = "dns")))]
pub mod dns;
mod error;
mod fd;
mod handle;
mod lookup;
mod sendfile;
#[cfg(feature = "signal")]
#[cfg_attr(docsrs, doc(cfg(feature = "signal")))]
pub mod signal;
mod source;
mod sys;
mod tcp;
mod udp;
mod unix;

#[cfg(feature = "hyper")]
#[cfg_attr(docsrs, doc(cfg(feature = "hyper")))]
pub use compat::hyper_rt::{CoroExecutor, CoroTimer};
pub use error::is_fd_exhaustion;
pub use fd::Fd;
pub use lookup::{lookup_host, ToSocketAddrs};
pub use tcp::{
    Incoming, OwnedReadHalf, OwnedWriteHalf, ReadHalf, TcpListener, TcpListenerBuilder, TcpStream,
    WriteHalf, DEFAULT_BACKLOG,
};
pub use udp::UdpSocket;
pub use unix::{
    Incoming as UnixIncoming, SocketAddr as UnixSocketAddr, UnixDatagram, UnixListener, UnixStream,
};
