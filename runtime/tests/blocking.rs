//! Blocking offload: the call runs on another OS thread while green threads go on.

use std::cell::Cell;
use std::rc::Rc;
use std::sync::mpsc;
use std::time::Duration;

use coro_runtime::{self as coro, Timeout};

#[test]
fn blocking_runs_elsewhere_and_others_keep_running() {
    coro::run(|| {
        let ticks = Rc::new(Cell::new(0));
        let t = ticks.clone();
        let ticker = coro::spawn(move || {
            for _ in 0..5 {
                coro::sleep(Duration::from_millis(2)).unwrap();
                t.set(t.get() + 1);
            }
        });
        let (tx, rx) = mpsc::channel::<()>();
        let here = std::thread::current().id();
        let job = coro::spawn(move || {
            coro::blocking(move || {
                // Blocks its OS thread until the ticker is done.
                rx.recv().unwrap();
                std::thread::current().id()
            })
        });
        ticker.join().unwrap();
        assert_eq!(ticks.get(), 5, "green threads ran while the job blocked");
        tx.send(()).unwrap();
        let there = job.join().unwrap().unwrap();
        assert_ne!(here, there);
    });
}

#[test]
fn blocking_under_timeout_returns_and_the_job_finishes_later() {
    coro::run(|| {
        let (tx, rx) = mpsc::channel::<u32>();
        let r = coro::with_timeout(Duration::from_millis(5), || {
            coro::blocking(move || rx.recv_timeout(Duration::from_secs(5)).unwrap_or(0))
        });
        assert_eq!(r, Err(Timeout));
        tx.send(1).unwrap();
        // The runtime still works, and another job completes.
        assert_eq!(coro::blocking(|| 5).unwrap(), 5);
    });
}

#[test]
fn a_panic_in_a_blocking_job_reaches_the_caller() {
    coro::run(|| {
        let h = coro::spawn(|| coro::blocking(|| -> u8 { panic!("job failed") }));
        let e = h.join().unwrap_err();
        assert_eq!(e.panic_message(), Some("job failed"));
    });
}

#[test]
fn many_jobs_on_a_small_pool() {
    let mut rt = coro::Runtime::builder()
        .blocking_threads(2)
        .build()
        .unwrap();
    let total = rt.block_on(|| {
        let hs: Vec<_> = (0..50u64)
            .map(|i| coro::spawn(move || coro::blocking(move || i * 2).unwrap()))
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).sum::<u64>()
    });
    assert_eq!(total, (0..50).map(|i| i * 2).sum());
}
