//! Issue #21, item 4: the latency warning names the usual cause (a blocking
//! std call) and its fix (`coro::blocking`), and without a logger every
//! warning reaches stderr, rate-limited with a count of those suppressed
//! (two of three warnings in one stall used to be counted but never shown).
//! The rate limit's arithmetic is tested in `watchdog::stderr`.

use std::time::Duration;

use coro_runtime as coro;

mod util;
use util::{child, is_child};

/// More hogs than the stderr burst (10), so some are suppressed unless the
/// run is slow enough for the bucket to refill.
const HOGS: u64 = 14;

#[test]
fn issue_21_4_every_latency_warning_reaches_stderr_naming_the_cause() {
    const NAME: &str = "issue_21_4_every_latency_warning_reaches_stderr_naming_the_cause";
    if is_child(NAME) {
        // No logger: the warnings can only reach stderr.
        let mut rt = coro::Runtime::builder()
            .latency_warning(Some(Duration::from_millis(20)))
            .build()
            .unwrap();
        let warnings = rt.block_on(|| {
            for i in 0..HOGS {
                coro::Builder::new()
                    .name(format!("sleeper-{i}"))
                    // The mistake the warning is about: a blocking std call.
                    .spawn(|| std::thread::sleep(Duration::from_millis(60)))
                    .unwrap()
                    .join()
                    .unwrap();
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
    assert_eq!(counted, HOGS, "one warning per sleeper: {stderr}");

    let shown: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("coro: latency warning: "))
        .collect();
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
        HOGS,
        "every warning is shown or counted:\n{stderr}"
    );
}
