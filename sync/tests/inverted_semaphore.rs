//! InvertedSemaphore: acquire never blocks, block_till_zero wakes every
//! waiter in FIFO order at zero, and interrupts and timeouts in every order.

mod util;

use std::rc::Rc;
use std::time::Duration;

use coro_runtime::{spawn, with_timeout, JoinHandle, Timeout};
use coro_sync::InvertedSemaphore;
use util::{interrupt, join_all, run, settle, Log};

/// Spawns `n` threads waiting for zero, logging the outcome; returns once all
/// are queued.
fn waiters(sem: &Rc<InvertedSemaphore>, log: &Log, n: usize) -> Vec<JoinHandle<()>> {
    let hs = (0..n)
        .map(|i| {
            let (sem, log) = (sem.clone(), log.clone());
            spawn(move || match sem.block_till_zero() {
                Ok(()) => log.push(i, "Ok"),
                Err(e) => log.push(i, e),
            })
        })
        .collect();
    settle();
    assert_eq!(sem.waiters(), n);
    hs
}

#[test]
fn smoke() {
    run(|| {
        let s = InvertedSemaphore::new();
        assert!(s.block_till_zero().is_ok());
        s.acquire(3);
        s.acquire(2);
        assert_eq!(s.count(), 5);
        s.release(5);
        assert_eq!(s.count(), 0);
        assert!(s.block_till_zero().is_ok());
        assert_eq!(
            format!("{s:?}"),
            "InvertedSemaphore { count: 0, waiters: 0 }"
        );
    });
}

#[test]
fn everyone_is_woken_in_fifo_order_at_zero() {
    run(|| {
        let sem = Rc::new(InvertedSemaphore::new());
        let log = Log::new();
        sem.acquire(2);
        let hs = waiters(&sem, &log, 3);
        sem.release(1);
        settle();
        assert!(log.order().is_empty());
        sem.release(1);
        join_all(hs);
        assert_eq!(log.order(), [0, 1, 2]);
    });
}

#[test]
fn a_waiter_that_saw_zero_returns_ok_even_if_the_count_rose_again() {
    run(|| {
        let sem = Rc::new(InvertedSemaphore::new());
        let log = Log::new();
        sem.acquire(1);
        let hs = waiters(&sem, &log, 1);
        sem.release(1);
        sem.acquire(1);
        join_all(hs);
        assert_eq!(log.with("Ok"), [0]);
    });
}

#[test]
fn interrupt_then_release_six_waiters_one_proceeds() {
    run(|| {
        let sem = Rc::new(InvertedSemaphore::new());
        let log = Log::new();
        sem.acquire(1);
        let hs = waiters(&sem, &log, 6);
        interrupt(&hs, [0, 2, 3, 4, 5]);
        sem.release(1);
        settle();
        assert_eq!(log.with("Ok"), [1]);
        assert_eq!(log.with("Interrupted").len(), 5);
        join_all(hs);
        assert_eq!(sem.waiters(), 0);
        assert_eq!(sem.count(), 0);
    });
}

#[test]
fn release_then_interrupt_the_interrupt_wins() {
    run(|| {
        let sem = Rc::new(InvertedSemaphore::new());
        let log = Log::new();
        sem.acquire(1);
        let hs = waiters(&sem, &log, 6);
        sem.release(1); // wakes all six; none has run yet
        interrupt(&hs, 0..5);
        join_all(hs);
        assert_eq!(log.with("Ok"), [5]);
        assert_eq!(log.with("Interrupted").len(), 5);
        assert_eq!(sem.waiters(), 0);
    });
}

#[test]
fn timeout_while_waiting() {
    run(|| {
        let sem = Rc::new(InvertedSemaphore::new());
        sem.acquire(1);
        let s = sem.clone();
        let h = spawn(move || with_timeout(Duration::from_millis(5), || s.block_till_zero()));
        assert_eq!(h.join().unwrap(), Err(Timeout));
        assert_eq!(sem.waiters(), 0);
        assert_eq!(sem.count(), 1);
    });
}

#[test]
fn releasing_more_than_acquired_panics() {
    run(|| {
        let sem = Rc::new(InvertedSemaphore::new());
        let s = sem.clone();
        sem.acquire(1);
        let h = spawn(move || s.release(2));
        let err = h.join().unwrap_err();
        assert_eq!(
            err.panic_message(),
            Some("InvertedSemaphore::release(2) with a count of only 1")
        );
        assert_eq!(sem.count(), 1);
    });
}
