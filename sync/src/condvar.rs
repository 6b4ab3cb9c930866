//! [`Condvar`]: wait for a notification, with or without a [`Mutex`].
//!
//! # Design
//!
//! A FIFO queue of waiters. A notification unlinks the first waiters and
//! wakes them. A waiter that is interrupted or times out after being notified
//! but before it ran passes its notification on to the next waiter, so a
//! `notify_one` is never swallowed by a thread that gave up.
//!
//! Without a mutex, a plain check-then-wait is race-free in a cooperative
//! runtime: nothing else runs between the check and the moment the thread is
//! queued. A mutex is needed only when the condition spans blocking calls.

use std::cell::RefCell;
use std::fmt;

use coro_runtime::WaitError;

use crate::error::LockError;
use crate::mutex::{Mutex, MutexGuard};
use crate::waitlist::{self, WaitList};

/// A condition variable for green threads of one runtime.
///
/// Use it with a [`Mutex`] guard ([`wait`](Condvar::wait),
/// [`wait_while`](Condvar::wait_while)) like `std::sync::Condvar`, or without
/// one ([`notified`](Condvar::notified)): in a cooperative runtime nothing can
/// run between checking a condition and starting to wait.
///
/// # Wake-ups
///
/// Waiters are notified in FIFO order. The notify calls return how many
/// waiters they woke. A notification is not stored: notifying with nobody
/// waiting does nothing.
///
/// A wait returns only after a notification, never spuriously in the sense of
/// `std`. But the condition may be false again by the time the woken thread
/// runs (another thread got to the data first), so check it in a loop, or use
/// [`wait_while`](Condvar::wait_while).
///
/// # Interruption and timeouts
///
/// A waiter that is interrupted or times out leaves the queue and returns the
/// error. If it had been notified but not yet run, it passes the notification
/// on to the next waiter. [`wait`](Condvar::wait) returns without the guard
/// on error: the mutex is then not held.
///
/// # Examples
///
/// ```
/// use std::rc::Rc;
/// use coro::sync::{Condvar, Mutex};
///
/// coro::run(|| {
///     let pair = Rc::new((Mutex::new(false), Condvar::new()));
///     let p = pair.clone();
///     coro::spawn(move || {
///         *p.0.lock().unwrap() = true;
///         p.1.notify_one();
///     });
///     let (ready, cv) = &*pair;
///     let guard = cv.wait_while(ready.lock().unwrap(), |ready| !*ready).unwrap();
///     assert!(*guard);
/// });
/// ```
///
/// Without a mutex:
///
/// ```
/// use std::cell::Cell;
/// use std::rc::Rc;
/// use coro::sync::Condvar;
///
/// coro::run(|| {
///     let state = Rc::new((Cell::new(0), Condvar::new()));
///     let s = state.clone();
///     coro::spawn(move || {
///         s.0.set(42);
///         assert_eq!(s.1.notify_all(), 1);
///     });
///     while state.0.get() == 0 {
///         state.1.notified().unwrap();
///     }
///     assert_eq!(state.0.get(), 42);
/// });
/// ```
pub struct Condvar {
    /// Threads waiting for a notification, FIFO.
    waiters: RefCell<WaitList<()>>,
}

impl Condvar {
    /// A condition variable with no waiters.
    pub const fn new() -> Condvar {
        Condvar {
            waiters: RefCell::new(WaitList::new()),
        }
    }

    /// Unlocks the mutex of `guard`, waits for a notification, and locks the
    /// mutex again.
    ///
    /// # Errors
    ///
    /// [`LockError::Wait`] if waiting for the notification or for the mutex
    /// was cut short (timeout, interrupt, shutdown). The guard is not given
    /// back: the mutex is not held on error.
    ///
    /// # Panics
    ///
    /// If the caller is not a green thread.
    #[track_caller]
    pub fn wait<'a, T: ?Sized>(
        &self,
        guard: MutexGuard<'a, T>,
    ) -> Result<MutexGuard<'a, T>, LockError> {
        self.wait_named(guard, "Condvar::wait")
    }

    /// [`wait`](Condvar::wait); `call` names the public call in the panic
    /// outside a green thread.
    #[track_caller]
    fn wait_named<'a, T: ?Sized>(
        &self,
        guard: MutexGuard<'a, T>,
        call: &str,
    ) -> Result<MutexGuard<'a, T>, LockError> {
        let mutex: &'a Mutex<T> = guard.lock;
        let coro = waitlist::current_coro(call);
        // Queue, then unlock: nothing else runs before we park, so no
        // notification can slip in between.
        let key = self.waiters.borrow_mut().push_back(coro, ());
        drop(guard);
        self.park(key).map_err(LockError::Wait)?;
        mutex.lock()
    }

    /// Waits while `condition` holds: returns with the mutex locked and the
    /// condition false.
    ///
    /// # Errors
    ///
    /// As [`wait`](Condvar::wait); on error the mutex is not held.
    ///
    /// # Panics
    ///
    /// If it has to wait and the caller is not a green thread.
    #[track_caller]
    pub fn wait_while<'a, T: ?Sized, F>(
        &self,
        mut guard: MutexGuard<'a, T>,
        mut condition: F,
    ) -> Result<MutexGuard<'a, T>, LockError>
    where
        F: FnMut(&mut T) -> bool,
    {
        while condition(&mut *guard) {
            guard = self.wait_named(guard, "Condvar::wait_while")?;
        }
        Ok(guard)
    }

    /// Waits for a notification, without a mutex.
    ///
    /// # Errors
    ///
    /// [`WaitError`] if waiting was cut short (timeout, interrupt, shutdown).
    ///
    /// # Panics
    ///
    /// If the caller is not a green thread.
    #[track_caller]
    pub fn notified(&self) -> Result<(), WaitError> {
        let coro = waitlist::current_coro("Condvar::notified");
        let key = self.waiters.borrow_mut().push_back(coro, ());
        self.park(key)
    }

    #[track_caller]
    fn park(&self, key: usize) -> Result<(), WaitError> {
        waitlist::wait(
            &self.waiters,
            key,
            "Condvar",
            || {},
            |()| {
                self.notify_one();
            },
        )
    }

    /// Wakes the first waiter; returns how many were woken (0 or 1).
    pub fn notify_one(&self) -> usize {
        self.notify_n(1)
    }

    /// Wakes the first `n` waiters (or all if fewer); returns how many.
    pub fn notify_n(&self, n: usize) -> usize {
        let mut w = self.waiters.borrow_mut();
        let mut woken = 0;
        let mut cur = w.first_live();
        while let Some(k) = cur {
            if woken == n {
                break;
            }
            cur = w.next_live(k);
            w.hand(k);
            woken += 1;
        }
        woken
    }

    /// Wakes every waiter; returns how many.
    pub fn notify_all(&self) -> usize {
        self.notify_n(usize::MAX)
    }

    /// Number of green threads waiting.
    pub fn waiters(&self) -> usize {
        self.waiters.borrow().len()
    }
}

impl Default for Condvar {
    fn default() -> Condvar {
        Condvar::new()
    }
}

impl fmt::Debug for Condvar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Condvar")
            .field("waiters", &self.waiters())
            .finish()
    }
}
