//! [`Event`]: a flag green threads can wait to see set.

use std::cell::{Cell, RefCell};
use std::fmt;

use coro_runtime::WaitError;

use crate::waitlist::{self, WaitList};

/// A manual-reset event: [`set`](Event::set) wakes every waiter and lets
/// later waits through until [`clear`](Event::clear).
///
/// # Wake-up semantics
///
/// `set` wakes the waiters in FIFO order, and each one's `wait` returns `Ok`
/// even if the event was cleared again before it ran: it saw the event. A
/// waiter that is interrupted or times out just leaves; the event is not
/// consumed, so there is nothing to pass on.
///
/// # Examples
///
/// ```
/// use std::rc::Rc;
/// use coro_sync::Event;
///
/// coro_runtime::run(|| {
///     let started = Rc::new(Event::new());
///     let s = started.clone();
///     let server = coro_runtime::spawn(move || {
///         // ... bind a socket ...
///         s.set();
///     });
///     started.wait().unwrap();
///     assert!(started.is_set());
///     server.join().unwrap();
/// });
/// ```
pub struct Event {
    /// The event is set.
    set: Cell<bool>,
    /// Threads in `wait`, FIFO.
    waiters: RefCell<WaitList<()>>,
}

impl Event {
    /// An event that is not set.
    pub const fn new() -> Event {
        Event {
            set: Cell::new(false),
            waiters: RefCell::new(WaitList::new()),
        }
    }

    /// Sets the event and wakes every waiter; returns how many were woken.
    pub fn set(&self) -> usize {
        self.set.set(true);
        self.waiters.borrow_mut().hand_all()
    }

    /// Clears the event: later waits block until the next [`set`](Event::set).
    pub fn clear(&self) {
        self.set.set(false);
    }

    /// Whether the event is set.
    pub fn is_set(&self) -> bool {
        self.set.get()
    }

    /// Waits until the event is set; returns at once if it is.
    ///
    /// # Errors
    ///
    /// [`WaitError`] if waiting was cut short (timeout, interrupt, shutdown).
    ///
    /// # Panics
    ///
    /// If it has to wait and the caller is not a green thread.
    #[track_caller]
    pub fn wait(&self) -> Result<(), WaitError> {
        if self.set.get() {
            return Ok(());
        }
        let coro = waitlist::current_coro("Event::wait");
        let key = self.waiters.borrow_mut().push_back(coro, ());
        waitlist::wait(
            &self.waiters,
            key,
            "Event::wait",
            || {
                if self.set.get() {
                    self.waiters.borrow_mut().hand_all();
                }
            },
            |()| {}, // the event is not consumed: nothing to pass on
        )
    }

    /// Number of green threads waiting.
    pub fn waiters(&self) -> usize {
        self.waiters.borrow().len()
    }
}

impl Default for Event {
    fn default() -> Event {
        Event::new()
    }
}

impl fmt::Debug for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Event")
            .field("set", &self.set.get())
            .field("waiters", &self.waiters())
            .finish()
    }
}
