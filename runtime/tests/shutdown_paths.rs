//! Shutdown on its harder paths: after the loop panicked (threads are
//! unwound and borrows of the caller's data end before `run` unwinds, and
//! the runtime is poisoned), with destructors that keep spawning, with
//! sockets dropped outside their runtime, with a thread leaked inside a
//! blocking call, with user code that panics during shutdown (a leftover
//! shutdown hook, a logger). Each ends, and keeps the deadlock report.

use std::cell::{Cell, RefCell};
use std::panic::{self, AssertUnwindSafe};
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use coro_runtime::{self as coro, ThreadState};

use coro_test_support::child::{child_ok, is_child};
use coro_test_support::{bounded, panic_text, within};

fn quiet_runtime() -> coro::Runtime {
    coro::Runtime::builder()
        .latency_warning(None)
        .build()
        .unwrap()
}

/// A thread that ignores the errors of its blocking calls in a
/// loop is stopped by an ordinary shutdown (its failing calls spend
/// selfishness and yield; the forced unwind then ends it).
#[test]
fn an_error_loop_is_stopped_by_a_normal_shutdown() {
    within(|| {
        quiet_runtime().block_on(|| {
            drop(coro::spawn(|| loop {
                let _ = coro::park();
            }));
            coro::yield_now();
        })
    })
    .unwrap();
}

/// The same thread, when shutdown runs from `block_on`'s guard
/// because the loop panicked (the deadlock report), spins forever:
/// `std::thread::panicking()` is true for the whole OS thread, so its
/// failing parks never yield (`spend_selfishness` defers the yield), and
/// shutdown's first phase (`run_passes`) never gets control back.
#[test]
fn an_error_loop_is_stopped_when_the_loop_panicked() {
    static PARKS: AtomicU64 = AtomicU64::new(0);
    let r = within(|| {
        panic::catch_unwind(AssertUnwindSafe(|| {
            quiet_runtime().block_on(|| {
                drop(coro::spawn(|| loop {
                    PARKS.fetch_add(1, Ordering::Relaxed);
                    let _ = coro::park();
                }));
                let _ = coro::park(); // everything parked: "coro: deadlock"
            })
        }))
        .is_err()
    });
    println!(
        "failed parks of the spinning thread so far: {}",
        PARKS.load(Ordering::Relaxed)
    );
    assert_eq!(r, Ok(true), "block_on must report the deadlock and return");
}

/// (Same cause:) a thread that polls a flag with `yield_now` (the
/// pattern the docs warn about only for destructors) spins forever in a
/// panic-path shutdown; nothing bounds it (`unwind_refusals` counts only
/// blocking calls of a thread already being unwound).
#[test]
fn a_yield_loop_is_stopped_when_the_loop_panicked() {
    let r = within(|| {
        panic::catch_unwind(AssertUnwindSafe(|| {
            quiet_runtime().block_on(|| {
                drop(coro::spawn(|| {
                    // Waits for a wake-up, then (woken by shutdown's
                    // interrupt) polls with yield_now as a cooperative
                    // thread would.
                    let _ = coro::park();
                    let mut n = 0u64;
                    loop {
                        n += 1;
                        coro::yield_now();
                        if n == u64::MAX {
                            break;
                        }
                    }
                }));
                let _ = coro::park();
            })
        }))
        .is_err()
    });
    assert_eq!(r, Ok(true), "block_on must report the deadlock and return");
}

/// A destructor that (re)spawns a worker, the supervisor pattern,
/// does not make shutdown endless: each unwound never-started closure drops
/// the guard, which spawns the next; after 64 passes what is left is leaked.
#[test]
fn a_respawning_destructor_does_not_make_shutdown_endless() {
    thread_local!(static SPAWNED: Cell<u64> = const { Cell::new(0) });
    struct Respawn;
    impl Drop for Respawn {
        fn drop(&mut self) {
            let next = Respawn;
            SPAWNED.with(|s| s.set(s.get() + 1));
            if SPAWNED.with(Cell::get) < 2_000_000 {
                drop(coro::spawn(move || {
                    let _g = next;
                    let _ = coro::park();
                }));
            } else {
                std::mem::forget(next);
            }
        }
    }
    let r = within(|| {
        quiet_runtime().block_on(|| {
            drop(coro::spawn(|| {
                let _g = Respawn;
                loop {
                    let _ = coro::park();
                    coro::yield_now();
                }
            }));
            coro::yield_now();
        });
        SPAWNED.with(Cell::get)
    });
    match r {
        Ok(n) => assert!(
            n < 1000,
            "shutdown unwound {n} respawned threads before giving up"
        ),
        Err(e) => panic!("{e}"),
    }
}

/// A registration (a socket) dropped while its runtime is not
/// running leaves that runtime's source table (otherwise the deadlock
/// report of every later run is off and a deadlock hangs).
#[test]
fn a_registration_dropped_outside_its_runtime_leaves_its_table() {
    let r = within(|| {
        let mut rt = quiet_runtime();
        let reg = rt.block_on(|| {
            let mut l = mio::net::TcpListener::bind("127.0.0.1:0".parse().unwrap()).unwrap();
            let reg = coro::Registration::new(&mut l, coro::Interest::READABLE).unwrap();
            (l, reg)
        });
        drop(reg); // the socket is closed; its entry stays
        let sources = rt.block_on(|| coro::stats().io_sources);
        assert_eq!(sources, 0, "the dropped socket left the table");
        panic::catch_unwind(AssertUnwindSafe(|| {
            rt.block_on(|| {
                let _ = coro::park();
            })
        }))
        .is_err()
    });
    assert_eq!(r, Ok(true), "the deadlock must be reported");
}

/// A thread leaked (after 8 caught unwinds) inside a `blocking` call keeps
/// its slot in the waiting table, but a dead waiter no longer counts as a
/// wake source: the next run still reports its deadlock.
#[test]
fn a_thread_leaked_in_a_blocking_call_does_not_hide_deadlocks() {
    let r = within(|| {
        let mut rt = quiet_runtime();
        rt.block_on(|| {
            drop(
                coro::Builder::new()
                    .name("stubborn".into())
                    .spawn(|| loop {
                        let _ = panic::catch_unwind(|| {
                            coro::blocking(|| std::thread::sleep(Duration::from_millis(50)))
                        });
                    })
                    .unwrap(),
            );
            coro::yield_now();
        });
        let inflight = rt.block_on(|| coro::stats().blocking_in_flight);
        println!("blocking_in_flight in the next run: {inflight}");
        panic::catch_unwind(AssertUnwindSafe(|| {
            rt.block_on(|| {
                let _ = coro::park();
            })
        }))
        .is_err()
    });
    assert_eq!(r, Ok(true), "the deadlock must be reported");
}

/// `block_on` unwinding (the deadlock report) with a parked thread
/// whose handle outlives the runtime. The thread is unwound before `run`
/// returns, with its runtime current; the handle left behind sees a dead
/// thread, and dropping it touches nothing freed (valgrind-clean).
#[test]
fn unwinding_block_on_unwinds_its_threads_first() {
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
    bounded(|| {
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

/// A runtime whose run panicked (here, the deadlock report) finished every
/// thread of the failed run before `block_on` unwound, and it is poisoned,
/// so a later run cannot start on top of it (a fresh runtime does).
#[test]
fn a_panicked_run_leaves_no_thread_and_poisons_the_runtime() {
    bounded(|| {
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

/// Sets its flag when dropped.
struct SetOnDrop<'a>(&'a Cell<bool>);

impl Drop for SetOnDrop<'_> {
    fn drop(&mut self) {
        self.0.set(true);
    }
}

/// When the loop panics (here the deadlock report)
/// while the main thread holds borrows of the caller's data, the main
/// thread is finished (it reacts to the interrupt and returns) before `run`
/// unwinds into the caller; its borrows are dropped, and its value written,
/// while the data is alive. Under valgrind in CI.
#[test]
fn borrows_end_before_run_unwinds() {
    let dropped = Cell::new(false);
    let r = panic::catch_unwind(AssertUnwindSafe(|| {
        coro::run(|| {
            let _guard = SetOnDrop(&dropped);
            let _ = coro::park(); // every thread parked: deadlock
            vec![1u8; 64] // a value that needs dropping, written while unwinding
        })
    }));
    assert!(r.is_err(), "the deadlock report unwinds run");
    assert!(dropped.get());
}

/// Panics when dropped (a hook's captured value).
struct PanicOnDrop;

impl Drop for PanicOnDrop {
    fn drop(&mut self) {
        panic!("a leftover shutdown hook's destructor panicked");
    }
}

/// Sets its flag when dropped.
struct Dropped(Rc<Cell<bool>>);

impl Drop for Dropped {
    fn drop(&mut self) {
        self.0.set(true);
    }
}

/// Runtime A's thread registers a shutdown hook while A shuts
/// down (after A ran its hooks), so the hook is left behind; runtime B's
/// shutdown drops it, and its destructor panics. B's shutdown still
/// finishes its threads (their destructors run), `block_on` returns, and B
/// is not poisoned.
#[test]
fn a_panicking_leftover_shutdown_hook_does_not_stop_shutdown() {
    let mut a = coro::Runtime::new().unwrap();
    a.block_on(|| {
        coro::spawn(|| {
            struct RegisterOnDrop;
            impl Drop for RegisterOnDrop {
                fn drop(&mut self) {
                    let bomb = PanicOnDrop;
                    coro::on_shutdown(move || drop(bomb));
                }
            }
            let _r = RegisterOnDrop;
            let _ = coro::park_as("until A shuts down");
        });
        coro::yield_now();
    });
    let mut b = coro::Runtime::new().unwrap();
    let dropped = Rc::new(Cell::new(false));
    let d = dropped.clone();
    let r = panic::catch_unwind(AssertUnwindSafe(|| {
        b.block_on(move || {
            coro::spawn(move || {
                let _flag = Dropped(d);
                let _ = coro::park_as("until B shuts down");
            });
            coro::yield_now();
        })
    }));
    assert!(r.is_ok(), "the hook's panic unwound out of block_on");
    assert!(dropped.get(), "B's thread was not finished");
    assert!(!b.is_poisoned());
    assert_eq!(b.block_on(|| 5), 5);
}

/// A logger that panics on every ERROR record.
struct PanickingLogger;

impl log::Log for PanickingLogger {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        m.level() <= log::Level::Error
    }
    fn log(&self, r: &log::Record<'_>) {
        if r.level() <= log::Level::Error {
            panic!("the logger panicked on: {}", r.args());
        }
    }
    fn flush(&self) {}
}

/// A thread that keeps catching its shutdown unwind is leaked,
/// and the ERROR line about it goes to a logger that panics. Shutdown
/// completes anyway, `block_on` returns, and the leaked thread never runs
/// again (a later `block_on` on the same runtime does not resume it).
#[test]
fn a_panicking_logger_does_not_stop_shutdown_and_leaked_threads_stay_dead() {
    const NAME: &str = "a_panicking_logger_does_not_stop_shutdown_and_leaked_threads_stay_dead";
    if is_child(NAME) {
        log::set_logger(&PanickingLogger).unwrap();
        log::set_max_level(log::LevelFilter::Error);
        let runs = Rc::new(Cell::new(0u32));
        let r = runs.clone();
        let mut rt = coro::Runtime::new().unwrap();
        let first = panic::catch_unwind(AssertUnwindSafe(|| {
            rt.block_on(move || {
                coro::spawn(move || loop {
                    r.set(r.get() + 1);
                    let _ = panic::catch_unwind(AssertUnwindSafe(|| coro::park_as("stubborn")));
                });
                coro::yield_now();
            })
        }));
        assert!(first.is_ok(), "the logger's panic unwound out of block_on");
        let after_first = runs.get();
        assert!(after_first > 1, "the thread was never unwound");
        rt.block_on(|| {
            for _ in 0..10 {
                coro::yield_now();
            }
        });
        assert_eq!(runs.get(), after_first, "the leaked thread ran again");
        println!("leaked thread stayed dead after {after_first} runs");
        return;
    }
    let out = child_ok(NAME);
    assert!(out.contains("stayed dead"), "{out}");
}

/// A runtime whose `block_on` unwound refuses to run again, with a
/// message that says why.
#[test]
fn a_runtime_whose_block_on_unwound_is_poisoned() {
    let mut rt = coro::Runtime::new().unwrap();
    let first = panic::catch_unwind(AssertUnwindSafe(|| rt.block_on(|| panic!("boom"))));
    assert!(first.is_err());
    assert!(rt.is_poisoned());
    let again = panic::catch_unwind(AssertUnwindSafe(|| rt.block_on(|| 1)));
    let p = again.expect_err("a poisoned runtime ran again");
    let msg = panic_text(&*p);
    assert!(msg.contains("poisoned"), "{msg}");
    // A runtime that returned normally stays usable.
    let mut ok = coro::Runtime::new().unwrap();
    assert_eq!(ok.block_on(|| 1), 1);
    assert!(!ok.is_poisoned());
    assert_eq!(ok.block_on(|| 2), 2);
}
