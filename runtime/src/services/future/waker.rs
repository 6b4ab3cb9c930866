//! The `Waker` of [`block_on`](super::block_on): `Send + Sync`, safe to
//! keep, clone and call late, from any OS thread.
//!
//! # Design
//!
//! One [`FutureWake`] per `block_on` call, shared through an `Arc` (std's
//! [`Wake`] trait builds the `Waker`: no `RawWaker` vtable, no unsafe). It
//! names the green thread by its key in the thread table and its id (keys
//! are reused, ids are not), never by pointer, and holds:
//!
//! * `woken`: set by every wake, cleared by `block_on` before each poll.
//!   `block_on` parks only if it is still clear after the poll, so a wake
//!   that comes while the future is being polled, or between the poll and
//!   the park, is never lost: the park is skipped.
//! * `parked`: `1 +` the park generation `block_on` is parked in, `0`
//!   when it is not parked. Written and read only on the runtime's OS
//!   thread (by `block_on`, and by [`FutureWake::wake_here`], which the
//!   loop runs), so a wake decides there whether the thread is still in
//!   that park: a late wake (after a timeout, an interrupt, the end of the
//!   `block_on`, or when the key now holds another thread) does nothing.
//!
//! A wake on the runtime's own OS thread (the reactor, a timer, another
//! green thread) schedules the thread at once. One from another OS thread
//! goes through the runtime's remote inbox (`remote`), whose loop calls
//! `wake_here`; the first wake after a clear does, later ones only set the
//! flag again, so a burst of wakes costs one inbox entry.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::Wake;

use crate::kernel::context;
use crate::kernel::sched::Scheduler;
use crate::kernel::task::ThreadState;
use crate::kernel::wake::make_ready;
use crate::services::remote::Outside;

/// The shared state behind one `block_on`'s `Waker`.
pub(crate) struct FutureWake {
    /// A wake came since `block_on` last cleared it (before a poll).
    pub(super) woken: AtomicBool,
    /// `1 +` the park generation `block_on` is parked in; `0`: not parked.
    ///
    /// # Invariant
    /// Only touched on the runtime's OS thread (`Relaxed` is enough: the
    /// atomic only makes the type `Sync`).
    pub(super) parked: AtomicU64,
    /// Key of the green thread in its runtime's thread table.
    key: usize,
    /// Its id: a key is reused by a later thread, an id never.
    id: u64,
    /// Id of the runtime the thread belongs to.
    runtime: u64,
    /// The runtime's inbox, for wakes from other OS threads.
    ///
    /// # Invariant
    /// `Some` whenever a `Waker` of this state exists; `None` only while the
    /// state waits, unshared, for its thread's next `block_on` (`recycle`):
    /// a held inbox reference tells the runtime that something outside may
    /// still wake it (no deadlock report), which a cached state must not.
    remote: Option<Outside>,
}

impl FutureWake {
    pub(super) fn new(key: usize, id: u64, remote: Outside) -> FutureWake {
        FutureWake {
            woken: AtomicBool::new(false),
            parked: AtomicU64::new(0),
            key,
            id,
            runtime: remote.runtime(),
            remote: Some(remote),
        }
    }

    /// Readies an unshared state for reuse by its thread's next `block_on`
    /// (`remote` is the runtime's inbox), or for the cache (`None`).
    pub(super) fn reset(&mut self, remote: Option<Outside>) {
        *self.woken.get_mut() = false;
        *self.parked.get_mut() = 0;
        self.remote = remote;
    }

    /// On the runtime's OS thread: schedules the thread if it is still
    /// parked in the `block_on` park this state is for.
    pub(crate) fn wake_here(&self, s: &Scheduler) {
        let parked = self.parked.load(Ordering::Relaxed);
        if parked == 0 {
            return;
        }
        let task = s.tasks.borrow().get(self.key).cloned();
        if let Some(t) = task {
            if t.id == self.id
                && t.state.get() == ThreadState::Parked
                && t.park_gen.get() + 1 == parked
            {
                make_ready(&t);
            }
        }
    }

    fn wake_ref(self: &Arc<Self>) {
        // Release: what the waker's caller did before is seen by the poll
        // that follows `block_on`'s Acquire swap.
        if self.woken.swap(true, Ordering::AcqRel) {
            // An earlier wake is not consumed yet: it already did (or is
            // doing) what this one would.
            return;
        }
        let local = context::try_with_sched(|s| {
            if s.id == self.runtime {
                self.wake_here(s);
                true
            } else {
                false
            }
        });
        if local != Some(true) {
            if let Some(remote) = &self.remote {
                // A closed inbox (the runtime was dropped): nothing to wake.
                let _ = remote.push_future_wake(self.clone());
            }
        }
    }
}

impl Wake for FutureWake {
    fn wake(self: Arc<Self>) {
        self.wake_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.wake_ref();
    }
}
