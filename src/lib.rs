//! coro: Shrapnel-style cooperative green threads for Rust.
//!
//! Write servers in plain blocking style (`stream.read(&mut buf)?`) and run
//! tens of thousands of them on one core. This crate is the facade: the
//! runtime's items at the top level, primitives in [`sync`], sockets in
//! [`net`] (with a DNS resolver and the back door console behind
//! features), Unix signals in `signal`.
//!
//! The package is `coro-rt` on crates.io, its library `coro`:
//!
//! ```toml
//! [dependencies]
//! coro-rt = "0.1"
//! ```
//!
//! A [`profile`] file is read by the `coro-profile` package, apart from
//! coro: its tool turns one into an HTML report (`coro-profile report
//! PROFILE -o report.html`) or compares two (`coro-profile diff A B`).
//!
//! # Examples
//!
//! ```
//! use std::time::Duration;
//!
//! coro::run(|| {
//!     let h = coro::spawn(|| {
//!         coro::sleep(Duration::from_millis(1)).unwrap();
//!         "done"
//!     });
//!     assert_eq!(h.join().unwrap(), "done");
//! });
//! ```
//!
//! # The guide
//!
//! The repository's `docs/` directory holds a guide of eleven chapters,
//! read in order from `docs/README.md`: getting started; green threads,
//! scheduling and the watchdog; timeouts, cancel scopes and nurseries; sync
//! primitives; sockets, DNS and signals; calling async crates; pools and
//! executors; observability; memory and stacks; operating the mail relay;
//! dependencies. Every example in it is compiled and run as a doctest of
//! this crate. This page and the items' own docs are the reference.
//!
//! # Where to look
//!
//! * Green threads, time and the runtime: [`run`], [`spawn`], [`Builder`],
//!   [`with_timeout`], [`sleep`], [`Runtime::builder`], [`blocking`],
//!   [`green_local!`], [`clock`], [`stats`].
//! * Talking to a runtime from other OS threads: [`Handle`],
//!   [`sync::remote`].
//! * Locks, semaphores, channels, events: [`sync`].
//! * TCP, UDP and Unix sockets: [`net`].
//! * Coming from tokio or std: [`macro@main`] (`#[coro::main]`), [`time`]
//!   (`sleep`, `timeout`, ...), `TcpStream::split` / `into_split` in [`net`].
//! * Futures and async crates on green threads: [`future::block_on`],
//!   [`future::sleep`], and the features below.
//!
//! # Calling async crates
//!
//! Code on a green thread calls a future with [`future::block_on`]: only
//! that green thread waits while the future is pending. With the features
//! below, coro's sockets are the async crates' I/O objects and its timers
//! their timers, all on coro's own reactor: no tokio runtime runs anywhere.
//! A long-lived future (a hyper or tokio-postgres connection) gets a green
//! thread of its own: `coro::spawn(move || coro::future::block_on(conn))`.
//! `with_timeout`, cancel scopes and interrupts apply to `block_on`: the
//! future is dropped on its green thread, which cancels it.
//!
//! The guide's chapter "Calling async crates" (`docs/06-async.md`) has a
//! hyper server and client in one runtime and a tokio-postgres client, both
//! compiled by the tests; `examples/hyper_server.rs` and
//! `examples/postgres.rs` are complete programs.
//!
//! # Cargo features
//!
//! The default build is the runtime, the primitives, TCP, UDP and Unix
//! sockets, and signals: 17 crates with this one. Each feature but
//! `tokio-bridge` forwards to `coro-net`, which implements it; "pulls in"
//! counts the crates it adds.
//!
//! | feature | default | what it adds | pulls in |
//! |---|---|---|---|
//! | `signal` | yes | Unix signals as a blocking-style stream: `signal::Signals` | signal-hook and its mio source: 4 crates |
//! | `dns` | no | `net::dns`, the stub DNS resolver (MX, TXT, PTR, addresses; a TTL cache) beside the system one of [`net::lookup_host`] | hickory-proto's message codec and its tree: 60 crates |
//! | `backdoor` | no | `net::backdoor`, a console into the running process on a Unix socket (threads, stats, timers, profiler, your own commands) | nothing |
//! | `futures-io` | no | `TcpStream` and `UnixStream` implement `futures_io::AsyncRead` / `AsyncWrite` | futures-io: 1 crate |
//! | `tokio-io` | no | the same for tokio's `AsyncRead` / `AsyncWrite` (tokio's io traits only, with none of its runtime features), for tokio-postgres, tokio-util codecs, ... | tokio without features: 2 crates |
//! | `hyper` | no | the same for hyper 1.x `rt::Read` / `rt::Write`, plus `net::CoroTimer` (`hyper::rt::Timer`) and `net::CoroExecutor` (`hyper::rt::Executor`, each future a green thread) | hyper without features, with http and bytes: 7 crates |
//! | `tokio-bridge` | no | `tokio`: futures that need a tokio runtime (reqwest, redis, sqlx) run on one coro starts on helper threads, while only the calling green thread waits (`coro::tokio::run(fut)`); the crate `coro-tokio` implements it | coro-tokio and tokio's multi-thread scheduler: 3 crates |
//!
//! [`future::block_on`] and [`future::Sleep`], the profiler ([`profile`])
//! and the flight recorder ([`flight`]) need no feature and pull in
//! nothing.

#![warn(missing_docs, missing_debug_implementations, rust_2018_idioms)]
#![cfg_attr(docsrs, feature(doc_cfg))]

pub use coro_runtime::*;

pub mod sync {
    //! Synchronization between green threads: locks, semaphores, channels,
    //! events and groups, with the shapes of `std::sync`.
    //!
    //! Only one green thread of a runtime runs at a time, so these primitives
    //! guard *resources* across blocking calls (a file being rewritten, the
    //! requests in flight on a link), not memory. They live in one runtime:
    //! they are `!Send`, and green threads share them through `Rc`. To reach a
    //! runtime from another OS thread or runtime, use the `Send` channel of
    //! [`remote`].
    //!
    //! | need | use |
    //! |---|---|
    //! | one holder at a time, across blocking calls | [`Mutex`] (`lock`, `try_lock`, `owner`) |
    //! | many readers or one writer | [`RwLock`] (writer-preferring) |
    //! | at most N at once (requests in flight, connections) | [`Semaphore`] |
    //! | wait until N outstanding jobs are done | [`InvertedSemaphore`], [`WaitGroup`], [`in_parallel`] |
    //! | a queue between green threads | [`channel`] (unbounded), [`sync_channel`] (bounded; `0` is a rendezvous), [`Fifo`] |
    //! | a queue from other OS threads or runtimes | [`remote::channel`] |
    //! | wake on a condition | [`Condvar`], [`Event`] |
    //!
    //! # What every primitive promises
    //!
    //! * **FIFO, no barging.** Waiters are served in arrival order, and what is
    //!   released (ownership, permits, an item) is handed straight to the first
    //!   waiter: a thread that arrives later cannot take it first.
    //! * **Every wait can fail, and says why.** A call that can wait returns a
    //!   `Result`: [`WaitError::TimedOut`](crate::WaitError) when an enclosing
    //!   [`with_timeout`](crate::with_timeout) deadline passes,
    //!   [`WaitError::Interrupted`](crate::WaitError) on
    //!   [`Coro::interrupt`](crate::Coro::interrupt) or at runtime shutdown.
    //!   Locks wrap it in [`LockError`] (which also reports
    //!   [`LockError::WouldDeadlock`] instead of hanging), channels in
    //!   [`RecvError`] and [`SendError`].
    //! * **Nothing is lost.** A waiter interrupted after it was handed
    //!   something passes it on to the next waiter (or back), and a send that
    //!   fails returns its value.
    //! * **Errors that come at once still yield.** A call that fails without
    //!   waiting (a `recv` on a disconnected channel, a `lock` the caller
    //!   already holds) spends selfishness, so a loop that ignores errors lets
    //!   the other threads run. `try_*` calls never switch threads.
    //!
    //! # Channels the std way
    //!
    //! `recv` fails with [`RecvError::Disconnected`] once every sender is gone
    //! and the queue is drained, so `while let Ok(item) = rx.recv()` and
    //! `for item in &rx` end when the producers are done:
    //!
    //! ```
    //! use coro::sync::{channel, sync_channel};
    //!
    //! coro::run(|| {
    //!     let (tx, rx) = channel();
    //!     for worker in 0..3 {
    //!         let tx = tx.clone();
    //!         coro::spawn(move || tx.send(format!("worker {worker} done")).unwrap());
    //!     }
    //!     drop(tx);
    //!     let mut lines: Vec<String> = rx.iter().collect();
    //!     lines.sort();
    //!     assert_eq!(lines, ["worker 0 done", "worker 1 done", "worker 2 done"]);
    //!
    //!     // Bounded: a fast producer waits for a slow consumer.
    //!     let (tx, rx) = sync_channel(1);
    //!     let producer = coro::spawn(move || (0..5).try_for_each(|i| tx.send(i)));
    //!     assert_eq!(rx.iter().sum::<i32>(), 10);
    //!     producer.join().unwrap().unwrap();
    //! });
    //! ```
    //!
    //! # Guarding a resource
    //!
    //! ```
    //! use std::rc::Rc;
    //! use coro::sync::{Mutex, Semaphore};
    //!
    //! coro::run(|| {
    //!     let journal = Rc::new(Mutex::new(Vec::new())); // a file, say
    //!     let slots = Rc::new(Semaphore::new(2)); // two requests in flight
    //!     let writers: Vec<_> = (0..4)
    //!         .map(|i| {
    //!             let (journal, slots) = (journal.clone(), slots.clone());
    //!             coro::spawn(move || -> Result<(), Box<dyn std::error::Error>> {
    //!                 let _slot = slots.acquire(1)?;
    //!                 let mut j = journal.lock()?;
    //!                 assert!(journal.is_owned_by_current_thread());
    //!                 j.push(i);
    //!                 coro::yield_now(); // a blocking write: still held
    //!                 Ok(())
    //!             })
    //!         })
    //!         .collect();
    //!     for w in writers {
    //!         w.join().unwrap().unwrap();
    //!     }
    //!     assert_eq!(*journal.lock().unwrap(), [0, 1, 2, 3]);
    //! });
    //! ```
    //!
    //! The `coro-sync` crate's documentation has the details of each type.
    pub use coro_sync::*;
}

pub mod net {
    //! Sockets for green threads: TCP, UDP and Unix-domain, with the shapes of
    //! `std::net` and `std::os::unix::net`.
    //!
    //! Change the import and blocking-style socket code runs on green threads:
    //! a call that would block suspends only the calling green thread, and the
    //! runtime's reactor (epoll, kqueue) wakes it when the socket is ready.
    //! [`TcpStream`] and [`UnixStream`] implement `Read` and `Write` (also for
    //! `&TcpStream`), so `BufReader`, `read_exact`, `write_all`, TLS stacks
    //! (rustls' `StreamOwned`) and other synchronous libraries work unchanged.
    //!
    //! # Serving
    //!
    //! One green thread per connection; the accept loop spawns with
    //! [`Builder::spawn`](crate::Builder::spawn), so running out of memory for
    //! stacks sheds a connection instead of killing the loop, and `incoming()`
    //! ends when the listener is [closed](TcpListener::close) or the
    //! acceptor's wait is cut short (a deadline passed, a cancel, an
    //! interrupt, shutdown; it yields that error once, then ends), so a loop
    //! that skips errors, as this one does, stops instead of spinning:
    //!
    //! ```
    //! use std::io::{BufRead, BufReader, Write};
    //! use std::rc::Rc;
    //! use std::time::Duration;
    //! use coro::net::{TcpListener, TcpStream};
    //!
    //! coro::run(|| -> std::io::Result<()> {
    //!     let listener = Rc::new(TcpListener::bind("127.0.0.1:0")?);
    //!     let addr = listener.local_addr()?;
    //!     let acceptor = {
    //!         let listener = listener.clone();
    //!         coro::spawn(move || {
    //!             for stream in listener.incoming() {
    //!                 let Ok(stream) = stream else { continue };
    //!                 let served = coro::Builder::new().spawn(move || -> std::io::Result<()> {
    //!                     let mut out = stream.try_clone()?;
    //!                     for line in BufReader::new(stream).lines() {
    //!                         // Idle connections end: every wait honours with_timeout.
    //!                         writeln!(out, "echo: {}", line?)?;
    //!                     }
    //!                     Ok(())
    //!                 });
    //!                 if served.is_err() {
    //!                     let _ = coro::sleep(Duration::from_millis(10)); // shed, back off
    //!                 }
    //!             }
    //!         })
    //!     };
    //!     let mut c = TcpStream::connect(addr)?;
    //!     writeln!(c, "hello")?;
    //!     let mut answer = String::new();
    //!     BufReader::new(&c).read_line(&mut answer)?;
    //!     assert_eq!(answer, "echo: hello\n");
    //!     listener.close(); // incoming() ends, the acceptor returns
    //!     acceptor.join().unwrap();
    //!     Ok(())
    //! })
    //! .unwrap();
    //! ```
    //!
    //! A fuller accept loop (backing off on `EMFILE`, logging shed
    //! connections once) is `accept_loop` in the repository's `examples/lib.rs`.
    //!
    //! # Timeouts, interrupts, closing
    //!
    //! * Every call honours an enclosing [`with_timeout`](crate::with_timeout)
    //!   (`ErrorKind::TimedOut`) and std's per-socket `set_read_timeout` /
    //!   `set_write_timeout`.
    //! * [`Coro::interrupt`](crate::Coro::interrupt) fails the call with
    //!   `ErrorKind::Other` wrapping [`WaitError`](crate::WaitError), never
    //!   `ErrorKind::Interrupted` (which `read_exact` would retry forever).
    //! * `close()` wakes every green thread waiting on the socket at once with
    //!   `NotConnected`; `try_clone` shares one socket between green threads.
    //!
    //! # Fairness
    //!
    //! A call that succeeds without waiting, or fails at once, spends one unit
    //! of the thread's selfishness; when it runs out the thread yields, so a
    //! sender on a fast link or a loop that skips errors cannot starve the
    //! others.
    //!
    //! # Beyond std
    //!
    //! [`TcpStream::sendfile`] sends a file region without copying it through
    //! user space; [`TcpListener::builder`] sets `SO_REUSEPORT` (one runtime
    //! per core, each with its own listener) and the backlog; [`Fd`] puts any
    //! other descriptor (a pipe, an eventfd) on the reactor; [`lookup_host`]
    //! resolves names on the blocking pool.
    //!
    //! Sockets are `!Send`: they belong to the runtime that made them. The
    //! `coro-net` crate's documentation has the details of each type.
    pub use coro_net::*;
}

#[cfg(feature = "signal")]
#[cfg_attr(docsrs, doc(cfg(feature = "signal")))]
pub use coro_net::signal;

#[cfg(feature = "tokio-bridge")]
pub mod tokio {
    //! The tokio bridge (feature `tokio-bridge`): a future that needs a
    //! tokio runtime (reqwest, redis, sqlx, the AWS SDK, tonic) runs on a
    //! tokio runtime coro starts on helper OS threads, while only the
    //! calling green thread waits for it; a timeout, an interrupt or a
    //! cancelled scope drops the tokio task.
    //!
    //! ```
    //! use std::time::Duration;
    //!
    //! coro::run(|| {
    //!     let out = coro::tokio::run(async {
    //!         tokio::time::sleep(Duration::from_millis(1)).await; // needs tokio's timer
    //!         "done"
    //!     });
    //!     assert_eq!(out.unwrap(), "done");
    //! });
    //! ```
    //!
    //! The `coro-tokio` crate's documentation has the details: the
    //! runtime's settings and lifetime, cancellation, calls outside a green
    //! thread, and what must not be done across the bridge.
    pub use coro_tokio::*;
}

/// Runs the function's body as the main green thread of a coro runtime, in
/// the style of `#[tokio::main]`: `#[coro::main] fn main()` is
/// `fn main() { coro::run(move || { ... }) }`.
///
/// # Examples
///
/// ```
/// use std::io::{Read, Write};
/// use coro::net::{TcpListener, TcpStream};
///
/// #[coro::main]
/// fn main() -> std::io::Result<()> {
///     let listener = TcpListener::bind("127.0.0.1:0")?;
///     let addr = listener.local_addr()?;
///     let server = coro::spawn(move || -> std::io::Result<()> {
///         let (mut s, _) = listener.accept()?;
///         s.write_all(b"hi")
///     });
///     let mut reply = String::new();
///     TcpStream::connect(addr)?.read_to_string(&mut reply)?;
///     assert_eq!(reply, "hi");
///     server.join().unwrap()
/// }
/// ```
pub use coro_macros::main;

pub mod time {
    //! Time in tokio's names (`tokio::time`), for code and habits that come
    //! from there: [`sleep`], [`sleep_until`], [`timeout`], [`timeout_at`],
    //! [`Instant`], [`Duration`].
    //!
    //! They are the runtime's own calls, renamed: `timeout` is
    //! [`with_timeout`](crate::with_timeout) and `timeout_at`
    //! [`with_deadline`](crate::with_deadline). Where tokio's `timeout`
    //! wraps a future, coro's wraps a closure, and every blocking call
    //! inside it (a socket read, a lock, a sleep) fails once the deadline
    //! passes; see `with_timeout` for its rules (level-triggered, nesting).
    //! A sleep is a blocking call like any other: it returns a `Result`, an
    //! error when an enclosing timeout or an interrupt ends it early.
    //!
    //! # Examples
    //!
    //! ```
    //! use coro::time::{self, Duration, Instant};
    //!
    //! coro::run(|| {
    //!     let start = Instant::now();
    //!     time::sleep(Duration::from_millis(2)).unwrap();
    //!     time::sleep_until(start + Duration::from_millis(3)).unwrap();
    //!     assert!(Instant::now() >= start + Duration::from_millis(3));
    //!
    //!     let slow = time::timeout(Duration::from_millis(1), || {
    //!         time::sleep(Duration::from_secs(10))
    //!     });
    //!     assert!(slow.is_err()); // Err(Timeout): the sleep was cut short
    //!     let fast = time::timeout(Duration::from_secs(10), || 42);
    //!     assert_eq!(fast.unwrap(), 42);
    //! });
    //! ```
    pub use coro_runtime::clock::Instant;
    pub use coro_runtime::{
        sleep, sleep_until, with_deadline as timeout_at, with_timeout as timeout, Timeout,
    };
    pub use std::time::Duration;
}

/// README's snippets, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

/// The guide's chapters (`docs/`): every example in them is compiled, and
/// run unless marked `no_run`, as a doctest of this crate. A chapter whose
/// examples use a feature is tested when that feature is on; the test
/// command (`scripts/test.sh`) turns every feature on.
#[cfg(doctest)]
pub mod guide {
    #[doc = include_str!("../docs/README.md")]
    pub mod contents {}
    #[doc = include_str!("../docs/01-getting-started.md")]
    pub mod getting_started {}
    #[doc = include_str!("../docs/02-green-threads.md")]
    pub mod green_threads {}
    #[doc = include_str!("../docs/03-cancellation.md")]
    pub mod cancellation {}
    #[doc = include_str!("../docs/04-sync.md")]
    pub mod sync {}
    #[cfg(all(feature = "dns", feature = "signal"))]
    #[doc = include_str!("../docs/05-sockets.md")]
    pub mod sockets {}
    #[cfg(all(feature = "hyper", feature = "tokio-io", feature = "tokio-bridge"))]
    #[doc = include_str!("../docs/06-async.md")]
    pub mod async_crates {}
    #[doc = include_str!("../docs/07-pools.md")]
    pub mod pools {}
    #[cfg(feature = "backdoor")]
    #[doc = include_str!("../docs/08-observability.md")]
    pub mod observability {}
    #[doc = include_str!("../docs/09-memory.md")]
    pub mod memory {}
    #[doc = include_str!("../docs/10-mail-relay.md")]
    pub mod mail_relay {}
    #[doc = include_str!("../docs/11-dependencies.md")]
    pub mod dependencies {}
}
