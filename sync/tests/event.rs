//! Event: set, clear, wait; waiters woken in FIFO order; interrupts and
//! timeouts in every order.

mod util;

use std::rc::Rc;
use std::time::Duration;

use coro_runtime::{spawn, with_timeout, JoinHandle, Timeout};
use coro_sync::Event;
use util::{interrupt, join_all, run, settle, Log};

/// Spawns `n` threads waiting for `ev`, logging the outcome; returns once
/// all are queued.
fn waiters(ev: &Rc<Event>, log: &Log, n: usize) -> Vec<JoinHandle<()>> {
    let hs = (0..n)
        .map(|i| {
            let (ev, log) = (ev.clone(), log.clone());
            spawn(move || match ev.wait() {
                Ok(()) => log.push(i, "Ok"),
                Err(e) => log.push(i, e),
            })
        })
        .collect();
    settle();
    assert_eq!(ev.waiters(), n);
    hs
}

#[test]
fn set_clear_wait() {
    run(|| {
        let ev = Event::new();
        assert!(!ev.is_set());
        assert_eq!(ev.set(), 0);
        assert!(ev.is_set());
        assert!(ev.wait().is_ok());
        ev.clear();
        assert!(!ev.is_set());
        assert_eq!(format!("{ev:?}"), "Event { set: false, waiters: 0 }");
    });
}

#[test]
fn set_wakes_everyone_in_fifo_order() {
    run(|| {
        let ev = Rc::new(Event::new());
        let log = Log::new();
        let hs = waiters(&ev, &log, 4);
        assert_eq!(ev.set(), 4);
        ev.clear(); // too late: they saw it
        join_all(hs);
        assert_eq!(log.order(), [0, 1, 2, 3]);
        assert_eq!(log.with("Ok").len(), 4);
    });
}

#[test]
fn interrupt_then_set_six_waiters_one_proceeds() {
    run(|| {
        let ev = Rc::new(Event::new());
        let log = Log::new();
        let hs = waiters(&ev, &log, 6);
        interrupt(&hs, [0, 1, 2, 3, 4]);
        assert_eq!(ev.set(), 1);
        settle();
        assert_eq!(log.with("Ok"), [5]);
        assert_eq!(log.with("Interrupted").len(), 5);
        join_all(hs);
        assert_eq!(ev.waiters(), 0);
        assert!(ev.is_set());
    });
}

#[test]
fn set_then_interrupt_the_interrupt_wins() {
    run(|| {
        let ev = Rc::new(Event::new());
        let log = Log::new();
        let hs = waiters(&ev, &log, 6);
        assert_eq!(ev.set(), 6);
        interrupt(&hs, 1..6);
        join_all(hs);
        assert_eq!(log.with("Ok"), [0]);
        assert_eq!(log.with("Interrupted").len(), 5);
        assert_eq!(ev.waiters(), 0);
        // Not consumed: a retry gets through.
        assert!(ev.wait().is_ok());
    });
}

#[test]
fn timeout_while_waiting() {
    run(|| {
        let ev = Rc::new(Event::new());
        let e = ev.clone();
        let h = spawn(move || with_timeout(Duration::from_millis(5), || e.wait()));
        assert_eq!(h.join().unwrap(), Err(Timeout));
        assert_eq!(ev.waiters(), 0);
        assert_eq!(ev.set(), 0);
    });
}
