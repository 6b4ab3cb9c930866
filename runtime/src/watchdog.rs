//! Latency warnings: a watchdog OS thread that notices a green thread running
//! too long without yielding, and samples run time per thread.
//!
//! # Design
//!
//! Reading the clock at every switch would cost more than the switch itself,
//! so the scheduler only publishes, with relaxed stores, a slice counter and
//! the id of the thread it resumes (0 while the scheduler itself runs). The
//! watchdog wakes every `threshold / 10` (at most 10 ms), and when it sees the
//! same slice still running `threshold` after it first saw it, it logs one
//! warning at WARN naming the thread, while the thread is still running. A
//! slice is reported at most once. It can never report a slice shorter than
//! the threshold (it measured at least that much of it) and reports any slice
//! longer than the threshold plus one sampling period.
//!
//! The same samples give each thread's approximate run time for
//! [`threads`](crate::threads).
//!
//! # The message
//!
//! The usual cause of a long slice is not computation but a blocking std
//! call that stops the whole OS thread (`std::thread::sleep`, `std::fs`, a
//! std lock, a DNS lookup): the warning says so and names `coro::blocking`,
//! the fix.
//!
//! # Without a logger
//!
//! A program that installed no `log` logger (or filters coro's warnings
//! out) would never hear of a hog. So each warning that no logger would show
//! goes to stderr as well, rate-limited, with a count of those suppressed
//! (`stderr`).

mod stderr;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Shared between the scheduler and its watchdog.
pub(crate) struct WatchShared {
    /// Bumped by the scheduler at every resume.
    pub(crate) slice: AtomicU64,
    /// Id of the green thread being resumed; 0 while none runs.
    pub(crate) running: AtomicU64,
    pub(crate) warnings: AtomicU64,
    /// The last slice reported (0: none yet); the scheduler compares it
    /// after each resume to record the slice in the flight recorder.
    pub(crate) hog_slice: AtomicU64,
    /// Names of named live threads, for the warning text.
    pub(crate) names: Mutex<HashMap<u64, Arc<str>>>,
    /// Sampled run time per thread id, in nanoseconds.
    pub(crate) run_ns: Mutex<HashMap<u64, u64>>,
    /// The most recent warnings (`latency`).
    pub(crate) recent: Mutex<crate::latency::Recent>,
    stop: Mutex<bool>,
    cv: Condvar,
    threshold: Duration,
}

/// Owns the watchdog thread; stops it on drop.
pub(crate) struct Watchdog {
    pub(crate) shared: Arc<WatchShared>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Watchdog {
    pub(crate) fn start(threshold: Duration) -> std::io::Result<Watchdog> {
        let shared = Arc::new(WatchShared {
            slice: AtomicU64::new(0),
            running: AtomicU64::new(0),
            warnings: AtomicU64::new(0),
            hog_slice: AtomicU64::new(0),
            names: Mutex::new(HashMap::new()),
            run_ns: Mutex::new(HashMap::new()),
            recent: Mutex::default(),
            stop: Mutex::new(false),
            cv: Condvar::new(),
            threshold,
        });
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name("coro-watchdog".into())
            .spawn(move || watch(s))?;
        Ok(Watchdog {
            shared,
            thread: Some(thread),
        })
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        *self.shared.stop.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.shared.cv.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        stderr::flush();
    }
}

/// The text of one warning: who, how long, and the usual cause and its fix.
fn warning_text(id: u64, name: Option<&str>, ran: Duration, threshold: Duration) -> String {
    format!(
        "latency warning: green thread #{id} '{}' has run {:.3} s without yielding (threshold \
         {:.3} s), and no other green thread of its runtime ran meanwhile. The usual cause is a \
         blocking std call (std::thread::sleep, std::fs, a std lock, a DNS lookup) that stops \
         the whole OS thread: run it with coro::blocking(|| ...), use coro's own call \
         (coro::sleep, coro::sync, coro::net), or yield (coro::yield_now) in a long computation",
        name.unwrap_or("<unnamed>"),
        ran.as_secs_f64(),
        threshold.as_secs_f64(),
    )
}

/// Charges `dt` nanoseconds to the thread running now.
///
/// `running` is read under the `run_ns` lock: the scheduler clears it before
/// it removes a finished thread's entry under that lock, so a thread read
/// here has not been removed yet, and a finished thread's entry is never
/// put back (which would leak one entry per race).
fn account(s: &WatchShared, dt: u64) {
    let mut run_ns = s.run_ns.lock().unwrap_or_else(|e| e.into_inner());
    let running = s.running.load(Ordering::Relaxed);
    if running != 0 {
        *run_ns.entry(running).or_default() += dt;
    }
}

fn watch(s: Arc<WatchShared>) {
    let period = (s.threshold / 10).clamp(Duration::from_micros(500), Duration::from_millis(10));
    let mut seen_slice = u64::MAX;
    let mut seen_at = Instant::now();
    let mut last_sample = Instant::now();
    let mut warned = false;
    let mut stop = s.stop.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        let (guard, _) =
            s.cv.wait_timeout(stop, period)
                .unwrap_or_else(|e| e.into_inner());
        stop = guard;
        if *stop {
            return;
        }
        let now = Instant::now();
        let running = s.running.load(Ordering::Relaxed);
        let slice = s.slice.load(Ordering::Relaxed);
        account(&s, now.duration_since(last_sample).as_nanos() as u64);
        last_sample = now;
        if running == 0 || slice != seen_slice {
            if warned {
                let ran = now.duration_since(seen_at);
                s.recent
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .update_last(ran, false);
            }
            seen_slice = slice;
            seen_at = now;
            warned = false;
            continue;
        }
        let ran = now.duration_since(seen_at);
        if warned {
            s.recent
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .update_last(ran, true);
        }
        if !warned && ran >= s.threshold {
            warned = true;
            s.warnings.fetch_add(1, Ordering::Relaxed);
            s.hog_slice.store(slice, Ordering::Release);
            let name = s
                .names
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(&running)
                .cloned();
            s.recent
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(running, name.clone(), ran);
            let text = warning_text(running, name.as_deref(), ran, s.threshold);
            log::warn!(target: "coro::latency", "{text}");
            if !log::log_enabled!(target: "coro::latency", log::Level::Warn) {
                stderr::warn(&text);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sample taken after the thread it read finished
    /// must not put the finished thread's entry back.
    #[test]
    fn a_finished_thread_is_not_charged_again() {
        let w = Watchdog::start(Duration::from_secs(3600)).unwrap();
        let s = &w.shared;
        s.running.store(7, Ordering::Relaxed);
        account(s, 10);
        assert_eq!(s.run_ns.lock().unwrap().get(&7), Some(&10));
        // The scheduler: the resume ends, then the thread finishes.
        s.running.store(0, Ordering::Relaxed);
        s.run_ns.lock().unwrap().remove(&7);
        // A sample that had read 7 before: it reads again under the lock.
        account(s, 10);
        assert!(s.run_ns.lock().unwrap().is_empty());
    }
}
