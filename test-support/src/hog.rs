//! Green threads that hog the CPU: for tests of what the runtime reports
//! about a slice that runs long (latency warnings, the profiler's and the
//! flight recorder's hog records, the backdoor's `threads` table).

use std::time::{Duration, Instant};

/// Runs without yielding for `d` of wall-clock time.
pub fn spin(d: Duration) {
    let t = Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}

/// Runs without yielding for at least `d`, and on until `warned()` says
/// the watchdog has seen this slice (reported it, or sampled it): the
/// watchdog is an OS thread of its own, which a loaded machine can keep off
/// the CPU for a whole slice, and it warns only while the slice runs.
/// `warned` is asked once a millisecond.
///
/// # Panics
///
/// When `warned()` has not held after a minute (within the test's
/// [`LIMIT`](crate::LIMIT), so the failure names what never happened).
#[track_caller]
pub fn spin_until(d: Duration, mut warned: impl FnMut() -> bool) {
    let t = Instant::now();
    while t.elapsed() < d || !warned() {
        assert!(t.elapsed() < Duration::from_secs(60), "never warned");
        spin(Duration::from_millis(1));
    }
}

/// Whether the watchdog has warned about the calling green thread's
/// current slice: it is the newest of the recent warnings (a warning about
/// another slice, which a loaded machine can stretch past the threshold
/// too, does not count).
pub fn warned_about_me() -> bool {
    let me = coro_runtime::current_id();
    coro_runtime::latency_warnings()
        .last()
        .is_some_and(|w| Some(w.thread) == me)
}

/// [`spin_until`] the watchdog has warned about this slice
/// ([`warned_about_me`]).
#[track_caller]
pub fn spin_until_warned(d: Duration) {
    spin_until(d, warned_about_me);
}
