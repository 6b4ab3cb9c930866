//! [`InvertedSemaphore`]: wait until a count of outstanding work drops to zero
//! (Shrapnel's `inverted_semaphore`).

use std::cell::{Cell, RefCell};
use std::fmt;

use coro_runtime::WaitError;

use crate::waitlist::{self, WaitList};

/// A counter of outstanding jobs that green threads can wait to see reach
/// zero.
///
/// [`acquire(n)`](InvertedSemaphore::acquire) adds `n` and never blocks;
/// [`release(n)`](InvertedSemaphore::release) subtracts `n`;
/// [`block_till_zero`](InvertedSemaphore::block_till_zero) waits until the
/// count is zero. Typical use: a dispatcher acquires one unit per job it
/// starts, each job releases its unit when done, and the dispatcher waits for
/// all of them.
///
/// # Wake-up semantics
///
/// When the count drops to zero every waiter is woken, in FIFO order, and
/// its `block_till_zero` returns `Ok` even if the count has gone up again by
/// the time it runs: it saw the zero. A waiter that is interrupted or times
/// out just leaves; a zero is not a resource, so there is nothing to pass on.
///
/// # Examples
///
/// ```
/// use std::rc::Rc;
/// use coro::sync::InvertedSemaphore;
///
/// coro::run(|| {
///     let outstanding = Rc::new(InvertedSemaphore::new());
///     for _ in 0..3 {
///         outstanding.acquire(1);
///         let o = outstanding.clone();
///         coro::spawn(move || {
///             coro::yield_now(); // the job
///             o.release(1);
///         });
///     }
///     outstanding.block_till_zero().unwrap();
///     assert_eq!(outstanding.count(), 0);
/// });
/// ```
pub struct InvertedSemaphore {
    /// Outstanding units.
    count: Cell<usize>,
    /// Threads in `block_till_zero`, FIFO.
    waiters: RefCell<WaitList<()>>,
}

impl InvertedSemaphore {
    /// A semaphore with a count of zero.
    pub const fn new() -> InvertedSemaphore {
        InvertedSemaphore {
            count: Cell::new(0),
            waiters: RefCell::new(WaitList::new()),
        }
    }

    /// Adds `n` to the count. Never blocks.
    ///
    /// # Panics
    ///
    /// If the count would overflow `usize`.
    pub fn acquire(&self, n: usize) {
        let c = self
            .count
            .get()
            .checked_add(n)
            .expect("InvertedSemaphore::acquire: count overflows usize");
        self.count.set(c);
    }

    /// Subtracts `n` from the count; at zero, wakes every waiter.
    ///
    /// # Panics
    ///
    /// If `n` is more than the count (more releases than acquires).
    pub fn release(&self, n: usize) {
        let c = self.count.get().checked_sub(n).unwrap_or_else(|| {
            panic!(
                "InvertedSemaphore::release({n}) with a count of only {}",
                self.count.get()
            )
        });
        self.count.set(c);
        self.dispatch();
    }

    /// The current count.
    pub fn count(&self) -> usize {
        self.count.get()
    }

    /// Number of green threads in [`block_till_zero`](Self::block_till_zero).
    pub fn waiters(&self) -> usize {
        self.waiters.borrow().len()
    }

    /// Waits until the count is zero; returns at once if it is.
    ///
    /// # Errors
    ///
    /// [`WaitError`] if waiting was cut short (timeout, interrupt, shutdown).
    ///
    /// # Panics
    ///
    /// If it has to wait and the caller is not a green thread.
    #[track_caller]
    pub fn block_till_zero(&self) -> Result<(), WaitError> {
        self.wait_for_zero("InvertedSemaphore::block_till_zero")
    }

    /// [`block_till_zero`](Self::block_till_zero), naming the call `what`
    /// in messages and in [`threads`](coro_runtime::threads).
    #[track_caller]
    pub(crate) fn wait_for_zero(&self, what: &'static str) -> Result<(), WaitError> {
        if self.count.get() == 0 {
            return Ok(());
        }
        let coro = waitlist::current_coro(what);
        let key = self.waiters.borrow_mut().push_back(coro, ());
        waitlist::wait(
            &self.waiters,
            key,
            what,
            || self.dispatch(),
            |()| {}, // a zero is not consumed: nothing to pass on
        )
    }

    fn dispatch(&self) {
        if self.count.get() == 0 {
            self.waiters.borrow_mut().hand_all();
        }
    }
}

impl Default for InvertedSemaphore {
    fn default() -> InvertedSemaphore {
        InvertedSemaphore::new()
    }
}

impl fmt::Debug for InvertedSemaphore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InvertedSemaphore")
            .field("count", &self.count.get())
            .field("waiters", &self.waiters())
            .finish()
    }
}
