//! Shutdown on its harder paths (issue #13, found by a review of its first
//! fix): after the loop panicked, with destructors that keep spawning, with
//! sockets dropped outside their runtime, with a thread leaked inside a
//! blocking call. Each ran forever or lost the deadlock report before.

use std::cell::Cell;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use coro_runtime as coro;

mod util;
use util::within;

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
    within(60, || {
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
    let r = within(60, || {
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
    let r = within(60, || {
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
    let r = within(60, || {
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
/// running leaves that runtime's source table (it used to stay, so the
/// deadlock report of every later run was off and a deadlock hung).
#[test]
fn a_registration_dropped_outside_its_runtime_leaves_its_table() {
    let r = within(60, || {
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
    let r = within(60, || {
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
