//! [`RwLock`]: many readers or one writer, writer-preferring, FIFO.
//!
//! # Design
//!
//! Readers and writers wait in one FIFO queue. A reader gets in at once only
//! when no writer holds the lock *and nobody is queued*; so once a writer
//! waits, every reader that arrives after it queues behind it, and the
//! readers inside drain out until the writer gets its turn. When the lock
//! frees up, the head of the queue is served: a writer alone, or every reader
//! up to the next queued writer together. Neither side can starve the other.
//!
//! The lock remembers the id of its writer and of each reader, so a green
//! thread that would wait for itself gets [`LockError::WouldDeadlock`].

use std::cell::{Cell, Ref, RefCell, RefMut};
use std::fmt;
use std::ops::{Deref, DerefMut};

use crate::error::{LockError, TryLockError};
use crate::waitlist::{self, WaitList};

/// What a queued thread asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Read,
    Write,
}

/// A reader-writer lock for green threads of one runtime.
///
/// Any number of green threads may hold it for reading, or one for writing.
/// Like [`Mutex`](crate::Mutex), it guards a *resource* across blocking calls
/// (a file or directory being read or rewritten), not memory.
///
/// # Fairness
///
/// Writer-preferring: once a writer waits, readers that arrive after it queue
/// behind it, so a steady stream of readers cannot hold a writer off. Waiters
/// are served in FIFO order; when the lock frees up the queue's head is
/// admitted: one writer, or all the readers before the next queued writer at
/// once. Hand-off is direct (no barging), as for [`Mutex`](crate::Mutex).
///
/// # Interruption and timeouts
///
/// A waiter that is interrupted or times out leaves the queue and gets
/// [`LockError::Wait`]; if it had already been admitted but had not run yet,
/// it releases what it was given, which admits the next waiters. A writer
/// leaving the head of the queue lets the readers behind it in.
///
/// # Self-deadlock
///
/// A green thread that holds the lock and asks again in a way that would
/// wait for itself (`write` while it reads or writes, `read` while it writes,
/// or a second `read` while a writer is queued) gets
/// [`LockError::WouldDeadlock`]. A second `read` that need not wait succeeds.
///
/// # Poisoning
///
/// There is none; a panicking holder releases the lock as its guard drops.
///
/// # Examples
///
/// ```
/// use std::rc::Rc;
/// use coro::sync::RwLock;
///
/// coro::run(|| {
///     let config = Rc::new(RwLock::new(String::from("v1")));
///     let r1 = config.read().unwrap();
///     let r2 = config.read().unwrap(); // readers share it
///     assert_eq!(*r1, *r2);
///     assert!(config.try_write().is_err());
///     drop((r1, r2));
///
///     config.write().unwrap().push_str("-patched");
///     assert_eq!(*config.read().unwrap(), "v1-patched");
/// });
/// ```
pub struct RwLock<T: ?Sized> {
    /// Number of read guards out (including readers admitted but not yet run).
    readers: Cell<usize>,
    /// A writer holds the lock.
    writer: Cell<bool>,
    /// Id of the writing green thread while `writer` (0 outside a green thread).
    owner: Cell<u64>,
    /// Ids of the reading green threads, one entry per read guard.
    reader_ids: RefCell<Vec<u64>>,
    /// Readers and writers waiting, FIFO.
    waiters: RefCell<WaitList<Mode>>,
    /// Borrowed shared by read guards, mutably by the one write guard.
    data: RefCell<T>,
}

/// Shared access to an [`RwLock`]'s data; releases it when dropped.
#[must_use = "if unused the RwLock will immediately unlock"]
pub struct RwLockReadGuard<'a, T: ?Sized> {
    lock: &'a RwLock<T>,
    data: Ref<'a, T>,
    /// The reader's green thread id, as recorded in `reader_ids`.
    id: u64,
}

/// Exclusive access to an [`RwLock`]'s data; releases it when dropped.
#[must_use = "if unused the RwLock will immediately unlock"]
pub struct RwLockWriteGuard<'a, T: ?Sized> {
    lock: &'a RwLock<T>,
    data: RefMut<'a, T>,
}

impl<T> RwLock<T> {
    /// An unlocked lock holding `value`.
    pub const fn new(value: T) -> RwLock<T> {
        RwLock {
            readers: Cell::new(0),
            writer: Cell::new(false),
            owner: Cell::new(0),
            reader_ids: RefCell::new(Vec::new()),
            waiters: RefCell::new(WaitList::new()),
            data: RefCell::new(value),
        }
    }

    /// Consumes the lock and returns the data.
    pub fn into_inner(self) -> T {
        self.data.into_inner()
    }
}

impl<T: ?Sized> RwLock<T> {
    /// Locks for reading, waiting while a writer holds the lock or anyone is
    /// queued for it.
    ///
    /// # Errors
    ///
    /// * [`LockError::WouldDeadlock`] if this green thread holds the write
    ///   lock, or holds a read lock while a writer is queued.
    /// * [`LockError::Wait`] if waiting was cut short (timeout, interrupt,
    ///   shutdown); the thread then holds nothing.
    ///
    /// # Panics
    ///
    /// If it has to wait and the caller is not a green thread.
    #[track_caller]
    pub fn read(&self) -> Result<RwLockReadGuard<'_, T>, LockError> {
        let me = waitlist::current_id();
        if !self.writer.get() && self.waiters.borrow().is_empty() {
            return Ok(self.read_guard(me));
        }
        if me != 0 && (self.owner.get() == me || self.reader_ids.borrow().contains(&me)) {
            waitlist::failed_at_once();
            return Err(LockError::WouldDeadlock);
        }
        match self.enqueue(Mode::Read, "RwLock::read") {
            Ok(()) => Ok(self.read_guard_admitted(me)),
            Err(e) => Err(e),
        }
    }

    /// Locks for writing, waiting until no one else holds the lock and every
    /// thread queued before this one is served.
    ///
    /// # Errors
    ///
    /// * [`LockError::WouldDeadlock`] if this green thread holds the lock in
    ///   either mode.
    /// * [`LockError::Wait`] if waiting was cut short; the thread then holds
    ///   nothing.
    ///
    /// # Panics
    ///
    /// If it has to wait and the caller is not a green thread.
    #[track_caller]
    pub fn write(&self) -> Result<RwLockWriteGuard<'_, T>, LockError> {
        let me = waitlist::current_id();
        if self.is_free() && self.waiters.borrow().is_empty() {
            self.writer.set(true);
            self.owner.set(me);
            return Ok(self.write_guard());
        }
        if me != 0 && (self.owner.get() == me || self.reader_ids.borrow().contains(&me)) {
            waitlist::failed_at_once();
            return Err(LockError::WouldDeadlock);
        }
        self.enqueue(Mode::Write, "RwLock::write")?;
        Ok(self.write_guard())
    }

    /// Locks for reading if that needs no waiting: no writer holds the lock
    /// and nobody is queued.
    ///
    /// # Errors
    ///
    /// [`TryLockError::WouldBlock`] otherwise.
    pub fn try_read(&self) -> Result<RwLockReadGuard<'_, T>, TryLockError> {
        if !self.writer.get() && self.waiters.borrow().is_empty() {
            Ok(self.read_guard(waitlist::current_id()))
        } else {
            Err(TryLockError::WouldBlock)
        }
    }

    /// Locks for writing if no one holds the lock and nobody is queued.
    ///
    /// # Errors
    ///
    /// [`TryLockError::WouldBlock`] otherwise.
    pub fn try_write(&self) -> Result<RwLockWriteGuard<'_, T>, TryLockError> {
        if self.is_free() && self.waiters.borrow().is_empty() {
            self.writer.set(true);
            self.owner.set(waitlist::current_id());
            Ok(self.write_guard())
        } else {
            Err(TryLockError::WouldBlock)
        }
    }

    /// Number of read guards out.
    pub fn readers(&self) -> usize {
        self.readers.get()
    }

    /// Whether a writer holds the lock.
    pub fn is_write_locked(&self) -> bool {
        self.writer.get()
    }

    /// Whether anyone holds the lock, in either mode.
    pub fn is_locked(&self) -> bool {
        !self.is_free()
    }

    /// The id ([`Coro::id`](coro_runtime::Coro::id)) of the green thread
    /// holding the write lock, or `None` when no writer holds it (or it was
    /// locked outside a green thread).
    pub fn writer(&self) -> Option<u64> {
        let owner = self.owner.get();
        (self.writer.get() && owner != 0).then_some(owner)
    }

    /// Whether the calling green thread holds the write lock: for assertions
    /// in code that must run under it.
    ///
    /// # Examples
    ///
    /// ```
    /// use coro::sync::RwLock;
    ///
    /// coro::run(|| {
    ///     let l = RwLock::new(0);
    ///     let w = l.write().unwrap();
    ///     assert!(l.is_write_owned_by_current_thread());
    ///     assert_eq!(l.writer(), coro::current_id());
    ///     drop(w);
    ///     let _r = l.read().unwrap();
    ///     assert!(!l.is_write_owned_by_current_thread());
    ///     assert!(l.is_read_owned_by_current_thread());
    /// });
    /// ```
    pub fn is_write_owned_by_current_thread(&self) -> bool {
        let me = waitlist::current_id();
        me != 0 && self.writer() == Some(me)
    }

    /// Whether the calling green thread holds a read guard of this lock.
    pub fn is_read_owned_by_current_thread(&self) -> bool {
        let me = waitlist::current_id();
        me != 0 && self.reader_ids.borrow().contains(&me)
    }

    /// Number of green threads queued for the lock.
    pub fn waiters(&self) -> usize {
        self.waiters.borrow().len()
    }

    /// A mutable reference to the data; no locking needed since the borrow is
    /// exclusive.
    pub fn get_mut(&mut self) -> &mut T {
        self.data.get_mut()
    }

    fn is_free(&self) -> bool {
        !self.writer.get() && self.readers.get() == 0
    }

    /// Queues the caller for `mode` and waits until it is admitted (the
    /// lock state already counts it).
    #[cold]
    #[track_caller]
    fn enqueue(&self, mode: Mode, what: &'static str) -> Result<(), LockError> {
        let coro = waitlist::current_coro(what);
        let key = self.waiters.borrow_mut().push_back(coro, mode);
        self.dispatch();
        if !self.waiters.borrow().is_linked(key) {
            self.waiters.borrow_mut().remove(key);
            return Ok(());
        }
        self.waiters.borrow_mut().target(what);
        self.publish_holder();
        waitlist::wait(
            &self.waiters,
            key,
            what,
            || self.dispatch(),
            |mode| match mode {
                Mode::Read => self.read_unlock(waitlist::current_id()),
                Mode::Write => self.write_unlock(),
            },
        )
        .map(drop)
        .map_err(LockError::Wait)
    }

    /// Records who holds the lock for the threads waiting on it (see
    /// `waitlist`): the writer, or else the reader that got in first.
    fn publish_holder(&self) {
        let holder = if self.writer.get() {
            self.owner.get()
        } else {
            self.reader_ids.borrow().first().copied().unwrap_or(0)
        };
        self.waiters.borrow().set_holder(holder);
    }

    /// Admits the head of the queue if it can get in: one writer when the
    /// lock is free, or every reader before the next writer when no writer
    /// holds it.
    fn dispatch(&self) {
        self.dispatch_waiters();
        self.publish_holder();
    }

    /// [`dispatch`](Self::dispatch) without recording the holder.
    fn dispatch_waiters(&self) {
        if self.writer.get() {
            return;
        }
        let mut w = self.waiters.borrow_mut();
        let mut cur = w.first_live();
        while let Some(k) = cur {
            match *w.data(k) {
                Mode::Write => {
                    if self.readers.get() == 0 {
                        self.writer.set(true);
                        self.owner.set(w.coro_id(k));
                        w.hand(k);
                    }
                    return;
                }
                Mode::Read => {
                    cur = w.next_live(k);
                    self.readers.set(self.readers.get() + 1);
                    self.reader_ids.borrow_mut().push(w.coro_id(k));
                    w.hand(k);
                }
            }
        }
    }

    fn read_guard(&self, me: u64) -> RwLockReadGuard<'_, T> {
        self.readers.set(self.readers.get() + 1);
        self.reader_ids.borrow_mut().push(me);
        self.read_guard_admitted(me)
    }

    /// A read guard for a reader already counted in `readers`.
    fn read_guard_admitted(&self, me: u64) -> RwLockReadGuard<'_, T> {
        RwLockReadGuard {
            lock: self,
            data: self.data.borrow(),
            id: me,
        }
    }

    fn write_guard(&self) -> RwLockWriteGuard<'_, T> {
        RwLockWriteGuard {
            lock: self,
            data: self.data.borrow_mut(),
        }
    }

    fn read_unlock(&self, id: u64) {
        self.readers.set(self.readers.get() - 1);
        {
            let mut ids = self.reader_ids.borrow_mut();
            if let Some(i) = ids.iter().position(|&r| r == id) {
                ids.swap_remove(i);
            }
        }
        if !self.waiters.borrow().is_empty() {
            if self.readers.get() == 0 {
                self.dispatch();
            } else {
                self.publish_holder();
            }
        }
    }

    fn write_unlock(&self) {
        self.writer.set(false);
        self.owner.set(0);
        if !self.waiters.borrow().is_empty() {
            self.dispatch();
        }
    }
}

impl<T: Default> Default for RwLock<T> {
    fn default() -> RwLock<T> {
        RwLock::new(T::default())
    }
}

impl<T> From<T> for RwLock<T> {
    fn from(value: T) -> RwLock<T> {
        RwLock::new(value)
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for RwLock<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("RwLock");
        match self.data.try_borrow() {
            Ok(v) if !self.writer.get() => d.field("data", &&*v),
            _ => d.field("data", &format_args!("<locked>")),
        };
        d.field("readers", &self.readers.get())
            .field("waiters", &self.waiters())
            .finish_non_exhaustive()
    }
}

impl<T: ?Sized> Deref for RwLockReadGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.data
    }
}

impl<T: ?Sized> Drop for RwLockReadGuard<'_, T> {
    /// Releases this read lock; the last reader out admits the next waiter.
    fn drop(&mut self) {
        self.lock.read_unlock(self.id);
    }
}

impl<T: ?Sized> Deref for RwLockWriteGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.data
    }
}

impl<T: ?Sized> DerefMut for RwLockWriteGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.data
    }
}

impl<T: ?Sized> Drop for RwLockWriteGuard<'_, T> {
    /// Releases the write lock and admits the next waiters.
    fn drop(&mut self) {
        self.lock.write_unlock();
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for RwLockReadGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for RwLockWriteGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}
