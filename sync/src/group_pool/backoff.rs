//! Spawn backoff of a [`GroupPool`](super::GroupPool): the per-key record
//! of consecutive failed spawns ([`Failing`]), its settings
//! ([`SpawnBackoff`]) and what [`stats`](super::GroupPool::stats) shows of
//! it ([`GroupPoolStats`], [`KeyBackoff`]).
//!
//! # Design
//!
//! The document removes a group whose spawn failed and lets the next `get`
//! spawn again: a broken application is spawned once per request. Here
//! each key keeps its run of failures (until a spawn succeeds); from the
//! `after`-th on, no spawn starts before a delay that doubles with each
//! further failure up to `max`, and a `get` that would need a spawn
//! meanwhile fails at once with the last error and the time left.

use std::fmt;
use std::rc::Rc;
use std::time::Duration;

use coro_runtime::clock::Instant;

/// How a [`GroupPool`](super::GroupPool) backs off a key whose spawns keep
/// failing; set with
/// [`GroupPoolBuilder::spawn_backoff`](super::GroupPoolBuilder::spawn_backoff).
///
/// After `after` consecutive failed spawns of a key, the next spawn waits
/// `initial`; each further failure doubles the delay, up to `max`. A
/// successful spawn ends the run, and so does
/// [`GroupPool::reset_backoff`](super::GroupPool::reset_backoff); the
/// cleaner forgets a run whose last failure is older than twice `max`.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use coro::sync::SpawnBackoff;
///
/// let b = SpawnBackoff { after: 3, initial: Duration::from_secs(1), max: Duration::from_secs(60) };
/// assert_eq!(b, SpawnBackoff::default());
/// assert_eq!(b.delay(2), None);
/// assert_eq!(b.delay(3), Some(Duration::from_secs(1)));
/// assert_eq!(b.delay(5), Some(Duration::from_secs(4)));
/// assert_eq!(b.delay(30), Some(Duration::from_secs(60)));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpawnBackoff {
    /// Consecutive failures before the pool backs off (default 3); 0: never
    /// back off.
    pub after: u32,
    /// The delay after the `after`-th failure (default 1 s).
    pub initial: Duration,
    /// The longest delay (default 60 s).
    pub max: Duration,
}

impl Default for SpawnBackoff {
    fn default() -> Self {
        SpawnBackoff {
            after: 3,
            initial: Duration::from_secs(1),
            max: Duration::from_secs(60),
        }
    }
}

impl SpawnBackoff {
    /// How long the next spawn waits after `failures` consecutive ones:
    /// `None` below `after` (or when backoff is off).
    pub fn delay(&self, failures: u32) -> Option<Duration> {
        if self.after == 0 || failures < self.after {
            return None;
        }
        let doublings = (failures - self.after).min(32);
        Some(self.initial.saturating_mul(1 << doublings).min(self.max))
    }
}

/// A key's run of failed spawns (kept in the pool's state by key).
#[derive(Debug)]
pub(super) struct Failing<E> {
    /// Consecutive failed spawns.
    pub(super) failures: u32,
    /// The last one's error.
    pub(super) error: Rc<E>,
    /// When it failed.
    pub(super) last: Instant,
    /// No spawn starts before this; `None` while `failures < after`.
    pub(super) next_try: Option<Instant>,
}

impl<E> Failing<E> {
    /// The time left until the next spawn may start, if it is not now.
    pub(super) fn wait_left(&self, now: Instant) -> Option<Duration> {
        self.next_try.filter(|&t| t > now).map(|t| t - now)
    }
}

/// A key whose last spawns failed, as [`GroupPool::stats`](super::GroupPool::stats) shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct KeyBackoff<K> {
    /// The group's key.
    pub key: K,
    /// Consecutive failed spawns.
    pub failures: u32,
    /// How long until a spawn may start again; `None`: a `get` may spawn
    /// now (fewer than `after` failures, or the delay is over).
    pub retry_in: Option<Duration>,
    /// The last spawn's error.
    pub error: String,
}

/// What a [`GroupPool`](super::GroupPool) holds at one moment, from
/// [`GroupPool::stats`](super::GroupPool::stats). Its `Display` is the
/// shape a back door command prints.
///
/// ```text
/// smtp: 2 workers (1 active, 1 idle), 0 spawning, max 6, 1 group
///   backoff 127.0.0.1:2525: 4 failed spawns in a row, next try in 1.9s: connect to 127.0.0.1:2525: Connection refused
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct GroupPoolStats<K> {
    /// The pool's name.
    pub name: String,
    /// Workers in the pool (the document's `count`).
    pub count: usize,
    /// Workers with at least one session (the document's `active`).
    pub active: usize,
    /// Spawns in flight.
    pub spawning: usize,
    /// The current `max`.
    pub max: usize,
    /// Groups in the pool.
    pub groups: usize,
    /// Keys whose last spawns failed, longest run first.
    pub failing: Vec<KeyBackoff<K>>,
}

impl<K> GroupPoolStats<K> {
    /// The keys a `get` cannot spawn for now.
    pub fn in_backoff(&self) -> impl Iterator<Item = &KeyBackoff<K>> {
        self.failing.iter().filter(|k| k.retry_in.is_some())
    }
}

impl<K: fmt::Debug> fmt::Display for GroupPoolStats<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {} workers ({} active, {} idle), {} spawning, max {}, {} group{}",
            self.name,
            self.count,
            self.active,
            self.count - self.active,
            self.spawning,
            self.max,
            self.groups,
            if self.groups == 1 { "" } else { "s" }
        )?;
        for k in &self.failing {
            let (state, next) = match k.retry_in {
                Some(d) => ("backoff", format!("next try in {d:.1?}")),
                None => ("failing", "a get may spawn now".to_owned()),
            };
            write!(
                f,
                "\n  {state} {:?}: {} failed spawn{} in a row, {next}: {}",
                k.key,
                k.failures,
                if k.failures == 1 { "" } else { "s" },
                k.error
            )?;
        }
        Ok(())
    }
}
