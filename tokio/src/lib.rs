//! The tokio bridge of coro: futures that need a tokio runtime (reqwest,
//! redis, sqlx, the AWS SDK, tonic) called from green threads.
//!
//! coro's async adapters run crates that only need I/O traits (hyper,
//! tokio-postgres) on coro's own reactor. Most client crates need more: a
//! tokio runtime of their own (`tokio::spawn`, `tokio::time`,
//! `tokio::net`); polled on a green thread they panic ("there is no
//! reactor running"). The bridge runs such a future on a tokio runtime
//! that coro starts for the process, while the green thread that called
//! waits for its output like for any blocking call. In the `coro` facade
//! this crate is `coro::tokio`, behind the `tokio-bridge` feature.
//!
//! | item | what it is |
//! |---|---|
//! | [`run(fut)`](run) | run a `Future + Send + 'static` on the bridge, wait for its output |
//! | [`spawn(fut)`](spawn), [`JoinHandle::join`] | the same in two steps (several calls in flight from one green thread) |
//! | [`handle()`](handle) | the bridge's `tokio::runtime::Handle`, for crates that ask for one |
//! | [`Builder`] | worker count, thread names, stack size, exit timeout: before first use |
//! | [`shutdown`] | stop the bridge (also done at process exit) |
//!
//! # Examples
//!
//! ```
//! use std::time::Duration;
//!
//! coro::run(|| {
//!     // Any future that needs tokio: here its timer and its channels.
//!     let (tx, rx) = tokio::sync::oneshot::channel();
//!     let answer = coro::tokio::spawn(async move { rx.await.unwrap() * 2 });
//!     coro::tokio::run(async move {
//!         tokio::time::sleep(Duration::from_millis(5)).await;
//!         tx.send(21).unwrap();
//!     })
//!     .unwrap();
//!     assert_eq!(answer.join().unwrap(), 42);
//! });
//! ```
//!
//! `examples/tokio_bridge.rs` in the repository is a whole program with
//! reqwest and redis: a client built once and cloned into each call's
//! `async move` block, requests under `with_timeout`.
//!
//! # Implementation
//!
//! * The bridge's runtime is a tokio multi-thread runtime with a few worker
//!   threads (up to [`DEFAULT_WORKERS`], or [`WORKERS_ENV`], or a
//!   [`Builder`]), started once per process by the first call, on helper
//!   OS threads. A keeper thread owns it and shuts it down on
//!   [`shutdown`] or at process exit (`runtime`).
//! * A call spawns the future onto it and waits for tokio's `JoinHandle`
//!   with [`coro::future::block_on`](coro_runtime::future::block_on): the
//!   green thread parks, and the waker it hands to tokio wakes it from the
//!   worker thread through its runtime's cross-thread inbox (`task`). No
//!   OS thread waits per call: thousands of green threads can each have a
//!   call in flight, and the runtime runs its other green threads
//!   meanwhile.
//!
//! # Cancellation
//!
//! A call is a blocking call like a socket read: an enclosing
//! [`with_timeout`](coro_runtime::with_timeout) deadline, a cancelled
//! [`CancelScope`](coro_runtime::CancelScope), an
//! [interrupt](coro_runtime::Coro::interrupt) or the runtime's shutdown
//! end the wait at once with [`JoinError::Wait`], and the tokio task is
//! aborted: its future is dropped on the tokio side at its next await
//! point, so the peer sees the request abandoned (the connection is
//! closed, not returned to a pool). A panic in the future comes back as
//! [`JoinError::Panicked`] with its message; it fails only that call.
//!
//! # Outside a green thread
//!
//! The calls also work on plain OS threads (in `main` before or after
//! [`coro::run`](coro_runtime::run), on coro's blocking pool, on any
//! thread): there they block the OS thread until the output is there, as
//! tokio's `Handle::block_on` does. On a thread that drives tokio tasks
//! (inside a future on the bridge) they panic with tokio's message:
//! blocking there would stall that runtime.
//!
//! # What not to do
//!
//! * **Do not hold coro's primitives across the bridge.** The future runs
//!   on another OS thread; coro's locks, channels, sockets and green
//!   thread handles belong to one runtime, are `!Send`, and the compiler
//!   refuses to move them into the future:
//!
//!   ```compile_fail,E0277
//!   use std::rc::Rc;
//!   coro::run(|| {
//!       let count = Rc::new(coro::sync::Mutex::new(0));
//!       let c = count.clone();
//!       let _ = coro::tokio::run(async move { *c.lock().unwrap() += 1 }); // Rc<Mutex>: !Send
//!   });
//!   ```
//!
//!   Take what the future needs out first (a value, an owned copy) and
//!   hand the result back as its output. A guard of coro's held by the
//!   green thread across a call (a `Mutex` guard, a semaphore's permit)
//!   stays held for the whole call: keep the section short, or put the
//!   call under `with_timeout`.
//! * **Do not call back into coro from the tokio side.** A future on the
//!   bridge runs on a tokio worker, not on a green thread: coro's blocking
//!   calls (`coro::sleep`, a coro socket,
//!   [`coro::future::block_on`](coro_runtime::future::block_on), a bridge
//!   call's [`join`](JoinHandle::join)) panic there, and a future that waits for something only a green
//!   thread does after its call returns never finishes (it waits for
//!   itself). What is `Send` may cross: `coro::Handle::spawn` starts a
//!   green thread from the tokio side, a `coro::sync::remote` channel or a
//!   `tokio::sync` channel carries values either way.
//! * **Create tokio's futures inside the `async` block** handed over:
//!   some take tokio's context when they are created, not when first
//!   polled (`tokio::time::sleep(d)`, `tokio::time::timeout(d, f)`), and
//!   panic on a green thread ("there is no reactor running"). Write
//!   `coro::tokio::run(async move { tokio::time::sleep(d).await })`, not
//!   `coro::tokio::run(tokio::time::sleep(d))`.
//! * **Do not poll a tokio-bound future with `coro::future::block_on`
//!   directly**: it needs the bridge (`coro::tokio::run`) or it panics
//!   without a reactor.
//! * A future that blocks its worker thread (a synchronous call, a long
//!   computation) stalls the bridge for every green thread, as it would
//!   stall any tokio runtime; give such work to `tokio::task::spawn_blocking`
//!   or do it on the green thread.
//!
//! # The bridge's `Handle`
//!
//! Crates that ask for a `tokio::runtime::Handle` (or for a tokio context
//! when a client is built: some spawn a background task then) get the
//! bridge's from [`handle()`](handle):
//!
//! ```
//! coro::run(|| -> std::io::Result<()> {
//!     let handle = coro::tokio::handle()?;
//!     let task = handle.spawn(async { "spawned through the handle" });
//!     // A tokio JoinHandle is a future: wait for it through the bridge.
//!     let out = coro::tokio::run(task)?;
//!     assert_eq!(out.unwrap(), "spawned through the handle");
//!     let _ctx = handle.enter(); // a tokio context on this OS thread, for constructors
//!     Ok(())
//! })
//! .unwrap();
//! ```

#![warn(missing_docs, missing_debug_implementations, rust_2018_idioms)]
#![warn(clippy::undocumented_unsafe_blocks)]
#![doc(test(attr(deny(warnings))))]

mod error;
mod runtime;
mod task;

pub use error::JoinError;
pub use runtime::{
    shutdown, Builder, DEFAULT_SHUTDOWN_TIMEOUT, DEFAULT_THREAD_NAME, DEFAULT_WORKERS, WORKERS_ENV,
};
pub use task::{run, spawn, JoinHandle};

/// The bridge's `tokio::runtime::Handle`, starting the bridge on first
/// use: for crates that take a handle, spawn onto a runtime of their
/// choosing, or need a tokio context (`handle.enter()`) while a client is
/// built.
///
/// What is spawned through the handle runs on the bridge like a
/// [`spawn`]ed future, but its tokio `JoinHandle` is tokio's: wait for it
/// with [`run`] (it is a future) and abort it yourself if you give up.
///
/// # Errors
///
/// As [`Builder::start`] when the bridge cannot be started;
/// `NotConnected` once it was [shut down](shutdown).
pub fn handle() -> std::io::Result<tokio::runtime::Handle> {
    runtime::running().cloned()
}
