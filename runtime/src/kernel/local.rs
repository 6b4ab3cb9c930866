//! Green-thread-local storage: [`green_local!`](crate::green_local) declares
//! a [`LocalKey`] whose value is per green thread (Shrapnel's
//! `coro.ThreadLocal`, tokio's `task_local!`, shaped like std's
//! `thread_local!`).
//!
//! # Design
//!
//! Each task keeps a small list of `(key id, value)`; a key gets a process-
//! wide id the first time it is used. `with` looks the value up, creating it
//! with the key's initialiser on first use in this green thread, and hands
//! the closure a reference to it. Values are reference-counted (`Rc`), so
//! no borrow of the list is held while the closure runs: it may use other
//! keys, spawn, or block.
//!
//! When a green thread ends (returns, panics, or is unwound at shutdown)
//! `spawn::entry` calls [`drop_all`] on the thread's own stack, before its
//! joiners wake, inside a `no_suspend` region: destructors run there and
//! may not block. A thread leaked at shutdown (it caught its unwind and
//! kept blocking) keeps its values, as it keeps its stack.

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::fmt;
use std::panic::{self, AssertUnwindSafe};
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::kernel::context;
use crate::kernel::task::Task;

/// Ids of keys: unique per process, never 0.
static NEXT_KEY: AtomicUsize = AtomicUsize::new(1);

/// Rounds of destructors at thread end: a destructor that uses a local
/// again creates a value that the next round drops.
const DROP_ROUNDS: usize = 8;

/// A key for green-thread-local values, declared with
/// [`green_local!`](crate::green_local): each green thread that uses it has
/// its own value, made by the initialiser on first use and dropped when the
/// thread ends (also when runtime shutdown unwinds it).
///
/// # Examples
///
/// ```
/// use std::cell::Cell;
///
/// coro::green_local! {
///     /// The request this green thread serves, for log lines.
///     static REQUEST: Cell<u64> = Cell::new(0);
/// }
///
/// coro::run(|| {
///     REQUEST.set(7);
///     let other = coro::spawn(|| {
///         REQUEST.set(8);
///         coro::yield_now(); // main runs meanwhile and sees its own value
///         REQUEST.get()
///     });
///     coro::yield_now();
///     assert_eq!(REQUEST.get(), 7);
///     assert_eq!(other.join().unwrap(), 8);
/// });
/// ```
pub struct LocalKey<T: 'static> {
    /// Makes the value of a green thread that has none yet.
    init: fn() -> T,
    /// Process-wide id, assigned on first use (0: not yet).
    id: AtomicUsize,
}

/// A [`LocalKey`] was used where no green thread runs (a plain OS thread,
/// or the scheduler itself).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct AccessError;

impl fmt::Display for AccessError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("green-thread-local value used outside a green thread")
    }
}

impl std::error::Error for AccessError {}

impl<T: 'static> LocalKey<T> {
    #[doc(hidden)]
    /// Used by `green_local!`.
    pub const fn new(init: fn() -> T) -> LocalKey<T> {
        LocalKey {
            init,
            id: AtomicUsize::new(0),
        }
    }

    fn id(&self) -> usize {
        match self.id.load(Ordering::Relaxed) {
            0 => {
                let new = NEXT_KEY.fetch_add(1, Ordering::Relaxed);
                match self
                    .id
                    .compare_exchange(0, new, Ordering::Relaxed, Ordering::Relaxed)
                {
                    Ok(_) => new,
                    Err(won) => won,
                }
            }
            id => id,
        }
    }

    /// This green thread's value, made on first use.
    fn value(&'static self) -> Result<Rc<dyn Any>, AccessError> {
        let id = self.id();
        let found = context::try_with_current(|_, t| find(t, id)).ok_or(AccessError)?;
        if let Some(v) = found {
            return Ok(v);
        }
        // No borrow is held while the initialiser runs: it may use locals.
        let v: Rc<dyn Any> = Rc::new((self.init)());
        context::try_with_current(|_, t| match find(t, id) {
            Some(first) => first, // made meanwhile, by the initialiser itself
            None => {
                t.tail_to_fill().locals.borrow_mut().push((id, v.clone()));
                v
            }
        })
        .ok_or(AccessError)
    }

    /// Runs `f` with this green thread's value.
    ///
    /// # Panics
    ///
    /// Outside a green thread (use [`try_with`](LocalKey::try_with) there).
    #[track_caller]
    pub fn with<F, R>(&'static self, f: F) -> R
    where
        F: FnOnce(&T) -> R,
    {
        match self.try_with(f) {
            Ok(r) => r,
            Err(_) => panic!(
                "coro: LocalKey::with (a green_local! value) needs a green thread \
                 (call it inside coro::run)"
            ),
        }
    }

    /// Runs `f` with this green thread's value, or fails where no green
    /// thread runs.
    ///
    /// # Errors
    ///
    /// [`AccessError`] outside a green thread.
    pub fn try_with<F, R>(&'static self, f: F) -> Result<R, AccessError>
    where
        F: FnOnce(&T) -> R,
    {
        let v = self.value()?;
        let v = v
            .downcast_ref::<T>()
            .expect("a green-local value has its key's type");
        Ok(f(v))
    }
}

fn find(t: &Task, id: usize) -> Option<Rc<dyn Any>> {
    t.tail
        .locals
        .borrow()
        .iter()
        .find(|(k, _)| *k == id)
        .map(|(_, v)| v.clone())
}

impl<T: Copy + 'static> LocalKey<Cell<T>> {
    /// A copy of the value.
    ///
    /// # Panics
    ///
    /// Outside a green thread.
    #[track_caller]
    pub fn get(&'static self) -> T {
        self.with(Cell::get)
    }
}

impl<T: 'static> LocalKey<Cell<T>> {
    /// Sets the value.
    ///
    /// # Panics
    ///
    /// Outside a green thread.
    #[track_caller]
    pub fn set(&'static self, value: T) {
        self.with(|c| c.set(value))
    }

    /// Replaces the value, returning the old one.
    ///
    /// # Panics
    ///
    /// Outside a green thread.
    #[track_caller]
    pub fn replace(&'static self, value: T) -> T {
        self.with(|c| c.replace(value))
    }

    /// Takes the value, leaving `Default::default()`.
    ///
    /// # Panics
    ///
    /// Outside a green thread.
    #[track_caller]
    pub fn take(&'static self) -> T
    where
        T: Default,
    {
        self.with(Cell::take)
    }
}

impl<T: 'static> LocalKey<RefCell<T>> {
    /// Runs `f` with a shared borrow of the value.
    ///
    /// # Panics
    ///
    /// Outside a green thread, or if the value is mutably borrowed.
    #[track_caller]
    pub fn with_borrow<F, R>(&'static self, f: F) -> R
    where
        F: FnOnce(&T) -> R,
    {
        self.with(|c| f(&c.borrow()))
    }

    /// Runs `f` with a mutable borrow of the value.
    ///
    /// # Panics
    ///
    /// Outside a green thread, or if the value is borrowed.
    #[track_caller]
    pub fn with_borrow_mut<F, R>(&'static self, f: F) -> R
    where
        F: FnOnce(&mut T) -> R,
    {
        self.with(|c| f(&mut c.borrow_mut()))
    }

    /// Replaces the value, returning the old one.
    ///
    /// # Panics
    ///
    /// Outside a green thread, or if the value is borrowed.
    #[track_caller]
    pub fn replace(&'static self, value: T) -> T {
        self.with(|c| c.replace(value))
    }

    /// Sets the value.
    ///
    /// # Panics
    ///
    /// Outside a green thread, or if the value is borrowed.
    #[track_caller]
    pub fn set(&'static self, value: T) {
        drop(self.replace(value));
    }

    /// Takes the value, leaving `Default::default()`.
    ///
    /// # Panics
    ///
    /// Outside a green thread, or if the value is borrowed.
    #[track_caller]
    pub fn take(&'static self) -> T
    where
        T: Default,
    {
        self.with(RefCell::take)
    }
}

impl<T: 'static> fmt::Debug for LocalKey<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalKey").finish_non_exhaustive()
    }
}

/// Drops the running green thread's local values (at its end), in rounds
/// while destructors make new ones. Runs inside `no_suspend`: a destructor
/// that blocks is refused. A panicking destructor is logged and the others
/// still run.
#[inline(always)]
pub(crate) fn drop_all() {
    // A thread that never made a local has none (making one marks the
    // task, see `Task::cold_used`): nothing to do, no cold line read.
    if context::try_with_current(|_, t| t.cold_used.get()).unwrap_or(false) {
        drop_all_now();
    }
}

/// [`drop_all`], for a thread that may have locals.
#[inline(never)]
fn drop_all_now() {
    crate::kernel::suspend::no_suspend(|| {
        for _ in 0..DROP_ROUNDS {
            let values =
                context::try_with_current(|_, t| std::mem::take(&mut *t.tail.locals.borrow_mut()))
                    .unwrap_or_default();
            if values.is_empty() {
                return;
            }
            for (_, v) in values {
                if let Err(p) = panic::catch_unwind(AssertUnwindSafe(move || drop(v))) {
                    log::error!(
                        target: "coro",
                        "a green_local! value's destructor panicked as its green thread ended; ignored"
                    );
                    std::mem::forget(p);
                }
            }
        }
        log::error!(
            target: "coro",
            "green_local! destructors kept making new values for {DROP_ROUNDS} rounds; the rest is leaked"
        );
        if let Some(rest) =
            context::try_with_current(|_, t| std::mem::take(&mut *t.tail.locals.borrow_mut()))
        {
            std::mem::forget(rest);
        }
    });
}

/// Declares green-thread-local values: like std's `thread_local!`, but each
/// *green* thread has its own value (see [`LocalKey`]).
///
/// ```
/// use std::cell::RefCell;
///
/// coro::green_local! {
///     static TRAIL: RefCell<Vec<&'static str>> = RefCell::new(Vec::new());
///     pub static DEPTH: std::cell::Cell<u32> = std::cell::Cell::new(0);
/// }
///
/// coro::run(|| {
///     TRAIL.with_borrow_mut(|t| t.push("main"));
///     let h = coro::spawn(|| TRAIL.with_borrow(|t| t.len()));
///     assert_eq!(h.join().unwrap(), 0); // a fresh value in the new thread
///     assert_eq!(DEPTH.get(), 0);
/// });
/// ```
#[macro_export]
macro_rules! green_local {
    () => {};
    ($(#[$attr:meta])* $vis:vis static $name:ident: $t:ty = $init:expr; $($rest:tt)*) => {
        $crate::green_local!($(#[$attr])* $vis static $name: $t = $init);
        $crate::green_local!($($rest)*);
    };
    ($(#[$attr:meta])* $vis:vis static $name:ident: $t:ty = $init:expr) => {
        $(#[$attr])*
        $vis static $name: $crate::LocalKey<$t> = $crate::LocalKey::new({
            fn init() -> $t {
                $init
            }
            init
        });
    };
}
