//! The runtime: building one ([`Runtime::builder`]), running a main green
//! thread on it ([`Runtime::block_on`], [`run`]), and shutting down the
//! threads still alive when that main thread returns.
//!
//! # Shutdown
//!
//! When the main closure returns, the hooks registered with
//! [`on_shutdown`](crate::on_shutdown) run first, on a green thread of their
//! own while the others still run. Then every other green thread is interrupted:
//! parked ones are woken, and from then on every blocking call fails with
//! [`WaitError::Interrupted`](crate::WaitError). The loop runs (without
//! blocking) until no thread is ready or 64 passes went by, so threads that
//! react to the error leave normally. Threads still alive after that are
//! unwound in place: their stacks unwind as if from a panic, so destructors
//! run and no stack or thread leaks. `JoinHandle::join` on such a thread
//! reports [`JoinError::Cancelled`](crate::JoinError).

use std::io;
use std::panic;
use std::rc::Rc;
use std::time::Duration;

use crate::clock;
use crate::context;
use crate::error::JoinError;
use crate::sched::{Config, Scheduler};
use crate::spawn::{check_selfishness, check_stack_size, Builder};
use crate::task::{make_ready, Task, ThreadState};

/// Default usable stack size of a green thread: 256 KiB of address space, of
/// which only touched pages use memory (see README, "Memory").
pub const DEFAULT_STACK_SIZE: usize = 256 * 1024;
/// Default selfishness budget.
pub const DEFAULT_SELFISHNESS: u32 = 4;
/// Default latency-warning threshold.
pub const DEFAULT_LATENCY_WARNING: Duration = Duration::from_millis(200);

const SHUTDOWN_PASSES: usize = 64;

/// Settings for a [`Runtime`].
///
/// # Examples
///
/// ```
/// # use coro_runtime as coro;
/// use std::time::Duration;
///
/// let mut rt = coro::Runtime::builder()
///     .stack_size(128 * 1024)
///     .selfishness(8)
///     .latency_warning(Some(Duration::from_millis(50)))
///     .build()
///     .unwrap();
/// assert_eq!(rt.block_on(|| 1 + 1), 2);
/// ```
#[derive(Debug, Clone)]
pub struct RuntimeBuilder {
    stack_size: usize,
    selfishness: u32,
    latency_warning: Option<Duration>,
    blocking_threads: usize,
    stack_pool: usize,
}

impl Default for RuntimeBuilder {
    fn default() -> Self {
        RuntimeBuilder {
            stack_size: DEFAULT_STACK_SIZE,
            selfishness: DEFAULT_SELFISHNESS,
            latency_warning: Some(DEFAULT_LATENCY_WARNING),
            blocking_threads: 4,
            stack_pool: 1024,
        }
    }
}

impl RuntimeBuilder {
    /// Default usable stack size of green threads, in bytes.
    pub fn stack_size(mut self, bytes: usize) -> Self {
        self.stack_size = bytes;
        self
    }

    /// Default selfishness budget of green threads (1..=32768).
    pub fn selfishness(mut self, n: u32) -> Self {
        self.selfishness = n;
        self
    }

    /// Latency-warning threshold; `None` disables the warnings (and the
    /// watchdog thread with them).
    pub fn latency_warning(mut self, threshold: Option<Duration>) -> Self {
        self.latency_warning = threshold;
        self
    }

    /// Most OS threads of the blocking-offload pool (at least 1).
    pub fn blocking_threads(mut self, n: usize) -> Self {
        self.blocking_threads = n;
        self
    }

    /// Most finished threads' stacks kept for reuse.
    pub fn stack_pool(mut self, n: usize) -> Self {
        self.stack_pool = n;
        self
    }

    /// Builds the runtime.
    ///
    /// # Errors
    ///
    /// `InvalidInput` naming the bad setting (stack size below
    /// [`MIN_STACK_SIZE`](crate::MIN_STACK_SIZE), selfishness outside
    /// 1..=32768, zero blocking threads, a zero latency threshold), or the OS
    /// error of creating the poller or the watchdog thread.
    pub fn build(self) -> io::Result<Runtime> {
        let stack_size = check_stack_size(self.stack_size)?;
        let selfishness = check_selfishness(self.selfishness)?;
        if self.blocking_threads == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "blocking_threads must be at least 1",
            ));
        }
        if self.latency_warning == Some(Duration::ZERO) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "latency_warning threshold must be above zero (use None to disable)",
            ));
        }
        clock::init();
        #[cfg(unix)]
        crate::stack::overflow::install();
        let sched = Scheduler::new(Config {
            stack_size,
            selfishness,
            latency_warning: self.latency_warning,
            blocking_threads: self.blocking_threads,
            stack_pool: self.stack_pool,
        })?;
        Ok(Runtime {
            sched: Box::new(sched),
        })
    }
}

/// A scheduler on the current OS thread, with its timers, reactor, stack
/// pool and blocking-offload pool.
///
/// # `!Send`
///
/// A runtime and its green threads stay on the OS thread that made them; run
/// one runtime per core to use several.
///
/// ```compile_fail
/// # use coro_runtime as coro;
/// fn send<T: Send>() {}
/// send::<coro::Runtime>();
/// ```
pub struct Runtime {
    sched: Box<Scheduler>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("config", &self.sched.config)
            .finish_non_exhaustive()
    }
}

impl Runtime {
    /// A builder with the defaults: 256 KiB stacks, selfishness 4, latency
    /// warnings at 200 ms.
    pub fn builder() -> RuntimeBuilder {
        RuntimeBuilder::default()
    }

    /// A runtime with the default settings.
    pub fn new() -> io::Result<Runtime> {
        RuntimeBuilder::default().build()
    }

    /// Runs `f` as the first green thread (named `main`) and drives the
    /// scheduler until it returns; then stops the other green threads (see
    /// the module docs) and returns `f`'s value.
    ///
    /// # Panics
    ///
    /// If `f` panics (after the other threads were stopped), if called from
    /// inside a runtime, or if the main thread cannot get a stack.
    ///
    /// Called from a destructor while the OS thread unwinds from a panic,
    /// the runtime runs, but no green thread may block or switch: the panic
    /// state is the OS thread's, and it looks to the runtime like an unwind
    /// in progress (blocking calls fail with `SuspendForbidden`).
    pub fn block_on<F, T>(&mut self, f: F) -> T
    where
        F: FnOnce() -> T + 'static,
        T: 'static,
    {
        if !context::sched_ptr().is_null() {
            panic!("coro: Runtime::block_on / coro::run called from inside a runtime (nested runtimes on one OS thread are not supported)");
        }
        #[cfg(unix)]
        let _alt = crate::stack::overflow::AltStack::ensure()
            .unwrap_or_else(|e| panic!("coro: cannot set up a signal stack: {e}"));
        let s: &Scheduler = &self.sched;
        let prev = context::enter(s);
        struct Exit(*const Scheduler);
        impl Drop for Exit {
            fn drop(&mut self) {
                context::enter(self.0);
            }
        }
        let _exit = Exit(prev);
        s.shutting_down.set(false);
        let handle = Builder::new()
            .name("main".into())
            .spawn_in(s, f)
            .unwrap_or_else(|e| panic!("coro: cannot start the main green thread: {e}"));
        let main = handle.thread().0.clone();
        s.run_until(&main);
        shutdown(s);
        drop(main);
        match handle.join() {
            Ok(v) => v,
            Err(JoinError::Panicked(p)) => panic::resume_unwind(p),
            Err(e) => panic!("coro: main green thread did not finish: {e}"),
        }
    }
}

/// Stops every green thread still alive (see the module docs).
fn shutdown(s: &Scheduler) {
    crate::shutdown_hooks::run(s);
    if s.tasks.borrow().is_empty() {
        s.timers.borrow_mut().clear();
        return;
    }
    s.shutting_down.set(true);
    let live: Vec<Rc<Task>> = s.tasks.borrow().iter().map(|(_, t)| t.clone()).collect();
    for t in &live {
        t.interrupted.set(true);
        if t.state.get() == ThreadState::Parked {
            make_ready(t);
        }
    }
    drop(live);
    s.run_passes(SHUTDOWN_PASSES);
    s.ready.borrow_mut().clear();
    let rest: Vec<Rc<Task>> = s.tasks.borrow().iter().map(|(_, t)| t.clone()).collect();
    for t in rest {
        t.unwinding.set(true);
        t.state.set(ThreadState::Running);
        s.current.set(Rc::as_ptr(&t));
        let co = t.coroutine.borrow_mut().take();
        if let Some(mut co) = co {
            co.force_unwind();
            s.stacks.borrow_mut().put(co.into_stack());
        }
        s.current.set(std::ptr::null());
        s.finish(&t);
    }
    s.ready.borrow_mut().clear();
    s.timers.borrow_mut().clear();
    s.shutting_down.set(false);
}

/// Builds a runtime with the default settings on this OS thread, runs `f` as
/// its first green thread, and returns `f`'s value. Green threads still alive
/// when `f` returns are interrupted and unwound (their destructors run).
///
/// # Panics
///
/// If `f` panics, if the runtime cannot be built, or when called inside a
/// runtime.
///
/// # Examples
///
/// ```
/// # use coro_runtime as coro;
/// use std::time::Duration;
///
/// let total = coro::run(|| {
///     let handles: Vec<_> = (1..=3)
///         .map(|i| coro::spawn(move || {
///             coro::sleep(Duration::from_millis(i)).unwrap();
///             i
///         }))
///         .collect();
///     handles.into_iter().map(|h| h.join().unwrap()).sum::<u64>()
/// });
/// assert_eq!(total, 6);
/// ```
pub fn run<F, T>(f: F) -> T
where
    F: FnOnce() -> T + 'static,
    T: 'static,
{
    Runtime::new()
        .unwrap_or_else(|e| panic!("coro::run: cannot build the runtime: {e}"))
        .block_on(f)
}
