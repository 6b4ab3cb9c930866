//! [`WaiterQueue`]: the green threads parked on one direction of an I/O
//! source, in order, with the first kept inline.
//!
//! A socket almost always has one waiter per direction: the thread that
//! owns it. Keeping that one inside the source's state instead of in a
//! `VecDeque`'s heap buffer saves a cache line on every wait and every
//! wake, which counts when thousands of connections share a core's cache
//! (BENCHMARKS.md, echo at 1 000 connections). The others go to a deque
//! made the first time a second thread waits, and kept (a pointer, not the
//! deque's four words, so that both queues of a source share the line of
//! its readiness flags: `reactor::IoState`).

use std::collections::VecDeque;

use crate::kernel::wake::Waiter;

/// A FIFO of [`Waiter`]s whose head is stored inline.
///
/// # Invariant
///
/// `first` is `None` only when `rest` holds no waiter: `first` is the head.
#[derive(Default)]
pub(crate) struct WaiterQueue {
    first: Option<Waiter>,
    /// The waiters after `first`, in order: made when a second thread first
    /// waits, then kept (emptied, not freed). Boxed: one word in the
    /// source's state where the deque itself is four (module docs).
    #[expect(clippy::box_collection)]
    rest: Option<Box<VecDeque<Waiter>>>,
}

impl WaiterQueue {
    /// Queues `w` last.
    #[inline]
    pub(crate) fn push_back(&mut self, w: Waiter) {
        if self.first.is_none() {
            self.first = Some(w);
        } else {
            self.rest.get_or_insert_with(Box::default).push_back(w);
        }
    }

    /// Takes the first waiter.
    #[inline]
    pub(crate) fn pop_front(&mut self) -> Option<Waiter> {
        let head = self.first.take();
        if head.is_some() {
            self.first = self.rest.as_mut().and_then(|r| r.pop_front());
        }
        head
    }

    /// The first waiter.
    #[inline]
    pub(crate) fn front(&self) -> Option<&Waiter> {
        self.first.as_ref()
    }

    /// Number of queued waiters.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        usize::from(self.first.is_some()) + self.rest.as_ref().map_or(0, |r| r.len())
    }

    /// The waiters, first to last.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Waiter> {
        self.first
            .iter()
            .chain(self.rest.iter().flat_map(|r| r.iter()))
    }

    /// Keeps only the waiters `keep` accepts, in order.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&Waiter) -> bool) {
        if self.first.as_ref().is_some_and(|w| !keep(w)) {
            self.first = None;
        }
        if let Some(rest) = &mut self.rest {
            rest.retain(|w| keep(w));
            if self.first.is_none() {
                self.first = rest.pop_front();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::WaiterQueue;
    use crate::kernel::wake::Waiter;

    /// `n` parked threads' waiters, their ids in order.
    fn queue_of(n: usize) -> (WaiterQueue, Vec<u64>) {
        let mut q = WaiterQueue::default();
        let mut ids = Vec::new();
        for _ in 0..n {
            let h = crate::spawn(|| crate::park().unwrap());
            crate::yield_now(); // it parks
            ids.push(h.thread().id());
            q.push_back(Waiter::of(h.thread()));
        }
        (q, ids)
    }

    fn ids(q: &WaiterQueue) -> Vec<u64> {
        q.iter().map(Waiter::thread_id).collect()
    }

    #[test]
    fn waiters_come_out_in_order_with_the_first_inline() {
        crate::run(|| {
            let (mut q, all) = queue_of(3);
            assert_eq!(q.len(), 3);
            assert_eq!(ids(&q), all);
            assert_eq!(q.pop_front().map(|w| w.thread_id()), Some(all[0]));
            assert_eq!(ids(&q), all[1..]);
            let again = crate::thread_by_id(all[1]).unwrap();
            q.push_back(Waiter::of(&again));
            assert_eq!(ids(&q), [all[1], all[2], all[1]]);
            let mut woken = 0;
            while let Some(w) = q.pop_front() {
                woken += usize::from(w.wake());
            }
            assert_eq!(woken, 2, "the second waiter of a thread finds it woken");
            assert_eq!(q.len(), 0);
            assert!(q.first.is_none() && q.rest.as_ref().is_some_and(|r| r.is_empty()));
            crate::thread_by_id(all[0]).unwrap().unpark().unwrap();
        });
    }

    #[test]
    fn a_lone_waiter_makes_no_overflow_deque() {
        crate::run(|| {
            let (mut q, _) = queue_of(1);
            assert!(q.rest.is_none(), "a lone waiter made the overflow deque");
            q.retain(|_| true);
            assert!(q.rest.is_none() && q.len() == 1);
            assert!(q.pop_front().unwrap().wake());
            assert!(q.len() == 0 && q.rest.is_none());
            // A second waiter makes it, and draining keeps it.
            let (mut q, _) = queue_of(2);
            assert_eq!(q.rest.as_ref().map(|r| r.len()), Some(1));
            while let Some(w) = q.pop_front() {
                assert!(w.wake());
            }
            assert!(q.len() == 0 && q.rest.as_ref().is_some_and(|r| r.is_empty()));
        });
    }

    #[test]
    fn retain_keeps_the_order_and_the_head_inline() {
        crate::run(|| {
            let (mut q, all) = queue_of(4);
            // Drop the head: the next one moves inline.
            q.retain(|w| w.thread_id() != all[0]);
            assert_eq!(ids(&q), all[1..]);
            assert_eq!(q.first.as_ref().map(Waiter::thread_id), Some(all[1]));
            q.retain(|w| w.thread_id() == all[3]);
            assert_eq!(ids(&q), [all[3]]);
            assert!(q.rest.as_ref().is_some_and(|r| r.is_empty()));
            q.retain(|_| false);
            assert_eq!(q.len(), 0);
            // Wake the parked threads so the runtime can end.
            for id in all {
                crate::thread_by_id(id).unwrap().unpark().unwrap();
            }
        });
    }
}
