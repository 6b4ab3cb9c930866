//! Regression tests for issue #13 (soundness): one per numbered item that
//! the runtime alone can show. Each fails on the code before the fix. The
//! first runs under valgrind in CI (`.ci/run`), where the use-after-free it
//! guards against shows as an invalid read or write.

use std::cell::{Cell, RefCell};
use std::panic::{self, AssertUnwindSafe};
use std::rc::Rc;
use std::sync::mpsc;
use std::sync::{Arc, Barrier, Mutex};
use std::time::Duration;

use coro_runtime::{self as coro, JoinError, ThreadState, WaitError};

mod util;
use util::{bounded, capture_logs, LOGS};

/// Item 1: `block_on` unwinding (the deadlock report) with a parked thread
/// whose handle outlives the runtime. The thread is unwound before `run`
/// returns, with its runtime current; the handle left behind sees a dead
/// thread, and dropping it touches nothing freed (valgrind-clean).
#[test]
fn issue_13_1_unwinding_block_on_unwinds_its_threads_first() {
    thread_local! {
        static KEEP: RefCell<Vec<coro::Coro>> = const { RefCell::new(Vec::new()) };
        static DROPPED: Cell<bool> = const { Cell::new(false) };
    }
    struct Flag;
    impl Drop for Flag {
        fn drop(&mut self) {
            DROPPED.with(|d| d.set(true));
        }
    }
    bounded(60, || {
        let r = panic::catch_unwind(|| {
            coro::run(|| {
                drop(coro::spawn(|| {
                    let _flag = Flag;
                    KEEP.with(|k| k.borrow_mut().push(coro::current()));
                    let _ = coro::park();
                }));
                let _ = coro::park(); // everything parked: "coro: deadlock"
            })
        });
        let msg = r.expect_err("the deadlock is reported");
        let msg = msg.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(msg.contains("deadlock"), "{msg}");
        assert!(DROPPED.with(Cell::get), "the parked thread was unwound");
        KEEP.with(|k| {
            for c in k.borrow().iter() {
                assert_eq!(c.state(), ThreadState::Dead);
                assert!(c.unpark().is_err());
            }
            k.borrow_mut().clear(); // the last Rc<Task>
        });
    });
}

/// Item 1, the reuse half: a runtime whose run panicked (here, the
/// deadlock report) finished every thread of the failed run before
/// `block_on` unwound; since issue 20 it is poisoned, so a later run
/// cannot start on top of it (a fresh runtime does).
#[test]
fn issue_13_1_a_panicked_run_leaves_no_thread_and_poisons_the_runtime() {
    bounded(60, || {
        let mut rt = coro::Runtime::new().unwrap();
        let finished = Rc::new(Cell::new(0));
        let f = finished.clone();
        let r = panic::catch_unwind(AssertUnwindSafe(|| {
            rt.block_on(move || {
                for _ in 0..3 {
                    let f = f.clone();
                    drop(coro::spawn(move || {
                        struct Count(Rc<Cell<u32>>);
                        impl Drop for Count {
                            fn drop(&mut self) {
                                self.0.set(self.0.get() + 1);
                            }
                        }
                        let _c = Count(f);
                        let _ = coro::park();
                    }));
                }
                let _ = coro::park();
            })
        }));
        assert!(r.is_err());
        assert_eq!(finished.get(), 3, "threads of the failed run were left");
        assert!(rt.is_poisoned());
        let again = panic::catch_unwind(AssertUnwindSafe(|| rt.block_on(|| ())));
        assert!(again.is_err(), "a poisoned runtime ran again");
        let live = coro::Runtime::new()
            .unwrap()
            .block_on(|| coro::stats().live);
        assert_eq!(live, 1, "only the new main thread");
    });
}

struct PanicOnDrop(&'static str);
impl Drop for PanicOnDrop {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            panic!("{}", self.0);
        }
    }
}

/// Item 2(b): a detached thread's result, or its panic payload, whose
/// destructor panics does not unwind out of `run`; the others carry on.
#[test]
fn issue_13_2_destructor_panics_of_detached_results_stay_inside() {
    capture_logs();
    bounded(60, || {
        let sum = coro::run(|| {
            drop(coro::spawn(|| PanicOnDrop("result dropped")));
            drop(coro::spawn(|| -> () {
                panic::panic_any(PanicOnDrop("payload dropped"))
            }));
            let other = coro::spawn(|| 5);
            for _ in 0..4 {
                coro::yield_now();
            }
            other.join().unwrap() + coro::spawn(|| 1).join().unwrap()
        });
        assert_eq!(sum, 6);
    });
    let logs = LOGS.lock().unwrap();
    assert!(
        logs.iter()
            .any(|(l, m)| *l == log::Level::Error && m.contains("result dropped")),
        "{logs:?}"
    );
}

/// Item 4: two green threads waiting on one shared handle both return.
#[test]
fn issue_13_4_every_joiner_of_a_shared_handle_wakes() {
    bounded(60, || {
        coro::run(|| {
            let h = Rc::new(coro::spawn(|| {
                let _ = coro::park();
                7
            }));
            let waiters: Vec<_> = (0..2)
                .map(|_| {
                    let h = h.clone();
                    coro::spawn(move || coro::with_timeout(Duration::from_secs(20), || h.wait()))
                })
                .collect();
            coro::yield_now();
            h.thread().unpark().unwrap();
            for w in waiters {
                assert_eq!(w.join().unwrap(), Ok(Ok(())));
            }
            let h = Rc::try_unwrap(h).unwrap();
            assert_eq!(h.join().unwrap(), 7);
        })
    });
}

/// Item 5: a sleep that failed before it suspended (an interrupt was
/// pending) leaves a timer that must not wake the thread's next park, and
/// `pending_timers` counts exactly the timers that will still fire.
#[test]
fn issue_13_5_a_cancelled_sleeps_timer_wakes_nothing_later() {
    bounded(60, || {
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

/// Item 6: a thread that catches its shutdown unwind in a loop is unwound
/// a few times, then logged by name and leaked; `run` returns.
#[test]
fn issue_13_6_a_thread_that_swallows_its_unwind_is_leaked_not_spun_on() {
    capture_logs();
    bounded(60, || {
        coro::run(|| {
            drop(
                coro::Builder::new()
                    .name("stubborn".into())
                    .spawn(|| loop {
                        let _ = panic::catch_unwind(|| {
                            let _ = coro::sleep(Duration::from_secs(1));
                            coro::yield_now();
                        });
                    })
                    .unwrap(),
            );
            // Its sleeps fail at once now, and fail-at-once calls yield.
            drop(
                coro::Builder::new()
                    .name("no-yield".into())
                    .spawn(|| loop {
                        let _ = panic::catch_unwind(|| coro::sleep(Duration::from_secs(1)));
                    })
                    .unwrap(),
            );
            coro::yield_now();
        });
    });
    let logs = LOGS.lock().unwrap();
    for name in ["stubborn", "no-yield"] {
        assert!(
            logs.iter().any(|(l, m)| *l == log::Level::Error
                && m.contains(&format!("'{name}'"))
                && m.contains("leaked")),
            "{name}: {logs:?}"
        );
    }
}

/// Item 6, the common case: a supervisor loop around `catch_unwind` still
/// runs its destructors at each round of the unwind.
#[test]
fn issue_13_6_destructors_run_in_a_thread_that_catches_its_unwind() {
    bounded(60, || {
        let drops = Rc::new(Cell::new(0));
        let d = drops.clone();
        coro::run(move || {
            drop(coro::spawn(move || loop {
                struct Count(Rc<Cell<u32>>);
                impl Drop for Count {
                    fn drop(&mut self) {
                        self.0.set(self.0.get() + 1);
                    }
                }
                let c = Count(d.clone());
                let _ = panic::catch_unwind(AssertUnwindSafe(|| {
                    let _c = c;
                    let _ = coro::park();
                }));
            }));
            coro::yield_now();
        });
        assert!(drops.get() >= 2, "{}", drops.get());
    });
}

/// Item 8: four jobs submitted together on a warm pool of four threads run
/// at the same time (they meet at a barrier; run one after another they
/// would never all arrive).
#[test]
fn issue_13_8_jobs_submitted_together_run_together_on_a_warm_pool() {
    bounded(120, || {
        let mut rt = coro::Runtime::builder()
            .blocking_threads(4)
            .build()
            .unwrap();
        rt.block_on(|| {
            for round in 0..3 {
                let barrier = Arc::new(Barrier::new(4));
                let hs: Vec<_> = (0..4)
                    .map(|_| {
                        let b = barrier.clone();
                        coro::spawn(move || {
                            coro::blocking(move || {
                                // A wait that times out means the jobs were
                                // not all running at once.
                                let (tx, rx) = mpsc::channel();
                                std::thread::spawn(move || {
                                    b.wait();
                                    let _ = tx.send(());
                                });
                                rx.recv_timeout(Duration::from_secs(20)).is_ok()
                            })
                        })
                    })
                    .collect();
                for h in hs {
                    assert_eq!(h.join().unwrap(), Ok(true), "round {round}");
                }
            }
            assert!(coro::stats().blocking_threads <= 4);
        })
    });
}

/// Item 8: a job whose caller stopped waiting before a worker took it never
/// runs, and callers beyond the queue's bound wait instead of growing it.
#[test]
fn issue_13_8_abandoned_jobs_are_dropped_and_the_queue_is_bounded() {
    bounded(120, || {
        let mut rt = coro::Runtime::builder()
            .blocking_threads(1)
            .build()
            .unwrap();
        rt.block_on(|| {
            let (release, stuck) = mpsc::channel::<()>();
            let holder = coro::spawn(move || coro::blocking(move || stuck.recv().is_ok()));
            // Until the worker has taken the holder's job (one yield is not
            // enough where threads are slow to start: under valgrind).
            coro::yield_now();
            while coro::stats().blocking_queued > 0 {
                coro::sleep(Duration::from_millis(1)).unwrap();
            }
            let ran = Arc::new(Mutex::new(false));
            let r = ran.clone();
            let gave_up = coro::with_timeout(Duration::from_millis(10), || {
                coro::blocking(move || *r.lock().unwrap() = true)
            });
            assert!(gave_up.is_err());
            assert_eq!(
                coro::stats().blocking_queued,
                0,
                "the abandoned job left the queue"
            );
            // Many callers that give up: the queue stays bounded.
            let callers: Vec<_> = (0..5000)
                .map(|_| {
                    coro::spawn(|| {
                        coro::with_timeout(Duration::from_millis(200), || coro::blocking(|| ()))
                    })
                })
                .collect();
            coro::yield_now();
            coro::yield_now();
            assert!(coro::stats().blocking_queued <= 4096);
            for c in callers {
                assert!(c.join().unwrap().is_err());
            }
            assert_eq!(coro::stats().blocking_queued, 0);
            release.send(()).unwrap();
            assert_eq!(holder.join().unwrap(), Ok(true));
            // A job submitted now runs after the holder: the abandoned one,
            // queued before it, would have run first.
            coro::blocking(|| ()).unwrap();
            assert!(!*ran.lock().unwrap(), "an abandoned job ran");
        })
    });
}

/// Item 10: a thread spawned by a destructor during shutdown's unwind is
/// unwound too (its closure dropped, never run) before `run` returns, and
/// the runtime's next run starts empty.
#[test]
fn issue_13_10_threads_spawned_during_the_unwind_do_not_outlive_it() {
    thread_local! {
        static CLOSURE_DROPPED: Cell<bool> = const { Cell::new(false) };
        static CLOSURE_RAN: Cell<bool> = const { Cell::new(false) };
    }
    struct SpawnOnDrop;
    impl Drop for SpawnOnDrop {
        fn drop(&mut self) {
            struct Mark;
            impl Drop for Mark {
                fn drop(&mut self) {
                    CLOSURE_DROPPED.with(|d| d.set(true));
                }
            }
            let m = Mark;
            drop(coro::spawn(move || {
                let _m = m;
                CLOSURE_RAN.with(|r| r.set(true));
            }));
        }
    }
    bounded(60, || {
        let mut rt = coro::Runtime::new().unwrap();
        rt.block_on(|| {
            drop(coro::spawn(|| {
                let _s = SpawnOnDrop;
                loop {
                    // Swallows the interrupt: only the forced unwind ends it.
                    let _ = coro::park();
                    coro::yield_now();
                }
            }));
            coro::yield_now();
        });
        assert!(CLOSURE_DROPPED.with(Cell::get));
        assert!(!CLOSURE_RAN.with(Cell::get));
        assert_eq!(rt.block_on(|| coro::stats().live), 1);
    });
}

/// Item 14: a timer entry that went stale (a scope that left with its timer
/// armed) does not put off the deadlock report until its deadline.
#[test]
fn issue_13_14_stale_timers_do_not_delay_the_deadlock_report() {
    bounded(60, || {
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

/// Issue #12's sleep fix, made here: a due sleep is a blocking call (it
/// reports an expired scope) and runs behind earlier due sleepers.
#[test]
fn issue_13_zero_sleep_reports_an_expired_scope_and_keeps_deadline_order() {
    bounded(60, || {
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

/// A join error for a thread unwound at shutdown still says `Cancelled`.
#[test]
fn threads_unwound_at_shutdown_report_cancelled() {
    thread_local!(static H: RefCell<Option<coro::JoinHandle<()>>> = const { RefCell::new(None) });
    bounded(60, || {
        coro::run(|| {
            let h = coro::spawn(|| loop {
                let _ = coro::park();
                coro::yield_now();
            });
            H.with(|s| *s.borrow_mut() = Some(h));
            coro::yield_now();
        });
        let h = H.with(|s| s.borrow_mut().take()).unwrap();
        assert!(matches!(h.join(), Err(JoinError::Cancelled)));
    });
}
