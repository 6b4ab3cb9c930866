//! The bridge's tokio runtime: configured by [`Builder`], started once per
//! process (by [`Builder::start`], or by the first bridge call with the
//! defaults), stopped by [`shutdown`] or when the process exits.
//!
//! # Design
//!
//! A multi-thread tokio runtime with a few workers. Once started, its
//! `Handle` is published in a `OnceLock`: a bridge call reads it without
//! taking a lock. The `Runtime` itself is owned by a keeper OS thread that
//! sleeps until a stop is requested and then runs tokio's
//! `shutdown_timeout` (which drops every task on the workers and waits,
//! bounded, for the runtime's threads to end). Both ways of stopping,
//! [`shutdown`] and the `atexit(3)` hook, only post the request and wait
//! for the keeper on a `Condvar`, bounded: the thread that runs the exit
//! hook may have lost its thread-locals already (the C runtime destroys
//! the exiting thread's thread-locals before it runs the atexit handlers),
//! and may even be a tokio worker, so the hook does nothing that needs
//! either a thread-local or a tokio context.
//!
//! Stopping is final: once [`shutdown`] was called (or the exit hook ran),
//! every later bridge call fails with [`JoinError::Unavailable`]
//! (`NotConnected`), and calls in flight end with [`JoinError::Cancelled`].
//!
//! [`JoinError::Unavailable`]: crate::JoinError::Unavailable
//! [`JoinError::Cancelled`]: crate::JoinError::Cancelled

use std::io;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use tokio::runtime::{Handle, Runtime};

/// The environment variable that sets the number of worker threads of a
/// bridge started without [`Builder::worker_threads`] (a whole number, at
/// least 1).
pub const WORKERS_ENV: &str = "CORO_TOKIO_WORKERS";

/// The most worker threads the bridge starts by default: the machine's
/// parallelism, capped at this. The workers only drive the I/O and timers
/// of the futures handed over; the program's own work runs on green
/// threads.
pub const DEFAULT_WORKERS: usize = 2;

/// How long shutting down at process exit waits, by default, for the
/// bridge's threads (see [`Builder::shutdown_timeout`]).
pub const DEFAULT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(1);

/// The name of the bridge's worker threads, by default.
pub const DEFAULT_THREAD_NAME: &str = "coro-tokio";

/// The running bridge.
struct Bridge {
    /// Spawns onto the runtime; valid (spawns are cancelled at once) after
    /// the runtime stopped.
    handle: Handle,
    /// Owns the runtime and stops it.
    keeper: Arc<Keeper>,
}

/// Set once, when the runtime has started.
static BRIDGE: OnceLock<Bridge> = OnceLock::new();

/// Set by [`shutdown`] and the exit hook: no call may start or use the
/// bridge any more.
static STOPPED: AtomicBool = AtomicBool::new(false);

/// Serializes starting with stopping: a start either completes before a
/// stop looks for the bridge, or sees `STOPPED` and does not start.
static LIFECYCLE: Mutex<()> = Mutex::new(());

/// Live threads of the bridge's runtime (workers and its blocking pool).
static LIVE_THREADS: AtomicUsize = AtomicUsize::new(0);

/// Settings of the bridge's runtime, applied by [`start`](Builder::start)
/// before its first use.
///
/// Without a builder, the first bridge call starts the runtime with the
/// defaults (the worker count from [`WORKERS_ENV`] when it is set).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
///
/// // At the top of main, before any bridge call.
/// coro::tokio::Builder::new()
///     .worker_threads(1)
///     .thread_name("app-tokio")
///     .shutdown_timeout(Duration::from_millis(500))
///     .start()
///     .expect("the tokio bridge");
/// coro::run(|| {
///     let n = coro::tokio::run(async { 6 * 7 }).unwrap();
///     assert_eq!(n, 42);
/// });
/// ```
#[derive(Debug, Clone)]
pub struct Builder {
    /// `None`: [`WORKERS_ENV`], else the default.
    worker_threads: Option<usize>,
    thread_name: String,
    /// `None`: tokio's default.
    thread_stack_size: Option<usize>,
    shutdown_timeout: Duration,
}

impl Default for Builder {
    fn default() -> Builder {
        Builder::new()
    }
}

impl Builder {
    /// The defaults: up to [`DEFAULT_WORKERS`] workers (or
    /// [`WORKERS_ENV`]), named [`DEFAULT_THREAD_NAME`], tokio's default
    /// stack size, [`DEFAULT_SHUTDOWN_TIMEOUT`].
    pub fn new() -> Builder {
        Builder {
            worker_threads: None,
            thread_name: DEFAULT_THREAD_NAME.to_owned(),
            thread_stack_size: None,
            shutdown_timeout: DEFAULT_SHUTDOWN_TIMEOUT,
        }
    }

    /// The number of worker threads (at least 1); overrides
    /// [`WORKERS_ENV`].
    pub fn worker_threads(mut self, n: usize) -> Builder {
        self.worker_threads = Some(n);
        self
    }

    /// The name of the runtime's threads.
    pub fn thread_name(mut self, name: impl Into<String>) -> Builder {
        self.thread_name = name.into();
        self
    }

    /// The stack size of the runtime's threads, in bytes (not 0).
    pub fn thread_stack_size(mut self, bytes: usize) -> Builder {
        self.thread_stack_size = Some(bytes);
        self
    }

    /// How long the shutdown at process exit waits for the runtime's
    /// threads to end: every task is dropped at once, but a future that
    /// blocks its thread (or a `spawn_blocking` job) holds the exit up to
    /// this long.
    pub fn shutdown_timeout(mut self, timeout: Duration) -> Builder {
        self.shutdown_timeout = timeout;
        self
    }

    /// Starts the bridge's runtime with these settings.
    ///
    /// # Errors
    ///
    /// * `AlreadyExists` if the bridge is running already (a bridge call
    ///   started it with the defaults, or `start` was called before):
    ///   configure it before its first use.
    /// * `NotConnected` if it was [shut down](shutdown).
    /// * `InvalidInput` for a worker count or stack size of 0, or a
    ///   [`WORKERS_ENV`] that is not a whole number of at least 1.
    /// * The OS's error if a thread cannot be created.
    pub fn start(self) -> io::Result<()> {
        start(self, true).map(|_| ())
    }

    /// The worker count: the builder's, else the environment's, else the
    /// default.
    fn workers(&self) -> io::Result<usize> {
        let n = match self.worker_threads {
            Some(n) => n,
            None => match std::env::var(WORKERS_ENV) {
                Err(std::env::VarError::NotPresent) => {
                    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
                    cpus.min(DEFAULT_WORKERS)
                }
                Ok(v) => v.trim().parse().ok().filter(|&n| n > 0).ok_or_else(|| {
                    invalid(format!(
                        "{WORKERS_ENV}={v:?} is not a number of worker threads (a whole \
                         number of at least 1)"
                    ))
                })?,
                Err(std::env::VarError::NotUnicode(v)) => {
                    return Err(invalid(format!(
                        "{WORKERS_ENV}={v:?} is not a number of worker threads"
                    )))
                }
            },
        };
        if n == 0 {
            return Err(invalid(
                "a tokio bridge of 0 worker threads cannot run anything (at least 1)".into(),
            ));
        }
        Ok(n)
    }
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, format!("coro::tokio: {msg}"))
}

fn stopped() -> io::Error {
    io::Error::new(
        io::ErrorKind::NotConnected,
        "coro::tokio: the tokio bridge was shut down",
    )
}

fn lifecycle() -> MutexGuard<'static, ()> {
    LIFECYCLE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The bridge's handle, starting the runtime with the defaults if it has
/// not started; an error if it cannot run anything.
pub(crate) fn running() -> io::Result<&'static Handle> {
    if let Some(b) = BRIDGE.get() {
        if !STOPPED.load(Ordering::Acquire) {
            return Ok(&b.handle);
        }
        return Err(stopped());
    }
    start(Builder::new(), false).map(|b| &b.handle)
}

/// The bridge's handle if it ever started, whether it runs or not.
pub(crate) fn started() -> Option<&'static Handle> {
    BRIDGE.get().map(|b| &b.handle)
}

/// Starts the runtime with `builder`, or returns the one running (an
/// error instead if `explicit`: the settings would be ignored).
fn start(builder: Builder, explicit: bool) -> io::Result<&'static Bridge> {
    // Bad settings are reported whatever the bridge's state.
    let workers = builder.workers()?;
    if builder.thread_stack_size == Some(0) {
        return Err(invalid("a thread stack size of 0 bytes".into()));
    }
    let _guard = lifecycle();
    if STOPPED.load(Ordering::Acquire) {
        return Err(stopped());
    }
    if let Some(b) = BRIDGE.get() {
        if explicit {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                "coro::tokio: the tokio bridge is running already; configure it before its \
                 first use (the first bridge call starts it with the defaults)",
            ));
        }
        return Ok(b);
    }
    let mut tokio = tokio::runtime::Builder::new_multi_thread();
    tokio
        .worker_threads(workers)
        .thread_name(builder.thread_name.clone())
        .on_thread_start(|| {
            LIVE_THREADS.fetch_add(1, Ordering::AcqRel);
        })
        .on_thread_stop(|| {
            LIVE_THREADS.fetch_sub(1, Ordering::AcqRel);
        })
        .enable_all();
    if let Some(bytes) = builder.thread_stack_size {
        tokio.thread_stack_size(bytes);
    }
    let runtime = tokio.build()?;
    let handle = runtime.handle().clone();
    let keeper = Arc::new(Keeper {
        state: Mutex::new(Stop::default()),
        changed: Condvar::new(),
        exit_timeout: builder.shutdown_timeout,
    });
    let k = keeper.clone();
    // If the keeper cannot be created, the closure (and the runtime in it)
    // is dropped here, which stops the runtime's threads.
    std::thread::Builder::new()
        .name(format!("{}-keeper", builder.thread_name))
        .spawn(move || k.keep(runtime))?;
    at_exit::register();
    Ok(BRIDGE.get_or_init(|| Bridge { handle, keeper }))
}

/// Stops the tokio bridge: every task on it is dropped (a green thread
/// waiting for one gets [`JoinError::Cancelled`]), and this waits up to
/// `timeout` for the runtime's threads to end. Later bridge calls fail
/// with [`JoinError::Unavailable`] (`NotConnected`): stopping is final.
///
/// Returns `true` if every thread of the runtime has ended (also when the
/// bridge never started), `false` if some still ran when `timeout` passed
/// (a future that blocks its thread, a `spawn_blocking` job), or if the
/// calling green thread's wait was cut short.
///
/// The process's exit does the same with the
/// [`shutdown_timeout`](Builder::shutdown_timeout) of the settings: call
/// this to stop the bridge earlier, or with another bound.
///
/// On a green thread, the wait runs on coro's blocking pool (only this
/// green thread waits); on any other thread it blocks that thread. Do not
/// call it from a future on the bridge: that worker would wait for itself
/// until `timeout`.
///
/// [`JoinError::Cancelled`]: crate::JoinError::Cancelled
/// [`JoinError::Unavailable`]: crate::JoinError::Unavailable
///
/// # Examples
///
/// ```
/// use std::time::Duration;
///
/// coro::run(|| {
///     assert_eq!(coro::tokio::run(async { 1 }).unwrap(), 1);
/// });
/// assert!(coro::tokio::shutdown(Duration::from_secs(5)));
/// coro::run(|| {
///     let err = coro::tokio::run(async { 2 }).unwrap_err();
///     assert!(matches!(err, coro::tokio::JoinError::Unavailable(_)), "{err}");
/// });
/// ```
pub fn shutdown(timeout: Duration) -> bool {
    let bridge = {
        let _guard = lifecycle();
        STOPPED.store(true, Ordering::Release);
        BRIDGE.get()
    };
    let Some(bridge) = bridge else {
        return true;
    };
    if coro_runtime::in_green_thread() {
        coro_runtime::blocking(move || bridge.keeper.stop(timeout)).unwrap_or(false)
    } else {
        bridge.keeper.stop(timeout)
    }
}

/// Owns the runtime on its own OS thread until a stop is requested.
struct Keeper {
    state: Mutex<Stop>,
    /// Signalled when a stop is requested and when it is done.
    changed: Condvar,
    /// The bound of the stop at process exit.
    exit_timeout: Duration,
}

#[derive(Default)]
struct Stop {
    /// The bound of the first stop requested.
    requested: Option<Duration>,
    /// The runtime has been shut down (its threads ended, or the bound
    /// passed).
    done: bool,
}

impl Keeper {
    fn lock(&self) -> MutexGuard<'_, Stop> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The keeper thread: waits for a stop, then shuts the runtime down.
    fn keep(&self, runtime: Runtime) {
        let timeout = {
            let mut s = self.lock();
            loop {
                if let Some(t) = s.requested {
                    break t;
                }
                s = self.changed.wait(s).unwrap_or_else(PoisonError::into_inner);
            }
        };
        runtime.shutdown_timeout(timeout);
        self.lock().done = true;
        self.changed.notify_all();
    }

    /// Requests the stop (bounded by `timeout`, if it is the first) and
    /// waits for the keeper, a little past `timeout` at most. Uses no
    /// thread-local and no tokio context (see the module docs).
    fn stop(&self, timeout: Duration) -> bool {
        let mut s = self.lock();
        if s.requested.is_none() {
            s.requested = Some(timeout);
            self.changed.notify_all();
        }
        // The keeper's own steps after tokio's bounded wait take a moment.
        let end = Instant::now().checked_add(timeout.saturating_add(Duration::from_millis(100)));
        while !s.done {
            let left = match end {
                Some(end) => end.saturating_duration_since(Instant::now()),
                None => Duration::MAX,
            };
            if left.is_zero() {
                break;
            }
            s = self
                .changed
                .wait_timeout(s, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        s.done && LIVE_THREADS.load(Ordering::Acquire) == 0
    }
}

mod at_exit {
    //! The `atexit(3)` hook that stops the bridge when the process exits
    //! (`main` returns, `std::process::exit`): its tasks are dropped (their
    //! destructors run: connections are closed, pools say goodbye) instead
    //! of vanishing with the process.

    use std::sync::atomic::Ordering;
    use std::sync::Once;

    use super::{BRIDGE, STOPPED};

    /// Registers the hook once per process.
    pub(super) fn register() {
        static ONCE: Once = Once::new();
        ONCE.call_once(|| {
            // SAFETY: `atexit` only stores the function pointer. `hook` is
            // an `extern "C" fn()` that never unwinds (a panic inside is
            // caught) and touches only statics, which live as long as the
            // program, so it is sound whenever `exit` runs it: after
            // `main`, from `std::process::exit` on any thread (a worker of
            // the bridge too: it waits only up to the shutdown timeout),
            // while other threads still run (everything it uses is `Sync`).
            // A failed registration (no memory) leaves the bridge to be
            // stopped by `shutdown` or the kernel.
            unsafe { libc::atexit(hook) };
        });
    }

    extern "C" fn hook() {
        let _ = std::panic::catch_unwind(|| {
            // No lifecycle lock: a thread that holds it forever (a start
            // interrupted by the exit) must not hang the exit. A bridge
            // that starts meanwhile stops with the process.
            STOPPED.store(true, Ordering::Release);
            if let Some(b) = BRIDGE.get() {
                b.keeper.stop(b.keeper.exit_timeout);
            }
        });
    }
}
