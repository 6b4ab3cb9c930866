//! Coro::interrupt: while parked, sleeping, not yet started, and racing a wake.

use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

use coro_runtime::{self as coro, WaitError};

#[test]
fn interrupt_while_parked() {
    coro::run(|| {
        let h = coro::spawn(coro::park);
        coro::yield_now();
        h.thread().interrupt().unwrap();
        assert_eq!(h.join().unwrap(), Err(WaitError::Interrupted));
    });
}

#[test]
fn interrupt_while_sleeping_ends_the_sleep_at_once() {
    coro::run(|| {
        let h = coro::spawn(|| coro::sleep(Duration::from_secs(3600)));
        coro::yield_now();
        h.thread().interrupt().unwrap();
        assert_eq!(h.join().unwrap(), Err(WaitError::Interrupted));
        // The interrupted sleep's timer no longer counts as pending.
        assert_eq!(coro::stats().pending_timers, 0);
    });
}

#[test]
fn interrupt_before_first_run_fails_its_first_blocking_call() {
    coro::run(|| {
        let started = Rc::new(Cell::new(false));
        let s = started.clone();
        let h = coro::spawn(move || {
            s.set(true);
            let first = coro::sleep(Duration::from_secs(3600));
            let second = coro::sleep(Duration::from_millis(1));
            (first, second)
        });
        h.thread().interrupt().unwrap();
        let (first, second) = h.join().unwrap();
        assert!(started.get(), "the closure still runs");
        assert_eq!(first, Err(WaitError::Interrupted));
        assert_eq!(second, Ok(()), "an interrupt is consumed by one call");
    });
}

#[test]
fn interrupt_wins_over_a_pending_wake() {
    coro::run(|| {
        let h = coro::spawn(coro::park);
        coro::yield_now();
        let t = h.thread().clone();
        t.unpark().unwrap(); // scheduled, has not run yet
        t.interrupt().unwrap(); // ...and interrupted before it runs
        assert_eq!(h.join().unwrap(), Err(WaitError::Interrupted));
    });
}

#[test]
fn interrupting_a_ready_thread_fails_its_next_blocking_call() {
    coro::run(|| {
        let h = coro::spawn(|| {
            coro::yield_now(); // interrupted while in the ready queue
            coro::sleep(Duration::from_secs(3600))
        });
        coro::yield_now();
        h.thread().interrupt().unwrap();
        assert_eq!(h.join().unwrap(), Err(WaitError::Interrupted));
    });
}

#[test]
fn self_interrupt_fails_the_next_blocking_call() {
    coro::run(|| {
        coro::current().interrupt().unwrap();
        assert_eq!(
            coro::sleep(Duration::from_secs(3600)),
            Err(WaitError::Interrupted)
        );
    });
}

#[test]
fn interrupt_is_never_io_interrupted() {
    let e: std::io::Error = WaitError::Interrupted.into();
    assert_ne!(e.kind(), std::io::ErrorKind::Interrupted);
    assert_eq!(WaitError::from_io(&e), Some(WaitError::Interrupted));
    let t: std::io::Error = WaitError::TimedOut.into();
    assert_eq!(t.kind(), std::io::ErrorKind::TimedOut);
}
