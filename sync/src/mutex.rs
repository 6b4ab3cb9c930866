//! [`Mutex`]: mutual exclusion between green threads, with FIFO hand-off.
//!
//! # Design
//!
//! The lock is a flag and the id of the owning green thread. Unlocking with
//! waiters queued does not clear the flag: ownership passes straight to the
//! first waiter that can take it (see `waitlist`), so a thread that arrives
//! later can never barge in ahead of the queue. The data sits in a `RefCell`
//! that only the guard borrows, so this module needs no `unsafe`.

use std::cell::{Cell, RefCell, RefMut};
use std::fmt;
use std::ops::{Deref, DerefMut};

use crate::error::{LockError, TryLockError};
use crate::waitlist::{self, WaitList};

/// A mutual-exclusion lock for green threads of one runtime.
///
/// [`lock`](Mutex::lock) suspends the calling green thread (not the OS
/// thread) until the lock is free. Since only one green thread runs at a time,
/// a mutex never protects memory from data races; it protects a *resource*
/// across blocking calls (a file being rewritten, a connection in the middle
/// of a request).
///
/// # Fairness
///
/// Waiters are served in FIFO order. Unlocking hands ownership directly to the
/// first waiter, so a thread that calls `lock` later cannot take the lock
/// first (no barging), and a thread that unlocks and relocks at once goes to
/// the back of the line.
///
/// # Interruption and timeouts
///
/// A waiter that is [interrupted](coro_runtime::Coro::interrupt) or whose
/// [`with_timeout`](coro_runtime::with_timeout) deadline passes leaves the
/// queue and gets [`LockError::Wait`]. If ownership had already been handed
/// to it but it had not run yet, it passes ownership on to the next waiter
/// (or unlocks): nothing is lost.
///
/// # Self-deadlock
///
/// Calling `lock` from the green thread that already holds the lock returns
/// [`LockError::WouldDeadlock`] instead of hanging.
///
/// # Poisoning
///
/// There is none: a green thread that panics while holding the guard unlocks
/// the mutex as the guard drops, and the data stays as it was left.
///
/// # `!Send`
///
/// A mutex lives in one runtime; share it between green threads with `Rc`.
///
/// ```compile_fail
/// fn send<T: Send>() {}
/// send::<coro::sync::Mutex<u32>>();
/// ```
///
/// # Examples
///
/// ```
/// use std::rc::Rc;
/// use coro::sync::Mutex;
///
/// coro::run(|| {
///     let log = Rc::new(Mutex::new(Vec::new()));
///     let l = log.clone();
///     let writer = coro::spawn(move || {
///         let mut g = l.lock().unwrap();
///         g.push("first");
///         coro::yield_now(); // still holding the lock
///         g.push("second");
///     });
///     coro::yield_now(); // let the writer take the lock
///     log.lock().unwrap().push("third"); // waits for the writer's guard
///     writer.join().unwrap();
///     assert_eq!(*log.lock().unwrap(), ["first", "second", "third"]);
/// });
/// ```
pub struct Mutex<T: ?Sized> {
    /// Held by someone (possibly by a waiter that was handed it and has not
    /// run yet).
    locked: Cell<bool>,
    /// Id of the owning green thread while `locked` (0: locked outside a
    /// green thread).
    owner: Cell<u64>,
    /// Threads waiting in [`Mutex::lock`], FIFO.
    waiters: RefCell<WaitList<()>>,
    /// Borrowed mutably only by the one live guard.
    data: RefCell<T>,
}

/// Proof of holding a [`Mutex`]; dereferences to the data and unlocks when
/// dropped.
#[must_use = "if unused the Mutex will immediately unlock"]
pub struct MutexGuard<'a, T: ?Sized> {
    pub(crate) lock: &'a Mutex<T>,
    data: RefMut<'a, T>,
}

impl<T> Mutex<T> {
    /// An unlocked mutex holding `value`.
    pub const fn new(value: T) -> Mutex<T> {
        Mutex {
            locked: Cell::new(false),
            owner: Cell::new(0),
            waiters: RefCell::new(WaitList::new()),
            data: RefCell::new(value),
        }
    }

    /// Consumes the mutex and returns the data.
    pub fn into_inner(self) -> T {
        self.data.into_inner()
    }
}

impl<T: ?Sized> Mutex<T> {
    /// Locks the mutex, suspending the green thread until it is its turn.
    ///
    /// # Errors
    ///
    /// * [`LockError::WouldDeadlock`] if this green thread already holds it.
    /// * [`LockError::Wait`] if waiting was cut short by an interrupt, a
    ///   timeout of an enclosing `with_timeout`, or runtime shutdown. The
    ///   thread then does not hold the lock.
    ///
    /// # Panics
    ///
    /// If the lock is held and the caller is not a green thread.
    #[inline]
    #[track_caller]
    pub fn lock(&self) -> Result<MutexGuard<'_, T>, LockError> {
        let me = waitlist::current_id();
        if !self.locked.get() {
            self.locked.set(true);
            self.owner.set(me);
            return Ok(self.guard());
        }
        self.lock_slow(me)
    }

    #[cold]
    #[track_caller]
    fn lock_slow(&self, me: u64) -> Result<MutexGuard<'_, T>, LockError> {
        if me != 0 && self.owner.get() == me {
            waitlist::failed_at_once();
            return Err(LockError::WouldDeadlock);
        }
        let coro = waitlist::current_coro("Mutex::lock");
        // The lock is held (that is how we got here, and nothing ran
        // since): queue and wait to be handed it.
        let key = {
            let mut w = self.waiters.borrow_mut();
            let key = w.push_back(coro, ());
            w.target("Mutex::lock").set_holder(self.owner.get());
            key
        };
        // If ownership was handed to us but we cannot take it, pass it on.
        waitlist::wait(
            &self.waiters,
            key,
            "Mutex::lock",
            || self.dispatch(),
            |()| self.unlock(),
        )
        .map_err(LockError::Wait)?;
        Ok(self.guard())
    }

    /// Locks the mutex if it is free, without waiting.
    ///
    /// # Errors
    ///
    /// [`TryLockError::WouldBlock`] if it is held (by anyone, including the
    /// caller).
    #[inline]
    pub fn try_lock(&self) -> Result<MutexGuard<'_, T>, TryLockError> {
        if self.locked.get() {
            return Err(TryLockError::WouldBlock);
        }
        self.locked.set(true);
        self.owner.set(waitlist::current_id());
        Ok(self.guard())
    }

    /// Whether some green thread holds the lock.
    pub fn is_locked(&self) -> bool {
        self.locked.get()
    }

    /// The id ([`Coro::id`](coro_runtime::Coro::id)) of the green thread
    /// holding the lock, or `None` when it is free (or was locked outside a
    /// green thread). A waiter the lock was handed to owns it before it runs.
    pub fn owner(&self) -> Option<u64> {
        let owner = self.owner.get();
        (self.locked.get() && owner != 0).then_some(owner)
    }

    /// Whether the calling green thread holds the lock: for assertions in
    /// code that must run under it.
    ///
    /// # Examples
    ///
    /// ```
    /// use coro::sync::Mutex;
    ///
    /// fn must_hold(m: &Mutex<u32>) {
    ///     assert!(m.is_owned_by_current_thread(), "call with the lock held");
    /// }
    ///
    /// coro::run(|| {
    ///     let m = Mutex::new(0);
    ///     let g = m.lock().unwrap();
    ///     must_hold(&m);
    ///     assert_eq!(m.owner(), coro::current_id());
    ///     drop(g);
    ///     assert!(!m.is_owned_by_current_thread());
    /// });
    /// ```
    pub fn is_owned_by_current_thread(&self) -> bool {
        let me = waitlist::current_id();
        me != 0 && self.owner() == Some(me)
    }

    /// Number of green threads queued in [`lock`](Mutex::lock).
    pub fn waiters(&self) -> usize {
        self.waiters.borrow().len()
    }

    /// A mutable reference to the data; no locking needed since the borrow is
    /// exclusive.
    pub fn get_mut(&mut self) -> &mut T {
        self.data.get_mut()
    }

    fn guard(&self) -> MutexGuard<'_, T> {
        MutexGuard {
            lock: self,
            data: self.data.borrow_mut(),
        }
    }

    /// Releases the lock: ownership goes to the first live waiter, or the
    /// mutex becomes free.
    #[inline]
    fn unlock(&self) {
        if self.waiters.borrow().is_empty() {
            self.locked.set(false);
            self.owner.set(0);
        } else {
            self.locked.set(false);
            self.dispatch();
        }
    }

    /// If the mutex is free, hands it to the first waiter that can take it.
    fn dispatch(&self) {
        if self.locked.get() {
            return;
        }
        let mut w = self.waiters.borrow_mut();
        if let Some(k) = w.first_live() {
            self.locked.set(true);
            self.owner.set(w.coro_id(k));
            w.set_holder(self.owner.get());
            w.hand(k);
        } else {
            self.owner.set(0);
            w.set_holder(0);
        }
    }
}

impl<T: Default> Default for Mutex<T> {
    fn default() -> Mutex<T> {
        Mutex::new(T::default())
    }
}

impl<T> From<T> for Mutex<T> {
    fn from(value: T) -> Mutex<T> {
        Mutex::new(value)
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for Mutex<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Mutex");
        match self.data.try_borrow() {
            Ok(v) if !self.locked.get() => d.field("data", &&*v),
            _ => d.field("data", &format_args!("<locked>")),
        };
        d.field("waiters", &self.waiters()).finish_non_exhaustive()
    }
}

impl<'a, T: ?Sized> MutexGuard<'a, T> {
    /// The mutex this guard holds.
    pub fn mutex(this: &Self) -> &'a Mutex<T> {
        this.lock
    }
}

impl<T: ?Sized> Deref for MutexGuard<'_, T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        &self.data
    }
}

impl<T: ?Sized> DerefMut for MutexGuard<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        &mut self.data
    }
}

impl<T: ?Sized> Drop for MutexGuard<'_, T> {
    /// Unlocks; never blocks. The next owner runs later, after this guard's
    /// borrow of the data is gone.
    #[inline]
    fn drop(&mut self) {
        self.lock.unlock();
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for MutexGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl<T: ?Sized + fmt::Display> fmt::Display for MutexGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&**self, f)
    }
}
