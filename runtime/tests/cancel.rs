//! `CancelScope`: explicit cancel before entry, from inside and from
//! another thread; level-triggering; `cancel_called` (which latches) and
//! `cancelled_caught`; nesting; shields (against outer deadlines and
//! cancels, lowered while a cancel is pending, against `interrupt`);
//! deadlines read, moved earlier and later while a thread is blocked, and
//! absolute; the effective deadline; and the timer heap staying exact
//! throughout.
//!
//! Interleavings are forced with `yield_until` on thread states, never with
//! sleeps. Time appears only as lower bounds.

use coro_test_support as util;

use std::cell::Cell;
use std::io;
use std::rc::Rc;
use std::time::{Duration, Instant};

use coro_runtime::{
    self as coro, clock, with_deadline, with_timeout, CancelScope, Cancelled, Coro, JoinHandle,
    ThreadState, Timeout, WaitError,
};
use coro_test_support::{run, yield_until};

const LONG: Duration = Duration::from_secs(3600);

/// A thread sleeping `d` inside `scope`, blocked by the time this returns.
fn sleeping_inside(
    scope: &CancelScope,
    d: Duration,
) -> JoinHandle<Result<Result<(), WaitError>, Cancelled>> {
    let inside = {
        let scope = scope.clone();
        coro::spawn(move || scope.run(|| coro::sleep(d)))
    };
    until_parked(inside.thread());
    inside
}

#[track_caller]
fn until_parked(t: &Coro) {
    yield_until("the thread to block", || t.state() == ThreadState::Parked);
}

#[test]
fn cancel_before_entry_fails_the_first_blocking_call() {
    run(|| {
        let scope = CancelScope::new();
        scope.cancel();
        assert!(scope.cancel_called());
        assert!(!scope.cancelled_caught());
        let mut ran = false;
        let r = scope.run(|| {
            ran = true;
            coro::sleep(LONG)
        });
        assert!(ran, "the closure runs; its blocking calls fail");
        assert!(!r.unwrap_err().deadline_passed());
        assert!(scope.cancelled_caught());
    });
}

#[test]
fn cancel_from_inside() {
    run(|| {
        let scope = CancelScope::new();
        let r = scope.run(|| {
            scope.cancel();
            scope.cancel(); // idempotent
            coro::sleep(LONG)
        });
        assert!(r.is_err());
        assert!(!r.unwrap_err().deadline_passed());
        assert!(scope.cancel_called() && scope.cancelled_caught());
    });
}

#[test]
fn cancel_from_another_thread_wakes_the_blocked_call() {
    run(|| {
        let scope = CancelScope::new();
        let inside = sleeping_inside(&scope, LONG);
        scope.cancel();
        assert_eq!(inside.thread().state(), ThreadState::Ready, "woken at once");
        let r = inside.join().unwrap();
        assert!(r.is_err());
        assert!(scope.cancelled_caught());
        assert_eq!(coro::stats().pending_timers, 0);
    });
}

/// Runs `wait` in a cancel scope on a new thread, cancels the scope once the
/// thread is blocked, and checks that the call failed at once with
/// `Cancelled` and that the next one fails without blocking.
#[track_caller]
fn cancelled_while_blocked(wait: impl Fn() -> Result<(), WaitError> + 'static) {
    let scope = CancelScope::new();
    let inside = {
        let scope = scope.clone();
        coro::spawn(move || scope.run(|| (wait(), wait())))
    };
    until_parked(inside.thread());
    scope.cancel();
    assert_eq!(inside.thread().state(), ThreadState::Ready, "woken at once");
    let r = inside.join().unwrap();
    assert!(r.is_err(), "the scope caught its cancellation");
    assert!(scope.cancelled_caught());
}

#[test]
fn cancel_wakes_every_kind_of_runtime_wait() {
    run(|| {
        cancelled_while_blocked(|| coro::sleep(LONG));
        cancelled_while_blocked(coro::park);
        let sleeper = Rc::new(coro::spawn(|| coro::sleep(LONG)));
        let s = sleeper.clone();
        cancelled_while_blocked(move || s.wait());
        sleeper.thread().interrupt().unwrap();
        cancelled_while_blocked(|| {
            coro::blocking(|| std::thread::sleep(Duration::from_millis(50)))
        });
        assert_eq!(coro::stats().pending_timers, 0);
    });
}

#[test]
fn every_wait_fails_once_cancelled() {
    run(|| {
        let scope = CancelScope::new();
        let seen = Rc::new(Cell::new(0));
        let s = seen.clone();
        let _ = scope.run(|| {
            scope.cancel();
            for e in [
                coro::sleep(LONG),
                coro::sleep(Duration::ZERO),
                coro::park(),
                coro::spawn(|| ()).wait(),
                // A job that waits (one that finished before the call had
                // to wait would return its value: only waiting fails).
                coro::blocking(|| std::thread::sleep(Duration::from_millis(50))),
            ] {
                assert_eq!(e, Err(WaitError::Cancelled));
                s.set(s.get() + 1);
            }
        });
        assert_eq!(seen.get(), 5);
    });
}

#[test]
fn body_that_returns_after_a_cancel_reports_called_not_caught() {
    run(|| {
        let scope = CancelScope::new();
        let r = scope.run(|| {
            coro::sleep(Duration::from_millis(1)).unwrap();
            scope.cancel(); // after the last blocking call
            42
        });
        assert_eq!(r, Ok(42));
        assert!(scope.cancel_called());
        assert!(!scope.cancelled_caught());

        // A deadline that passed without a blocking call noticing it.
        let scope = CancelScope::after(Duration::from_millis(2));
        let r = scope.run(|| {
            let t = Instant::now();
            while t.elapsed() < Duration::from_millis(3) {}
            "done"
        });
        assert_eq!(r, Ok("done"));
        assert!(scope.cancel_called() && !scope.cancelled_caught());

        // Never cancelled.
        let scope = CancelScope::after(LONG);
        assert_eq!(
            scope.run(|| coro::sleep(Duration::from_millis(1))),
            Ok(Ok(()))
        );
        assert!(!scope.cancel_called() && !scope.cancelled_caught());
        scope.cancel(); // after exit: only recorded
        assert!(scope.cancel_called() && !scope.cancelled_caught());
        assert_eq!(coro::stats().pending_timers, 0);
    });
}

#[test]
fn nested_scopes_convert_only_their_own_cancellation() {
    run(|| {
        // Inner cancelled: only the inner converts.
        let outer = CancelScope::new();
        let r = outer.run(|| {
            let inner = CancelScope::new();
            let ri = inner.run(|| {
                inner.cancel();
                coro::sleep(LONG)
            });
            assert!(ri.is_err());
            coro::sleep(Duration::from_millis(1)) // the outer one still works
        });
        assert_eq!(r, Ok(Ok(())));
        assert!(!outer.cancelled_caught());

        // Outer cancelled: passes through the inner scope and a
        // with_timeout unchanged.
        let outer = CancelScope::new();
        let r = outer.run(|| {
            let inner = CancelScope::after(LONG);
            let ri = inner.run(|| {
                with_timeout(LONG, || {
                    outer.cancel();
                    coro::sleep(LONG)
                })
            });
            assert_eq!(ri, Ok(Ok(Err(WaitError::Cancelled))));
            assert!(!inner.cancel_called() && !inner.cancelled_caught());
        });
        assert!(r.is_err() && outer.cancelled_caught());
    });
}

#[test]
fn the_scope_cancelled_first_catches() {
    run(|| {
        // The outer deadline passed before the inner cancel: the outer one
        // owns the failure.
        let r = with_timeout(Duration::from_millis(2), || {
            let t = Instant::now();
            while t.elapsed() < Duration::from_millis(3) {}
            let inner = CancelScope::new();
            let ri = inner.run(|| {
                inner.cancel();
                coro::sleep(LONG)
            });
            assert_eq!(ri, Ok(Err(WaitError::TimedOut)));
            assert!(inner.cancel_called() && !inner.cancelled_caught());
        });
        assert_eq!(r, Err(Timeout));
    });
}

#[test]
fn deadline_errors_are_timeouts_and_cancels_are_not_interrupts() {
    run(|| {
        let scope = CancelScope::after(Duration::from_millis(2));
        let r = scope.run(|| coro::sleep(LONG));
        let c = r.unwrap_err();
        assert!(c.deadline_passed());
        assert_eq!(WaitError::from(c), WaitError::TimedOut);
        assert_eq!(io::Error::from(c).kind(), io::ErrorKind::TimedOut);

        let e = io::Error::from(WaitError::Cancelled);
        assert_ne!(e.kind(), io::ErrorKind::Interrupted);
        assert_eq!(WaitError::from_io(&e), Some(WaitError::Cancelled));
        let c = CancelScope::new();
        let r = c.run(|| {
            c.cancel();
            coro::park()
        });
        let c: Cancelled = r.unwrap_err();
        assert_ne!(io::Error::from(c).kind(), io::ErrorKind::Interrupted);
        assert_eq!(WaitError::from(c), WaitError::Cancelled);
    });
}

#[test]
fn shield_keeps_out_an_outer_deadline() {
    run(|| {
        let r = with_timeout(Duration::from_millis(5), || {
            assert_eq!(coro::sleep(LONG), Err(WaitError::TimedOut));
            assert_eq!(coro::sleep(Duration::ZERO), Err(WaitError::TimedOut));
            let t = Instant::now();
            let cleanup = CancelScope::new()
                .shielded()
                .run(|| coro::sleep(Duration::from_millis(10)));
            assert_eq!(cleanup, Ok(Ok(())));
            assert!(t.elapsed() >= Duration::from_millis(10));
            // Outside the shield again: still expired.
            assert_eq!(coro::sleep(Duration::ZERO), Err(WaitError::TimedOut));
        });
        assert_eq!(r, Err(Timeout));
    });
}

#[test]
fn shield_keeps_out_an_outer_cancel_but_not_its_own_deadline() {
    run(|| {
        let outer = CancelScope::new();
        let r = outer.run(|| {
            outer.cancel();
            let shielded = CancelScope::after(Duration::from_millis(200)).shielded();
            let r = shielded.run(|| {
                assert_eq!(coro::sleep(Duration::from_millis(1)), Ok(()));
                coro::sleep(LONG) // its own deadline still applies
            });
            assert!(r.unwrap_err().deadline_passed());
            coro::sleep(Duration::ZERO)
        });
        assert!(r.is_err() && outer.cancelled_caught());
    });
}

#[test]
fn lowering_the_shield_delivers_a_pending_cancel() {
    run(|| {
        let outer = CancelScope::new();
        let r = outer.run(|| {
            let shield = CancelScope::new().shielded();
            let r = shield.run(|| {
                outer.cancel();
                assert_eq!(coro::sleep(Duration::from_millis(1)), Ok(()));
                shield.set_shield(false);
                coro::sleep(LONG)
            });
            // The failure belongs to the outer scope: the inner one passes
            // it on.
            assert_eq!(r, Ok(Err(WaitError::Cancelled)));
        });
        assert!(r.is_err() && outer.cancelled_caught());
    });
}

#[test]
fn lowering_the_shield_from_another_thread_wakes_the_blocked_call() {
    run(|| {
        let outer = CancelScope::new();
        let shield = CancelScope::new().shielded();
        let inside = {
            let (outer, shield) = (outer.clone(), shield.clone());
            coro::spawn(move || outer.run(|| shield.run(|| coro::sleep(LONG))))
        };
        until_parked(inside.thread());
        outer.cancel();
        coro::yield_now();
        assert_eq!(inside.thread().state(), ThreadState::Parked, "shielded");
        shield.set_shield(false);
        let r = inside.join().unwrap();
        assert!(r.is_err(), "the outer scope caught it: {r:?}");
    });
}

#[test]
fn lowering_the_shield_exposes_an_outer_deadline_to_a_blocked_call() {
    run(|| {
        // The blocked thread armed no timer for the outer deadline (it was
        // hidden when it parked); lowering the shield must arm it.
        let shield = CancelScope::new().shielded();
        let inside = {
            let shield = shield.clone();
            coro::spawn(move || {
                with_timeout(Duration::from_millis(20), || {
                    shield.run(|| coro::sleep(LONG))
                })
            })
        };
        until_parked(inside.thread());
        assert_eq!(coro::stats().pending_timers, 1, "only the sleep's");
        shield.set_shield(false);
        let t = Instant::now();
        let r = inside.join().unwrap();
        assert_eq!(r, Err(Timeout));
        assert!(t.elapsed() < LONG);
        assert_eq!(coro::stats().pending_timers, 0);
    });
}

#[test]
fn interrupt_reaches_inside_a_shield() {
    run(|| {
        let inside = coro::spawn(|| CancelScope::new().shielded().run(|| coro::sleep(LONG)));
        until_parked(inside.thread());
        inside.thread().interrupt().unwrap();
        assert_eq!(inside.join().unwrap(), Ok(Err(WaitError::Interrupted)));
    });
}

#[test]
fn deadline_moved_earlier_while_blocked() {
    run(|| {
        let scope = CancelScope::after(LONG);
        let inside = sleeping_inside(&scope, LONG);
        assert!(scope.deadline().is_some(), "absolute once entered");
        let t = Instant::now();
        scope.set_deadline(Some(clock::now() + Duration::from_millis(5)));
        let r = inside.join().unwrap();
        assert!(
            t.elapsed() >= Duration::from_millis(5),
            "not before the new deadline"
        );
        assert!(r.unwrap_err().deadline_passed());
        let s = coro::stats();
        assert_eq!(s.pending_timers, 0);
    });
}

#[test]
fn deadline_moved_later_while_blocked() {
    run(|| {
        // The first deadline only has to outlast the moment it takes this
        // thread to run again (it is the next one ready).
        let scope = CancelScope::after(Duration::from_millis(300));
        let inside = sleeping_inside(&scope, Duration::from_millis(400));
        scope.set_deadline(Some(clock::now() + LONG));
        // The old timer fires early and re-arms; the sleep completes.
        assert_eq!(inside.join().unwrap(), Ok(Ok(())));
        assert!(!scope.cancel_called());
        assert_eq!(coro::stats().pending_timers, 0);
    });
}

#[test]
fn deadline_moved_into_the_past_or_removed() {
    run(|| {
        let scope = CancelScope::after(LONG);
        let inside = sleeping_inside(&scope, LONG);
        scope.set_deadline(Some(clock::now()));
        assert_eq!(inside.thread().state(), ThreadState::Ready, "woken at once");
        assert!(inside.join().unwrap().unwrap_err().deadline_passed());

        let scope = CancelScope::after(Duration::from_millis(300));
        let inside = sleeping_inside(&scope, Duration::from_millis(20));
        assert_eq!(coro::stats().pending_timers, 2);
        scope.set_deadline(None);
        assert_eq!(scope.deadline(), None);
        assert_eq!(
            coro::stats().pending_timers,
            1,
            "the scope's timer is given up"
        );
        assert_eq!(inside.join().unwrap(), Ok(Ok(())));
        assert_eq!(coro::stats().pending_timers, 0);
    });
}

#[test]
fn a_heartbeat_pushing_the_deadline_back_leaves_no_stale_timers() {
    run(|| {
        let scope = CancelScope::after(Duration::from_secs(30));
        let inside = sleeping_inside(&scope, LONG);
        for i in 0..10_000u64 {
            scope.set_deadline(Some(
                clock::now() + Duration::from_secs(60) + Duration::from_nanos(i),
            ));
        }
        let s = coro::stats();
        assert_eq!(s.pending_timers, 2, "the sleep's and the scope's");
        assert_eq!(s.timer_heap_len, 2, "later deadlines keep their entry");
        // And earlier, many times: stale entries stay bounded.
        let base = clock::now() + Duration::from_secs(60);
        for i in 0..10_000u64 {
            scope.set_deadline(Some(clock::Instant::from_ticks(base.ticks() - i)));
        }
        let s = coro::stats();
        assert_eq!(s.pending_timers, 2);
        assert!(
            s.timer_heap_len <= 2 * s.pending_timers + 260,
            "{}",
            s.timer_heap_len
        );
        scope.cancel();
        assert!(inside.join().unwrap().is_err());
        assert_eq!(coro::stats().pending_timers, 0);
    });
}

#[test]
fn absolute_deadlines() {
    run(|| {
        // `t` first: the deadline is 5 ms after it, whatever the time
        // between the two reads.
        let t = Instant::now();
        let at = clock::now() + Duration::from_millis(5);
        let scope = CancelScope::at(at);
        assert_eq!(scope.deadline(), Some(at));
        assert!(scope
            .run(|| coro::sleep(LONG))
            .unwrap_err()
            .deadline_passed());
        assert!(t.elapsed() >= Duration::from_millis(4));

        let t = Instant::now();
        let at = clock::now() + Duration::from_millis(5);
        assert_eq!(with_deadline(at, || coro::sleep(LONG)), Err(Timeout));
        assert!(t.elapsed() >= Duration::from_millis(4));
        // A deadline in the past fails the first blocking call only.
        assert_eq!(with_deadline(clock::now(), || 5), Ok(5));
        assert_eq!(with_deadline(clock::now(), coro::park), Err(Timeout));
    });
}

#[test]
fn relative_deadline_starts_at_entry() {
    run(|| {
        let scope = CancelScope::after(Duration::from_millis(500));
        assert_eq!(scope.deadline(), None, "not entered yet");
        coro::sleep(Duration::from_millis(60)).unwrap();
        let before = clock::now();
        let r = scope.run(|| {
            let d = scope.deadline().unwrap();
            assert!(d >= before + Duration::from_millis(500));
            coro::sleep(Duration::from_millis(1))
        });
        assert_eq!(r, Ok(Ok(())), "not expired by the time before entry");
    });
}

#[test]
#[should_panic(expected = "entered only once")]
fn entering_twice_panics() {
    run(|| {
        let scope = CancelScope::new();
        scope.run(|| ()).unwrap();
        let _ = scope.run(|| ());
    });
}

#[test]
fn effective_deadline_under_nesting_and_shields() {
    run(|| {
        assert_eq!(coro::current_effective_deadline(), None);
        let outer_at = clock::now() + Duration::from_secs(100);
        with_deadline(outer_at, || {
            assert_eq!(coro::current_effective_deadline(), Some(outer_at));
            // A later inner deadline does not count.
            with_timeout(Duration::from_secs(500), || {
                assert_eq!(coro::current_effective_deadline(), Some(outer_at));
            })
            .unwrap();
            let inner_at = clock::now() + Duration::from_secs(10);
            CancelScope::at(inner_at)
                .run(|| {
                    assert_eq!(coro::current_effective_deadline(), Some(inner_at));
                    // A shield hides the outer ones, not its own.
                    let own = clock::now() + Duration::from_secs(300);
                    CancelScope::at(own)
                        .shielded()
                        .run(|| assert_eq!(coro::current_effective_deadline(), Some(own)))
                        .unwrap();
                    CancelScope::new()
                        .shielded()
                        .run(|| assert_eq!(coro::current_effective_deadline(), None))
                        .unwrap();
                })
                .unwrap();
            // Cancelled: the deadline has passed.
            let c = CancelScope::new();
            c.run(|| {
                c.cancel();
                assert!(coro::current_effective_deadline().unwrap() <= clock::now());
            })
            .unwrap();
        })
        .unwrap();
    });
}

#[test]
fn zero_sleep_reports_an_expired_or_cancelled_scope() {
    run(|| {
        let r = with_timeout(Duration::from_millis(1), || {
            let t = Instant::now();
            while t.elapsed() < Duration::from_millis(2) {}
            coro::sleep(Duration::ZERO)
        });
        assert_eq!(r, Err(Timeout));
        let c = CancelScope::new();
        let r = c.run(|| {
            c.cancel();
            coro::sleep(Duration::ZERO)
        });
        assert!(r.is_err() && c.cancelled_caught());
        assert_eq!(coro::stats().pending_timers, 0);
    });
}

#[test]
fn with_timeout_creates_no_timer_when_nothing_blocks() {
    run(|| {
        for _ in 0..1000 {
            with_timeout(Duration::from_millis(1), || ()).unwrap();
            CancelScope::after(Duration::from_millis(1))
                .run(|| ())
                .unwrap();
        }
        let s = coro::stats();
        assert_eq!(s.pending_timers, 0);
        assert_eq!(s.timer_heap_len, 0);
    });
}

/// A deadline that passed before the scope was entered latches:
/// moving it later does not un-cancel the scope, and the scope is entered
/// cancelled.
#[test]
fn cancel_called_latches_before_entry() {
    util::run(|| {
        let scope = CancelScope::new();
        scope.set_deadline(Some(coro::clock::now()));
        scope.set_deadline(Some(coro::clock::now() + Duration::from_secs(30)));
        assert!(scope.cancel_called(), "un-latched by a later deadline");
        scope.set_deadline(None);
        assert!(scope.cancel_called(), "un-latched by removing the deadline");
        let r = scope.run(|| coro::sleep(Duration::from_secs(5)));
        assert!(r.is_err(), "entered uncancelled: {r:?}");
        assert!(scope.cancelled_caught());
    });
}

/// `cancel_called` latches the same way inside the scope, before the deadline's timer fired.
#[test]
fn cancel_called_latches_inside_the_scope() {
    util::run(|| {
        let scope = CancelScope::new();
        let s = scope.clone();
        let r = scope.run(move || {
            s.set_deadline(Some(coro::clock::now()));
            s.set_deadline(Some(coro::clock::now() + Duration::from_secs(30)));
            assert!(s.cancel_called());
            coro::sleep(Duration::from_secs(5))
        });
        assert!(r.is_err(), "the sleep was not cancelled: {r:?}");
        assert!(scope.cancel_called());
        let _ = WaitError::TimedOut;
    });
}
