//! Latency warnings: a thread that runs past the threshold without yielding is
//! reported once, through `log` at WARN, with its id, name and seconds.
//! Without a logger every warning reaches stderr, naming the usual cause (a
//! blocking std call) and its fix (`coro::blocking`), rate-limited with a
//! count of those suppressed (the rate limit's arithmetic is tested in
//! `watchdog::stderr`). The stderr tests read a child process's stderr.

use std::time::{Duration, Instant};

use coro_runtime::{self as coro, Runtime};

use coro_test_support::child::{child, is_child};
use coro_test_support::hog::{spin, spin_until, warned_about_me};
use coro_test_support::logs;

fn warnings_naming(name: &str) -> Vec<String> {
    logs::logged(log::Level::Warn, &format!("'{name}'"))
}

#[test]
fn a_300ms_busy_thread_gets_exactly_one_warning_and_a_50ms_one_none() {
    logs::capture();
    let mut rt = coro::Runtime::builder()
        .latency_warning(Some(Duration::from_millis(200)))
        .build()
        .unwrap();
    let (warnings, id, short) = rt.block_on(|| {
        let hog = coro::Builder::new()
            .name("hog-300ms".into())
            .spawn(|| {
                spin_until(Duration::from_millis(300), || {
                    !warnings_naming("hog-300ms").is_empty()
                })
            })
            .unwrap();
        let id = hog.thread().id();
        hog.join().unwrap();
        // A short slice is not reported, unless the OS kept this thread off
        // the CPU long enough to make it a long one: its slice lies within
        // `short`.
        let t = Instant::now();
        coro::Builder::new()
            .name("short-50ms".into())
            .spawn(|| spin(Duration::from_millis(50)))
            .unwrap()
            .join()
            .unwrap();
        let short = t.elapsed();
        (coro::stats().latency_warnings, id, short)
    });
    let hog = warnings_naming("hog-300ms");
    assert_eq!(hog.len(), 1, "{hog:?}");
    assert!(hog[0].contains(&format!("#{id}")), "{}", hog[0]);
    assert!(hog[0].contains(" s "), "{}", hog[0]);
    if short < Duration::from_millis(200) {
        assert!(warnings_naming("short-50ms").is_empty());
        assert_eq!(warnings, 1);
    }
}

#[test]
fn warnings_can_be_disabled_and_the_threshold_configured() {
    logs::capture();
    let mut rt = coro::Runtime::builder()
        .latency_warning(None)
        .build()
        .unwrap();
    rt.block_on(|| {
        coro::Builder::new()
            .name("hog-disabled".into())
            .spawn(|| spin(Duration::from_millis(250)))
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
            .spawn(|| {
                spin_until(Duration::from_millis(150), || {
                    !warnings_naming("hog-20ms").is_empty()
                })
            })
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
        let me = || coro::threads().into_iter().find(|t| t.id == 1).unwrap();
        // 120 ms, and on until the watchdog has sampled this thread running
        // (a loaded machine can keep its OS thread off the CPU meanwhile).
        spin_until(Duration::from_millis(120), || {
            me().run_time.is_some_and(|r| r > Duration::ZERO)
        });
        coro::yield_now();
        assert!(me().run_time.unwrap() > Duration::ZERO, "{:?}", me());
    });
}

/// Without a logger the latency warnings reach stderr, each of them (not
/// only the first of the process), naming the thread.
#[test]
fn latency_warnings_reach_stderr_without_a_logger() {
    const NAME: &str = "latency_warnings_reach_stderr_without_a_logger";
    if is_child(NAME) {
        let mut rt = Runtime::builder()
            .latency_warning(Some(Duration::from_millis(50)))
            .build()
            .unwrap();
        let warnings = rt.block_on(|| {
            for name in ["hog-1", "hog-2"] {
                let hog = coro::Builder::new()
                    .name(name.into())
                    .spawn(|| spin_until(Duration::from_millis(250), warned_about_me))
                    .unwrap();
                let id = hog.thread().id();
                hog.join().unwrap();
                let about = coro::latency_warnings()
                    .iter()
                    .filter(|w| w.thread == id)
                    .count();
                assert_eq!(about, 1, "one warning per hog");
            }
            coro::stats().latency_warnings
        });
        println!("\nWARNINGS={warnings}");
        return;
    }
    let out = child(NAME);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    // The hogs' warnings, and any other slice a loaded machine stretched
    // past 50 ms: each of them is shown (within the burst of 10).
    let counted: u64 = stdout
        .lines()
        .find_map(|l| l.split_once("WARNINGS="))
        .and_then(|(_, n)| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no count in {stdout}"));
    assert!(counted >= 2, "{counted} warnings: {stderr}");
    assert_eq!(
        stderr.matches("coro: latency warning: ").count() as u64,
        counted.min(10),
        "each warning: {stderr}"
    );
    assert_eq!(stderr.matches("'hog-1' has run").count(), 1, "{stderr}");
    assert_eq!(stderr.matches("'hog-2' has run").count(), 1, "{stderr}");
    assert_eq!(
        stderr.matches(" has run ").count(),
        2 + stderr.matches("'main' has run").count(),
        "{stderr}"
    );
    assert!(stderr.contains("install one"), "{stderr}");
}

/// More hogs than the stderr burst (10), so some are suppressed unless the
/// run is slow enough for the bucket to refill.
const HOGS: u64 = 14;

#[test]
fn every_latency_warning_reaches_stderr_naming_the_cause() {
    const NAME: &str = "every_latency_warning_reaches_stderr_naming_the_cause";
    if is_child(NAME) {
        // No logger: the warnings can only reach stderr.
        let mut rt = coro::Runtime::builder()
            .latency_warning(Some(Duration::from_millis(20)))
            .build()
            .unwrap();
        let warnings = rt.block_on(|| {
            for i in 0..HOGS {
                let sleeper = coro::Builder::new()
                    .name(format!("sleeper-{i}"))
                    // The mistake the warning is about: a blocking std call
                    // (60 ms, and on until the watchdog has warned about it).
                    .spawn(move || {
                        let t = Instant::now();
                        while t.elapsed() < Duration::from_millis(60) || !warned_about_me() {
                            assert!(t.elapsed() < Duration::from_secs(60), "never warned");
                            std::thread::sleep(Duration::from_millis(10));
                        }
                    })
                    .unwrap();
                let id = sleeper.thread().id();
                sleeper.join().unwrap();
                let about = coro::latency_warnings()
                    .iter()
                    .filter(|w| w.thread == id)
                    .count();
                assert_eq!(about, 1, "one warning per sleeper");
            }
            coro::stats().latency_warnings
        });
        println!("\nWARNINGS={warnings}");
        return;
    }
    let out = child(NAME);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let counted: u64 = stdout
        .lines()
        .find_map(|l| l.split_once("WARNINGS="))
        .and_then(|(_, n)| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no count in {stdout}"));
    // A loaded machine can stretch any other slice past 20 ms too (the
    // OS takes the CPU from the process), and that is warned about as well.
    assert!(counted >= HOGS, "{counted} warnings: {stderr}");

    let shown: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("coro: latency warning: "))
        .collect();
    for i in 0..HOGS {
        let of_it = shown
            .iter()
            .filter(|l| l.contains(&format!("'sleeper-{i}'")))
            .count();
        assert!(of_it <= 1, "sleeper-{i} warned {of_it} times:\n{stderr}");
    }
    for line in &shown {
        assert!(
            line.contains("'sleeper-") || line.contains("'main'"),
            "{line}"
        );
    }
    // The first stall's warnings are all shown, not only the first.
    for i in 0..3 {
        assert!(
            shown.iter().any(|l| l.contains(&format!("'sleeper-{i}'"))),
            "sleeper-{i}'s warning is not shown:\n{stderr}"
        );
    }
    for line in &shown {
        assert!(line.contains("std::thread::sleep"), "{line}");
        assert!(line.contains("coro::blocking"), "{line}");
    }
    // What was not shown is counted, once the burst is used up.
    let number = |l: &str| -> u64 {
        l.trim_start_matches("coro: (")
            .trim_start_matches("coro: ")
            .split(' ')
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no count in {l:?}"))
    };
    let suppressed: u64 = stderr
        .lines()
        .filter(|l| {
            l.contains("latency warnings before this one were not shown")
                || l.contains("more latency warnings were not shown")
        })
        .map(number)
        .sum();
    assert!(shown.len() >= 10, "the burst is shown whole:\n{stderr}");
    assert_eq!(
        shown.len() as u64 + suppressed,
        counted,
        "every warning is shown or counted:\n{stderr}"
    );
}
