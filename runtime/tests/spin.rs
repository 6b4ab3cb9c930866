//! Spin warnings: a thread that keeps making blocking calls after its wait
//! was cut short, each refused at once, is named once per run with the
//! call site and counted in `stats()`; correct code (a thread that catches
//! a timeout and goes on, a polling loop with a zero timeout, a thread that
//! waits between refusals) never is.
//!
//! Every loop here is bounded by a count; `util::run` turns a hang into a
//! failure.

use coro_test_support as util;

use std::panic::Location;
use std::time::Duration;

use coro_runtime::{self as coro, with_timeout, CancelScope, SPIN_LIMIT};
use coro_test_support::{logs, run};

const LONG: Duration = Duration::from_secs(3600);

/// The spin warnings logged so far that name green thread `name`.
fn warnings_about(name: &str) -> Vec<String> {
    let tag = format!("'{name}' spins");
    logs::logged(log::Level::Warn, &tag)
}

/// Runs `f` on a new green thread named `name` and waits for it.
fn on_thread<T: 'static>(name: &str, f: impl FnOnce() -> T + 'static) -> T {
    coro::Builder::new()
        .name(name.into())
        .spawn(f)
        .unwrap()
        .join()
        .unwrap()
}

/// The location of a `sleep` call in the caller's code.
#[track_caller]
fn sleep_here() -> (&'static Location<'static>, Result<(), coro::WaitError>) {
    (Location::caller(), coro::sleep(LONG))
}

#[test]
fn a_loop_that_skips_a_passed_deadline_is_named_once_with_its_call_site() {
    logs::capture();
    run(|| {
        let before = coro::stats().spin_warnings;
        let site = on_thread("skipper", || {
            let mut site = None;
            let r = with_timeout(Duration::ZERO, || {
                // Twice the limit: one warning for the whole run.
                for _ in 0..2 * SPIN_LIMIT {
                    let (at, r) = sleep_here();
                    assert!(r.is_err());
                    site = Some(at);
                }
            });
            assert!(r.is_err());
            site.unwrap()
        });
        let w = warnings_about("skipper");
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains(&site.to_string()),
            "no call site in: {}",
            w[0]
        );
        assert!(w[0].contains("timed out"), "no cause in: {}", w[0]);
        assert_eq!(coro::stats().spin_warnings, before + 1);
    });
}

#[test]
fn a_loop_that_skips_a_cancellation_is_named() {
    logs::capture();
    run(|| {
        on_thread("cancelled skipper", || {
            let scope = CancelScope::new();
            scope.cancel();
            let _ = scope.run(|| {
                for _ in 0..SPIN_LIMIT {
                    let _ = coro::park();
                }
            });
        });
        let w = warnings_about("cancelled skipper");
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("cancelled"), "no cause in: {}", w[0]);
        assert!(w[0].contains(file!()), "no call site in: {}", w[0]);
    });
}

#[test]
fn a_new_run_after_its_scope_ended_is_named_again() {
    logs::capture();
    run(|| {
        on_thread("twice", || {
            for _ in 0..2 {
                let _ = with_timeout(Duration::ZERO, || {
                    for _ in 0..SPIN_LIMIT {
                        let _ = coro::park();
                    }
                });
                // Leaving the expired scope ends the run; a sleep waits.
                coro::sleep(Duration::from_millis(1)).unwrap();
            }
        });
        assert_eq!(warnings_about("twice").len(), 2);
    });
}

#[test]
fn a_real_wait_between_refused_calls_keeps_the_count_below_the_limit() {
    logs::capture();
    run(|| {
        on_thread("patient", || {
            for _ in 0..SPIN_LIMIT + 10 {
                // An interrupt that is pending refuses the next call...
                coro::current().interrupt().unwrap();
                assert!(coro::park().is_err());
                // ...and a sleep that really waits follows it: no scope
                // is left in between, only the wait ends the run.
                coro::sleep(Duration::ZERO).unwrap();
            }
        });
        assert_eq!(warnings_about("patient"), Vec::<String>::new());
    });
}

#[test]
fn correct_code_is_never_named() {
    logs::capture();
    run(|| {
        let before = coro::stats().spin_warnings;
        // Catches one timeout and returns, again and again.
        on_thread("catches and returns", || {
            for _ in 0..3 * SPIN_LIMIT {
                let r = with_timeout(Duration::ZERO, || coro::sleep(LONG));
                assert!(r.is_err());
            }
        });
        // Polls a cancelled scope, each time a new one.
        on_thread("polls", || {
            for _ in 0..3 * SPIN_LIMIT {
                let scope = CancelScope::new();
                scope.cancel();
                assert!(scope.run(coro::park).is_err());
            }
        });
        // Ignores errors, but stops short of the limit.
        on_thread("gives up in time", || {
            let _ = with_timeout(Duration::ZERO, || {
                for _ in 0..SPIN_LIMIT - 1 {
                    let _ = coro::park();
                }
            });
        });
        // Is interrupted again and again, and waits each time.
        let waiter = coro::Builder::new()
            .name("interrupted".into())
            .spawn(|| {
                let mut interrupts = 0;
                while interrupts < 100 {
                    if coro::park().is_err() {
                        interrupts += 1;
                    }
                }
            })
            .unwrap();
        for _ in 0..100 {
            util::yield_until("the waiter to park", || {
                waiter.thread().state() == coro::ThreadState::Parked
            });
            waiter.thread().interrupt().unwrap();
        }
        waiter.join().unwrap();
        for name in [
            "catches and returns",
            "polls",
            "gives up in time",
            "interrupted",
        ] {
            assert_eq!(warnings_about(name), Vec::<String>::new(), "{name}");
        }
        assert_eq!(coro::stats().spin_warnings, before);
    });
}
