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
//! unwound in place: each is resumed once more and unwinds from the call it
//! was blocked in as if from a panic, on its own stack with the runtime
//! current, so destructors run and no stack or thread leaks. `JoinHandle::join` on such
//! a thread reports [`JoinError::Cancelled`](crate::JoinError). Threads
//! spawned meanwhile (by a destructor) are unwound too, without running,
//! until no thread is left.
//!
//! Last, what the run leaves behind is cleared, so that the runtime's next
//! `block_on` starts as a fresh runtime would: its timers (the wakers of
//! pending [`future::Sleep`](crate::future::Sleep)s are woken and
//! dropped: a `Sleep` polled again arms anew), the waiters and stored
//! wakers of sockets kept for the next run, blocking-pool jobs no worker
//! started, and shutdown hooks registered too late to run. Wakers made in
//! the run (`block_on`'s, [`RemoteWaker`](crate::RemoteWaker)s) wake
//! nothing afterwards and no longer keep a later run from reporting a
//! deadlock. A thread that this clearing spawns (a waker's code) is
//! stopped as the others were.
//!
//! The same shutdown runs when the loop itself panics (the deadlock report,
//! say): a guard in `block_on` runs it while the panic unwinds, so no green
//! thread outlives `block_on` on any path. This is what enforces the
//! invariant that tasks are unwound by their own scheduler with the runtime
//! current (see `sched`).
//!
//! # A thread that will not die
//!
//! A thread that catches its unwind (`catch_unwind` in a loop) and blocks
//! or yields again is unwound again from that call (its destructors run
//! again), up to 8 times; after that it is logged by name at ERROR and
//! leaked: its stack and what lives on it stay allocated and it never runs
//! again. A thread that catches the unwind and then loops without ever
//! blocking or yielding cannot be stopped by a cooperative scheduler; the
//! latency watchdog names it. Threads that destructors keep spawning during
//! the unwind are unwound for 64 passes, then leaked.
//!
//! A leaked thread keeps whatever it held: a lock it owned stays locked, a
//! socket it owned stays registered (so the runtime's deadlock report stays
//! off in its later runs).
//!
//! # `panic = "abort"`
//!
//! Unwinding needs unwinding panics. In a program built with
//! `panic = "abort"`, threads still alive after the interrupt passes are
//! leaked (logged by name) instead of unwound: their destructors do not run.

use std::io;
use std::panic::{self, AssertUnwindSafe};
use std::rc::Rc;
use std::time::Duration;

use crate::clock;
use crate::context;
use crate::error::JoinError;
use crate::panic_hook::caught;
use crate::sched::{Config, Scheduler};
use crate::spawn::{check_selfishness, check_stack_size, Builder};
use crate::task::{make_ready, Task, ThreadState};

/// Default usable stack size of a green thread: 256 KiB of address space, of
/// which only touched pages use memory (see README, "Memory").
pub const DEFAULT_STACK_SIZE: usize = 256 * 1024;
/// Default selfishness budget.
pub const DEFAULT_SELFISHNESS: u32 = 4;
/// Default time a green thread stays parked before the runtime gives back
/// the stack memory it does not use ([`RuntimeBuilder::idle_stack_release`]).
pub const DEFAULT_IDLE_STACK_RELEASE: Duration = Duration::from_secs(2);
/// Default latency-warning threshold.
pub const DEFAULT_LATENCY_WARNING: Duration = Duration::from_millis(200);

/// The least time between two flight-recorder snapshots taken on latency
/// warnings ([`RuntimeBuilder::latency_snapshots`]).
pub const DEFAULT_LATENCY_SNAPSHOTS: Duration = Duration::from_secs(60);

const SHUTDOWN_PASSES: usize = 64;

/// Settings for a [`Runtime`].
///
/// # Examples
///
/// ```
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
    stack_guard: usize,
    selfishness: u32,
    latency_warning: Option<Duration>,
    blocking_threads: usize,
    blocking_keep_alive: Duration,
    stack_pool: usize,
    idle_stack_release: Option<Duration>,
    idle_stack_copy_out: bool,
    deadlock_check: Option<Duration>,
    latency_snapshots: Option<Duration>,
}

impl Default for RuntimeBuilder {
    fn default() -> Self {
        RuntimeBuilder {
            stack_size: DEFAULT_STACK_SIZE,
            stack_guard: crate::stack::DEFAULT_STACK_GUARD,
            selfishness: DEFAULT_SELFISHNESS,
            latency_warning: Some(DEFAULT_LATENCY_WARNING),
            blocking_threads: crate::blocking::DEFAULT_MAX_THREADS,
            blocking_keep_alive: crate::blocking::DEFAULT_KEEP_ALIVE,
            stack_pool: usize::MAX,
            idle_stack_release: Some(DEFAULT_IDLE_STACK_RELEASE),
            idle_stack_copy_out: false,
            deadlock_check: None,
            latency_snapshots: Some(DEFAULT_LATENCY_SNAPSHOTS),
        }
    }
}

impl RuntimeBuilder {
    /// Default usable stack size of green threads, in bytes.
    pub fn stack_size(mut self, bytes: usize) -> Self {
        self.stack_size = bytes;
        self
    }

    /// Bytes of guard gap below each green thread's stack (1 MiB by
    /// default, the kernel's `stack_guard_gap` for the main thread's stack;
    /// rounded up to whole pages; at least one page, at most 1 GiB).
    ///
    /// Any access to the gap faults, and the fault is reported as that
    /// thread's stack overflow. Rust code touches every page of a large
    /// frame in order (stack probes), so one page would catch its
    /// overflows; the gap is for frames that skip pages: C or assembly
    /// built without `-fstack-clash-protection` (Debian's gcc default) can
    /// allocate a frame of tens of KiB and write to its far end first,
    /// past a one-page guard into the next thread's live stack, silently.
    /// A frame larger than the gap can still do that (see README,
    /// "Memory").
    ///
    /// The gap costs address space, never memory or mappings: it is a
    /// guard region (Linux 6.13+) or part of the one `mprotect`ed range
    /// below each stack, and chunks of stacks are reserved without
    /// committing memory. Stacks further apart do need more page-table
    /// pages (about 2 KiB per thread with the default gap; see
    /// BENCHMARKS.md), which a program with a million tiny threads may
    /// trade back with a smaller gap.
    pub fn stack_guard_size(mut self, bytes: usize) -> Self {
        self.stack_guard = bytes;
        self
    }

    /// Default selfishness budget of green threads (1..=32768).
    pub fn selfishness(mut self, n: u32) -> Self {
        self.selfishness = n;
        self
    }

    /// Latency-warning threshold (200 ms by default); `None` disables the
    /// warnings (and the watchdog thread with them).
    ///
    /// A green thread that runs longer than this without yielding is
    /// reported **through the `log` crate** at WARN (target
    /// `coro::latency`), naming it, while it still runs, and counted in
    /// [`Stats::latency_warnings`](crate::Stats). The usual cause is a
    /// blocking std call (`std::thread::sleep`, `std::fs`, a std lock) that
    /// stops the whole OS thread; the warning says so and names
    /// [`blocking`](crate::blocking), the fix. Install a logger
    /// (`env_logger`, ...) to see every warning there; without one, each
    /// also goes to stderr, rate-limited (a burst of 10, then one a second,
    /// with a count of those not shown), so a hog is never silent.
    pub fn latency_warning(mut self, threshold: Option<Duration>) -> Self {
        self.latency_warning = threshold;
        self
    }

    /// Most OS threads of the [`blocking`](crate::blocking) pool (at least
    /// 1; 512 by default, as tokio's). The pool starts with no thread;
    /// each job that finds no idle thread starts one, up to this bound (jobs
    /// beyond it queue), and a thread exits after
    /// [`blocking_keep_alive`](Self::blocking_keep_alive) idle. So a burst
    /// of slow calls (a 10 ms `fsync` on each of 50 connections) gets 50
    /// threads at once, a quiet server gives them back, and a high bound
    /// costs nothing while the pool is quiet. `coro::run` uses the defaults.
    pub fn blocking_threads(mut self, n: usize) -> Self {
        self.blocking_threads = n;
        self
    }

    /// How long an idle thread of the [`blocking`](crate::blocking) pool
    /// waits for work before it exits (10 s by default; above zero).
    pub fn blocking_keep_alive(mut self, idle: Duration) -> Self {
        self.blocking_keep_alive = idle;
        self
    }

    /// Most finished threads' stacks that keep their memory for reuse
    /// (unbounded by default).
    ///
    /// A finished thread's stack keeps the pages it touched for 2 s, so
    /// that threads spawned soon after reuse them without page faults; then
    /// the pages go back to the kernel. By default the pool is sized by
    /// demand: whatever finished in the last 2 s. With a bound, past `n`
    /// freed stacks the oldest gives its pages back at once. See README,
    /// "Memory".
    pub fn stack_pool(mut self, n: usize) -> Self {
        self.stack_pool = n;
        self
    }

    /// How long a green thread stays parked before the runtime gives back
    /// the stack memory it provably does not use (2 s by default; `None`
    /// never does).
    ///
    /// By default that is the pages below the parked thread's stack
    /// pointer: what it touched when it ran deeper (a large buffer, a deep
    /// call) and no longer uses. Nothing can point there, whatever the
    /// program does, so this is always sound; an idle thread keeps the one
    /// or two pages its live frames occupy. With the `unsafe` opt-in
    /// [`idle_stack_copy_out`](Self::idle_stack_copy_out), its whole stack
    /// is copied out to the heap instead, after the same time. Threads
    /// that wake more often than this never pay. A thread that parked
    /// while running on another stack than its own (a `corosensei`
    /// coroutine it resumed, `stacker::maybe_grow`) keeps its stack whole:
    /// where its own live frames end is unknown then
    /// ([`Stats::idle_stack_foreign`](crate::Stats::idle_stack_foreign)
    /// counts those parks). See README, "Memory".
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let mut rt = coro::Runtime::builder()
    ///     .idle_stack_release(Some(Duration::from_millis(50)))
    ///     .build()
    ///     .unwrap();
    /// rt.block_on(|| {
    ///     let sleeper = coro::spawn(|| {
    ///         let deep = [1u8; 64 * 1024]; // touches 16 pages...
    ///         std::hint::black_box(&deep);
    ///         coro::sleep(Duration::from_millis(300)) // ...then parks shallow
    ///     });
    ///     coro::sleep(Duration::from_millis(200)).unwrap();
    ///     assert!(coro::stats().idle_stack_trims >= 1); // the sleeper's, given back
    ///     sleeper.join().unwrap().unwrap();
    /// });
    /// ```
    pub fn idle_stack_release(mut self, after: Option<Duration>) -> Self {
        self.idle_stack_release = after;
        self
    }

    /// Copies the whole stack of a thread parked for
    /// [`idle_stack_release`](Self::idle_stack_release) out to the heap and
    /// gives all its pages back (off by default).
    ///
    /// An idle thread then costs the bytes its frames use (zero words left
    /// out, usually a few hundred bytes to a few KiB) instead of the pages
    /// they occupy, and pays one copy and a page fault or two when it next
    /// runs; it resumes at the same addresses. The stack of a thread that
    /// owns a running [`coro::scope`](crate::scope) stays in place (its
    /// threads borrow from it) and is only trimmed.
    ///
    /// # Safety
    ///
    /// While a green thread of this runtime is parked, nothing outside the
    /// runtime may read or write its stack: the caller promises that no
    /// part of a green thread's stack (a local, or anything pointing into
    /// one) is lent to another OS thread, or to the kernel, across a park.
    /// In particular, no green thread of this runtime parks (blocks on a
    /// coro call, or yields) while
    ///
    /// * OS threads it started with `std::thread::scope` or
    ///   `std::thread::Builder::spawn_scoped`, or through crossbeam's or
    ///   rayon's scopes (`rayon::scope`, `rayon::join`, `par_iter` on
    ///   borrowed data), may still use its locals;
    /// * a pointer into its stack is held by another OS thread (sent as a
    ///   raw pointer, or by unsafe code) or by the kernel (an asynchronous
    ///   I/O buffer on the stack).
    ///
    /// Otherwise those threads would read zeros from a copied-out stack and
    /// their writes would be lost when it is copied back: undefined
    /// behaviour. Borrows among green threads of this runtime through
    /// [`coro::scope`](crate::scope), and data moved into `spawn`ed,
    /// `blocking` or `Handle::spawn`ed closures (which are `'static`), are
    /// fine.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// // SAFETY: no green thread of this runtime lends its stack outside
    /// // the runtime (no std::thread::scope, no raw pointers to its locals).
    /// let mut rt = unsafe { coro::Runtime::builder().idle_stack_copy_out(true) }
    ///     .idle_stack_release(Some(Duration::from_millis(50)))
    ///     .build()
    ///     .unwrap();
    /// rt.block_on(|| {
    ///     let sleeper = coro::spawn(|| coro::sleep(Duration::from_millis(300)));
    ///     coro::sleep(Duration::from_millis(200)).unwrap();
    ///     assert_eq!(coro::stats().idle_stacks, 1); // the sleeper's
    ///     sleeper.join().unwrap().unwrap();
    /// });
    /// ```
    pub unsafe fn idle_stack_copy_out(mut self, on: bool) -> Self {
        self.idle_stack_copy_out = on;
        self
    }

    /// Looks for deadlocks (cycles of threads waiting on locks and joins
    /// held by each other, see [`deadlocks`](crate::deadlocks)) every
    /// `every`, and logs each new one at ERROR (target `coro::deadlock`),
    /// naming each thread, the call it is parked in and where it was made.
    /// `None` (the default) turns the check off; `deadlocks()` and the back
    /// door's `deadlocks` work either way.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// let rt = coro::Runtime::builder()
    ///     .deadlock_check(Some(Duration::from_secs(10)))
    ///     .build()
    ///     .unwrap();
    /// # drop(rt);
    /// ```
    pub fn deadlock_check(mut self, every: Option<Duration>) -> Self {
        self.deadlock_check = every;
        self
    }

    /// When a latency warning's slice ends, the flight recorder's events
    /// are saved (see [`flight`](crate::flight)), at most once per `every`
    /// (default [`DEFAULT_LATENCY_SNAPSHOTS`]); `None` turns that off.
    pub fn latency_snapshots(mut self, every: Option<Duration>) -> Self {
        self.latency_snapshots = every;
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
        if self.stack_guard == 0 || self.stack_guard > 1 << 30 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "stack_guard_size must be from one page to 1 GiB, not {} bytes",
                    self.stack_guard
                ),
            ));
        }
        let selfishness = check_selfishness(self.selfishness)?;
        if self.blocking_threads == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "blocking_threads must be at least 1",
            ));
        }
        if self.blocking_keep_alive.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "blocking_keep_alive must be above zero",
            ));
        }
        if self.deadlock_check == Some(Duration::ZERO) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "deadlock_check interval must be above zero (use None to disable)",
            ));
        }
        if self.latency_warning == Some(Duration::ZERO) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "latency_warning threshold must be above zero (use None to disable)",
            ));
        }
        clock::init();
        crate::panic_hook::install();
        #[cfg(unix)]
        crate::stack::overflow::install();
        let sched = Scheduler::new(Config {
            stack_size,
            stack_guard: self.stack_guard,
            selfishness,
            latency_warning: self.latency_warning,
            blocking_threads: self.blocking_threads,
            blocking_keep_alive: self.blocking_keep_alive,
            stack_pool: self.stack_pool,
            idle_stack_release: self.idle_stack_release,
            idle_stack_copy_out: self.idle_stack_copy_out,
            deadlock_check: self.deadlock_check,
            latency_snapshots: self.latency_snapshots,
        })?;
        Ok(Runtime {
            sched: Box::new(sched),
            poisoned: std::cell::Cell::new(false),
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
/// fn send<T: Send>() {}
/// send::<coro::Runtime>();
/// ```
pub struct Runtime {
    sched: Box<Scheduler>,
    /// An earlier `block_on` unwound (see [`Runtime::is_poisoned`]).
    poisoned: std::cell::Cell<bool>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("config", &self.sched.config)
            .field("poisoned", &self.poisoned.get())
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

    /// A `Send` handle that spawns green threads into this runtime from
    /// other OS threads (see [`Handle`](crate::Handle)).
    pub fn handle(&self) -> crate::Handle {
        self.sched.remote.handle()
    }

    /// Runs `f` as the first green thread (named `main`) and drives the
    /// scheduler until it returns; then stops the other green threads (see
    /// the module docs) and returns `f`'s value.
    ///
    /// # Panics
    ///
    /// If `f` panics (after the other threads were stopped), if called from
    /// inside a runtime, if the main thread cannot get a stack, or if the
    /// runtime is poisoned.
    ///
    /// # Poisoning
    ///
    /// A `block_on` that unwinds (`f` panicked, or the loop did: a deadlock
    /// report) first finishes every green thread, as on a normal return,
    /// and then poisons the runtime: later calls panic at once with a
    /// message that says so ([`is_poisoned`](Self::is_poisoned) tells
    /// beforehand). Build a new runtime to go on. Shutdown itself never
    /// unwinds: user code it calls (a logger, a destructor) runs under a
    /// catch, and a panic it could not contain aborts the process with a
    /// message naming the panic, so `block_on` never returns or unwinds
    /// while a green thread that may borrow from its caller is alive.
    ///
    /// Called from a destructor while the OS thread unwinds from a panic,
    /// the runtime runs, but no green thread may block or switch: the panic
    /// state is the OS thread's, and it looks to the runtime like an unwind
    /// in progress (blocking calls fail with `SuspendForbidden`).
    ///
    /// # Borrowing
    ///
    /// `f` may borrow from the caller, as with `std::thread::scope`: the
    /// main green thread is finished (or, if it swallows its shutdown
    /// unwind, abandoned for good) before `block_on` returns or unwinds, on
    /// every path (see the `borrow` module of the source). Threads it
    /// spawns still need `'static` closures.
    ///
    /// ```
    /// let names = vec!["green".to_string(), "threads".to_string()];
    /// let mut rt = coro::Runtime::new().unwrap();
    /// let longest = rt.block_on(|| names.iter().max_by_key(|n| n.len()));
    /// assert_eq!(longest, Some(&names[1])); // a borrow of the caller's data
    /// ```
    #[track_caller]
    pub fn block_on<F, T>(&mut self, f: F) -> T
    where
        F: FnOnce() -> T,
    {
        // Declared first: outlives the shutdown guard, on whose path the main
        // closure may still return and write it (see `borrow`).
        let mut out: Option<T> = None;
        if !context::sched_ptr().is_null() {
            panic!("coro: Runtime::block_on / coro::run called from inside a runtime (nested runtimes on one OS thread are not supported)");
        }
        if self.poisoned.get() {
            panic!(
                "coro: Runtime::block_on on a poisoned runtime: an earlier block_on on it \
                 unwound (a panic of its main closure or of the loop); build a new Runtime"
            );
        }
        /// Poisons the runtime unless `block_on` returns normally (it is
        /// forgotten then). Declared before the shutdown guard, so it is
        /// dropped after shutdown finished.
        struct Poison<'a>(&'a std::cell::Cell<bool>);
        impl Drop for Poison<'_> {
            fn drop(&mut self) {
                self.0.set(true);
            }
        }
        let poison = Poison(&self.poisoned);
        #[cfg(unix)]
        let _alt = crate::stack::overflow::AltStack::ensure()
            .unwrap_or_else(|e| panic!("coro: cannot set up a signal stack: {e}"));
        let s: &Scheduler = &self.sched;
        let prev = context::enter(s);
        // Drop order is the reverse of declaration: on every path (also when
        // the loop panics) the remaining threads are shut down first, with
        // this runtime current, and only then is the previous one restored.
        struct Exit(*const Scheduler);
        impl Drop for Exit {
            fn drop(&mut self) {
                context::enter(self.0);
            }
        }
        let _exit = Exit(prev);
        /// Finishes every green thread on every path out of `block_on`.
        /// Nothing unwinds out of it: the green threads may borrow from the
        /// frame `block_on` is about to leave (see `borrow`), so a panic
        /// that stopped shutdown half-way ends the process instead.
        struct Shutdown<'a>(&'a Scheduler);
        impl Drop for Shutdown<'_> {
            fn drop(&mut self) {
                if let Err(p) = panic::catch_unwind(AssertUnwindSafe(|| shutdown(self.0))) {
                    crate::panic_hook::abort_after("the runtime's shutdown", p);
                }
            }
        }
        let stop = Shutdown(s);
        s.shutting_down.set(false);
        // The coarse clock (see `Scheduler::coarse_now`) dates spawns, parks
        // and freed stacks until the loop's first poll: not from the last
        // `block_on` or the build, however long ago those were.
        let now = clock::now().ticks();
        s.coarse_now.set(now);
        // The flight recorder's first clock reading of this run: where its
        // first resume begins (see `flight`), not at the last reading of the
        // previous run.
        s.flight.tick(crate::flight::key(s), now);
        // SAFETY: `erase`'s contract holds: `stop` (declared after `out`,
        // before the main thread exists) finishes or abandons the main
        // thread on every path out of this frame, and `out` is read only
        // after the main thread is dead (see the `borrow` module).
        let main_fn = unsafe { crate::borrow::erase(f, std::ptr::addr_of_mut!(out)) };
        let handle = Builder::new()
            .name("main".into())
            .spawn_in(s, main_fn)
            .unwrap_or_else(|e| panic!("coro: cannot start the main green thread: {e}"));
        let main = handle.thread().0.clone();
        // Spawns queued while the runtime was not running, or while its
        // last shutdown refused them (their wake of the loop is spent).
        s.remote.drain(s);
        // A panic of the loop itself (the deadlock report) is held while the
        // other threads are stopped, so they are stopped as in an ordinary
        // shutdown (they may still yield: the OS thread is not panicking),
        // then it goes on.
        let looped = panic::catch_unwind(AssertUnwindSafe(|| s.run_until(&main)));
        drop(stop);
        if let Err(p) = looped {
            drop(main);
            drop(handle);
            panic::resume_unwind(p);
        }
        drop(main);
        match handle.join() {
            Ok(()) => {
                std::mem::forget(poison);
                out.take()
                    .expect("the main green thread returned without a value")
            }
            Err(JoinError::Panicked(p)) => panic::resume_unwind(p),
            Err(e) => panic!("coro: main green thread did not finish: {e}"),
        }
    }

    /// Whether an earlier [`block_on`](Self::block_on) on this runtime
    /// unwound, so that it refuses to run again (see "Poisoning" there).
    pub fn is_poisoned(&self) -> bool {
        self.poisoned.get()
    }
}

/// Stops every green thread still alive (see the module docs). Runs with
/// this runtime current, on the scheduler's stack (the OS thread's).
///
/// # Panics
///
/// User code that runs here (a `log` backend, the destructor of a hook
/// another runtime left behind) runs under [`caught`]; whatever else
/// would still panic is the runtime's bug, and `block_on`'s `Shutdown`
/// guard aborts the process on it rather than let `block_on` unwind with
/// threads alive that may borrow from its caller's frame.
fn shutdown(s: &Scheduler) {
    // The loop stops: the ticker need not run for this runtime meanwhile.
    s.flight.rest();
    crate::shutdown_hooks::run(s);
    if s.tasks.borrow().is_empty() {
        end_of_run(s);
        if s.tasks.borrow().is_empty() {
            return;
        }
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
    // Unwind what is left, and whatever their destructors spawn, until the
    // table is empty; a destructor that spawns again at every unwind is cut
    // off after UNWIND_PASSES and what it left is leaked. Then clear what
    // the run left behind: that runs user code too (wakers, destructors),
    // which may spawn again, so round again until it leaves no thread (at
    // most UNWIND_PASSES times: code that spawns at every round leaves its
    // last traces for the next run).
    let mut cleared = 0;
    for pass in 0.. {
        let mut rest: Vec<Rc<Task>> = s.tasks.borrow().iter().map(|(_, t)| t.clone()).collect();
        if rest.is_empty() {
            if cleared == UNWIND_PASSES {
                break;
            }
            cleared += 1;
            end_of_run(s);
            if s.tasks.borrow().is_empty() {
                break;
            }
            continue;
        }
        // Deepest `coro::scope` threads first, so that a tree of scopes is
        // unwound in one pass.
        rest.sort_by_key(|t| std::cmp::Reverse(crate::cancel::scope_depth(t)));
        for t in rest {
            if pass < UNWIND_PASSES && cfg!(panic = "unwind") {
                // The threads of a `coro::scope` may borrow from their
                // owner's frame: they are unwound before it (see `scope`).
                // Leaking, below, is safe in any order.
                if crate::cancel::owns_live_threads(&t) {
                    continue;
                }
                unwind(s, &t);
            } else {
                leak(s, &t, why_leaked(pass));
            }
        }
        s.ready.borrow_mut().clear();
    }
    s.shutting_down.set(false);
}

/// Clears what a run leaves behind once its threads are all gone, so
/// that the runtime's next `block_on` starts as a fresh runtime would
/// (ids, the counters of its whole life and the flight recorder's
/// history go on). Every wait of the run's threads is over, but its
/// traces are in tables that outlive the run: timer entries; the wakers
/// of `future::Sleep`s, which no entry would fire any more (a `Sleep`
/// polled in the next run would look armed and never fire, and a
/// `block_on` waker among them would hold the inbox, so that no later run
/// could report a deadlock); the waiters and task wakers of sockets kept
/// for the next run; blocking-pool waiters; leak and deadlock bookkeeping;
/// shutdown hooks registered too late to run. Wakers are woken (their
/// owners poll again) and dropped with no borrow held, under `caught`:
/// they are user code, which may even spawn a thread (`shutdown` then
/// stops that one too, and calls this again).
fn end_of_run(s: &Scheduler) {
    s.ready.borrow_mut().clear();
    s.timers.borrow_mut().clear();
    let wakers = s.timer_wakers.borrow_mut().take_all();
    for w in wakers {
        caught(move || w.wake());
    }
    s.reactor.end_of_run();
    s.remote.end_of_run();
    s.blocking.end_of_run();
    s.waits.end_of_run();
    // A thread leaked while copied out stays so, but is no parked thread
    // of the runtime any more.
    s.stacks.borrow_mut().idle.out = 0;
    crate::shutdown_hooks::discard(s);
}

/// Times a thread that catches its shutdown unwind is unwound again before
/// it is leaked.
const UNWIND_ROUNDS: usize = 8;

/// Passes over the thread table (each unwinding the threads that the last
/// one's destructors spawned) before what is left is leaked.
const UNWIND_PASSES: usize = 64;

fn why_leaked(pass: usize) -> &'static str {
    if cfg!(panic = "abort") {
        "the program is built with panic = \"abort\", so it cannot be unwound"
    } else if pass >= UNWIND_PASSES {
        "threads kept spawning threads from destructors during shutdown's unwind"
    } else {
        "it caught its shutdown unwind and blocked again 8 times"
    }
}

/// Leaks a thread shutdown cannot unwind: its coroutine is forgotten (its
/// stack and what lives on it stay allocated, and it never runs again).
/// The thread is out of the table before the log line, so a logger that
/// panics cannot leave it behind to be resumed by a later `block_on`.
fn leak(s: &Scheduler, t: &Rc<Task>, why: &str) {
    if let Some(co) = t.coroutine.borrow_mut().take() {
        std::mem::forget(co);
    }
    s.finish(t);
    caught(|| {
        log::error!(
            target: "coro",
            "green thread #{} '{}' is leaked at shutdown: {why} (its stack and what lives on it \
             stay allocated; it never runs again)",
            t.id,
            t.display_name(),
        )
    });
}

/// Unwinds one thread on its own stack by resuming it with its unwind
/// requested (see `crate::suspend::forced_unwind_point`); a thread that never ran
/// starts and `spawn::entry` drops its closure under its `catch_unwind`.
/// Leaks a thread that keeps catching the unwind and blocking again.
fn unwind(s: &Scheduler, t: &Rc<Task>) {
    t.unwinding.set(true);
    for _ in 0..UNWIND_ROUNDS {
        if t.state.get() == ThreadState::Dead || t.coroutine.borrow().is_none() {
            break;
        }
        s.resume(t.clone());
    }
    if t.state.get() != ThreadState::Dead {
        leak(s, t, why_leaked(0));
    }
}

/// Builds a runtime with the default settings on this OS thread, runs `f` as
/// its first green thread, and returns `f`'s value. Green threads still alive
/// when `f` returns are interrupted and unwound (their destructors run).
///
/// `f` may borrow from the caller (`coro::run(|| serve(&addr))`): see
/// [`Runtime::block_on`], "Borrowing".
///
/// # Panics
///
/// If `f` panics, if the runtime cannot be built, or when called inside a
/// runtime.
///
/// # Examples
///
/// ```
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
    F: FnOnce() -> T,
{
    Runtime::new()
        .unwrap_or_else(|e| panic!("coro::run: cannot build the runtime: {e}"))
        .block_on(f)
}
