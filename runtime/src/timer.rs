//! The timer heap: deadlines in clock ticks, ordered by `(deadline, seq)` so
//! equal deadlines fire in insertion order.
//!
//! # Design
//!
//! Entries are never removed from the middle of the heap. An entry whose
//! operation finished first (a sleep that was interrupted, a `with_timeout`
//! scope that returned, a scope whose deadline moved) becomes *stale*: it is skipped when it pops, and the
//! heap is rebuilt without stale entries once they outnumber the live ones
//! (and pass a small floor). So the heap holds at most about twice the live
//! timers plus that floor, and cancelling costs O(1).
//!
//! The heap counts *live* entries exactly: an insert adds one, and each
//! entry is taken off exactly once, either when it fires ([`TimerHeap::fired`])
//! or when its owner gives it up ([`TimerHeap::cancel_one`]): a sleep whose
//! timer did not fire, a scope that left with its timer armed and unexpired.
//! Popping a stale entry changes nothing, so the count does not depend on
//! whether the owner gives up before or after its entry pops.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::rc::Rc;

use crate::task::{Task, ThreadState};

/// Stale entries tolerated before a rebuild is considered.
const STALE_FLOOR: usize = 256;

/// What a timer does when it fires.
#[derive(Debug, Clone, Copy)]
pub(crate) enum TimerKind {
    /// Wake the task if it is still in the park of this generation (sleep).
    Wake { gen: u64 },
    /// Expire the task's scope with this id (`with_timeout`, a cancel scope).
    Scope { id: u64 },
}

pub(crate) struct Entry {
    pub(crate) deadline: u64,
    seq: u64,
    pub(crate) task: Rc<Task>,
    pub(crate) kind: TimerKind,
}

impl Entry {
    /// Whether firing this entry would still do something.
    pub(crate) fn is_live(&self) -> bool {
        match self.kind {
            TimerKind::Wake { gen } => {
                self.task.state.get() == ThreadState::Parked && self.task.park_gen.get() == gen
            }
            TimerKind::Scope { id } => crate::cancel::timer_is_live(&self.task, id, self.deadline),
        }
    }
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    // Reversed: BinaryHeap is a max-heap and we want the earliest first.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.deadline, other.seq).cmp(&(self.deadline, self.seq))
    }
}

/// Min-heap of timer entries with lazy cancellation.
#[derive(Default)]
pub(crate) struct TimerHeap {
    heap: BinaryHeap<Entry>,
    /// Insertion counter: the tie-breaker for equal deadlines.
    seq: u64,
    /// Entries inserted and neither fired nor cancelled by their owner.
    live: usize,
}

impl TimerHeap {
    pub(crate) fn insert(&mut self, deadline: u64, task: Rc<Task>, kind: TimerKind) {
        self.seq += 1;
        self.live += 1;
        self.heap.push(Entry {
            deadline,
            seq: self.seq,
            task,
            kind,
        });
    }

    /// Earliest deadline of an entry that would still do something; stale
    /// entries at the head are dropped on the way.
    pub(crate) fn next_live_deadline(&mut self) -> Option<u64> {
        while let Some(e) = self.heap.peek() {
            if e.is_live() {
                return Some(e.deadline);
            }
            self.heap.pop();
        }
        None
    }

    /// Pops the earliest entry if its deadline is at or before `now`.
    pub(crate) fn pop_expired(&mut self, now: u64) -> Option<Entry> {
        if self.heap.peek()?.deadline <= now {
            self.heap.pop()
        } else {
            None
        }
    }

    /// A popped entry was live and fired.
    pub(crate) fn fired(&mut self) {
        self.live = self.live.saturating_sub(1);
    }

    /// Its owner gave up an entry that did not fire: it no longer does
    /// anything. Rebuilds the heap when stale entries dominate.
    pub(crate) fn cancel_one(&mut self) {
        self.live = self.live.saturating_sub(1);
        let stale = self.heap.len().saturating_sub(self.live);
        if stale > STALE_FLOOR && stale * 2 > self.heap.len() {
            self.compact();
        }
    }

    /// Drops every stale entry.
    pub(crate) fn compact(&mut self) {
        let old = std::mem::take(&mut self.heap);
        self.heap = old.into_iter().filter(Entry::is_live).collect();
    }

    /// Timers that will still do something.
    pub(crate) fn pending(&self) -> usize {
        self.live
    }

    /// The entries that would still do something, in no order (`coro::timers`).
    pub(crate) fn live_entries(&self) -> impl Iterator<Item = &Entry> {
        self.heap.iter().filter(|e| e.is_live())
    }

    /// Entries in the heap, stale ones included.
    pub(crate) fn len(&self) -> usize {
        self.heap.len()
    }

    pub(crate) fn clear(&mut self) {
        self.heap.clear();
        self.live = 0;
    }
}
