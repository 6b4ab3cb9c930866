//! The FIFO queue of parked green threads that every primitive is built on.
//!
//! # Design
//!
//! A [`WaitList`] is a doubly linked list threaded through a vector of slots
//! (a small slab), so a waiter can leave from the middle in O(1) and keeps a
//! stable key while it is parked. Each slot holds the waiter's [`Coro`] and a
//! per-primitive payload (the permits it asks for, the slot an item is handed
//! into, ...).
//!
//! Waking is a *hand-off*: the primitive decides that waiter `k` gets the
//! resource, updates its own state on `k`'s behalf (ownership, permits, an
//! item in the payload), then calls [`WaitList::hand`], which unlinks `k` and
//! unparks it. Unlinked means handed. The waiter's slot stays allocated until
//! the waiter itself runs and [`WaitList::remove`]s it, so it can always tell
//! whether it was handed something.
//!
//! The runtime lets an interrupt or a timeout win over a wake that has not run
//! yet (Shrapnel's rule). So a waiter whose park fails checks its slot: if it
//! was handed something it passes it on (to the next waiter or back to the
//! primitive) before it returns the error; see [`wait`]. To pass things on
//! rarely, [`WaitList::first_live`] skips waiters that an interrupt or a
//! timeout has already made ready: they are about to fail and leave.

use std::cell::RefCell;
use std::fmt;
use std::panic::Location;
use std::rc::Rc;

use coro_runtime::{Coro, ThreadState, WaitError, WaitTarget};

const NIL: usize = usize::MAX;

/// A FIFO list of waiting green threads with payloads of type `D`.
pub(crate) struct WaitList<D> {
    /// Slots; a free slot is `None` and its index is on `free`.
    slots: Vec<Option<Node<D>>>,
    /// Indices of free slots, reused last-in first-out.
    free: Vec<usize>,
    /// First and last linked slot, or `NIL`.
    head: usize,
    tail: usize,
    /// Number of linked (not yet handed) waiters.
    linked: usize,
    /// What threads parked here wait on, for who-waits-on-whom (made when
    /// the first thread waits; the primitive keeps its holder up to date
    /// with [`WaitList::set_holder`]).
    target: Option<Rc<WaitTarget>>,
}

struct Node<D> {
    coro: Coro,
    data: D,
    /// Still queued. A node leaves the list when it is handed something (and
    /// stays allocated until its waiter removes it) or when its waiter gives up.
    linked: bool,
    prev: usize,
    next: usize,
}

impl<D> WaitList<D> {
    pub(crate) const fn new() -> WaitList<D> {
        WaitList {
            slots: Vec::new(),
            free: Vec::new(),
            head: NIL,
            tail: NIL,
            linked: 0,
            target: None,
        }
    }

    /// The object threads parked here wait on; made on first use, its
    /// kind the part of `what` before `::` (`"Mutex::lock"`: `"Mutex"`).
    #[inline]
    pub(crate) fn target(&mut self, what: &'static str) -> &Rc<WaitTarget> {
        if self.target.is_none() {
            self.make_target(what);
        }
        self.target
            .as_ref()
            .unwrap_or_else(|| unreachable!("made above"))
    }

    #[cold]
    #[inline(never)]
    fn make_target(&mut self, what: &'static str) {
        self.target = Some(WaitTarget::new(
            what.split_once("::").map_or(what, |(kind, _)| kind),
        ));
    }

    /// Records the green thread holding the primitive now (0: nobody) for
    /// the threads waiting on it. Cheap, and nothing while nobody ever
    /// waited.
    #[inline]
    pub(crate) fn set_holder(&self, thread: u64) {
        if let Some(t) = &self.target {
            t.set_holder(thread);
        }
    }

    /// Number of queued waiters (including ones about to leave).
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.linked
    }

    /// No waiter is queued.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.linked == 0
    }

    fn node(&self, key: usize) -> &Node<D> {
        self.slots[key].as_ref().expect("wait list key is live")
    }

    fn node_mut(&mut self, key: usize) -> &mut Node<D> {
        self.slots[key].as_mut().expect("wait list key is live")
    }

    #[inline]
    fn alloc(&mut self, node: Node<D>) -> usize {
        match self.free.pop() {
            Some(k) => {
                self.slots[k] = Some(node);
                k
            }
            None => {
                self.slots.push(Some(node));
                self.slots.len() - 1
            }
        }
    }

    /// Queues `coro` at the back; returns its key.
    #[inline]
    pub(crate) fn push_back(&mut self, coro: Coro, data: D) -> usize {
        let prev = self.tail;
        let key = self.alloc(Node {
            coro,
            data,
            linked: true,
            prev,
            next: NIL,
        });
        if prev == NIL {
            self.head = key;
        } else {
            self.node_mut(prev).next = key;
        }
        self.tail = key;
        self.linked += 1;
        key
    }

    /// Queues `coro` at the front (a waiter that was served but has to
    /// wait again keeps its place); returns its key.
    pub(crate) fn push_front(&mut self, coro: Coro, data: D) -> usize {
        let next = self.head;
        let key = self.alloc(Node {
            coro,
            data,
            linked: true,
            prev: NIL,
            next,
        });
        if next == NIL {
            self.tail = key;
        } else {
            self.node_mut(next).prev = key;
        }
        self.head = key;
        self.linked += 1;
        key
    }

    /// Takes `key` out of the list (its slot stays allocated).
    fn unlink(&mut self, key: usize) {
        let (prev, next) = {
            let n = self.node_mut(key);
            debug_assert!(n.linked);
            n.linked = false;
            (n.prev, n.next)
        };
        if prev == NIL {
            self.head = next;
        } else {
            self.node_mut(prev).next = next;
        }
        if next == NIL {
            self.tail = prev;
        } else {
            self.node_mut(next).prev = prev;
        }
        self.linked -= 1;
    }

    /// Whether `key` is still queued (not handed anything).
    #[inline]
    pub(crate) fn is_linked(&self, key: usize) -> bool {
        self.node(key).linked
    }

    /// The id of the green thread queued as `key`.
    pub(crate) fn coro_id(&self, key: usize) -> u64 {
        self.node(key).coro.id()
    }

    /// The payload of `key`.
    pub(crate) fn data(&self, key: usize) -> &D {
        &self.node(key).data
    }

    /// The payload of `key`, mutably (to hand something into it).
    pub(crate) fn data_mut(&mut self, key: usize) -> &mut D {
        &mut self.node_mut(key).data
    }

    /// Frees `key`'s slot; returns its payload and whether it had been handed
    /// something (was no longer linked).
    pub(crate) fn remove(&mut self, key: usize) -> (D, bool) {
        let handed = !self.is_linked(key);
        if !handed {
            self.unlink(key);
        }
        let node = self.slots[key].take().expect("wait list key is live");
        self.free.push(key);
        (node.data, handed)
    }

    /// Whether a waiter can still take a hand-off: it is parked, or it is the
    /// running thread itself (a waiter re-checking after a spurious wake-up).
    /// A waiter made ready by an interrupt or a timeout is about to fail.
    fn is_live(node: &Node<D>) -> bool {
        matches!(
            node.coro.state(),
            ThreadState::Parked | ThreadState::Running
        )
    }

    /// The first queued waiter that can take a hand-off, if any.
    #[inline]
    pub(crate) fn first_live(&self) -> Option<usize> {
        self.live_from(self.head)
    }

    /// Number of queued waiters that can take a hand-off (O(n)).
    pub(crate) fn live_count(&self) -> usize {
        let mut n = 0;
        let mut k = self.first_live();
        while let Some(key) = k {
            n += 1;
            k = self.next_live(key);
        }
        n
    }

    /// The next queued waiter after `key` that can take a hand-off.
    pub(crate) fn next_live(&self, key: usize) -> Option<usize> {
        self.live_from(self.node(key).next)
    }

    fn live_from(&self, mut k: usize) -> Option<usize> {
        while k != NIL {
            let n = self.node(k);
            if Self::is_live(n) {
                return Some(k);
            }
            k = n.next;
        }
        None
    }

    /// Unlinks `key` and wakes it: it has been handed what it waited for.
    ///
    /// The unpark fails only when the waiter is not parked: it is the running
    /// thread itself, or an interrupt or a timeout made it ready first. In the
    /// latter case it sees the hand-off when it runs and passes it on.
    pub(crate) fn hand(&mut self, key: usize) {
        self.unlink(key);
        let _ = self.node(key).coro.unpark();
    }

    /// Unlinks and wakes every queued waiter that can take a hand-off, in
    /// FIFO order; returns how many.
    pub(crate) fn hand_all(&mut self) -> usize {
        let mut n = 0;
        let mut cur = self.first_live();
        while let Some(k) = cur {
            cur = self.next_live(k);
            self.hand(k);
            n += 1;
        }
        n
    }
}

impl<D> fmt::Debug for WaitList<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut ids = Vec::with_capacity(self.linked);
        let mut k = self.head;
        while k != NIL {
            let n = self.node(k);
            ids.push(n.coro.id());
            k = n.next;
        }
        f.debug_struct("WaitList").field("waiters", &ids).finish()
    }
}

/// Parks the running thread, queued in `list` as `key`, until it is handed
/// something; returns the payload.
///
/// `dispatch` is the primitive's "hand out what can be handed out" step. It
/// runs after a spurious wake-up (the thread may itself be first in line now)
/// and after the thread leaves the queue unhanded (it may have been holding
/// up the head of the line). `pass_on` gets the payload when the thread was
/// handed something but cannot keep it (its park failed: the interrupt or
/// timeout won); it must pass it to the next waiter or back to the primitive.
/// Neither may hold a borrow of `list`.
///
/// The slot is freed on every exit, also when the thread is unwound (at
/// runtime shutdown) while parked.
///
/// While parked the thread is recorded as waiting on the list's
/// [`WaitTarget`] (see `coro_runtime::park_on`), called from the caller of
/// the `#[track_caller]` chain that leads here.
#[inline]
#[track_caller]
pub(crate) fn wait<D, F, P>(
    list: &RefCell<WaitList<D>>,
    key: usize,
    what: &'static str,
    dispatch: F,
    pass_on: P,
) -> Result<D, WaitError>
where
    F: Fn(),
    P: FnOnce(D),
{
    let mut leave = Leave {
        list,
        key,
        dispatch: &dispatch,
        pass_on: Some(pass_on),
    };
    let site = Location::caller();
    let target = list.borrow_mut().target(what).clone();
    loop {
        let r = coro_runtime::park_on(&target, what, site);
        let handed = !list.borrow().is_linked(key);
        match r {
            Ok(()) if handed => return Ok(leave.take()),
            Err(err) => return Err(err), // `leave` cleans up
            Ok(()) => {
                // A spurious wake-up: maybe the way is clear now.
                dispatch();
                if !list.borrow().is_linked(key) {
                    return Ok(leave.take());
                }
            }
        }
    }
}

/// Frees a waiter's slot when its wait fails or unwinds, passing on what it
/// was handed or letting the next waiters in.
struct Leave<'a, D, F: Fn(), P: FnOnce(D)> {
    list: &'a RefCell<WaitList<D>>,
    key: usize,
    dispatch: &'a F,
    /// `None` once the wait succeeded (nothing to clean up).
    pass_on: Option<P>,
}

impl<D, F: Fn(), P: FnOnce(D)> Leave<'_, D, F, P> {
    /// The wait succeeded: frees the slot and returns the payload.
    fn take(&mut self) -> D {
        self.pass_on = None;
        self.list.borrow_mut().remove(self.key).0
    }
}

impl<D, F: Fn(), P: FnOnce(D)> Drop for Leave<'_, D, F, P> {
    fn drop(&mut self) {
        let Some(pass_on) = self.pass_on.take() else {
            return;
        };
        let (data, handed) = self.list.borrow_mut().remove(self.key);
        if handed {
            pass_on(data);
        } else {
            (self.dispatch)();
        }
    }
}

/// A blocking call is returning an error without having waited: it spends
/// one unit of the running thread's selfishness, as a call that succeeds
/// without waiting on a socket does, so a loop that ignores the error
/// yields every few calls instead of starving the other threads (the rule
/// is stated in the runtime's crate docs, "Calls that fail at once").
/// Nothing outside a green thread.
#[inline]
pub(crate) fn failed_at_once() {
    coro_runtime::failed_at_once();
}

/// The id of the running green thread, or 0 outside one.
#[inline]
pub(crate) fn current_id() -> u64 {
    coro_runtime::current_id().unwrap_or(0)
}

/// The running green thread's handle, for queueing it.
///
/// # Panics
///
/// Outside a green thread, with a message naming `what`.
#[track_caller]
pub(crate) fn current_coro(what: &str) -> Coro {
    if !coro_runtime::in_green_thread() {
        panic!(
            "coro: {what} would block, and that needs a green thread (call it inside coro::run)"
        );
    }
    coro_runtime::current()
}
