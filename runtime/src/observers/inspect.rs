//! Looking into the running runtime beyond the counters of `stats`: the
//! next timers to fire ([`timers`]) and a handle to a green thread found by
//! its id ([`thread_by_id`]). Used by the back door console.

use std::time::Duration;

use crate::kernel::clock::{self, Instant};
use crate::kernel::context;
use crate::kernel::wake::Coro;
use crate::services::timer::TimerKind;

/// A pending timer.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TimerInfo {
    /// When it fires.
    pub deadline: Instant,
    /// Time until then (zero when due).
    pub remaining: Duration,
    /// The green thread it belongs to.
    pub thread: u64,
    /// That thread's name, if any.
    pub name: Option<String>,
    /// `"sleep"` (a sleep or a timed wait) or `"timeout"` (the deadline of
    /// a `with_timeout` scope).
    pub kind: &'static str,
}

/// The `limit` earliest pending timers of the current runtime, earliest
/// first. Timers that would no longer do anything (a sleep cut short, a
/// scope that returned) are left out.
///
/// # Panics
///
/// Outside a runtime.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
///
/// coro::run(|| {
///     let h = coro::Builder::new().name("napper".into())
///         .spawn(|| coro::sleep(Duration::from_secs(60))).unwrap();
///     coro::yield_now(); // let it start sleeping
///     let t = coro::timers(10);
///     assert_eq!(t[0].name.as_deref(), Some("napper"));
///     assert!(t[0].remaining > Duration::from_secs(59));
///     h.thread().interrupt().unwrap();
///     assert!(h.join().unwrap().is_err());
/// });
/// ```
#[track_caller]
pub fn timers(limit: usize) -> Vec<TimerInfo> {
    context::with_sched("coro::timers", |s| {
        let heap = s.driver.timers.borrow();
        let mut live: Vec<_> = heap.live_entries().collect();
        live.sort_unstable_by_key(|e| e.deadline);
        let now = clock::now();
        live.into_iter()
            .take(limit)
            .map(|e| {
                let deadline = Instant::from_ticks(e.deadline);
                TimerInfo {
                    deadline,
                    remaining: deadline.duration_since(now),
                    thread: e.task.id,
                    name: e.task.name.as_deref().map(str::to_owned),
                    kind: match e.kind {
                        TimerKind::Wake { .. } => "sleep",
                        TimerKind::Scope { .. } => "timeout",
                        TimerKind::Waker { .. } => "future",
                    },
                }
            })
            .collect()
    })
}

/// A handle to the live green thread with this id, in the current runtime.
///
/// # Panics
///
/// Outside a runtime.
///
/// # Examples
///
/// ```
/// coro::run(|| {
///     let me = coro::current();
///     assert_eq!(coro::thread_by_id(me.id()), Some(me));
///     assert_eq!(coro::thread_by_id(u64::MAX), None);
/// });
/// ```
#[track_caller]
pub fn thread_by_id(id: u64) -> Option<Coro> {
    context::with_sched("coro::thread_by_id", |s| {
        s.tasks
            .borrow()
            .iter()
            .find(|(_, t)| t.id == id)
            .map(|(_, t)| Coro(t.clone()))
    })
}
