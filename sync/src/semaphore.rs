//! [`Semaphore`]: a count of permits handed out in FIFO order.
//!
//! # Design
//!
//! A count and a FIFO queue of requests. A release adds to the count and then
//! serves the queue from its head while the head's request fits, taking the
//! permits out of the count on each waiter's behalf (so a thread that calls
//! `acquire` in between cannot take them). The head is never skipped for a
//! smaller request behind it.

use std::cell::{Cell, RefCell};
use std::fmt;

use coro_runtime::WaitError;

use crate::error::TryAcquireError;
use crate::waitlist::{self, WaitList};

/// A counting semaphore for green threads of one runtime.
///
/// The classic use in a cooperative runtime is to bound a resource: the
/// number of outstanding requests on an RPC link, of connections to a
/// backend, of jobs in flight.
///
/// # Fairness and head-of-line blocking
///
/// Requests are served strictly in FIFO order. A big request at the head of
/// the queue is **not** overtaken by smaller ones behind it, even if enough
/// permits for those are free: `acquire(1)` waits while an earlier
/// `acquire(10)` waits. This keeps big requests from starving; the price is
/// that one big request holds up everyone behind it until enough permits
/// come back. A new `acquire` also queues whenever anyone is queued.
///
/// # Interruption and timeouts
///
/// A waiter that is interrupted or times out leaves the queue and gets the
/// [`WaitError`]. If its permits had already been handed to it but it had not
/// run yet, it releases them again, which serves the next waiters. If it was
/// the head of the line, the requests behind it are re-examined at once.
///
/// # Permits
///
/// [`acquire`](Semaphore::acquire) returns a [`SemaphorePermit`] that releases
/// on drop. To hold permits beyond a scope, [`forget`](SemaphorePermit::forget)
/// it and call [`release`](Semaphore::release) later. `release` can also add
/// permits that were never acquired: the count has no upper bound.
///
/// # Examples
///
/// ```
/// use std::rc::Rc;
/// use coro_sync::Semaphore;
///
/// coro_runtime::run(|| {
///     let slots = Rc::new(Semaphore::new(2)); // at most 2 requests in flight
///     let workers: Vec<_> = (0..5)
///         .map(|i| {
///             let slots = slots.clone();
///             coro_runtime::spawn(move || {
///                 let _permit = slots.acquire(1).unwrap();
///                 coro_runtime::yield_now(); // "talk to the backend"
///                 i
///             })
///         })
///         .collect();
///     let done: Vec<_> = workers.into_iter().map(|h| h.join().unwrap()).collect();
///     assert_eq!(done, [0, 1, 2, 3, 4]);
///     assert_eq!(slots.available(), 2);
/// });
/// ```
pub struct Semaphore {
    /// Permits free to take. Permits handed to a waiter are already taken out.
    permits: Cell<usize>,
    /// Requests waiting, FIFO; the payload is the number of permits asked for.
    waiters: RefCell<WaitList<usize>>,
}

/// Permits taken from a [`Semaphore`]; they go back when this is dropped.
#[must_use = "if unused the permits are released at once"]
pub struct SemaphorePermit<'a> {
    sem: &'a Semaphore,
    n: usize,
}

impl Semaphore {
    /// A semaphore with `permits` permits.
    pub const fn new(permits: usize) -> Semaphore {
        Semaphore {
            permits: Cell::new(permits),
            waiters: RefCell::new(WaitList::new()),
        }
    }

    /// Takes `n` permits, waiting for them in FIFO order.
    ///
    /// `acquire(0)` returns at once.
    ///
    /// # Errors
    ///
    /// [`WaitError`] if waiting was cut short (timeout, interrupt, shutdown);
    /// the caller then holds no permits from this call.
    ///
    /// # Panics
    ///
    /// If it has to wait and the caller is not a green thread.
    #[inline]
    #[track_caller]
    pub fn acquire(&self, n: usize) -> Result<SemaphorePermit<'_>, WaitError> {
        if let Ok(p) = self.try_acquire(n) {
            return Ok(p);
        }
        self.acquire_slow(n)
    }

    #[cold]
    #[track_caller]
    fn acquire_slow(&self, n: usize) -> Result<SemaphorePermit<'_>, WaitError> {
        let coro = waitlist::current_coro("Semaphore::acquire");
        let key = self.waiters.borrow_mut().push_back(coro, n);
        self.dispatch();
        if !self.waiters.borrow().is_linked(key) {
            self.waiters.borrow_mut().remove(key);
            return Ok(SemaphorePermit { sem: self, n });
        }
        let n = waitlist::wait(
            &self.waiters,
            key,
            "Semaphore::acquire",
            || self.dispatch(),
            |n| self.release(n),
        )?;
        Ok(SemaphorePermit { sem: self, n })
    }

    /// Takes `n` permits if they are free and nobody is queued ahead.
    ///
    /// # Errors
    ///
    /// [`TryAcquireError`] if that would need waiting.
    #[inline]
    pub fn try_acquire(&self, n: usize) -> Result<SemaphorePermit<'_>, TryAcquireError> {
        let p = self.permits.get();
        if n == 0 || (p >= n && self.waiters.borrow().is_empty()) {
            self.permits.set(p - n);
            Ok(SemaphorePermit { sem: self, n })
        } else {
            Err(TryAcquireError)
        }
    }

    /// Adds `n` permits and serves the queue in order.
    ///
    /// Use it for permits whose [`SemaphorePermit`] was
    /// [forgotten](SemaphorePermit::forget), or to raise the count.
    ///
    /// # Panics
    ///
    /// If the count would overflow `usize`.
    #[inline]
    pub fn release(&self, n: usize) {
        let p = self
            .permits
            .get()
            .checked_add(n)
            .expect("Semaphore::release: permit count overflows usize");
        self.permits.set(p);
        if !self.waiters.borrow().is_empty() {
            self.dispatch();
        }
    }

    /// Permits free now.
    pub fn available(&self) -> usize {
        self.permits.get()
    }

    /// Number of green threads queued in [`acquire`](Semaphore::acquire).
    pub fn waiters(&self) -> usize {
        self.waiters.borrow().len()
    }

    /// Serves the queue from its head while the head's request fits.
    fn dispatch(&self) {
        let mut w = self.waiters.borrow_mut();
        while let Some(k) = w.first_live() {
            let n = *w.data(k);
            let p = self.permits.get();
            if n > p {
                return;
            }
            self.permits.set(p - n);
            w.hand(k);
        }
    }
}

impl Default for Semaphore {
    /// A semaphore with no permits.
    fn default() -> Semaphore {
        Semaphore::new(0)
    }
}

impl fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Semaphore")
            .field("available", &self.permits.get())
            .field("waiters", &self.waiters())
            .finish()
    }
}

impl SemaphorePermit<'_> {
    /// Number of permits held.
    pub fn count(&self) -> usize {
        self.n
    }

    /// Keeps the permits taken: they are not released on drop. Give them back
    /// with [`Semaphore::release`].
    pub fn forget(self) {
        std::mem::forget(self);
    }
}

impl Drop for SemaphorePermit<'_> {
    /// Releases the permits; never blocks.
    fn drop(&mut self) {
        if self.n > 0 {
            self.sem.release(self.n);
        }
    }
}

impl fmt::Debug for SemaphorePermit<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SemaphorePermit")
            .field("count", &self.n)
            .finish()
    }
}
