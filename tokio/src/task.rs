//! Bridge calls: [`spawn`] hands a future to the bridge's runtime,
//! [`JoinHandle::join`] waits for it, [`run`] does both.
//!
//! # Design
//!
//! `spawn` is tokio's `Handle::spawn`. `join` waits for tokio's
//! `JoinHandle` as for any future: on a green thread with
//! [`coro::future::block_on`](coro_runtime::future::block_on), which parks
//! only that green thread and hands tokio a `Send + Sync` waker that wakes
//! it through its runtime's cross-thread inbox; no OS thread is held per
//! call. Anywhere else with tokio's `Handle::block_on`, which blocks the
//! calling OS thread (and refuses a thread that drives tokio tasks).
//!
//! The tokio `JoinHandle` is wrapped in [`Abandon`], whose destructor
//! aborts the task unless it finished: when `block_on` gives up (a
//! timeout, a cancel, an interrupt) it drops the future it waited on, and
//! with it the task on the tokio side.

use std::fmt;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::error::JoinError;
use crate::runtime;

/// Runs `fut` on the tokio bridge and waits for its output: only the
/// calling green thread waits, the runtime runs its other green threads
/// meanwhile. `spawn(fut).join()`.
///
/// The future runs on a worker thread of the bridge's runtime (started on
/// first use), inside its tokio context: `tokio::spawn`, `tokio::time`,
/// `tokio::net` and the crates built on them (reqwest, redis, sqlx, the
/// AWS SDK, tonic) work there.
///
/// # Errors
///
/// * [`JoinError::Wait`]: the wait was cut short by an enclosing
///   [`with_timeout`](coro_runtime::with_timeout) or cancel scope, an
///   interrupt, or runtime shutdown; the task is aborted (its future is
///   dropped on the tokio side: a request in flight is abandoned, its
///   connection closed).
/// * [`JoinError::Panicked`]: the future panicked (the bridge and the
///   runtime go on).
/// * [`JoinError::Cancelled`]: the bridge shut down before the future
///   finished.
/// * [`JoinError::Unavailable`]: the bridge could not be started, or was
///   shut down.
///
/// # Panics
///
/// On a thread that drives tokio tasks (inside a future on the bridge,
/// or on any tokio runtime's worker), with tokio's message ("Cannot start
/// a runtime from within a runtime"): blocking there would stall that
/// runtime. A future on the bridge awaits other futures instead.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
///
/// coro::run(|| {
///     let ticker = coro::spawn(|| {
///         for _ in 0..3 {
///             coro::sleep(Duration::from_millis(1)).unwrap(); // runs meanwhile
///         }
///     });
///     let slept = coro::tokio::run(async {
///         tokio::time::sleep(Duration::from_millis(10)).await; // a tokio timer
///         "slept"
///     });
///     assert_eq!(slept.unwrap(), "slept");
///     ticker.join().unwrap();
///
///     // Cut short: the tokio task is dropped.
///     let late = coro::with_timeout(Duration::from_millis(5), || {
///         coro::tokio::run(async { tokio::time::sleep(Duration::from_secs(60)).await })
///     });
///     assert!(late.is_err());
/// });
/// ```
pub fn run<F>(fut: F) -> Result<F::Output, JoinError>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    spawn(fut).join()
}

/// Hands `fut` to the tokio bridge's runtime (starting it on first use)
/// and returns a handle to wait for it; the future starts running at once.
///
/// Like `std::thread::spawn` and `tokio::spawn`, dropping the handle
/// detaches the task: it runs on, and its output is dropped. A
/// [`join`](JoinHandle::join) cut short aborts it.
///
/// # Examples
///
/// ```
/// coro::run(|| {
///     // Several calls in flight from one green thread.
///     let handles: Vec<_> = (0..4u64).map(|i| coro::tokio::spawn(async move { i * i })).collect();
///     let squares: Vec<u64> = handles.into_iter().map(|h| h.join().unwrap()).collect();
///     assert_eq!(squares, [0, 1, 4, 9]);
/// });
/// ```
pub fn spawn<F>(fut: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    JoinHandle {
        task: runtime::running().map(|h| h.spawn(fut)),
    }
}

/// A future running on the tokio bridge: [`join`](JoinHandle::join) waits
/// for its output.
///
/// It is `Send` (for `Send` outputs): it may be joined on another green
/// thread, in another runtime, or on a plain OS thread.
#[must_use = "dropping the handle detaches the task: join it to get its output"]
pub struct JoinHandle<T> {
    /// The task, or why the bridge could not run it.
    task: io::Result<tokio::task::JoinHandle<T>>,
}

impl<T> JoinHandle<T> {
    /// Waits for the future's output.
    ///
    /// On a green thread, only that green thread waits: it parks and is
    /// woken from the tokio side through its runtime's cross-thread wake
    /// path, so thousands of green threads can each wait for a call. On
    /// any other thread (a plain OS thread, coro's blocking pool, `main`
    /// before or after [`coro::run`](coro_runtime::run)), it blocks that
    /// OS thread until the output is there.
    ///
    /// # Errors
    ///
    /// As [`run`]'s: [`JoinError::Wait`] when the green thread's wait is
    /// cut short (the task is aborted), [`JoinError::Panicked`],
    /// [`JoinError::Cancelled`] (aborted, or the bridge shut down),
    /// [`JoinError::Unavailable`].
    ///
    /// # Panics
    ///
    /// On a thread that drives tokio tasks, as [`run`] does.
    pub fn join(self) -> Result<T, JoinError> {
        let task = Abandon {
            task: self.task.map_err(JoinError::Unavailable)?,
            finished: false,
        };
        let output = if coro_runtime::in_green_thread() {
            // On error `block_on` has dropped `task`: aborted.
            coro_runtime::future::block_on(task)?
        } else {
            let handle = runtime::started().expect("a task exists, so the bridge started");
            handle.block_on(task)
        };
        output.map_err(JoinError::from_tokio)
    }

    /// Aborts the task: its future is dropped on the tokio side at its
    /// next await point (at once if it is idle), and
    /// [`join`](JoinHandle::join) returns [`JoinError::Cancelled`] (or the
    /// output, if it had finished already).
    pub fn abort(&self) {
        if let Ok(t) = &self.task {
            t.abort();
        }
    }

    /// Whether the task has finished (with an output, a panic or a
    /// cancellation), so that [`join`](JoinHandle::join) would not wait.
    pub fn is_finished(&self) -> bool {
        self.task.as_ref().map_or(true, |t| t.is_finished())
    }
}

impl<T> fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinHandle")
            .field("finished", &self.is_finished())
            .finish_non_exhaustive()
    }
}

/// A tokio `JoinHandle` that aborts its task when dropped before the task
/// finished.
struct Abandon<T> {
    task: tokio::task::JoinHandle<T>,
    /// The task's result was taken: there is nothing left to abort.
    finished: bool,
}

impl<T> Future for Abandon<T> {
    type Output = Result<T, tokio::task::JoinError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let r = Pin::new(&mut self.task).poll(cx);
        if r.is_ready() {
            self.finished = true;
        }
        r
    }
}

impl<T> Drop for Abandon<T> {
    fn drop(&mut self) {
        if !self.finished {
            self.task.abort();
        }
    }
}

/// Compile-time proof that a handle can be sent to another thread.
const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<JoinHandle<u64>>();
    send_sync::<crate::Builder>();
};
