//! Condvar: with a Mutex and without one, FIFO notification, notify counts,
//! and interrupts and timeouts in every order (a notification handed to a
//! waiter that then fails passes on).

mod util;

use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

use coro_runtime::{spawn, with_timeout, yield_now, JoinHandle, Timeout, WaitError};
use coro_sync::{Condvar, LockError, Mutex};
use util::{interrupt, join_all, run, settle, Log};

/// Spawns `n` threads waiting (without a mutex), logging the outcome;
/// returns once all are queued.
fn waiters(cv: &Rc<Condvar>, log: &Log, n: usize) -> Vec<JoinHandle<()>> {
    let hs = (0..n)
        .map(|i| {
            let (cv, log) = (cv.clone(), log.clone());
            spawn(move || match cv.notified() {
                Ok(()) => log.push(i, "Ok"),
                Err(e) => log.push(i, e),
            })
        })
        .collect();
    settle();
    assert_eq!(cv.waiters(), n);
    hs
}

#[test]
fn wait_while_with_a_mutex() {
    run(|| {
        let pair = Rc::new((Mutex::new(0), Condvar::new()));
        let p = pair.clone();
        let producer = spawn(move || {
            for _ in 0..3 {
                *p.0.lock().unwrap() += 1;
                p.1.notify_all();
                yield_now();
            }
        });
        let (m, cv) = &*pair;
        let g = cv.wait_while(m.lock().unwrap(), |n| *n < 3).unwrap();
        assert_eq!(*g, 3);
        drop(g);
        producer.join().unwrap();
    });
}

#[test]
fn wait_releases_and_retakes_the_mutex() {
    run(|| {
        let pair = Rc::new((Mutex::new(false), Condvar::new()));
        let p = pair.clone();
        let waiter = spawn(move || {
            let g = p.0.lock().unwrap();
            let g = p.1.wait(g).unwrap();
            *g
        });
        yield_now();
        let (m, cv) = &*pair;
        // The waiter let go of the mutex while it waits.
        let mut g = m.try_lock().unwrap();
        *g = true;
        assert_eq!(cv.notify_one(), 1);
        // It is woken but must wait for the mutex we hold.
        settle();
        assert!(!waiter.is_finished());
        drop(g);
        assert!(waiter.join().unwrap());
    });
}

#[test]
fn ping_pong_without_a_mutex() {
    run(|| {
        let s = Rc::new((Cell::new(0u32), Condvar::new()));
        let s2 = s.clone();
        let pong = spawn(move || {
            for i in 0..100 {
                while s2.0.get() != 2 * i + 1 {
                    s2.1.notified().unwrap();
                }
                s2.0.set(2 * i + 2);
                s2.1.notify_one();
            }
        });
        for i in 0..100 {
            s.0.set(2 * i + 1);
            s.1.notify_one();
            while s.0.get() != 2 * i + 2 {
                s.1.notified().unwrap();
            }
        }
        pong.join().unwrap();
    });
}

#[test]
fn waiters_are_notified_in_fifo_order() {
    run(|| {
        let cv = Rc::new(Condvar::new());
        let log = Log::new();
        let hs = waiters(&cv, &log, 5);
        for i in 0..5 {
            assert_eq!(cv.notify_one(), 1);
            settle();
            assert_eq!(log.order().last(), Some(&i));
        }
        assert_eq!(cv.notify_one(), 0);
        join_all(hs);
        assert_eq!(log.order(), [0, 1, 2, 3, 4]);
    });
}

#[test]
fn notify_n_and_notify_all_return_how_many_were_woken() {
    run(|| {
        let cv = Rc::new(Condvar::new());
        let log = Log::new();
        let hs = waiters(&cv, &log, 5);
        assert_eq!(cv.notify_n(3), 3);
        assert_eq!(cv.waiters(), 2);
        assert_eq!(cv.notify_all(), 2);
        assert_eq!(cv.notify_all(), 0);
        join_all(hs);
        assert_eq!(log.order(), [0, 1, 2, 3, 4]);
    });
}

#[test]
fn interrupt_then_notify_six_waiters_one_proceeds() {
    run(|| {
        let cv = Rc::new(Condvar::new());
        let log = Log::new();
        let hs = waiters(&cv, &log, 6);
        interrupt(&hs, [1, 2, 3, 4, 5]);
        assert_eq!(cv.notify_one(), 1);
        settle();
        assert_eq!(log.with("Ok"), [0]);
        assert_eq!(log.with("Interrupted").len(), 5);
        join_all(hs);
        assert_eq!(cv.waiters(), 0);
    });
}

#[test]
fn notify_then_interrupt_passes_the_notification_on() {
    run(|| {
        let cv = Rc::new(Condvar::new());
        let log = Log::new();
        let hs = waiters(&cv, &log, 6);
        assert_eq!(cv.notify_one(), 1); // waiter 0, which has not run yet
        interrupt(&hs, 0..5);
        settle();
        assert_eq!(log.with("Ok"), [5]);
        assert_eq!(log.with("Interrupted").len(), 5);
        join_all(hs);
        assert_eq!(cv.waiters(), 0);
    });
}

#[test]
fn interrupted_wait_returns_without_the_mutex() {
    run(|| {
        let pair = Rc::new((Mutex::new(()), Condvar::new()));
        let p = pair.clone();
        let waiter = spawn(move || {
            let g = p.0.lock().unwrap();
            p.1.wait(g).map(drop)
        });
        yield_now();
        waiter.thread().interrupt().unwrap();
        assert_eq!(
            waiter.join().unwrap(),
            Err(LockError::Wait(WaitError::Interrupted))
        );
        assert!(!pair.0.is_locked());
        assert_eq!(pair.1.waiters(), 0);
    });
}

#[test]
fn timeout_while_waiting() {
    run(|| {
        let pair = Rc::new((Mutex::new(()), Condvar::new()));
        let p = pair.clone();
        let h = spawn(move || {
            with_timeout(Duration::from_millis(5), || {
                let g = p.0.lock().unwrap();
                p.1.wait(g).map(drop)
            })
        });
        assert_eq!(h.join().unwrap(), Err(Timeout));
        assert!(!pair.0.is_locked());
        assert_eq!(pair.1.waiters(), 0);
        let cv = Rc::new(Condvar::new());
        let c = cv.clone();
        let h = spawn(move || with_timeout(Duration::from_millis(5), || c.notified()));
        assert_eq!(h.join().unwrap(), Err(Timeout));
        assert_eq!(cv.notify_one(), 0);
    });
}
