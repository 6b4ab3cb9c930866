//! [`Fifo`]: an unbounded queue whose `pop` waits for an item.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::fmt;

use coro_runtime::WaitError;

use crate::waitlist::{self, WaitList};

/// An unbounded FIFO queue shared by green threads of one runtime (Shrapnel's
/// `fifo`): [`push`](Fifo::push) never blocks, [`pop`](Fifo::pop) waits
/// until there is an item.
///
/// # Fairness
///
/// Threads waiting in `pop` are served in FIFO order, and a pushed item goes
/// straight to the first of them: a thread that calls `pop` later cannot
/// take it first.
///
/// # Interruption and timeouts
///
/// A popper that is interrupted or times out leaves the queue with the
/// error. If an item had been handed to it but it had not run yet, the item
/// goes back to the *front* of the queue (or to the next waiting popper), so
/// order is kept and nothing is lost.
///
/// # Examples
///
/// ```
/// use std::rc::Rc;
/// use coro_sync::Fifo;
///
/// coro_runtime::run(|| {
///     let jobs = Rc::new(Fifo::new());
///     let j = jobs.clone();
///     let worker = coro_runtime::spawn(move || {
///         let mut done = Vec::new();
///         loop {
///             match j.pop().unwrap() {
///                 0 => return done,
///                 n => done.push(n),
///             }
///         }
///     });
///     jobs.push(1);
///     jobs.push(2);
///     jobs.push(0); // stop
///     assert_eq!(worker.join().unwrap(), [1, 2]);
/// });
/// ```
pub struct Fifo<T> {
    /// Items nobody waits for yet. Non-empty only when no popper can take one.
    items: RefCell<VecDeque<T>>,
    /// Threads in `pop`, FIFO; an item is handed into the payload.
    waiters: RefCell<WaitList<Option<T>>>,
}

impl<T> Fifo<T> {
    /// An empty queue.
    pub const fn new() -> Fifo<T> {
        Fifo {
            items: RefCell::new(VecDeque::new()),
            waiters: RefCell::new(WaitList::new()),
        }
    }

    /// Appends `item`, or hands it to the first waiting popper. Never blocks.
    pub fn push(&self, item: T) {
        if let Some(item) = self.hand(item) {
            self.items.borrow_mut().push_back(item);
        }
    }

    /// Puts `item` at the front, so it is popped next (or hands it to the
    /// first waiting popper). Never blocks.
    pub fn push_front(&self, item: T) {
        if let Some(item) = self.hand(item) {
            self.items.borrow_mut().push_front(item);
        }
    }

    /// Gives `item` to the first popper that can take it; returns it if there
    /// is none.
    fn hand(&self, item: T) -> Option<T> {
        let mut w = self.waiters.borrow_mut();
        match w.first_live() {
            Some(k) => {
                *w.data_mut(k) = Some(item);
                w.hand(k);
                None
            }
            None => Some(item),
        }
    }

    /// Removes the first item, waiting for one if the queue is empty.
    ///
    /// # Errors
    ///
    /// [`WaitError`] if waiting was cut short (timeout, interrupt, shutdown).
    ///
    /// # Panics
    ///
    /// If it has to wait and the caller is not a green thread.
    #[track_caller]
    pub fn pop(&self) -> Result<T, WaitError> {
        self.pop_named("Fifo::pop")
    }

    /// [`pop`](Fifo::pop); `call` names the public call in the panic
    /// outside a green thread.
    #[track_caller]
    fn pop_named(&self, call: &str) -> Result<T, WaitError> {
        if let Some(item) = self.items.borrow_mut().pop_front() {
            return Ok(item);
        }
        let coro = waitlist::current_coro(call);
        let key = self.waiters.borrow_mut().push_back(coro, None);
        let item = waitlist::wait(
            &self.waiters,
            key,
            "Fifo::pop",
            || self.dispatch(),
            |item| {
                if let Some(item) = item {
                    self.push_front(item);
                }
            },
        )?;
        Ok(item.expect("a handed Fifo waiter has an item"))
    }

    /// Removes the first item if there is one.
    pub fn try_pop(&self) -> Option<T> {
        self.items.borrow_mut().pop_front()
    }

    /// Removes every item, waiting until there is at least one.
    ///
    /// # Errors
    ///
    /// [`WaitError`] if waiting was cut short (timeout, interrupt, shutdown).
    ///
    /// # Panics
    ///
    /// If it has to wait and the caller is not a green thread.
    pub fn pop_all(&self) -> Result<Vec<T>, WaitError> {
        let first = self.pop_named("Fifo::pop_all")?;
        let mut items = self.items.borrow_mut();
        let mut all = Vec::with_capacity(1 + items.len());
        all.push(first);
        all.extend(items.drain(..));
        Ok(all)
    }

    /// Number of items queued (not counting items handed to a popper that has
    /// not run yet).
    pub fn len(&self) -> usize {
        self.items.borrow().len()
    }

    /// Whether no item is queued.
    pub fn is_empty(&self) -> bool {
        self.items.borrow().is_empty()
    }

    /// Number of green threads waiting in [`pop`](Fifo::pop).
    pub fn waiters(&self) -> usize {
        self.waiters.borrow().len()
    }

    /// Hands queued items to waiting poppers (after a popper left the line or
    /// woke spuriously).
    fn dispatch(&self) {
        let mut items = self.items.borrow_mut();
        let mut w = self.waiters.borrow_mut();
        while !items.is_empty() {
            let Some(k) = w.first_live() else { return };
            *w.data_mut(k) = items.pop_front();
            w.hand(k);
        }
    }
}

impl<T> Default for Fifo<T> {
    fn default() -> Fifo<T> {
        Fifo::new()
    }
}

impl<T> FromIterator<T> for Fifo<T> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Fifo<T> {
        Fifo {
            items: RefCell::new(iter.into_iter().collect()),
            waiters: RefCell::new(WaitList::new()),
        }
    }
}

impl<T> fmt::Debug for Fifo<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Fifo")
            .field("len", &self.len())
            .field("waiters", &self.waiters())
            .finish()
    }
}
