//! Regression tests for issue #14 ("What a newcomer missed"), the parts the
//! runtime alone shows: the blocking pool grows and shrinks (item 5), the
//! first latency warning reaches stderr without a logger (item 6), `run`
//! takes a closure that borrows (item 8; these run under valgrind in CI),
//! and a panic names its green thread (item 9). Items 6 and 9 read a child
//! process's stderr.

mod util;

use std::cell::Cell;
use std::panic::{self, AssertUnwindSafe};
use std::sync::{Arc, Barrier, Condvar, Mutex};
use std::time::{Duration, Instant};

use coro_runtime::{self as coro, Runtime};
use util::{child, is_child};

const LIMIT: Duration = Duration::from_secs(30);

/// Sleeps a millisecond at a time until `cond` holds; fails after [`LIMIT`].
#[track_caller]
fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < LIMIT, "still waiting for {what}");
        coro::sleep(Duration::from_millis(1)).unwrap();
    }
}

/// Item 5: jobs that must all run at once get a thread each (a fixed pool
/// of 4 deadlocked here), jobs beyond the bound queue, and idle threads
/// exit after the keep-alive.
#[test]
fn issue_14_5_the_blocking_pool_grows_on_demand_and_shrinks_when_idle() {
    // The default pool (coro::run) is not capped at a handful of threads.
    coro::run(|| {
        let all = Arc::new(Barrier::new(16));
        let jobs: Vec<_> = (0..16)
            .map(|_| {
                let all = all.clone();
                coro::spawn(move || coro::blocking(move || all.wait().is_leader()))
            })
            .collect();
        let leaders = coro::with_timeout(LIMIT, || {
            jobs.into_iter()
                .map(|h| h.join().unwrap().unwrap())
                .filter(|&l| l)
                .count()
        })
        .expect("16 jobs that wait for each other ran at once");
        assert_eq!(leaders, 1);
        assert!(coro::stats().blocking_threads >= 16);
    });

    let mut rt = Runtime::builder()
        .blocking_threads(4)
        .blocking_keep_alive(Duration::from_millis(100))
        .build()
        .unwrap();
    rt.block_on(|| {
        assert_eq!(coro::stats().blocking_threads, 0, "the pool starts empty");
        let gate = Arc::new((Mutex::new(false), Condvar::new()));
        let jobs: Vec<_> = (0..5)
            .map(|_| {
                let gate = gate.clone();
                coro::spawn(move || {
                    coro::blocking(move || {
                        let (open, cv) = &*gate;
                        let mut open = open.lock().unwrap();
                        while !*open {
                            open = cv.wait(open).unwrap();
                        }
                    })
                })
            })
            .collect();
        wait_until("four threads busy and one job queued", || {
            let s = coro::stats();
            s.blocking_threads == 4 && s.blocking_queued == 1
        });
        *gate.0.lock().unwrap() = true;
        gate.1.notify_all();
        for h in jobs {
            h.join().unwrap().unwrap();
        }
        assert_eq!(coro::stats().blocking_threads, 4);
        wait_until("idle threads to exit after the keep-alive", || {
            coro::stats().blocking_threads == 0
        });
        // And it grows again.
        assert_eq!(coro::blocking(|| 7).unwrap(), 7);
        assert_eq!(coro::stats().blocking_threads, 1);
    });
}

fn busy(d: Duration) {
    let t = Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}

/// Item 6: without a logger a 500 ms hog printed nothing. Now the
/// warnings reach stderr (since issue #21, item 4, every one of them, not
/// only the first of the process: see `issue_21.rs`).
#[test]
fn issue_14_6_the_first_latency_warning_reaches_stderr_without_a_logger() {
    const NAME: &str = "issue_14_6_the_first_latency_warning_reaches_stderr_without_a_logger";
    if is_child(NAME) {
        let mut rt = Runtime::builder()
            .latency_warning(Some(Duration::from_millis(50)))
            .build()
            .unwrap();
        let warnings = rt.block_on(|| {
            for name in ["hog-1", "hog-2"] {
                coro::Builder::new()
                    .name(name.into())
                    .spawn(|| busy(Duration::from_millis(250)))
                    .unwrap()
                    .join()
                    .unwrap();
            }
            coro::stats().latency_warnings
        });
        assert_eq!(warnings, 2);
        return;
    }
    let out = child(NAME);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(
        stderr.matches("coro: latency warning: ").count(),
        2,
        "each warning: {stderr}"
    );
    assert!(stderr.contains("'hog-1' has run"), "{stderr}");
    assert!(stderr.contains("'hog-2' has run"), "{stderr}");
    assert!(stderr.contains("install one"), "{stderr}");
}

/// Item 9: a panic in a green thread was reported as `thread 'main'
/// panicked`. Now a line names the green thread first; a hook the program
/// set before the runtime still runs.
#[test]
fn issue_14_9_a_panic_names_its_green_thread() {
    const NAME: &str = "issue_14_9_a_panic_names_its_green_thread";
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

/// Item 8: `run` and `block_on` take closures that borrow (this failed
/// with E0373) and may return borrows.
#[test]
fn issue_14_8_run_takes_a_closure_that_borrows() {
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

/// Sets its flag when dropped.
struct SetOnDrop<'a>(&'a Cell<bool>);

impl Drop for SetOnDrop<'_> {
    fn drop(&mut self) {
        self.0.set(true);
    }
}

/// Item 8, the unsafe part: when the loop panics (here the deadlock report)
/// while the main thread holds borrows of the caller's data, the main
/// thread is finished (it reacts to the interrupt and returns) before `run`
/// unwinds into the caller; its borrows are dropped, and its value written,
/// while the data is alive. Under valgrind in CI.
#[test]
fn issue_14_8_borrows_end_before_run_unwinds() {
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
