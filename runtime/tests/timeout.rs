//! with_timeout: level-triggered, nested, scoped.

use std::time::Duration;

use coro_runtime::{self as coro, with_timeout, Timeout, WaitError};

const LONG: Duration = Duration::from_secs(3600);

#[test]
fn timeout_around_sleep() {
    coro::run(|| {
        let t = std::time::Instant::now();
        assert_eq!(
            with_timeout(Duration::from_millis(10), || coro::sleep(LONG)),
            Err(Timeout)
        );
        assert!(t.elapsed() >= Duration::from_millis(10));
    });
}

#[test]
fn completed_operation_is_not_a_timeout() {
    coro::run(|| {
        let r = with_timeout(Duration::from_secs(5), || {
            coro::sleep(Duration::from_millis(1)).unwrap();
            7
        });
        assert_eq!(r, Ok(7));
        assert_eq!(coro::stats().pending_timers, 0);
    });
}

#[test]
fn zero_timeout_fails_the_first_blocking_call() {
    coro::run(|| {
        let mut ran = false;
        let r = with_timeout(Duration::ZERO, || {
            ran = true;
            coro::park()
        });
        assert!(ran);
        assert_eq!(r, Err(Timeout));
        // Nothing blocking inside: a zero timeout does not fire.
        assert_eq!(with_timeout(Duration::ZERO, || 1), Ok(1));
    });
}

#[test]
fn inner_deadline_fires_only_the_inner_scope() {
    coro::run(|| {
        let outer = with_timeout(LONG, || {
            let inner = with_timeout(Duration::from_millis(5), || coro::sleep(LONG));
            assert_eq!(inner, Err(Timeout));
            // The outer scope is still good: blocking works again.
            coro::sleep(Duration::from_millis(1))
        });
        assert_eq!(outer, Ok(Ok(())));
    });
}

#[test]
fn outer_deadline_fires_only_the_outer_scope() {
    coro::run(|| {
        let outer = with_timeout(Duration::from_millis(5), || {
            let inner = with_timeout(LONG, || coro::sleep(LONG));
            // The inner scope hands the error on unchanged.
            assert_eq!(inner, Ok(Err(WaitError::TimedOut)));
            "inner returned"
        });
        assert_eq!(outer, Err(Timeout));
    });
}

#[test]
fn swallowed_timeout_comes_back_from_the_next_blocking_call() {
    coro::run(|| {
        let mut errors = Vec::new();
        let r = with_timeout(Duration::from_millis(5), || {
            // Swallow the first error and try to block again, twice.
            errors.push(coro::sleep(LONG));
            errors.push(coro::sleep(LONG));
            errors.push(coro::park());
            "swallowed"
        });
        assert_eq!(r, Err(Timeout));
        assert_eq!(errors, [Err(WaitError::TimedOut); 3]);
        // After the scope, blocking works again.
        coro::sleep(Duration::from_millis(1)).unwrap();
    });
}

#[test]
fn timeout_around_join() {
    coro::run(|| {
        let h = coro::spawn(|| coro::sleep(LONG));
        let t = h.thread().clone();
        let r = with_timeout(Duration::from_millis(5), || h.wait());
        assert_eq!(r, Err(Timeout));
        t.interrupt().unwrap();
    });
}

#[test]
fn timeout_fires_while_ready_is_seen_by_the_next_block() {
    coro::run(|| {
        let r = with_timeout(Duration::from_millis(2), || {
            // Busy past the deadline without blocking, yielding so the
            // scheduler fires the timer while this thread is ready.
            let t = std::time::Instant::now();
            while t.elapsed() < Duration::from_millis(5) {
                coro::yield_now();
            }
            coro::sleep(LONG)
        });
        assert_eq!(r, Err(Timeout));
    });
}

#[test]
fn a_deadline_nobody_saw_does_not_discard_the_result() {
    coro::run(|| {
        let r = with_timeout(Duration::from_millis(1), || {
            let t = std::time::Instant::now();
            while t.elapsed() < Duration::from_millis(3) {
                coro::yield_now();
            }
            42
        });
        assert_eq!(r, Ok(42));
    });
}

#[test]
fn timeout_error_is_io_timed_out() {
    let e: std::io::Error = Timeout.into();
    assert_eq!(e.kind(), std::io::ErrorKind::TimedOut);
}
