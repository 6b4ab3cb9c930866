//! The tail of a control block: the state of the features a plain thread
//! never touches (joiners, what a park waits on, shutdown's unwind counts,
//! the spin streak, green-thread locals, a future's waker), kept apart from
//! the fields every switch reads (see `Task`'s layout).

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;

use crate::kernel::seams::TheFutureWake;
use crate::kernel::wait_target::WaitTarget;
use crate::kernel::wake::Waiter;

/// The values of one green thread's locals, by key id (see `local`).
pub(crate) type Locals = Vec<(usize, Rc<dyn Any>)>;

/// A thread's run of refused blocking calls (a field of the tail, see `spin`).
#[derive(Default)]
pub(crate) struct Streak {
    /// The task's `park_gen` just after the last refused call: a refusal
    /// that finds it unchanged follows the last one with no park between.
    pub(crate) gen: Cell<u64>,
    /// Refused calls in the current run.
    pub(crate) count: Cell<u32>,
}

impl Streak {
    /// Whether it holds what `Streak::default()` holds.
    pub(crate) fn is_empty(&self) -> bool {
        self.gen.get() == 0 && self.count.get() == 0
    }
}

/// The fields of a [`Task`] a plain thread never fills: the tail of the
/// block.
///
/// # Invariant
///
/// In every block `task_pool` keeps for reuse, the tail is empty
/// ([`Tail::is_empty`]): whatever fills one of its fields reaches it
/// through [`Task::tail_to_fill`], which marks the task `cold_used`, and `Task::recycle` resets
/// the tail of a marked task before keeping it. So [`Task::reinit`] leaves
/// the tail alone.
#[derive(Default)]
pub(crate) struct Tail {
    /// Every green thread waiting for it to finish (`JoinHandle::wait`: a
    /// handle can be shared, so there may be several); all are woken when
    /// it ends.
    pub(crate) joiners: RefCell<Vec<Waiter>>,
    /// Who-waits-on-whom (see `waits`): the object it is parked on, set by
    /// [`park_on`](crate::park_on) for the length of the park.
    pub(crate) wait_target: Cell<Option<Rc<WaitTarget>>>,
    /// The green thread it is parked joining (0: none).
    pub(crate) wait_thread: Cell<u64>,
    /// Times the task raised shutdown's unwind.
    pub(crate) unwind_rounds: Cell<u32>,
    /// Blocking calls refused while the task was being unwound (bounds a
    /// loop that keeps catching its unwind while the OS thread panics).
    pub(crate) unwind_refusals: Cell<u32>,
    /// A refused `yield_now` was logged (it is logged once per thread).
    pub(crate) yield_refusal_logged: Cell<bool>,
    /// Its run of blocking calls refused at once (see `spin`).
    pub(crate) spin: Streak,
    /// Its `green_local!` values (see `local`).
    pub(crate) locals: RefCell<Locals>,
    /// The waker state of its last `future::block_on`, kept for the next
    /// one when no clone of that waker survived (see `future`).
    pub(crate) future_wake: Cell<Option<Arc<TheFutureWake>>>,
}

impl Tail {
    /// Whether every field holds what `Tail::default()` holds.
    pub(crate) fn is_empty(&mut self) -> bool {
        let Tail {
            joiners,
            wait_target,
            wait_thread,
            unwind_rounds,
            unwind_refusals,
            yield_refusal_logged,
            spin,
            locals,
            future_wake,
        } = self;
        joiners.get_mut().is_empty()
            && wait_target.get_mut().is_none()
            && wait_thread.get() == 0
            && unwind_rounds.get() == 0
            && unwind_refusals.get() == 0
            && !yield_refusal_logged.get()
            && spin.is_empty()
            && locals.get_mut().is_empty()
            && future_wake.get_mut().is_none()
    }
}
