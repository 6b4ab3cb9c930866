//! [`GroupPoolBuilder`]: the settings of a [`GroupPool`] and their checks,
//! and the per-group [`GroupOptions`].

use std::cell::RefCell;
use std::fmt;
use std::io;
use std::marker::PhantomData;
use std::rc::Rc;
use std::time::Duration;

use super::backoff::SpawnBackoff;
use super::state::State;
use super::{GroupPool, Inner, Spawner, DEFAULT_MAX, DEFAULT_MAX_IDLE_TIME, DEFAULT_MAX_QUEUE};
use crate::condvar::Condvar;
use crate::deferred::Deferred;
use crate::executor::PeriodicExecutor;

/// Per-group settings a `get` applies to its group (the document's
/// `PoolOptions`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GroupOptions {
    /// Sessions a worker serves before it is recycled; 0: no limit.
    pub max_requests: u64,
    /// Workers the cleaner keeps, and that are spawned up front.
    pub min_processes: usize,
}

/// Settings of a [`GroupPool`]; see [`GroupPool::builder`].
pub struct GroupPoolBuilder<S> {
    pub(super) name: String,
    pub(super) max: usize,
    pub(super) max_per_app: usize,
    pub(super) max_idle_time: Duration,
    pub(super) max_queue: usize,
    pub(super) global_queue: bool,
    pub(super) session_limit: usize,
    pub(super) options: GroupOptions,
    pub(super) spawn_backoff: SpawnBackoff,
    pub(super) _spawner: PhantomData<fn() -> S>,
}

impl<S> fmt::Debug for GroupPoolBuilder<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GroupPoolBuilder")
            .field("name", &self.name)
            .field("max", &self.max)
            .field("max_per_app", &self.max_per_app)
            .field("max_idle_time", &self.max_idle_time)
            .field("max_queue", &self.max_queue)
            .field("global_queue", &self.global_queue)
            .field("session_limit", &self.session_limit)
            .field("options", &self.options)
            .field("spawn_backoff", &self.spawn_backoff)
            .finish()
    }
}

impl<S> Default for GroupPoolBuilder<S> {
    fn default() -> Self {
        GroupPoolBuilder {
            _spawner: PhantomData,
            name: "GroupPool".into(),
            max: DEFAULT_MAX,
            max_per_app: 0,
            max_idle_time: DEFAULT_MAX_IDLE_TIME,
            max_queue: DEFAULT_MAX_QUEUE,
            global_queue: false,
            session_limit: 0,
            options: GroupOptions::default(),
            spawn_backoff: SpawnBackoff::default(),
        }
    }
}

impl<S: Spawner> GroupPoolBuilder<S> {
    /// The pool's name (its threads' names, its log messages).
    pub fn name(mut self, name: &str) -> Self {
        self.name = name.to_owned();
        self
    }
    /// Most workers in the pool, spawns in flight included (default 6).
    pub fn max(mut self, n: usize) -> Self {
        self.max = n;
        self
    }
    /// Most workers per group; 0 (default): only `max`.
    pub fn max_per_app(mut self, n: usize) -> Self {
        self.max_per_app = n;
        self
    }
    /// Idle workers older than this are detached by the cleaner (default
    /// 300 s); zero: never.
    pub fn max_idle_time(mut self, d: Duration) -> Self {
        self.max_idle_time = d;
        self
    }
    /// Most callers waiting per group (default 100); more get
    /// [`GetError::QueueFull`](super::GetError::QueueFull).
    pub fn max_queue(mut self, n: usize) -> Self {
        self.max_queue = n;
        self
    }
    /// Global-queue mode: when every worker of a group is busy, wait for one
    /// to become free instead of queueing at the least busy one.
    pub fn global_queue(mut self, on: bool) -> Self {
        self.global_queue = on;
        self
    }
    /// Most sessions of one worker at once; 0 (default): no limit. An SMTP
    /// connection takes 1.
    pub fn session_limit(mut self, n: usize) -> Self {
        self.session_limit = n;
        self
    }
    /// `max_requests` and `min_processes` for `get` (default 0, 0).
    pub fn options(mut self, o: GroupOptions) -> Self {
        self.options = o;
        self
    }

    /// How a key whose spawns keep failing is backed off (default: after
    /// 3 failures in a row, 1 s doubling up to 60 s); see [`SpawnBackoff`].
    pub fn spawn_backoff(mut self, b: SpawnBackoff) -> Self {
        self.spawn_backoff = b;
        self
    }

    /// Builds the pool and starts its cleaner and its shutdown queue.
    ///
    /// # Errors
    ///
    /// `InvalidInput` for a `max` or `max_queue` of 0, or a
    /// [`SpawnBackoff`] (that is on) whose `initial` is 0 or above its
    /// `max`; the error of
    /// spawning the cleaner's or the shutdown queue's thread.
    ///
    /// # Panics
    ///
    /// Outside a runtime.
    pub fn build(self, spawner: S) -> io::Result<GroupPool<S>> {
        if self.max == 0 || self.max_queue == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "group pool '{}': max and max_queue must be at least 1",
                    self.name
                ),
            ));
        }
        let b = self.spawn_backoff;
        if b.after > 0 && (b.initial.is_zero() || b.initial > b.max) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "group pool '{}': spawn_backoff needs 0 < initial <= max (initial {:?}, max {:?})",
                    self.name, b.initial, b.max
                ),
            ));
        }
        let spawner = Rc::new(spawner);
        let s = spawner.clone();
        let retirer = Deferred::new(&format!("{}-shutdown", self.name), move |w| s.shutdown(w))?;
        let inner = Rc::new_cyclic(|me| Inner {
            me: me.clone(),
            spawner,
            state: RefCell::new(State::new(
                self.max,
                self.max_per_app,
                self.max_idle_time,
                self.spawn_backoff,
            )),
            room: Condvar::new(),
            queue: Condvar::new(),
            retirer,
            cleaner: RefCell::new(None),
            cleaner_ex: RefCell::new(None),
            config: self,
        });
        let ex = PeriodicExecutor::with_owner(
            &inner,
            cleaner_interval(inner.config.max_idle_time),
            Duration::ZERO,
            &format!("{}-cleaner", inner.config.name),
            |inner: &Inner<S>| {
                inner.clean();
                true
            },
        );
        ex.open()?;
        *inner.cleaner.borrow_mut() = Some(ex.close_on_drop());
        *inner.cleaner_ex.borrow_mut() = Some(ex);
        Ok(GroupPool { inner })
    }
}

/// The cleaner waits `max_idle_time` between passes (an hour while it is 0).
pub(super) fn cleaner_interval(d: Duration) -> Duration {
    if d.is_zero() {
        Duration::from_secs(3600)
    } else {
        d.max(Duration::from_millis(1))
    }
}
