//! What happens to green threads still alive when the main closure returns:
//! they see `Interrupted`, their destructors run, a thread that swallows its
//! unwind is leaked (logged by name), threads spawned during the unwind are
//! unwound too, and joiners see `Cancelled`.

use std::cell::{Cell, RefCell};
use std::panic::{self, AssertUnwindSafe};
use std::rc::Rc;
use std::time::Duration;

use coro_runtime::{self as coro, JoinError, WaitError};

use coro_test_support::{bounded, logs};

struct Flag(Rc<Cell<u32>>);
impl Drop for Flag {
    fn drop(&mut self) {
        self.0.set(self.0.get() + 1);
    }
}

#[test]
fn destructors_run_for_threads_alive_when_run_returns() {
    let dropped = Rc::new(Cell::new(0));
    let d = dropped.clone();
    // Rc is !Send but run's closure need not be Send: it runs on this thread.
    coro::run(move || {
        // Parked forever, ignores errors: unwound.
        let f = Flag(d.clone());
        coro::spawn(move || {
            let _f = f;
            loop {
                let _ = coro::park();
                coro::yield_now();
            }
        });
        // Sleeping: interrupted, leaves normally.
        let f = Flag(d.clone());
        coro::spawn(move || {
            let _f = f;
            coro::sleep(Duration::from_secs(3600))
        });
        // Never started: its closure is dropped.
        let f = Flag(d.clone());
        let started = coro::spawn(move || {
            let _f = f;
        });
        drop(started);
        // Spinning on yield_now: unwound after the shutdown passes.
        let f = Flag(d.clone());
        coro::spawn(move || {
            let _f = f;
            loop {
                coro::yield_now();
            }
        });
        coro::yield_now();
    });
    assert_eq!(dropped.get(), 4);
}

#[test]
fn threads_see_interrupted_at_shutdown_and_stacks_are_reclaimed() {
    let seen = Rc::new(Cell::new(None));
    let s = seen.clone();
    let mut rt = coro::Runtime::new().unwrap();
    rt.block_on(move || {
        coro::spawn(move || s.set(Some(coro::sleep(Duration::from_secs(3600)))));
        coro::yield_now();
    });
    assert_eq!(seen.get(), Some(Err(WaitError::Interrupted)));
    // The runtime is clean and usable again.
    let live = rt.block_on(|| coro::stats().live);
    assert_eq!(live, 1);
}

#[test]
fn blocking_in_a_destructor_during_unwinding_is_refused() {
    struct BlocksOnDrop(Rc<Cell<Option<Result<(), WaitError>>>>);
    impl Drop for BlocksOnDrop {
        fn drop(&mut self) {
            self.0.set(Some(coro::sleep(Duration::from_millis(1))));
        }
    }
    let got = Rc::new(Cell::new(None));
    let g = got.clone();
    coro::run(move || {
        let h = coro::spawn(move || {
            let _b = BlocksOnDrop(g);
            panic!("unwind through a blocking destructor");
        });
        assert!(h.join().unwrap_err().is_panic());
    });
    assert_eq!(got.get(), Some(Err(WaitError::SuspendForbidden)));
}

/// A destructor that yields (directly, or through a socket operation's
/// selfishness) while its thread unwinds must not switch: no other thread may
/// run in the middle of an unwind (the panic state is per OS thread).
struct YieldsOnDrop {
    /// Whether the other thread had run when the destructor finished.
    other_ran_before_drop_ended: Rc<Cell<Option<bool>>>,
    other_ran: Rc<Cell<bool>>,
}
impl Drop for YieldsOnDrop {
    fn drop(&mut self) {
        let yielded = coro::try_selfish(); // budget 1: would yield
        coro::yield_now();
        let _ = yielded;
        self.other_ran_before_drop_ended
            .set(Some(self.other_ran.get()));
    }
}

#[test]
fn yields_in_a_destructor_during_a_panic_do_not_switch() {
    coro::run(|| {
        let seen = Rc::new(Cell::new(None));
        let other_ran = Rc::new(Cell::new(false));
        let guard = YieldsOnDrop {
            other_ran_before_drop_ended: seen.clone(),
            other_ran: other_ran.clone(),
        };
        let h = coro::Builder::new()
            .selfishness(1)
            .spawn(move || {
                let _guard = guard;
                panic!("unwind through a yielding destructor");
            })
            .unwrap();
        let o = other_ran.clone();
        let other = coro::spawn(move || {
            o.set(true);
            coro::sleep(Duration::from_millis(1))
        });
        assert!(h.join().unwrap_err().is_panic());
        assert_eq!(seen.get(), Some(false), "another thread ran mid-unwind");
        // And nothing of the unwind leaked into the other thread.
        assert_eq!(other.join().unwrap(), Ok(()));
    });
}

#[test]
fn yields_in_a_destructor_during_shutdown_do_not_abort() {
    let seen = Rc::new(Cell::new(None));
    let other_ran = Rc::new(Cell::new(false));
    let guard = YieldsOnDrop {
        other_ran_before_drop_ended: seen.clone(),
        other_ran: other_ran.clone(),
    };
    coro::run(move || {
        coro::Builder::new()
            .selfishness(1)
            .spawn(move || {
                let _guard = guard;
                loop {
                    // Ignores every error, so shutdown must unwind it.
                    let _ = coro::park();
                    coro::yield_now();
                }
            })
            .unwrap();
        coro::spawn(move || loop {
            other_ran.set(true);
            let _ = coro::park();
            coro::yield_now();
        });
        coro::yield_now();
    });
    // Reaching this line is the test: a switch mid-unwind aborts the process.
    assert!(seen.get().is_some(), "the destructor ran");
}

#[test]
fn no_suspend_puts_off_selfish_yields_and_ignores_yield_now() {
    coro::run(|| {
        coro::set_selfishness(1).unwrap();
        let before = coro::stats().switches;
        let yielded = coro::no_suspend(|| {
            let y = coro::try_selfish();
            coro::yield_now();
            y
        });
        assert!(!yielded);
        assert_eq!(coro::stats().switches, before, "nothing switched");
        // The yield was put off, not forgotten: the next spend yields.
        assert!(coro::try_selfish());
    });
}

/// A thread that catches its shutdown unwind in a loop is unwound
/// a few times, then logged by name and leaked; `run` returns.
#[test]
fn a_thread_that_swallows_its_unwind_is_leaked_not_spun_on() {
    logs::capture();
    bounded(|| {
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
    let lines = logs::lines();
    for name in ["stubborn", "no-yield"] {
        assert!(
            lines.iter().any(|(l, m)| *l == log::Level::Error
                && m.contains(&format!("'{name}'"))
                && m.contains("leaked")),
            "{name}: {lines:?}"
        );
    }
}

/// A supervisor loop around `catch_unwind` still
/// runs its destructors at each round of the unwind.
#[test]
fn destructors_run_in_a_thread_that_catches_its_unwind() {
    bounded(|| {
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

/// A thread spawned by a destructor during shutdown's unwind is
/// unwound too (its closure dropped, never run) before `run` returns, and
/// the runtime's next run starts empty.
#[test]
fn threads_spawned_during_the_unwind_do_not_outlive_it() {
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
    bounded(|| {
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

/// A join error for a thread unwound at shutdown still says `Cancelled`.
#[test]
fn threads_unwound_at_shutdown_report_cancelled() {
    thread_local!(static H: RefCell<Option<coro::JoinHandle<()>>> = const { RefCell::new(None) });
    bounded(|| {
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
