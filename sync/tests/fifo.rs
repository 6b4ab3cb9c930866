//! Fifo: push, push_front, pop, pop_all, len; poppers served in FIFO order;
//! an item handed to a popper that then fails goes back to the front.

mod util;

use std::rc::Rc;
use std::time::Duration;

use coro_runtime::{spawn, with_timeout, JoinHandle, Timeout};
use coro_sync::Fifo;
use util::{interrupt, join_all, run, settle, Log};

/// Spawns `n` poppers logging what they got; returns once all are queued.
fn poppers(q: &Rc<Fifo<u32>>, log: &Log, n: usize) -> Vec<JoinHandle<()>> {
    let hs = (0..n)
        .map(|i| {
            let (q, log) = (q.clone(), log.clone());
            spawn(move || match q.pop() {
                Ok(v) => log.push(i, v),
                Err(e) => log.push(i, e),
            })
        })
        .collect();
    settle();
    assert_eq!(q.waiters(), n);
    hs
}

#[test]
fn push_pop_len() {
    run(|| {
        let q = Fifo::new();
        assert!(q.is_empty());
        q.push(2);
        q.push(3);
        q.push_front(1);
        assert_eq!(q.len(), 3);
        assert_eq!(q.pop(), Ok(1));
        assert_eq!(q.try_pop(), Some(2));
        assert_eq!(q.pop_all(), Ok(vec![3]));
        assert_eq!(q.try_pop(), None);
        let q: Fifo<_> = (1..=3).collect();
        assert_eq!(q.pop_all(), Ok(vec![1, 2, 3]));
        assert_eq!(format!("{q:?}"), "Fifo { len: 0, waiters: 0 }");
    });
}

#[test]
fn pop_all_waits_for_at_least_one() {
    run(|| {
        let q = Rc::new(Fifo::new());
        let q2 = q.clone();
        let h = spawn(move || q2.pop_all());
        settle();
        assert_eq!(q.waiters(), 1);
        q.push(1);
        q.push(2);
        assert_eq!(h.join().unwrap(), Ok(vec![1, 2]));
        assert!(q.is_empty());
    });
}

#[test]
fn poppers_are_served_in_fifo_order() {
    run(|| {
        let q = Rc::new(Fifo::new());
        let log = Log::new();
        let hs = poppers(&q, &log, 5);
        for v in 0..5 {
            q.push(v * 10);
        }
        assert_eq!(q.len(), 0); // all handed straight over
        join_all(hs);
        let got: Vec<_> = log.entries();
        let want: Vec<_> = (0..5).map(|i| (i, (i * 10).to_string())).collect();
        assert_eq!(got, want);
    });
}

#[test]
fn interrupt_then_push_six_poppers_one_gets_it() {
    run(|| {
        let q = Rc::new(Fifo::new());
        let log = Log::new();
        let hs = poppers(&q, &log, 6);
        interrupt(&hs, [0, 1, 2, 4, 5]);
        q.push(7);
        settle();
        assert_eq!(log.with("7"), [3]);
        assert_eq!(log.with("Interrupted").len(), 5);
        join_all(hs);
        assert_eq!(q.len(), 0);
        assert_eq!(q.waiters(), 0);
    });
}

#[test]
fn push_then_interrupt_passes_the_item_on() {
    run(|| {
        let q = Rc::new(Fifo::new());
        let log = Log::new();
        let hs = poppers(&q, &log, 6);
        q.push(7); // handed to popper 0, which has not run yet
        interrupt(&hs, 0..5);
        settle();
        assert_eq!(log.with("7"), [5]);
        assert_eq!(log.with("Interrupted").len(), 5);
        join_all(hs);
        assert_eq!(q.len(), 0);
    });
}

#[test]
fn a_handed_item_that_is_not_taken_goes_back_to_the_front() {
    run(|| {
        let q = Rc::new(Fifo::new());
        let log = Log::new();
        let hs = poppers(&q, &log, 1);
        q.push(1); // handed to the popper
        q.push(2); // queued
        interrupt(&hs, [0]);
        join_all(hs);
        assert_eq!(log.with("Interrupted"), [0]);
        assert_eq!(q.pop_all(), Ok(vec![1, 2]));
    });
}

#[test]
fn timeout_while_waiting() {
    run(|| {
        let q: Rc<Fifo<u32>> = Rc::new(Fifo::new());
        let q2 = q.clone();
        let h = spawn(move || with_timeout(Duration::from_millis(5), || q2.pop()));
        assert_eq!(h.join().unwrap(), Err(Timeout));
        assert_eq!(q.waiters(), 0);
        q.push(1);
        assert_eq!(q.len(), 1);
    });
}
