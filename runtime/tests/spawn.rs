//! spawn, Builder, join, panics, and spawn errors; `run` with closures
//! that borrow.

use std::cell::Cell;
use std::panic;
use std::rc::Rc;
use std::time::Duration;

use coro_test_support::child::{child, is_child};
use coro_test_support::{bounded, logs};

use coro_runtime::{self as coro, JoinError, Runtime};

#[test]
fn join_returns_the_value() {
    assert_eq!(coro::run(|| coro::spawn(|| 40 + 2).join().unwrap()), 42);
}

#[test]
fn a_panicking_thread_does_not_disturb_the_others() {
    coro::run(|| {
        let steady = coro::spawn(|| {
            let mut n = 0;
            for _ in 0..10 {
                coro::sleep(Duration::from_millis(1)).unwrap();
                n += 1;
            }
            n
        });
        let bad = coro::Builder::new()
            .name("bad".into())
            .spawn(|| -> u32 {
                coro::yield_now();
                panic!("boom in a green thread")
            })
            .unwrap();
        let e = bad.join().unwrap_err();
        assert!(e.is_panic());
        assert_eq!(e.panic_message(), Some("boom in a green thread"));
        assert!(e.to_string().contains("boom"));
        assert_eq!(steady.join().unwrap(), 10);
        assert_eq!(coro::stats().panicked, 1);
    });
}

#[test]
fn a_panic_in_main_propagates_after_shutdown() {
    let r = std::panic::catch_unwind(|| {
        coro::run(|| {
            coro::spawn(|| coro::sleep(Duration::from_secs(3600)));
            panic!("main failed");
        })
    });
    let e = r.unwrap_err();
    assert_eq!(e.downcast_ref::<&str>(), Some(&"main failed"));
}

#[test]
fn builder_names_and_sizes() {
    coro::run(|| {
        let h = coro::Builder::new()
            .name("sized".into())
            .stack_size(100_000)
            .spawn(|| {
                let me = coro::current();
                let info = coro::threads()
                    .into_iter()
                    .find(|t| t.id == me.id())
                    .unwrap();
                (me.name().map(str::to_owned), info.stack_size)
            })
            .unwrap();
        let (name, size) = h.join().unwrap();
        assert_eq!(name.as_deref(), Some("sized"));
        assert!((100_000..100_000 + 4096 * 4).contains(&size), "{size}");
    });
}

#[test]
fn bad_builder_settings_are_errors_that_name_the_problem() {
    coro::run(|| {
        let e = coro::Builder::new().stack_size(0).spawn(|| ()).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
        assert!(e.to_string().contains("stack size"), "{e}");
        let e = coro::Builder::new()
            .selfishness(0)
            .spawn(|| ())
            .unwrap_err();
        assert!(e.to_string().contains("selfishness"), "{e}");
        let e = coro::Builder::new()
            .selfishness(32769)
            .spawn(|| ())
            .unwrap_err();
        assert!(e.to_string().contains("1..=32768"), "{e}");
    });
    let e = coro::Runtime::builder().stack_size(10).build().unwrap_err();
    assert!(e.to_string().contains("stack size"));
    let e = coro::Runtime::builder().selfishness(0).build().unwrap_err();
    assert!(e.to_string().contains("selfishness"));
    let e = coro::Runtime::builder()
        .blocking_threads(0)
        .build()
        .unwrap_err();
    assert!(e.to_string().contains("blocking_threads"));
}

#[test]
fn stacks_are_recycled() {
    coro::run(|| {
        for _ in 0..100 {
            coro::spawn(|| ()).join().unwrap();
        }
        let s = coro::stats();
        assert!(s.pooled_stacks >= 1 && s.pooled_stacks <= 2, "{s:?}");
        assert_eq!(s.live, 1);
    });
}

#[test]
fn join_after_finish_and_wait() {
    coro::run(|| {
        let h = coro::spawn(|| "x");
        h.wait().unwrap();
        assert!(h.is_finished());
        assert_eq!(h.join().unwrap(), "x");
        let h = coro::spawn(|| coro::sleep(Duration::from_secs(3600)));
        h.thread().interrupt().unwrap();
        assert!(matches!(h.join(), Ok(Err(coro::WaitError::Interrupted))));
    });
}

#[test]
fn join_error_debug_is_readable() {
    let e = JoinError::Cancelled;
    assert_eq!(format!("{e:?}"), "Cancelled");
}

#[test]
fn a_large_closure_can_be_spawned() {
    coro::run(|| {
        let big = [1u8; 4096];
        let h = coro::spawn(move || big.iter().map(|&b| b as u32).sum::<u32>());
        assert_eq!(h.join().unwrap(), 4096);
    });
}

#[test]
fn current_id_names_the_running_thread() {
    assert_eq!(coro::current_id(), None, "no runtime on this OS thread");
    coro::run(|| {
        let main = coro::current_id().expect("main is a green thread");
        assert_eq!(main, coro::current().id());
        let h = coro::spawn(|| {
            coro::yield_now();
            coro::current_id()
        });
        let child = h.thread().id();
        assert_ne!(child, main);
        assert_eq!(h.join().unwrap(), Some(child));
        assert_eq!(
            coro::current_id(),
            Some(main),
            "still main after the switch"
        );
    });
    assert_eq!(coro::current_id(), None, "the runtime has returned");
}

struct PanicOnDrop(&'static str);

impl Drop for PanicOnDrop {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            panic!("{}", self.0);
        }
    }
}

/// A detached thread's result, or its panic payload, whose
/// destructor panics does not unwind out of `run`; the others carry on.
#[test]
fn destructor_panics_of_detached_results_stay_inside() {
    logs::capture();
    bounded(|| {
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
    let lines = logs::lines();
    assert!(
        lines
            .iter()
            .any(|(l, m)| *l == log::Level::Error && m.contains("result dropped")),
        "{lines:?}"
    );
}

/// Two green threads waiting on one shared handle both return.
#[test]
fn every_joiner_of_a_shared_handle_wakes() {
    bounded(|| {
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

/// `run` and `block_on` take closures that borrow (no E0373) and may
/// return borrows.
#[test]
fn run_takes_a_closure_that_borrows() {
    fn serve(addr: &str, hits: &Cell<u32>) -> usize {
        let h = coro::spawn(coro::yield_now);
        h.join().unwrap();
        hits.set(hits.get() + 1);
        addr.len()
    }
    let addr = String::from("127.0.0.1:7000");
    let hits = Cell::new(0);
    assert_eq!(coro::run(|| serve(&addr, &hits)), addr.len());
    let mut rt = Runtime::new().unwrap();
    let words = ["green".to_string(), "threads".to_string()];
    let longest: &String = rt.block_on(|| {
        coro::sleep(Duration::from_millis(1)).unwrap();
        words.iter().max_by_key(|w| w.len()).unwrap()
    });
    assert_eq!(longest, "threads");
    assert_eq!(rt.block_on(|| serve(&addr, &hits)), addr.len());
    assert_eq!(hits.get(), 2);
}

/// A panic in a green thread is reported with a line that names the green
/// thread first (std's own line says `thread 'main'`); a hook the program
/// set before the runtime still runs.
#[test]
fn a_panic_names_its_green_thread() {
    const NAME: &str = "a_panic_names_its_green_thread";
    if is_child(NAME) {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            eprintln!("program's own hook ran");
            previous(info);
        }));
        coro::run(|| {
            let h = coro::Builder::new()
                .name("worker".into())
                .spawn(|| panic!("boom in a worker"))
                .unwrap();
            assert!(h.join().unwrap_err().is_panic());
            // No green thread: nothing is added.
            assert_eq!(
                std::thread::spawn(coro::panic_hook_line).join().unwrap(),
                None
            );
        });
        return;
    }
    let out = child(NAME);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let line = stderr
        .lines()
        .position(|l| l.starts_with("coro: green thread #2 'worker' panicked (on OS thread"))
        .unwrap_or_else(|| panic!("no line names the green thread: {stderr}"));
    let rest: Vec<&str> = stderr.lines().skip(line + 1).collect();
    assert_eq!(rest.first(), Some(&"program's own hook ran"), "{stderr}");
    assert!(stderr.contains("boom in a worker"), "{stderr}");
}

/// The stack guard gap is configurable, and a bad size is an error naming it.
#[test]
fn the_guard_gap_size_is_checked() {
    let e = coro::Runtime::builder()
        .stack_guard_size(0)
        .build()
        .unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    assert!(e.to_string().contains("stack_guard_size"), "{e}");
    let mut rt = coro::Runtime::builder()
        .stack_guard_size(64 * 1024)
        .build()
        .unwrap();
    assert_eq!(rt.block_on(|| coro::spawn(|| 3).join().unwrap()), 3);
    assert_eq!(coro::DEFAULT_STACK_GUARD, 1 << 20);
}
