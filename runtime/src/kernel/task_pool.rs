//! Control blocks of finished green threads, kept for the next spawn on the
//! same OS thread.
//!
//! # Why
//!
//! A [`Task`] is several hundred bytes. With many threads alive at once,
//! glibc's per-size cache (7 blocks per size class) runs dry, and every
//! spawn and every finished thread goes through malloc's bins instead
//! (BENCHMARKS.md, "Spawn"). Finished blocks are kept here instead and reused by the next
//! spawn. Like stacks (`stack`, the arena), they belong to the OS thread and
//! not to one runtime, so a runtime built later on the thread reuses them.
//!
//! # Invariant: a kept block has no other handle
//!
//! [`Task::recycle`] keeps a block only through `Rc::get_mut`, which succeeds
//! only for the last strong handle with no weak ones: nobody else can see
//! the block when [`new_task`] overwrites it. What a finished task still
//! refers to (its name, its nursery, its future waker) is dropped when it
//! is kept, not when it is reused, so keeping it holds nothing alive.

use std::cell::RefCell;
use std::rc::Rc;

use crate::kernel::seams::CancelSlot;
use crate::kernel::tail::Tail;
use crate::kernel::task::{Task, TaskInit, ThreadState};

/// Most blocks kept per OS thread (as many as the default stack pool).
const KEEP: usize = 1024;

thread_local! {
    static FREE: RefCell<Vec<Rc<Task>>> = const { RefCell::new(Vec::new()) };
}

/// A new task in a shared block: a kept one if there is any (made over in
/// place, see [`Task::reinit`]), else a new one.
#[inline(always)]
pub(crate) fn new_task(init: TaskInit) -> Rc<Task> {
    match FREE.try_with(|f| f.borrow_mut().pop()) {
        Ok(Some(mut block)) => match Rc::get_mut(&mut block) {
            Some(slot) => {
                slot.reinit(init);
                block
            }
            None => Rc::new(Task::new(init)),
        },
        _ => Rc::new(Task::new(init)),
    }
}

impl Task {
    /// Keeps the block of a finished task for a later spawn, if `task` is its
    /// last handle (see the module docs); otherwise just drops `task`.
    #[inline]
    pub(crate) fn recycle(mut task: Rc<Task>) {
        let Some(t) = Rc::get_mut(&mut task) else {
            return;
        };
        if t.state.get() != ThreadState::Dead {
            // Not finished by its scheduler (which takes the coroutine out as
            // it marks the task dead): the block's `Drop` deals with that.
            return;
        }
        // Its handle emptied the slot before letting go (`result_slot`).
        debug_assert!(!t.result.is_full());
        // A plain thread never filled the cold fields (nor the tail, where
        // joiners, wait targets and unwind counts live): nothing to empty, and
        // their cache lines are not read. `Task::reinit` relies on the tail
        // being empty.
        if t.cold_used.get() {
            if t.coroutine.get_mut().is_some() || !t.tail.locals.get_mut().is_empty() {
                // Locals leaked with it: the block's `Drop` deals with that.
                return;
            }
            t.name = None;
            t.cancel.release();
            // The joiner list (stale entries of waits that gave up, each
            // holding a task), too: the tail is empty again (see `Tail`).
            t.tail = Tail::default();
        }
        // While the OS thread exits the list is gone: the block is freed.
        let _ = FREE.try_with(|f| {
            let mut f = f.borrow_mut();
            if f.len() < KEEP {
                f.push(task);
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use std::rc::Rc;

    fn block(c: &crate::Coro) -> *const super::Task {
        Rc::as_ptr(&c.0)
    }

    fn kept(b: *const super::Task) -> bool {
        super::FREE.with(|f| f.borrow().iter().any(|t| Rc::as_ptr(t) == b))
    }

    #[test]
    fn a_joined_threads_block_is_reused_by_the_next_spawn() {
        crate::run(|| {
            let h = crate::spawn(|| 1);
            let first = block(h.thread());
            assert_eq!(h.join().unwrap(), 1);
            assert!(kept(first));
            let h = crate::spawn(|| 2);
            assert_eq!(block(h.thread()), first);
            assert!(!kept(first));
            assert_eq!(h.join().unwrap(), 2);
        });
    }

    #[test]
    fn a_detached_threads_block_is_reused_once_it_ends() {
        crate::run(|| {
            let h = crate::spawn(|| ());
            let first = block(h.thread());
            drop(h);
            assert!(!kept(first));
            crate::yield_now();
            assert!(kept(first));
            let h = crate::spawn(|| ());
            assert_eq!(block(h.thread()), first);
            h.join().unwrap();
        });
    }

    #[test]
    fn a_block_with_a_live_handle_is_never_reused() {
        crate::run(|| {
            let h = crate::spawn(|| ());
            let kept_handle = h.thread().clone();
            let id = kept_handle.id();
            h.join().unwrap();
            assert!(!kept(block(&kept_handle)));
            let later: Vec<_> = (0..4).map(|_| crate::spawn(|| ())).collect();
            for h in &later {
                assert_ne!(block(h.thread()), block(&kept_handle));
            }
            // The old handle still describes its own, finished thread.
            assert_eq!(kept_handle.id(), id);
            assert_eq!(kept_handle.state(), crate::ThreadState::Dead);
            for h in later {
                h.join().unwrap();
            }
        });
    }

    #[test]
    fn a_kept_block_holds_nothing_of_its_thread() {
        crate::run(|| {
            let h = crate::Builder::new()
                .name("kept".into())
                .spawn(|| ())
                .unwrap();
            h.join().unwrap();
            super::FREE.with(|f| {
                let f = f.borrow();
                let t = f.last().expect("the joined thread's block is kept");
                assert!(t.name.is_none());
                assert!(t.cancel.parent.get().is_none());
            });
            // A future's waker state stays with its thread for the next
            // `block_on`: it goes when the block is kept.
            let h = crate::spawn(|| crate::future::block_on(async { 7 }).unwrap());
            assert_eq!(h.join().unwrap(), 7);
            super::FREE.with(|f| {
                let f = f.borrow();
                let t = f.last().expect("the joined thread's block is kept");
                let wake = t.tail.future_wake.take();
                assert!(wake.is_none(), "the kept block holds a future waker");
            });
        });
    }

    /// The block of thread `id` (at `b`) is kept, with its tail empty (see
    /// `Tail`); `marked`: as a thread that filled its tail.
    fn kept_with_an_empty_tail(b: *const super::Task, id: u64, marked: bool) {
        super::FREE.with(|f| {
            let mut f = f.borrow_mut();
            let t = f
                .iter_mut()
                .find(|t| Rc::as_ptr(t) == b && t.id == id)
                .expect("the thread's block is kept");
            let t = Rc::get_mut(t).expect("a kept block has one handle");
            assert_eq!(t.cold_used.get(), marked);
            assert!(t.tail.is_empty(), "a kept block's tail is emptied");
        });
    }

    /// Yields until `h`'s thread has ended (it needs a few turns).
    fn until_finished<T>(h: &crate::JoinHandle<T>) {
        for _ in 0..100 {
            if h.is_finished() {
                return;
            }
            crate::yield_now();
        }
        panic!("the thread did not end");
    }

    #[test]
    fn a_thread_joined_while_it_runs_is_kept_with_an_empty_tail() {
        crate::run(|| {
            let h = crate::spawn(crate::yield_now);
            let (b, id) = (block(h.thread()), h.thread().id());
            // The join waits: it is on the thread's joiner list.
            h.join().unwrap();
            kept_with_an_empty_tail(b, id, true);
        });
    }

    /// Runs `f` on a thread, lets it end, joins it (without waiting) and
    /// checks its block as [`kept_with_an_empty_tail`] does.
    fn ends_kept_with_an_empty_tail<T: 'static>(f: impl FnOnce() -> T + 'static, marked: bool) {
        crate::run(|| {
            let h = crate::spawn(f);
            let (b, id) = (block(h.thread()), h.thread().id());
            until_finished(&h);
            let _ = h.join().unwrap();
            kept_with_an_empty_tail(b, id, marked);
        });
    }

    #[test]
    fn a_thread_that_joined_is_kept_with_an_empty_tail() {
        // The thread it waited for is written in the tail for the length
        // of the join, and no longer: nothing marks it.
        ends_kept_with_an_empty_tail(|| crate::spawn(crate::yield_now).join().unwrap(), false);
    }

    #[test]
    fn a_thread_refused_a_yield_is_kept_with_an_empty_tail() {
        ends_kept_with_an_empty_tail(|| crate::no_suspend(crate::yield_now), true);
    }

    #[test]
    fn a_thread_parked_on_a_wait_target_is_kept_with_an_empty_tail() {
        crate::run(|| {
            let target = crate::WaitTarget::new("Gate");
            let t = target.clone();
            let h = crate::spawn(move || {
                crate::park_on(&t, "Gate::wait", std::panic::Location::caller())
            });
            let (b, id) = (block(h.thread()), h.thread().id());
            crate::yield_now();
            h.thread().unpark().unwrap();
            until_finished(&h);
            h.join().unwrap().unwrap();
            kept_with_an_empty_tail(b, id, true);
        });
    }

    #[test]
    fn a_plain_threads_block_is_kept_without_reading_its_cold_fields() {
        crate::run(|| {
            let h = crate::spawn(|| ());
            let first = block(h.thread());
            // It ends before it is joined: nobody waited on it (a join
            // that waits fills the joiner list, a cold field).
            crate::yield_now();
            h.join().unwrap();
            assert!(kept(first));
            super::FREE.with(|f| {
                let f = f.borrow();
                let t = f.last().expect("the joined thread's block is kept");
                assert!(!t.cold_used.get());
            });
            // Any use of a cold field marks the thread (and is emptied).
            let h = crate::spawn(|| crate::future::block_on(async {}).unwrap());
            let b = block(h.thread());
            assert_eq!(b, first, "the kept block is reused");
            h.join().unwrap();
            super::FREE.with(|f| {
                let f = f.borrow();
                let t = f.last().expect("the joined thread's block is kept");
                assert!(t.cold_used.get());
            });
        });
    }
}
