//! [`WaitGroup`]: wait for a group of green threads (or any units of work)
//! to finish, each member counted by a guard that cannot be forgotten.

use std::fmt;
use std::io;
use std::rc::Rc;

use coro_runtime::{Builder, JoinHandle, WaitError};

use crate::InvertedSemaphore;

/// Waits until every member of a group has finished, like Go's
/// `sync.WaitGroup`, with members counted by guards.
///
/// [`add`](WaitGroup::add) makes a member: it raises the count and returns a
/// [`WaitGroupGuard`] that lowers it again when dropped (or
/// [`done`](WaitGroupGuard::done)), so a member that returns early, fails
/// or panics is still counted out and a waiter is never stranded.
/// [`spawn`](WaitGroup::spawn) starts a green thread that is a member for
/// its whole run. [`wait`](WaitGroup::wait) blocks until the count is zero.
///
/// The group is a cheap handle (`Clone` shares it). It is built on an
/// [`InvertedSemaphore`]; use that directly to count in units other than
/// one per member.
///
/// # Wake-up semantics
///
/// When the last member finishes, every waiter is woken in the order it
/// started waiting, and its `wait` returns `Ok` even if new members joined
/// before it ran: it saw the group empty. A waiter that is interrupted or
/// whose [`with_timeout`](coro_runtime::with_timeout) deadline passes leaves
/// with the error; the members are not affected.
///
/// # Examples
///
/// ```
/// use std::cell::Cell;
/// use std::rc::Rc;
/// use coro::sync::WaitGroup;
///
/// coro::run(|| {
///     let group = WaitGroup::new();
///     let done = Rc::new(Cell::new(0));
///     for _ in 0..3 {
///         let done = done.clone();
///         group.spawn(move || {
///             coro::yield_now(); // the work
///             done.set(done.get() + 1);
///         });
///     }
///     group.wait().unwrap();
///     assert_eq!(done.get(), 3);
/// });
/// ```
#[derive(Clone, Default)]
pub struct WaitGroup {
    members: Rc<InvertedSemaphore>,
}

impl WaitGroup {
    /// An empty group.
    pub fn new() -> WaitGroup {
        WaitGroup::default()
    }

    /// Adds a member; it counts until the returned guard is dropped.
    ///
    /// # Examples
    ///
    /// ```
    /// use coro::sync::WaitGroup;
    ///
    /// coro::run(|| {
    ///     let group = WaitGroup::new();
    ///     let member = group.add();
    ///     coro::spawn(move || {
    ///         coro::yield_now(); // the work
    ///         member.done();
    ///     });
    ///     group.wait().unwrap();
    ///     assert_eq!(group.len(), 0);
    /// });
    /// ```
    #[must_use = "the member is counted out as soon as the guard is dropped"]
    pub fn add(&self) -> WaitGroupGuard {
        self.members.acquire(1);
        WaitGroupGuard {
            members: self.members.clone(),
        }
    }

    /// Spawns a green thread (see [`coro_runtime::spawn`]) that is a member
    /// of the group until it returns or panics.
    ///
    /// # Panics
    ///
    /// Outside a runtime, or if no stack can be had for the thread (as
    /// [`coro_runtime::spawn`]); [`spawn_with`](WaitGroup::spawn_with)
    /// returns that as an error.
    pub fn spawn<F, T>(&self, f: F) -> JoinHandle<T>
    where
        F: FnOnce() -> T + 'static,
        T: 'static,
    {
        let member = self.add();
        coro_runtime::spawn(move || {
            let _member = member;
            f()
        })
    }

    /// [`spawn`](WaitGroup::spawn) through a [`Builder`] (a name, a stack
    /// size, a selfishness budget): like [`Builder::spawn`], it returns an
    /// error instead of panicking when the thread cannot be started, and the
    /// group is then as it was.
    ///
    /// # Errors
    ///
    /// As [`Builder::spawn`]: bad settings, or no memory for a stack.
    ///
    /// # Examples
    ///
    /// ```
    /// use coro::Builder;
    /// use coro::sync::WaitGroup;
    ///
    /// coro::run(|| -> std::io::Result<()> {
    ///     let group = WaitGroup::new();
    ///     let worker = Builder::new().name("worker".into()).stack_size(64 * 1024);
    ///     group.spawn_with(worker, || coro::yield_now())?;
    ///     group.wait().unwrap();
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn spawn_with<F, T>(&self, builder: Builder, f: F) -> io::Result<JoinHandle<T>>
    where
        F: FnOnce() -> T + 'static,
        T: 'static,
    {
        let member = self.add();
        // On an error the closure, and with it the member, is dropped.
        builder.spawn(move || {
            let _member = member;
            f()
        })
    }

    /// Members that have not finished yet.
    pub fn len(&self) -> usize {
        self.members.count()
    }

    /// Whether every member has finished (or none was added).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Waits until every member has finished; returns at once if the group
    /// is empty.
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
        self.members.wait_for_zero("WaitGroup::wait")
    }
}

impl fmt::Debug for WaitGroup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WaitGroup")
            .field("members", &self.members.count())
            .field("waiters", &self.members.waiters())
            .finish()
    }
}

/// A member of a [`WaitGroup`]: counted until dropped.
///
/// Dropping never blocks; the last member out wakes the group's waiters.
pub struct WaitGroupGuard {
    members: Rc<InvertedSemaphore>,
}

impl WaitGroupGuard {
    /// Counts this member out (the same as dropping the guard, said
    /// explicitly).
    pub fn done(self) {}
}

impl Drop for WaitGroupGuard {
    fn drop(&mut self) {
        self.members.release(1);
    }
}

impl fmt::Debug for WaitGroupGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WaitGroupGuard")
            .field("members", &self.members.count())
            .finish()
    }
}
