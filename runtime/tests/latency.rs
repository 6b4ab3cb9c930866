//! Latency warnings: a thread that runs past the threshold without yielding is
//! reported once, through `log` at WARN, with its id, name and seconds.

use std::time::{Duration, Instant};

use coro_runtime as coro;

mod util;
use util::{capture_logs, LOGS};

fn warnings_naming(name: &str) -> Vec<String> {
    LOGS.lock()
        .unwrap()
        .iter()
        .filter(|(l, m)| *l == log::Level::Warn && m.contains(&format!("'{name}'")))
        .map(|(_, m)| m.clone())
        .collect()
}

fn busy(d: Duration) {
    let t = Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}

#[test]
fn a_300ms_busy_thread_gets_exactly_one_warning_and_a_50ms_one_none() {
    capture_logs();
    let mut rt = coro::Runtime::builder()
        .latency_warning(Some(Duration::from_millis(200)))
        .build()
        .unwrap();
    let (warnings, id) = rt.block_on(|| {
        let hog = coro::Builder::new()
            .name("hog-300ms".into())
            .spawn(|| busy(Duration::from_millis(300)))
            .unwrap();
        let id = hog.thread().id();
        hog.join().unwrap();
        coro::Builder::new()
            .name("short-50ms".into())
            .spawn(|| busy(Duration::from_millis(50)))
            .unwrap()
            .join()
            .unwrap();
        (coro::stats().latency_warnings, id)
    });
    let hog = warnings_naming("hog-300ms");
    assert_eq!(hog.len(), 1, "{hog:?}");
    assert!(hog[0].contains(&format!("#{id}")), "{}", hog[0]);
    assert!(hog[0].contains(" s "), "{}", hog[0]);
    assert!(warnings_naming("short-50ms").is_empty());
    assert_eq!(warnings, 1);
}

#[test]
fn warnings_can_be_disabled_and_the_threshold_configured() {
    capture_logs();
    let mut rt = coro::Runtime::builder()
        .latency_warning(None)
        .build()
        .unwrap();
    rt.block_on(|| {
        coro::Builder::new()
            .name("hog-disabled".into())
            .spawn(|| busy(Duration::from_millis(250)))
            .unwrap()
            .join()
            .unwrap();
        assert_eq!(coro::stats().latency_warnings, 0);
        assert!(coro::threads()[0].run_time.is_none());
    });
    assert!(warnings_naming("hog-disabled").is_empty());

    let mut rt = coro::Runtime::builder()
        .latency_warning(Some(Duration::from_millis(20)))
        .build()
        .unwrap();
    let n = rt.block_on(|| {
        coro::Builder::new()
            .name("hog-20ms".into())
            .spawn(|| busy(Duration::from_millis(150)))
            .unwrap()
            .join()
            .unwrap();
        coro::stats().latency_warnings
    });
    assert_eq!(n, 1);
    assert_eq!(warnings_naming("hog-20ms").len(), 1);
}

#[test]
fn run_time_is_sampled_per_thread() {
    let mut rt = coro::Runtime::builder()
        .latency_warning(Some(Duration::from_secs(10)))
        .build()
        .unwrap();
    rt.block_on(|| {
        busy(Duration::from_millis(120));
        coro::yield_now();
        let me = coro::threads().into_iter().find(|t| t.id == 1).unwrap();
        assert!(me.run_time.unwrap() > Duration::ZERO, "{me:?}");
    });
}
