//! [`PeriodicExecutor`]: a green thread that runs a target every interval,
//! can be woken early, and is closed without blocking (PyMongo's design).
//!
//! # Design
//!
//! The executor's thread runs the target, then waits on a [`Condvar`] under a
//! `with_timeout` until the next run is due: `interval` after the last run,
//! or `min_interval` after it once [`wake`](PeriodicExecutor::wake) was
//! called. `wake`, [`close`](PeriodicExecutor::close) and
//! [`update_interval`](PeriodicExecutor::update_interval) set a flag and
//! notify the condvar; notifying only makes the thread ready, it never
//! suspends the caller, so all three are safe in `Drop` and inside
//! [`no_suspend`](coro_runtime::no_suspend). (PyMongo's executors had to
//! poll their stop flag because a Python destructor cannot take the lock a
//! wake needs; here a wake is lock-free, so a closed executor stops at once.)
//!
//! Live executors are kept in a per-thread registry of weak references. The
//! first [`open`](PeriodicExecutor::open) in a runtime registers an
//! [`on_shutdown`](coro_runtime::on_shutdown) hook: when the runtime's main
//! closure returns, every registered executor is closed, then all are joined
//! within [`SHUTDOWN_JOIN`], before the runtime interrupts the threads still
//! alive.

use std::cell::{Cell, RefCell};
use std::fmt;
use std::io;
use std::panic::{self, AssertUnwindSafe};
use std::rc::{Rc, Weak};
use std::time::Duration;

use coro_runtime::clock::{self, Instant};
use coro_runtime::WaitError;

use crate::condvar::Condvar;
use crate::event::Event;

/// How long runtime shutdown waits, in all, for closed executors to finish.
pub const SHUTDOWN_JOIN: Duration = Duration::from_secs(1);

const LOG_TARGET: &str = "coro_sync::executor";

/// Why an executor's thread ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ExecutorExit {
    /// [`close`](PeriodicExecutor::close) was called (by the owner, or by the
    /// runtime's shutdown hook).
    Closed,
    /// The target returned `false` (for [`with_owner`](PeriodicExecutor::with_owner):
    /// also when the owner was gone).
    Stopped,
    /// The target panicked; the panic was logged with the executor's name.
    Panicked,
    /// Waiting for the next run failed: the thread was interrupted, or the
    /// runtime stopped it.
    Interrupted,
}

type Target = Box<dyn FnMut() -> bool + 'static>;

struct Inner {
    name: String,
    /// Time between runs when nobody wakes the executor; read at each wait, so
    /// changes apply to the wait in progress.
    interval: Cell<Duration>,
    /// Least time between the end of a run and the next one when woken.
    min_interval: Duration,
    /// Borrowed only by the executor's thread, while the target runs.
    target: RefCell<Target>,
    /// `close` was called and no `open` since.
    stopped: Cell<bool>,
    /// `wake` was called since the current (or last) run began.
    woken: Cell<bool>,
    /// Run again without waiting once.
    skip_sleep: Cell<bool>,
    /// A thread runs the loop and has not decided to leave it. At most one
    /// such thread exists.
    running: Cell<bool>,
    /// Set when the current thread has ended; a new one per thread.
    done: RefCell<Rc<Event>>,
    /// The thread waits here between runs.
    cv: Condvar,
    /// End of the last run.
    last_run: Cell<Option<Instant>>,
    runs: Cell<u64>,
    exit: Cell<Option<ExecutorExit>>,
}

/// A green thread that calls `target` every `interval` until it returns
/// `false` or the executor is closed (PyMongo's `PeriodicExecutor`).
///
/// Cloning gives another handle to the same executor. Dropping handles does
/// not stop it: call [`close`](PeriodicExecutor::close), or put a
/// [`close_on_drop`](PeriodicExecutor::close_on_drop) guard in the object the
/// executor works for.
///
/// # Timing
///
/// The first run is as soon as the thread is scheduled after
/// [`open`](PeriodicExecutor::open). After each run the thread sleeps until
/// `interval` has passed, or, if [`wake`](PeriodicExecutor::wake) is called,
/// until `min_interval` has passed since the end of that run (a wake during a
/// run counts for the next one). [`skip_sleep`](PeriodicExecutor::skip_sleep)
/// makes the next run follow at once. Runs never overlap.
///
/// # Closing and shutdown
///
/// [`close`](PeriodicExecutor::close) sets a flag and wakes the thread; it
/// never blocks, so it is safe from `Drop`. A run in progress finishes first;
/// [`join`](PeriodicExecutor::join) waits for the thread to end. An executor
/// can be opened again after it was closed. When the runtime shuts down,
/// every open executor is closed and joined (for at most [`SHUTDOWN_JOIN`] in
/// all) before the remaining threads are interrupted.
///
/// # Panics in the target
///
/// A panic in `target` is logged at ERROR with the executor's name and the
/// message, and ends only this executor ([`ExecutorExit::Panicked`]).
///
/// # Examples
///
/// ```
/// use std::cell::Cell;
/// use std::rc::Rc;
/// use std::time::Duration;
/// use coro::sync::{ExecutorExit, PeriodicExecutor};
///
/// coro::run(|| {
///     let runs = Rc::new(Cell::new(0));
///     let r = runs.clone();
///     let hour = Duration::from_secs(3600);
///     let ex = PeriodicExecutor::new(hour, Duration::ZERO, "counter", move || {
///         r.set(r.get() + 1);
///         r.get() < 3 // stop after the third run
///     });
///     ex.open().unwrap();
///     while runs.get() < 3 {
///         ex.wake(); // run again soon, not in an hour
///         coro::yield_now();
///     }
///     assert!(ex.join(Duration::from_secs(5)).unwrap());
///     assert_eq!(ex.exit(), Some(ExecutorExit::Stopped));
/// });
/// ```
#[derive(Clone)]
pub struct PeriodicExecutor {
    inner: Rc<Inner>,
}

/// Closes an executor when dropped; see
/// [`PeriodicExecutor::close_on_drop`].
#[must_use = "dropping the guard closes the executor at once"]
pub struct CloseOnDrop(PeriodicExecutor);

impl PeriodicExecutor {
    /// An executor named `name` (also its thread's name) that will call
    /// `target` every `interval`, and no sooner than `min_interval` after a
    /// run when woken. It does not run until [`open`](PeriodicExecutor::open).
    ///
    /// # Panics
    ///
    /// If `interval` is zero (the thread would never wait).
    pub fn new(
        interval: Duration,
        min_interval: Duration,
        name: &str,
        target: impl FnMut() -> bool + 'static,
    ) -> PeriodicExecutor {
        assert!(
            !interval.is_zero(),
            "PeriodicExecutor '{name}': the interval must be above zero"
        );
        let done = Event::new();
        done.set();
        PeriodicExecutor {
            inner: Rc::new(Inner {
                name: name.to_owned(),
                interval: Cell::new(interval),
                min_interval,
                target: RefCell::new(Box::new(target)),
                stopped: Cell::new(false),
                woken: Cell::new(false),
                skip_sleep: Cell::new(false),
                running: Cell::new(false),
                done: RefCell::new(Rc::new(done)),
                cv: Condvar::new(),
                last_run: Cell::new(None),
                runs: Cell::new(0),
                exit: Cell::new(None),
            }),
        }
    }

    /// An executor that holds its owner weakly (PyMongo's `weakref.proxy`
    /// pattern): each run upgrades the reference and calls `target` with the
    /// owner; once the owner is gone the executor stops
    /// ([`ExecutorExit::Stopped`]) at its next run, so it never keeps the
    /// owner alive. For a prompt stop, keep a
    /// [`close_on_drop`](PeriodicExecutor::close_on_drop) guard in the owner.
    ///
    /// # Panics
    ///
    /// If `interval` is zero.
    pub fn with_owner<O: 'static>(
        owner: &Rc<O>,
        interval: Duration,
        min_interval: Duration,
        name: &str,
        mut target: impl FnMut(&O) -> bool + 'static,
    ) -> PeriodicExecutor {
        let owner: Weak<O> = Rc::downgrade(owner);
        PeriodicExecutor::new(interval, min_interval, name, move || {
            match owner.upgrade() {
                Some(o) => target(&o),
                None => false,
            }
        })
    }

    /// Starts the executor's thread, or keeps the one still running (after a
    /// `close` it had not acted on yet). Idempotent.
    ///
    /// # Errors
    ///
    /// The error of spawning the thread (no memory for a stack).
    ///
    /// # Panics
    ///
    /// Outside a runtime.
    pub fn open(&self) -> io::Result<()> {
        let inner = &self.inner;
        inner.stopped.set(false);
        if inner.running.get() {
            return Ok(());
        }
        let done = Rc::new(Event::new());
        *inner.done.borrow_mut() = done.clone();
        inner.running.set(true);
        inner.exit.set(None);
        let me = inner.clone();
        let spawned = coro_runtime::Builder::new()
            .name(inner.name.clone())
            .spawn(move || run(me, done));
        if let Err(e) = spawned {
            inner.running.set(false);
            inner.done.borrow().set();
            return Err(e);
        }
        registry::add(inner);
        Ok(())
    }

    /// Asks the thread to stop: sets a flag and wakes it. A run in progress
    /// finishes first. Never blocks or suspends; safe in `Drop` and inside
    /// [`no_suspend`](coro_runtime::no_suspend).
    pub fn close(&self) {
        self.inner.stopped.set(true);
        self.inner.cv.notify_all();
    }

    /// Asks for a run soon: when `min_interval` has passed since the last
    /// run ended (at once if it has). A wake during a run asks for another
    /// run after it. Never blocks or suspends.
    pub fn wake(&self) {
        self.inner.woken.set(true);
        self.inner.cv.notify_all();
    }

    /// Changes the interval; the wait in progress uses the new one.
    ///
    /// # Panics
    ///
    /// If `interval` is zero.
    pub fn update_interval(&self, interval: Duration) {
        assert!(
            !interval.is_zero(),
            "PeriodicExecutor '{}': the interval must be above zero",
            self.inner.name
        );
        self.inner.interval.set(interval);
        self.inner.cv.notify_all();
    }

    /// Skips the wait after the current (or next) run once: the run after it
    /// follows at once.
    pub fn skip_sleep(&self) {
        self.inner.skip_sleep.set(true);
    }

    /// Waits for the executor's thread to end, for at most `timeout`.
    /// Returns whether it has ended (`true` at once if it never started).
    ///
    /// # Errors
    ///
    /// [`WaitError`] if the caller is interrupted or an enclosing
    /// `with_timeout` expires.
    ///
    /// # Panics
    ///
    /// If it has to wait outside a green thread.
    pub fn join(&self, timeout: Duration) -> Result<bool, WaitError> {
        let done = self.inner.done.borrow().clone();
        if done.is_set() {
            return Ok(true);
        }
        match coro_runtime::with_timeout(timeout, || done.wait()) {
            Ok(r) => r.map(|()| true),
            Err(_) => Ok(false),
        }
    }

    /// A guard that [`close`](PeriodicExecutor::close)s this executor when
    /// dropped: put it in the object the executor works for, and the
    /// executor stops as soon as that object is dropped (PyMongo's weakref
    /// callback).
    pub fn close_on_drop(&self) -> CloseOnDrop {
        CloseOnDrop(self.clone())
    }

    /// The executor's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The interval between runs.
    pub fn interval(&self) -> Duration {
        self.inner.interval.get()
    }

    /// Whether its thread is running its loop (opened and not yet ended).
    pub fn is_running(&self) -> bool {
        self.inner.running.get()
    }

    /// Whether [`close`](PeriodicExecutor::close) was called since the last
    /// [`open`](PeriodicExecutor::open).
    pub fn is_closed(&self) -> bool {
        self.inner.stopped.get()
    }

    /// Number of completed runs of the target.
    pub fn runs(&self) -> u64 {
        self.inner.runs.get()
    }

    /// Why the last thread ended; `None` while one runs or before the first.
    pub fn exit(&self) -> Option<ExecutorExit> {
        self.inner.exit.get()
    }
}

impl fmt::Debug for PeriodicExecutor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PeriodicExecutor")
            .field("name", &self.inner.name)
            .field("interval", &self.inner.interval.get())
            .field("min_interval", &self.inner.min_interval)
            .field("running", &self.inner.running.get())
            .field("closed", &self.inner.stopped.get())
            .field("runs", &self.inner.runs.get())
            .finish()
    }
}

impl Drop for CloseOnDrop {
    /// Closes the executor; never blocks.
    fn drop(&mut self) {
        self.0.close();
    }
}

impl fmt::Debug for CloseOnDrop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("CloseOnDrop").field(&self.0.name()).finish()
    }
}

/// The executor's thread.
fn run(inner: Rc<Inner>, done: Rc<Event>) {
    /// Marks the thread ended on every path, also when the runtime unwinds it.
    struct Ended<'a>(&'a Inner, Rc<Event>);
    impl Drop for Ended<'_> {
        fn drop(&mut self) {
            self.0.running.set(false);
            if self.0.exit.get().is_none() {
                self.0.exit.set(Some(ExecutorExit::Interrupted));
            }
            self.1.set();
        }
    }
    let _ended = Ended(&inner, done);
    let exit = loop {
        if inner.stopped.get() {
            break ExecutorExit::Closed;
        }
        inner.woken.set(false);
        let r = panic::catch_unwind(AssertUnwindSafe(|| (inner.target.borrow_mut())()));
        inner.runs.set(inner.runs.get() + 1);
        let end = clock::now();
        inner.last_run.set(Some(end));
        match r {
            Ok(true) => {}
            Ok(false) => break ExecutorExit::Stopped,
            Err(p) => {
                let msg = panic_message(&*p);
                log::error!(
                    target: LOG_TARGET,
                    "periodic executor '{}' panicked: {msg}; this executor stops",
                    inner.name
                );
                break ExecutorExit::Panicked;
            }
        }
        if inner.skip_sleep.replace(false) {
            coro_runtime::yield_now();
            continue;
        }
        if let Err(exit) = wait_for_next_run(&inner, end) {
            break exit;
        }
    };
    inner.running.set(false);
    inner.exit.set(Some(exit));
}

/// The message of a panic payload, for logs.
pub(crate) fn panic_message(p: &(dyn std::any::Any + Send)) -> &str {
    p.downcast_ref::<&str>()
        .copied()
        .or_else(|| p.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("<non-string payload>")
}

/// Sleeps until the next run is due (see "Timing" on [`PeriodicExecutor`]).
fn wait_for_next_run(inner: &Inner, last: Instant) -> Result<(), ExecutorExit> {
    loop {
        if inner.stopped.get() {
            return Err(ExecutorExit::Closed);
        }
        let step = if inner.woken.get() {
            inner.min_interval
        } else {
            inner.interval.get()
        };
        let now = clock::now();
        let due = last + step;
        if now >= due {
            // Due already (a wake after min_interval): let the others run
            // first, so a target that wakes itself cannot hog the CPU.
            coro_runtime::yield_now();
            return Ok(());
        }
        match coro_runtime::with_timeout(due - now, || inner.cv.notified()) {
            Ok(Ok(())) | Err(_) => {} // woken, closed, retimed, or due: look again
            Ok(Err(_)) => return Err(ExecutorExit::Interrupted),
        }
    }
}

/// The executors opened on this OS thread's runtime, closed and joined at
/// its shutdown.
mod registry {
    use super::*;

    #[derive(Default)]
    struct Registry {
        executors: Vec<Weak<Inner>>,
        /// Held also by the pending shutdown hook: the hook is registered
        /// while the count is above one.
        hook: Rc<()>,
    }

    thread_local! {
        static REGISTRY: RefCell<Registry> = RefCell::new(Registry::default());
    }

    /// Records `inner`, and registers the shutdown hook if none is pending.
    pub(super) fn add(inner: &Rc<Inner>) {
        let token = REGISTRY.with(|r| {
            let mut r = r.borrow_mut();
            r.executors.retain(|w| w.strong_count() > 0);
            if !r
                .executors
                .iter()
                .any(|w| std::ptr::eq(w.as_ptr(), Rc::as_ptr(inner)))
            {
                r.executors.push(Rc::downgrade(inner));
            }
            (Rc::strong_count(&r.hook) == 1).then(|| r.hook.clone())
        });
        if let Some(token) = token {
            coro_runtime::on_shutdown(move || {
                drop(token);
                shutdown_all();
            });
        }
    }

    /// Closes every live executor, then joins them all within
    /// [`SHUTDOWN_JOIN`].
    fn shutdown_all() {
        let live: Vec<PeriodicExecutor> = REGISTRY.with(|r| {
            std::mem::take(&mut r.borrow_mut().executors)
                .into_iter()
                .filter_map(|w| w.upgrade())
                .map(|inner| PeriodicExecutor { inner })
                .collect()
        });
        for ex in &live {
            ex.close();
        }
        let deadline = clock::now() + SHUTDOWN_JOIN;
        for ex in &live {
            let left = deadline - clock::now();
            if !matches!(ex.join(left), Ok(true)) {
                log::warn!(
                    target: LOG_TARGET,
                    "periodic executor '{}' did not finish within {SHUTDOWN_JOIN:?} of shutdown; the runtime interrupts it",
                    ex.name()
                );
            }
        }
    }
}
