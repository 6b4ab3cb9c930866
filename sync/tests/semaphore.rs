//! Semaphore: FIFO service, head-of-line blocking, permits and plain
//! release, try_acquire, and interrupts and timeouts in every order.

mod util;

use std::rc::Rc;
use std::time::Duration;

use coro_runtime::{spawn, with_timeout, yield_now, JoinHandle, Timeout};
use coro_sync::{Semaphore, TryAcquireError};
use util::{interrupt, join_all, run, settle, Log};

/// Spawns one thread per entry of `asks`; each acquires that many permits,
/// logs the outcome, then holds the permits for `hold` yields. Returns once
/// all are queued.
fn acquirers(sem: &Rc<Semaphore>, log: &Log, asks: &[usize], hold: usize) -> Vec<JoinHandle<()>> {
    let hs = asks
        .iter()
        .enumerate()
        .map(|(i, &n)| {
            let (sem, log) = (sem.clone(), log.clone());
            spawn(move || match sem.acquire(n) {
                Ok(_p) => {
                    log.push(i, "Ok");
                    for _ in 0..hold {
                        yield_now();
                    }
                }
                Err(e) => log.push(i, e),
            })
        })
        .collect();
    settle();
    hs
}

#[test]
fn smoke() {
    run(|| {
        let s = Semaphore::new(3);
        let p = s.acquire(2).unwrap();
        assert_eq!(p.count(), 2);
        assert_eq!(s.available(), 1);
        assert_eq!(s.try_acquire(2).err(), Some(TryAcquireError));
        let q = s.try_acquire(1).unwrap();
        assert_eq!(s.available(), 0);
        assert!(s.try_acquire(0).is_ok());
        assert!(s.acquire(0).is_ok());
        drop(p);
        assert_eq!(s.available(), 2);
        q.forget();
        assert_eq!(s.available(), 2);
        s.release(1); // plain release of the forgotten permit
        s.release(10); // raising the count
        assert_eq!(s.available(), 13);
        assert_eq!(format!("{s:?}"), "Semaphore { available: 13, waiters: 0 }");
    });
}

#[test]
fn waiters_are_served_in_fifo_order() {
    run(|| {
        let sem = Rc::new(Semaphore::new(0));
        let log = Log::new();
        let hs: Vec<_> = (0..5)
            .map(|i| {
                let (sem, log) = (sem.clone(), log.clone());
                spawn(move || {
                    sem.acquire(1).unwrap().forget();
                    log.push(i, "Ok");
                })
            })
            .collect();
        settle();
        assert_eq!(sem.waiters(), 5);
        for i in 0..5 {
            sem.release(1);
            settle();
            assert_eq!(log.order().last(), Some(&i));
        }
        join_all(hs);
        assert_eq!(log.order(), [0, 1, 2, 3, 4]);
        assert_eq!(sem.available(), 0);
    });
}

#[test]
fn a_big_request_at_the_head_is_not_overtaken() {
    run(|| {
        let sem = Rc::new(Semaphore::new(1));
        let log = Log::new();
        let hs = acquirers(&sem, &log, &[3, 1], 2);
        // One permit is free, but the request for 3 is first in line.
        assert_eq!(sem.available(), 1);
        assert_eq!(sem.waiters(), 2);
        assert!(log.order().is_empty());
        assert_eq!(sem.try_acquire(1).err(), Some(TryAcquireError));
        sem.release(2);
        join_all(hs);
        assert_eq!(log.order(), [0, 1]);
        assert_eq!(sem.available(), 3);
    });
}

#[test]
fn a_big_request_timing_out_at_the_head_lets_the_rest_in() {
    run(|| {
        let sem = Rc::new(Semaphore::new(2));
        let log = Log::new();
        let s = sem.clone();
        // Long enough that the small requests queue behind it first, even
        // on a slow machine (or an emulator).
        let big =
            spawn(move || with_timeout(Duration::from_millis(300), || s.acquire(5).map(drop)));
        yield_now();
        let small = acquirers(&sem, &log, &[1, 1], 0);
        assert!(log.order().is_empty());
        assert_eq!(big.join().unwrap(), Err(Timeout));
        join_all(small);
        assert_eq!(log.order(), [0, 1]);
        assert_eq!(sem.available(), 2);
        assert_eq!(sem.waiters(), 0);
    });
}

#[test]
fn interrupt_then_release_six_waiters_one_proceeds() {
    run(|| {
        let sem = Rc::new(Semaphore::new(0));
        let log = Log::new();
        let hs = acquirers(&sem, &log, &[1; 6], 0);
        interrupt(&hs, [0, 1, 2, 3, 5]);
        sem.release(1);
        settle();
        assert_eq!(log.with("Ok"), [4]);
        assert_eq!(log.with("Interrupted").len(), 5);
        join_all(hs);
        assert_eq!(sem.available(), 1);
        assert_eq!(sem.waiters(), 0);
    });
}

#[test]
fn release_then_interrupt_passes_the_permit_on() {
    run(|| {
        let sem = Rc::new(Semaphore::new(0));
        let log = Log::new();
        let hs = acquirers(&sem, &log, &[1; 6], 0);
        sem.release(1); // hands the permit to waiter 0, which has not run yet
        assert_eq!(sem.available(), 0);
        interrupt(&hs, 0..5);
        settle();
        assert_eq!(log.with("Ok"), [5]);
        assert_eq!(log.with("Interrupted").len(), 5);
        join_all(hs);
        assert_eq!(sem.available(), 1);
        assert_eq!(sem.waiters(), 0);
    });
}

#[test]
fn handed_permits_of_an_interrupted_waiter_serve_the_next() {
    run(|| {
        let sem = Rc::new(Semaphore::new(0));
        let log = Log::new();
        let hs = acquirers(&sem, &log, &[2, 2], 0);
        sem.release(2);
        interrupt(&hs, [0]);
        join_all(hs);
        assert_eq!(log.order(), [0, 1]);
        assert_eq!(log.entries()[0].1, "Interrupted");
        assert_eq!(log.entries()[1].1, "Ok");
        assert_eq!(sem.available(), 2);
    });
}

#[test]
fn timeout_while_waiting() {
    run(|| {
        let sem = Rc::new(Semaphore::new(0));
        let s = sem.clone();
        let h = spawn(move || with_timeout(Duration::from_millis(5), || s.acquire(1).map(drop)));
        assert_eq!(h.join().unwrap(), Err(Timeout));
        assert_eq!(sem.waiters(), 0);
        sem.release(1);
        assert_eq!(sem.available(), 1);
    });
}
