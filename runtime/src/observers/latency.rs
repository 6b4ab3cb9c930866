//! The record of recent latency warnings: a bounded ring the watchdog fills
//! and [`latency_warnings`] reads (the back door's `latency` command, the
//! profiler's report of an interval).
//!
//! # Design
//!
//! The watchdog thread (`watchdog`) pushes one [`LatencyWarning`] when it
//! logs a warning, while the hog still runs, and updates that entry's run
//! time at each later sample until the slice ends; so a reader sees the slice
//! grow while it runs and its final length (to a sampling period) after. The
//! ring keeps the [`RECENT_WARNINGS`] most recent entries: memory stays
//! bounded however many warnings a runtime has issued (the total is
//! [`Stats::latency_warnings`](crate::Stats)).

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::kernel::clock::{self, Instant};
use crate::kernel::context;

/// How many recent latency warnings a runtime keeps.
pub const RECENT_WARNINGS: usize = 64;

/// One latency warning: a green thread ran past the threshold without
/// yielding.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
///
/// let mut rt = coro::Runtime::builder()
///     .latency_warning(Some(Duration::from_millis(20)))
///     .build()
///     .unwrap();
/// rt.block_on(|| {
///     coro::Builder::new().name("hog".into()).spawn(|| {
///         let t = std::time::Instant::now();
///         while t.elapsed() < Duration::from_millis(60) {} // no yield
///     }).unwrap().join().unwrap();
///     coro::sleep(Duration::from_millis(50)).unwrap(); // the watchdog's next look
///     let w = coro::latency_warnings();
///     assert_eq!(w[0].name.as_deref(), Some("hog"));
///     assert!(w[0].ran >= Duration::from_millis(20) && !w[0].running);
/// });
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LatencyWarning {
    /// The green thread's id.
    pub thread: u64,
    /// Its name, if it has one.
    pub name: Option<String>,
    /// When its slice began (to the watchdog's sampling period), on the
    /// tick clock.
    pub started: Instant,
    /// The same moment in wall time.
    pub started_wall: SystemTime,
    /// How long the slice ran: so far while [`running`](Self::running),
    /// in total after.
    pub ran: Duration,
    /// The slice was still running when the watchdog last looked (it looks
    /// every tenth of the threshold, at most every 10 ms).
    pub running: bool,
}

/// The ring itself, kept by the watchdog under a mutex.
#[derive(Debug, Default)]
pub(crate) struct Recent {
    ring: VecDeque<LatencyWarning>,
}

impl Recent {
    /// Records a new warning for a slice still running; drops the oldest
    /// entry when the ring is full.
    pub(crate) fn push(&mut self, thread: u64, name: Option<Arc<str>>, ran: Duration) {
        if self.ring.len() == RECENT_WARNINGS {
            self.ring.pop_front();
        }
        let now = clock::now();
        let started =
            Instant::from_ticks(now.ticks().saturating_sub(clock::duration_to_ticks(ran)));
        self.ring.push_back(LatencyWarning {
            thread,
            name: name.map(|n| n.to_string()),
            started,
            started_wall: SystemTime::now()
                .checked_sub(ran)
                .unwrap_or(SystemTime::UNIX_EPOCH),
            ran,
            running: true,
        });
    }

    /// The slice of the newest warning has run `ran` so far, and is still
    /// `running`.
    pub(crate) fn update_last(&mut self, ran: Duration, running: bool) {
        if let Some(w) = self.ring.back_mut() {
            w.ran = ran;
            w.running = running;
        }
    }

    pub(crate) fn to_vec(&self) -> Vec<LatencyWarning> {
        self.ring.iter().cloned().collect()
    }
}

/// The current runtime's recent latency warnings (at most
/// [`RECENT_WARNINGS`]), oldest first; empty when warnings are disabled.
///
/// # Panics
///
/// Outside a runtime.
#[track_caller]
pub fn latency_warnings() -> Vec<LatencyWarning> {
    context::with_sched("coro::latency_warnings", |s| {
        s.observers.watchdog.as_ref().map_or_else(Vec::new, |w| {
            w.shared
                .recent
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .to_vec()
        })
    })
}

/// The latency-warning threshold of the current runtime (`None`: disabled).
///
/// # Panics
///
/// Outside a runtime.
#[track_caller]
pub fn latency_threshold() -> Option<Duration> {
    context::with_sched("coro::latency_threshold", |s| s.config.latency_warning)
}
