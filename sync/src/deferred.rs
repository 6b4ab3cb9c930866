//! [`Deferred`]: work that code which must not block (a destructor, a
//! `no_suspend` region) hands to a periodic executor instead of doing it.
//!
//! # Design
//!
//! A queue in a `RefCell` and a [`PeriodicExecutor`] (PyMongo's kill-cursors
//! thread). [`push`](Deferred::push) appends to the queue and wakes the
//! executor; neither step can suspend, so it is safe anywhere, including a
//! `Drop` that runs while the thread unwinds. The executor's thread takes
//! the items one at a time and calls the handler, which may block: it waits
//! for locks like any other thread instead of inside whatever code the
//! destructor interrupted (see the PyPy post in the reference documents).
//! The handler sits in a coro [`Mutex`], so [`flush`](Deferred::flush) on
//! another thread and the executor never run it at once.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::fmt;
use std::io;
use std::panic::{self, AssertUnwindSafe};
use std::rc::Rc;
use std::time::Duration;

use coro_runtime::WaitError;

use crate::executor::{panic_message, PeriodicExecutor};
use crate::mutex::Mutex;

/// Default time between two drains when nothing is pushed (PyMongo's
/// kill-cursors thread checks once a second).
pub const DEFAULT_DRAIN_INTERVAL: Duration = Duration::from_secs(1);

struct Shared<T> {
    name: String,
    items: RefCell<VecDeque<T>>,
    handler: Mutex<Box<dyn FnMut(T) + 'static>>,
    /// The `Deferred` was dropped: drain what is left, then stop.
    orphaned: Cell<bool>,
    handled: Cell<u64>,
}

/// A queue of work that must not be done where it arises, handled later by
/// a [`PeriodicExecutor`] of its own.
///
/// [`push`](Deferred::push) never blocks or suspends, from any context: a
/// destructor, a destructor running while the thread unwinds from a panic, a
/// [`no_suspend`](coro_runtime::no_suspend) region. It wakes the executor,
/// whose thread calls the handler on each item in push order; the handler may
/// block (take locks, do I/O).
///
/// # Dropping and shutdown
///
/// Dropping the `Deferred` lets its thread handle what is queued, then stop.
/// When the runtime shuts down, the items still queued are handled by a
/// shutdown hook (on the hooks' thread, while the other threads still run).
/// A panic in the handler is logged with the queue's name; the next items are
/// still handled.
///
/// # Examples
///
/// ```
/// use std::rc::Rc;
/// use coro::sync::{Deferred, Mutex};
///
/// coro::run(|| {
///     let server_log = Rc::new(Mutex::new(Vec::new()));
///     let l = server_log.clone();
///     // Closing a cursor takes a lock: never from a destructor.
///     let kill_cursors = Rc::new(Deferred::new("kill-cursors", move |id: u64| {
///         l.lock().unwrap().push(id);
///     }).unwrap());
///
///     struct Cursor(u64, Rc<Deferred<u64>>);
///     impl Drop for Cursor {
///         fn drop(&mut self) {
///             self.1.push(self.0); // never blocks
///         }
///     }
///
///     let held = server_log.lock().unwrap();
///     drop(Cursor(7, kill_cursors.clone())); // while the lock is held: fine
///     drop(held);
///     kill_cursors.flush().unwrap();
///     assert_eq!(*server_log.lock().unwrap(), [7]);
/// });
/// ```
pub struct Deferred<T: 'static> {
    shared: Rc<Shared<T>>,
    executor: PeriodicExecutor,
}

impl<T: 'static> Deferred<T> {
    /// A queue named `name` whose items are passed to `handler` on a thread
    /// of its own, soon after each push and every
    /// [`DEFAULT_DRAIN_INTERVAL`] otherwise.
    ///
    /// # Errors
    ///
    /// The error of spawning the executor's thread.
    ///
    /// # Panics
    ///
    /// Outside a runtime.
    pub fn new(name: &str, handler: impl FnMut(T) + 'static) -> io::Result<Deferred<T>> {
        Deferred::with_interval(name, DEFAULT_DRAIN_INTERVAL, Duration::ZERO, handler)
    }

    /// As [`new`](Deferred::new), with the executor's `interval` and
    /// `min_interval` (the least time between two drains when pushes come
    /// fast, to batch them).
    ///
    /// # Errors
    ///
    /// The error of spawning the executor's thread.
    ///
    /// # Panics
    ///
    /// Outside a runtime, or if `interval` is zero.
    pub fn with_interval(
        name: &str,
        interval: Duration,
        min_interval: Duration,
        handler: impl FnMut(T) + 'static,
    ) -> io::Result<Deferred<T>> {
        let shared = Rc::new(Shared {
            name: name.to_owned(),
            items: RefCell::new(VecDeque::new()),
            handler: Mutex::new(Box::new(handler)),
            orphaned: Cell::new(false),
            handled: Cell::new(0),
        });
        let s = shared.clone();
        let executor = PeriodicExecutor::new(interval, min_interval, name, move || {
            let _ = s.drain();
            !(s.orphaned.get() && s.items.borrow().is_empty())
        });
        executor.open()?;
        let weak = Rc::downgrade(&shared);
        coro_runtime::on_shutdown(move || {
            if let Some(s) = weak.upgrade() {
                let _ = s.drain();
            }
        });
        Ok(Deferred { shared, executor })
    }

    /// Queues `item` and wakes the executor. Never blocks or suspends, and
    /// never fails.
    pub fn push(&self, item: T) {
        self.shared.items.borrow_mut().push_back(item);
        self.executor.wake();
    }

    /// Handles every queued item now, on the calling thread (waiting for a
    /// drain in progress on the executor's thread first).
    ///
    /// # Errors
    ///
    /// [`WaitError`] if waiting for the handler was cut short.
    pub fn flush(&self) -> Result<(), WaitError> {
        self.shared.drain()
    }

    /// Items queued and not yet taken by the handler.
    pub fn len(&self) -> usize {
        self.shared.items.borrow().len()
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.shared.items.borrow().is_empty()
    }

    /// Items handled so far.
    pub fn handled(&self) -> u64 {
        self.shared.handled.get()
    }

    /// The executor that drains the queue.
    pub fn executor(&self) -> &PeriodicExecutor {
        &self.executor
    }
}

impl<T> Shared<T> {
    /// Passes queued items to the handler until none is left.
    fn drain(&self) -> Result<(), WaitError> {
        if self.items.borrow().is_empty() {
            return Ok(());
        }
        let mut handler = self.handler.lock().map_err(|e| match e {
            crate::LockError::Wait(w) => w,
            // The handler pushed and flushed from inside itself.
            crate::LockError::WouldDeadlock => WaitError::SuspendForbidden,
        })?;
        loop {
            let Some(item) = self.items.borrow_mut().pop_front() else {
                return Ok(());
            };
            if let Err(p) = panic::catch_unwind(AssertUnwindSafe(|| (handler)(item))) {
                let msg = panic_message(&*p);
                log::error!(
                    target: "coro_sync::deferred",
                    "deferred queue '{}': the handler panicked: {msg}",
                    self.name
                );
            }
            self.handled.set(self.handled.get() + 1);
        }
    }
}

impl<T> Drop for Deferred<T> {
    /// Lets the executor handle what is left, then stop; never blocks.
    fn drop(&mut self) {
        self.shared.orphaned.set(true);
        self.executor.wake();
    }
}

impl<T> fmt::Debug for Deferred<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Deferred")
            .field("name", &self.shared.name)
            .field("queued", &self.shared.items.borrow().len())
            .field("handled", &self.shared.handled.get())
            .finish()
    }
}
