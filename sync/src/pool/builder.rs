//! [`Builder`]: the settings of a [`Pool`] and their checks.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::fmt;
use std::io;
use std::marker::PhantomData;
use std::rc::Rc;
use std::time::Duration;

use super::{
    Inner, Manager, Pool, Statistics, DEFAULT_CONNECTION_TIMEOUT, DEFAULT_POOL_SIZE,
    DEFAULT_REAPER_RATE,
};
use crate::deferred::Deferred;
use crate::executor::PeriodicExecutor;
use crate::waitlist::WaitList;

/// Settings of a [`Pool`]; see [`Pool::builder`].
pub struct Builder<M> {
    pub(super) name: String,
    pub(super) pool_size: usize,
    pub(super) max_size: Option<usize>,
    pub(super) min_idle: usize,
    pub(super) idle_timeout: Option<Duration>,
    pub(super) max_lifetime: Option<Duration>,
    pub(super) connection_timeout: Duration,
    pub(super) test_on_check_out: bool,
    pub(super) reaper_rate: Duration,
    pub(super) _manager: PhantomData<fn() -> M>,
}

impl<M> fmt::Debug for Builder<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Builder")
            .field("name", &self.name)
            .field("pool_size", &self.pool_size)
            .field("max_size", &self.max_size)
            .field("min_idle", &self.min_idle)
            .field("idle_timeout", &self.idle_timeout)
            .field("max_lifetime", &self.max_lifetime)
            .field("connection_timeout", &self.connection_timeout)
            .field("test_on_check_out", &self.test_on_check_out)
            .field("reaper_rate", &self.reaper_rate)
            .finish()
    }
}

impl<M> Default for Builder<M> {
    fn default() -> Builder<M> {
        Builder {
            name: "Pool".into(),
            pool_size: DEFAULT_POOL_SIZE,
            max_size: None,
            min_idle: 0,
            idle_timeout: None,
            max_lifetime: None,
            connection_timeout: DEFAULT_CONNECTION_TIMEOUT,
            test_on_check_out: true,
            reaper_rate: DEFAULT_REAPER_RATE,
            _manager: PhantomData,
        }
    }
}

impl<M: Manager> Builder<M> {
    /// The pool's name, in its log messages and its threads' names
    /// (default `"Pool"`).
    pub fn name(mut self, name: &str) -> Builder<M> {
        self.name = name.to_owned();
        self
    }

    /// The soft limit (ZODB's `pool_size`, default 7): most idle connections
    /// kept, and the number of open connections above which each new one is
    /// logged (WARN, then ERROR beyond twice the size).
    pub fn pool_size(mut self, n: usize) -> Builder<M> {
        self.pool_size = n;
        self
    }

    /// The hard limit (r2d2's `max_size`): most connections open or opening
    /// at once; callers beyond it wait in FIFO order. `None` (the default)
    /// sets none.
    pub fn max_size(mut self, n: Option<usize>) -> Builder<M> {
        self.max_size = n;
        self
    }

    /// Idle connections the reaper keeps open (default 0).
    pub fn min_idle(mut self, n: usize) -> Builder<M> {
        self.min_idle = n;
        self
    }

    /// Idle connections unused this long are closed by the reaper (keeping
    /// `min_idle`). Default: never.
    pub fn idle_timeout(mut self, d: Option<Duration>) -> Builder<M> {
        self.idle_timeout = d;
        self
    }

    /// Connections older than this are closed when they come back or by the
    /// reaper. Default: never.
    pub fn max_lifetime(mut self, d: Option<Duration>) -> Builder<M> {
        self.max_lifetime = d;
        self
    }

    /// How long `get` may wait for a connection (and open one), default 30 s.
    pub fn connection_timeout(mut self, d: Duration) -> Builder<M> {
        self.connection_timeout = d;
        self
    }

    /// Whether `get` checks an idle connection with
    /// [`Manager::is_valid`] before handing it out (default `true`).
    pub fn test_on_check_out(mut self, on: bool) -> Builder<M> {
        self.test_on_check_out = on;
        self
    }

    /// Time between two runs of the reaper (default 30 s).
    pub fn reaper_rate(mut self, d: Duration) -> Builder<M> {
        self.reaper_rate = d;
        self
    }

    /// Builds the pool. It opens no connection itself; with `min_idle` the
    /// reaper opens them as soon as it first runs.
    ///
    /// # Errors
    ///
    /// `InvalidInput` naming the bad setting (a `pool_size` or `max_size` of
    /// 0, `min_idle` above either, a zero timeout or reaper rate); the error
    /// of spawning the reaper's or the closer's thread.
    ///
    /// # Panics
    ///
    /// Outside a runtime, when a reaper or a closer thread is needed.
    pub fn build(self, manager: M) -> io::Result<Pool<M>> {
        let invalid = |m: String| Err(io::Error::new(io::ErrorKind::InvalidInput, m));
        if self.pool_size == 0 {
            return invalid(format!(
                "pool '{}': pool_size must be at least 1",
                self.name
            ));
        }
        if self.max_size == Some(0) {
            return invalid(format!("pool '{}': max_size must be at least 1", self.name));
        }
        if self.min_idle > self.pool_size || self.max_size.is_some_and(|m| self.min_idle > m) {
            return invalid(format!(
                "pool '{}': min_idle ({}) must not exceed pool_size ({}) or max_size ({:?})",
                self.name, self.min_idle, self.pool_size, self.max_size
            ));
        }
        if self.connection_timeout.is_zero() || self.reaper_rate.is_zero() {
            return invalid(format!(
                "pool '{}': connection_timeout and reaper_rate must be above zero",
                self.name
            ));
        }
        let manager = Rc::new(manager);
        let closer = if M::CLOSE_BLOCKS {
            let m = manager.clone();
            Some(Deferred::new(&format!("{}-closer", self.name), move |c| {
                m.close(c)
            })?)
        } else {
            None
        };
        let reap = self.min_idle > 0 || self.idle_timeout.is_some() || self.max_lifetime.is_some();
        let inner = Rc::new(Inner {
            manager,
            pool_size: Cell::new(self.pool_size),
            idle: RefCell::new(VecDeque::new()),
            all: Cell::new(0),
            connecting: Cell::new(0),
            waiters: RefCell::new(WaitList::new()),
            stats: Cell::new(Statistics::default()),
            closed: Cell::new(false),
            closer,
            reaper: RefCell::new(None),
            config: self,
        });
        if reap {
            let ex = PeriodicExecutor::with_owner(
                &inner,
                inner.config.reaper_rate,
                Duration::ZERO,
                &format!("{}-reaper", inner.config.name),
                |pool: &Inner<M>| {
                    pool.reap();
                    true
                },
            );
            ex.open()?;
            *inner.reaper.borrow_mut() = Some(ex.close_on_drop());
        }
        Ok(Pool { inner })
    }
}
