//! sleep, sleep_until and the timer heap: deadline order, no early wake,
//! no timer left behind by a sleep that failed before it suspended or by a
//! scope that left with its timer armed.

use std::cell::{Cell, RefCell};
use std::panic;
use std::rc::Rc;
use std::time::Duration;

use coro_runtime::{self as coro, clock, WaitError};

use coro_test_support::bounded;

/// 10 000 sleepers with deadlines 1 µs apart, spawned in a scrambled
/// order, all parked before the first is due; `None` if some sleeper only
/// ran once its deadline had passed (a slow or loaded machine, valgrind),
/// so that the order proves nothing.
fn ten_thousand_sleepers(margin: Duration) -> Option<Vec<u64>> {
    coro::run(|| {
        let order = Rc::new(RefCell::new(Vec::with_capacity(10_000)));
        // The base deadline is set after all are spawned, `margin` ahead,
        // so that every sleeper is parked before the first one is due.
        let base = Rc::new(std::cell::Cell::new(clock::now()));
        let late = Rc::new(std::cell::Cell::new(false));
        // Deadlines 1 µs apart (several share a tick count only if the
        // clock is coarse, then insertion order decides).
        let hs: Vec<_> = (0..10_000u64)
            .map(|i| (i * 7919) % 10_000)
            .map(|k| {
                let order = order.clone();
                let base = base.clone();
                let late = late.clone();
                coro::spawn(move || {
                    let deadline = base.get() + Duration::from_micros(k);
                    if clock::now() >= deadline {
                        late.set(true);
                    }
                    coro::sleep_until(deadline).unwrap();
                    order.borrow_mut().push(k);
                })
            })
            .collect();
        base.set(clock::now() + margin);
        for h in hs {
            h.join().unwrap();
        }
        let v = order.borrow().clone();
        (!late.get()).then_some(v)
    })
}

#[test]
fn ten_thousand_sleepers_wake_in_deadline_order() {
    // Wider margins until every sleeper parks in time (a pass over 10 000
    // threads takes about a second under valgrind).
    let order = [500, 2_000, 8_000, 30_000]
        .into_iter()
        .find_map(|ms| ten_thousand_sleepers(Duration::from_millis(ms)))
        .expect("some sleeper ran after its deadline even with a 30 s margin");
    assert_eq!(order.len(), 10_000);
    assert!(
        order.windows(2).all(|w| w[0] < w[1]),
        "sleepers woke out of deadline order"
    );
}

#[test]
fn equal_deadlines_fire_in_insertion_order() {
    let order = coro::run(|| {
        let order = Rc::new(RefCell::new(Vec::new()));
        let at = clock::now() + Duration::from_millis(5);
        let hs: Vec<_> = (0..50)
            .map(|i| {
                let order = order.clone();
                coro::spawn(move || {
                    coro::sleep_until(at).unwrap();
                    order.borrow_mut().push(i);
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        let v = order.borrow().clone();
        v
    });
    assert_eq!(order, (0..50).collect::<Vec<_>>());
}

#[test]
fn sleep_never_returns_early() {
    coro::run(|| {
        for ms in [0u64, 1, 3, 10] {
            let t = clock::now();
            let s = std::time::Instant::now();
            coro::sleep(Duration::from_millis(ms)).unwrap();
            assert!(t.elapsed() >= Duration::from_millis(ms));
            assert!(s.elapsed() >= Duration::from_millis(ms));
        }
    });
}

#[test]
fn shifting_the_wall_clock_does_not_move_a_timer() {
    coro::run(|| {
        let wall0 = clock::wall_now();
        let h = coro::spawn(|| {
            let t = std::time::Instant::now();
            coro::sleep(Duration::from_millis(50)).unwrap();
            t.elapsed()
        });
        coro::yield_now();
        // Move wall time a day forward, then a day back, while the timer waits.
        let off = clock::wall_offset();
        clock::set_wall_offset(off + 86_400_000_000_000);
        let jumped = clock::wall_now();
        assert!(jumped.duration_since(wall0).unwrap() >= Duration::from_secs(86_399));
        coro::yield_now();
        clock::set_wall_offset(off - 86_400_000_000_000);
        let slept = h.join().unwrap();
        clock::resync_wall();
        // It fired after its 50 ms, not a day early or late.
        assert!(slept >= Duration::from_millis(50));
        assert!(slept < Duration::from_secs(3600));
    });
}

#[test]
fn a_million_timeouts_that_complete_at_once_leave_no_timers() {
    coro::run(|| {
        for _ in 0..1_000_000 {
            coro::with_timeout(Duration::from_secs(10), || ()).unwrap();
        }
        let s = coro::stats();
        assert_eq!(s.pending_timers, 0);
        assert_eq!(s.timer_heap_len, 0);
    });
}

#[test]
fn timeouts_around_blocking_calls_do_not_pile_up_in_the_heap() {
    coro::run(|| {
        // Each scope arms a timer (the thread blocks inside it), then leaves
        // before it fires: the entries go stale and the heap is rebuilt.
        for _ in 0..20_000 {
            coro::with_timeout(Duration::from_secs(10), || {
                let me = coro::current();
                let h = coro::spawn(move || me.unpark().unwrap());
                coro::park().unwrap();
                h.join().unwrap();
            })
            .unwrap();
        }
        let s = coro::stats();
        assert_eq!(s.pending_timers, 0, "{s:?}");
        assert!(s.timer_heap_len <= 600, "heap kept stale entries: {s:?}");
    });
}

/// A sleep that failed before it suspended (an interrupt was
/// pending) leaves a timer that must not wake the thread's next park, and
/// `pending_timers` counts exactly the timers that will still fire.
#[test]
fn a_cancelled_sleeps_timer_wakes_nothing_later() {
    bounded(|| {
        coro::run(|| {
            coro::current().interrupt().unwrap();
            assert_eq!(
                coro::sleep(Duration::from_millis(5)),
                Err(WaitError::Interrupted)
            );
            assert_eq!(coro::stats().pending_timers, 0);
            let woken_by = Rc::new(Cell::new(""));
            let me = coro::current();
            let w = woken_by.clone();
            let unparker = coro::spawn(move || {
                coro::sleep(Duration::from_millis(100)).unwrap();
                w.set("unparker");
                me.unpark().unwrap();
            });
            coro::park().unwrap();
            assert_eq!(woken_by.get(), "unparker", "woken by the stale 5 ms timer");
            unparker.join().unwrap();

            // The same race, then a sleep: the stale entry neither cuts the
            // sleep short nor makes the count read low while it lasts.
            coro::current().interrupt().unwrap();
            assert!(coro::sleep(Duration::from_millis(5)).is_err());
            let probe = coro::spawn(|| {
                coro::sleep(Duration::from_millis(30)).unwrap();
                coro::stats().pending_timers
            });
            let t = coro::clock::now();
            coro::sleep(Duration::from_millis(100)).unwrap();
            assert!(t.elapsed() >= Duration::from_millis(100));
            assert_eq!(probe.join().unwrap(), 1, "main's sleep is pending");
            assert_eq!(coro::stats().pending_timers, 0);
        })
    });
}

/// A timer entry that went stale (a scope that left with its timer
/// armed) does not put off the deadlock report until its deadline.
#[test]
fn stale_timers_do_not_delay_the_deadlock_report() {
    bounded(|| {
        let r = panic::catch_unwind(|| {
            coro::run(|| {
                let me = coro::current();
                let waker = coro::spawn(move || me.unpark());
                // Parks inside an hour-long scope: its timer is armed, and
                // goes stale when the scope returns.
                let _ = coro::with_timeout(Duration::from_secs(3600), coro::park);
                waker.join().unwrap().unwrap();
                let _ = coro::park();
            })
        });
        let msg = r.expect_err("deadlock reported");
        let msg = msg.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(msg.contains("deadlock"), "{msg}");
    });
}

/// A due sleep is a blocking call (it reports an expired scope) and runs
/// behind earlier due sleepers.
#[test]
fn a_zero_sleep_reports_an_expired_scope_and_keeps_deadline_order() {
    bounded(|| {
        coro::run(|| {
            assert_eq!(
                coro::with_timeout(Duration::ZERO, || coro::sleep(Duration::ZERO)),
                Err(coro::Timeout)
            );
            let order = Rc::new(RefCell::new(Vec::new()));
            let t0 = coro::clock::now();
            let o = order.clone();
            let early = coro::spawn(move || {
                coro::sleep_until(t0 + Duration::from_millis(1)).unwrap();
                o.borrow_mut().push("early");
            });
            coro::yield_now(); // `early` sleeps
                               // Let its deadline and ours pass without the loop firing timers.
            while coro::clock::now() < t0 + Duration::from_millis(3) {
                std::hint::spin_loop();
            }
            coro::sleep_until(t0 + Duration::from_millis(2)).unwrap();
            order.borrow_mut().push("due");
            early.join().unwrap();
            assert_eq!(*order.borrow(), ["early", "due"]);
        })
    });
}
