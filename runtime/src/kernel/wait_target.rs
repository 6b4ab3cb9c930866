//! What a parked thread waits on, when another thread can hold it: the
//! park's record that the wait graph (`observers::waits`) follows.

use std::cell::Cell;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Ids of wait targets: unique per process.
static NEXT_TARGET_ID: AtomicU64 = AtomicU64::new(1);

/// An object green threads park on and another thread can hold: a lock, a
/// queue, a thread being joined. [`threads`](crate::threads) shows it as
/// what a thread waits on, [`deadlocks`](crate::deadlocks) and [`leaks`](crate::leaks) follow its holder.
///
/// Primitives make one (an `Rc`, shared with the threads parked on it) when
/// a thread first waits, keep its holder up to date while threads wait,
/// and park with [`park_on`](crate::park_on).
///
/// # Examples
///
/// ```
/// coro::run(|| {
///     let t = coro::WaitTarget::new("Mutex");
///     assert_eq!(t.holder(), None);
///     t.set_holder(coro::current_id().unwrap());
///     assert_eq!(t.holder(), coro::current_id());
/// });
/// ```
#[derive(Debug)]
pub struct WaitTarget {
    id: u64,
    kind: &'static str,
    /// The green thread holding it (0: none, or not known).
    holder: Cell<u64>,
}

impl WaitTarget {
    /// A target of this kind (`"Mutex"`, `"RwLock"`, ...), held by nobody.
    pub fn new(kind: &'static str) -> Rc<WaitTarget> {
        Rc::new(WaitTarget {
            id: NEXT_TARGET_ID.fetch_add(1, Ordering::Relaxed),
            kind,
            holder: Cell::new(0),
        })
    }

    /// Its id, unique in the process.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Its kind.
    pub fn kind(&self) -> &'static str {
        self.kind
    }

    /// Records the green thread (by [`Coro::id`](crate::Coro::id)) that
    /// holds it now; 0 for nobody.
    pub fn set_holder(&self, thread: u64) {
        self.holder.set(thread);
    }

    /// The green thread holding it, if any.
    pub fn holder(&self) -> Option<u64> {
        Some(self.holder.get()).filter(|&h| h != 0)
    }
}
