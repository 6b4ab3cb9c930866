//! Bridge calls: outputs, concurrency, panics, and where a call may be
//! made.

use std::cell::Cell;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use coro::tokio::JoinError;

use crate::util;

/// A green thread that counts ticks of `every` until told to stop.
pub struct Ticker {
    ticks: Rc<Cell<u64>>,
    stop: Rc<Cell<bool>>,
    thread: Option<coro::JoinHandle<()>>,
}

impl Ticker {
    pub fn start(every: Duration) -> Ticker {
        let (ticks, stop) = (Rc::new(Cell::new(0)), Rc::new(Cell::new(false)));
        let (t, s) = (ticks.clone(), stop.clone());
        let thread = coro::spawn(move || {
            while !s.get() && coro::sleep(every).is_ok() {
                t.set(t.get() + 1);
            }
        });
        Ticker {
            ticks,
            stop,
            thread: Some(thread),
        }
    }

    pub fn ticks(&self) -> u64 {
        self.ticks.get()
    }

    pub fn stop(mut self) -> u64 {
        self.stop.set(true);
        self.thread.take().unwrap().join().unwrap();
        self.ticks.get()
    }
}

#[test]
fn a_call_returns_the_output_while_the_other_green_threads_run() {
    util::run(|| {
        coro::tokio::run(async {}).unwrap(); // started
        let ticker = Ticker::start(Duration::from_millis(5));
        let t = Instant::now();
        let out = coro::tokio::run(async {
            tokio::time::sleep(Duration::from_millis(200)).await;
            std::thread::current().name().map(str::to_owned)
        })
        .unwrap();
        assert!(t.elapsed() >= Duration::from_millis(200));
        // It ran on a worker of the bridge, not on this thread.
        assert_eq!(out.as_deref(), Some(coro::tokio::DEFAULT_THREAD_NAME));
        // The runtime ran the ticker meanwhile: a call blocking the OS
        // thread would leave it at 0 or 1.
        let ticks = ticker.stop();
        assert!(ticks >= 5, "the ticker ticked {ticks} times in 200 ms");
    });
}

#[test]
fn two_thousand_green_threads_each_have_a_call_in_flight_without_an_os_thread_each() {
    const N: usize = 2000;
    util::run(|| {
        coro::tokio::run(async {}).unwrap();
        let in_flight = Arc::new(AtomicUsize::new(0));
        let (release, released) = tokio::sync::watch::channel(false);
        let callers: Vec<_> = (0..N)
            .map(|i| {
                let (in_flight, mut released) = (in_flight.clone(), released.clone());
                coro::spawn(move || {
                    coro::tokio::run(async move {
                        in_flight.fetch_add(1, Ordering::SeqCst);
                        released.wait_for(|r| *r).await.unwrap();
                        i
                    })
                })
            })
            .collect();
        // Every call waits at once: more than any pool of OS threads
        // (coro's blocking pool and tokio's stop at 512) could hold.
        util::wait_until("every call in flight", || {
            in_flight.load(Ordering::SeqCst) == N
        });
        let threads = crate::threads();
        assert!(
            threads < 200,
            "{threads} threads in the process with {N} calls in flight"
        );
        release.send(true).unwrap();
        for (i, c) in callers.into_iter().enumerate() {
            assert_eq!(c.join().unwrap().unwrap(), i);
        }
    });
}

#[test]
fn a_panic_in_the_future_fails_only_its_call() {
    util::run(|| {
        let err = coro::tokio::run(async { panic!("the future broke") }).unwrap_err();
        assert!(err.is_panic(), "{err:?}");
        assert_eq!(err.panic_message(), Some("the future broke"));
        assert!(err.to_string().contains("the future broke"), "{err}");
        match err {
            JoinError::Panicked(payload) => {
                assert_eq!(payload.downcast_ref::<&str>(), Some(&"the future broke"))
            }
            other => panic!("{other:?}"),
        }
        // A green thread that does not handle the error fails with the
        // message; the runtime and the bridge go on.
        let caller = coro::spawn(|| {
            coro::tokio::run(async { panic!("{} broke", "the formatted future") }).unwrap()
        });
        let failed = caller.join().unwrap_err();
        let msg = failed.panic_message().unwrap_or_default().to_owned();
        assert!(msg.contains("the formatted future broke"), "{msg}");
        assert_eq!(coro::tokio::run(async { 7 }).unwrap(), 7);
    });
}

#[test]
fn a_call_on_a_plain_os_thread_blocks_that_thread_and_returns_the_output() {
    let os = std::thread::spawn(|| {
        assert!(!coro::in_green_thread());
        let t = Instant::now();
        let out = coro::tokio::run(async {
            tokio::time::sleep(Duration::from_millis(20)).await;
            "from a plain thread"
        });
        (out.unwrap(), t.elapsed())
    });
    let (out, waited) = os.join().unwrap();
    assert_eq!(out, "from a plain thread");
    assert!(waited >= Duration::from_millis(20));
    // Also on coro's blocking pool, and joined on another thread.
    util::run(|| {
        let h = coro::tokio::spawn(async { 5 });
        let out = coro::blocking(move || h.join().unwrap()).unwrap();
        assert_eq!(out, 5);
    });
}

#[test]
fn a_call_from_the_tokio_side_panics_saying_why() {
    util::run(|| {
        let err =
            coro::tokio::run(async { coro::tokio::run(async { 1 }).map_err(|e| e.to_string()) })
                .unwrap_err();
        let msg = err.panic_message().unwrap_or_default();
        assert!(
            msg.contains("Cannot start a runtime from within a runtime"),
            "{err:?}"
        );
        // The same for coro's blocking calls: no coro runtime there.
        let err = coro::tokio::run(async { coro::sleep(Duration::from_millis(1)) }).unwrap_err();
        let msg = err.panic_message().unwrap_or_default();
        assert!(msg.contains("coro::sleep needs a coro runtime"), "{err:?}");
    });
}

#[test]
fn the_handle_spawns_onto_the_bridge() {
    util::run(|| {
        let handle = coro::tokio::handle().unwrap();
        let task = handle.spawn(async { std::thread::current().name().map(str::to_owned) });
        let name = coro::tokio::run(task).unwrap().unwrap();
        assert_eq!(name.as_deref(), Some(coro::tokio::DEFAULT_THREAD_NAME));
        // A tokio context on this OS thread, for constructors that need
        // one (the guard is dropped before the green thread blocks).
        let sleep = {
            let _ctx = handle.enter();
            tokio::time::sleep(Duration::from_millis(1))
        };
        coro::tokio::run(sleep).unwrap();
    });
}

#[test]
fn several_calls_in_flight_from_one_green_thread() {
    util::run(|| {
        let t = Instant::now();
        let handles: Vec<_> = (0..50u64)
            .map(|i| {
                coro::tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    i
                })
            })
            .collect();
        let sum: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
        assert_eq!(sum, (0..50u64).sum::<u64>());
        assert!(t.elapsed() >= Duration::from_millis(100));
    });
}

#[test]
fn bad_settings_are_refused_naming_them() {
    let err = coro::tokio::Builder::new()
        .worker_threads(0)
        .start()
        .unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    assert!(err.to_string().contains("0 worker threads"), "{err}");
    let err = coro::tokio::Builder::new()
        .thread_stack_size(0)
        .start()
        .unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    assert!(err.to_string().contains("stack size"), "{err}");
}
