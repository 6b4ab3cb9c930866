//! [`Pool`]: a connection pool with ZODB's semantics (a soft `pool_size`
//! with warnings, LIFO reuse, the oldest idle connection pushed out and
//! cleared) plus what r2d2 and bb8 users expect (a hard `max_size` with FIFO
//! waiters and a `connection_timeout`, validation, reaping, statistics).
//!
//! # Design
//!
//! The idle connections are a stack (a `VecDeque`: the top is handed out
//! next, the bottom is the oldest and the first pushed out). A connection
//! that comes back goes straight to the first waiting caller if there is one
//! (a hand-off through the crate's wait list, as every primitive here does),
//! otherwise on top of the stack. Capacity freed under `max_size` (a
//! connection closed, a connect that failed) is handed to the first waiter
//! as a *slot*: the waiter opens a connection itself, counted against
//! `max_size` while it connects. A waiter that is interrupted or times out
//! after it was handed something passes it on.
//!
//! Nothing on the return path can suspend: the guard's `Drop` runs inside
//! [`no_suspend`](coro_runtime::no_suspend), and a manager whose `close`
//! blocks gets its connections closed on a [`Deferred`] queue. `min_idle`,
//! `idle_timeout` and `max_lifetime` are kept by a [`PeriodicExecutor`] (the
//! reaper) that holds the pool weakly and is closed when the pool goes.

mod builder;
mod error;
mod guard;
mod manager;
mod stats;

pub use builder::Builder;
pub use error::PoolError;
pub use guard::PooledConnection;
pub use manager::Manager;
pub use stats::{State, Statistics};

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::fmt;
use std::io;
use std::rc::Rc;
use std::time::Duration;

use coro_runtime::clock::{self, Instant};
use coro_runtime::WaitError;

use crate::deferred::Deferred;
use crate::executor::CloseOnDrop;
use crate::waitlist::{self, WaitList};

/// ZODB's default `pool_size`.
pub const DEFAULT_POOL_SIZE: usize = 7;
/// r2d2's default `connection_timeout`.
pub const DEFAULT_CONNECTION_TIMEOUT: Duration = Duration::from_secs(30);
/// r2d2's default time between two runs of the reaper.
pub const DEFAULT_REAPER_RATE: Duration = Duration::from_secs(30);

const LOG_TARGET: &str = "coro_sync::pool";

/// A live connection and its times.
pub(crate) struct Conn<C> {
    pub(crate) conn: C,
    created: Instant,
    /// When it went idle; kept only if `idle_timeout` is set.
    idle_since: Instant,
}

/// What a waiting `get` is handed.
enum Grant<C> {
    /// A returned connection.
    Conn(Conn<C>),
    /// Room under `max_size`: open a connection (already counted in
    /// `connecting`).
    Slot,
    /// The pool was closed.
    Closed,
}

/// Why the pool closed a connection.
#[derive(Clone, Copy)]
enum Cause {
    Broken,
    Invalid,
    IdleTimeout,
    MaxLifetime,
    PushedOut,
    ByPool,
}

pub(crate) struct Inner<M: Manager> {
    config: Builder<M>,
    manager: Rc<M>,
    /// The soft limit, changed live by `set_pool_size`.
    pool_size: Cell<usize>,
    /// Idle connections, oldest at the front; the back is handed out next.
    /// # Invariant
    /// Non-empty only while no live waiter is queued.
    idle: RefCell<VecDeque<Conn<M::Connection>>>,
    /// Live connections: idle and in use (ZODB's `all`).
    all: Cell<usize>,
    /// Connects in progress (they count against `max_size`).
    connecting: Cell<usize>,
    /// Callers of `get` waiting, FIFO; each is handed a grant.
    waiters: RefCell<WaitList<Option<Grant<M::Connection>>>>,
    stats: Cell<Statistics>,
    closed: Cell<bool>,
    /// Closes connections off the return path when `close` blocks.
    closer: Option<Deferred<M::Connection>>,
    /// Closes the reaper when the pool goes.
    reaper: RefCell<Option<CloseOnDrop>>,
}

/// A pool of connections made by a [`Manager`]: ZODB's soft `pool_size`
/// and LIFO reuse, r2d2's and bb8's hard `max_size`, timeouts, reaping and
/// statistics. Cloning gives another handle to the same pool.
///
/// # Checkout and return
///
/// [`get`](Pool::get) hands out the most recently returned idle connection
/// (LIFO: the one most likely still warm), checked with
/// [`Manager::is_valid`] when `test_on_check_out` is on; with none idle it
/// opens one, or, at `max_size`, waits. The [`PooledConnection`] guard
/// returns the connection when dropped, **without ever suspending**: a
/// broken one ([`Manager::has_broken`], or
/// [`mark_broken`](PooledConnection::mark_broken)) or one past
/// `max_lifetime` is closed instead, and a returned connection goes first to
/// a waiting caller.
///
/// # The soft limit
///
/// At most `pool_size` idle connections are kept: returning one when the
/// stack is full pushes the oldest out ([`Manager::clear`], then closed).
/// Opening the (`pool_size`+1)-th concurrent connection and each one after
/// it up to 2×`pool_size` logs at WARN `"<name>.get() has N open connections
/// with a pool_size of P"` (target `coro_sync::pool`); beyond that each one
/// logs at ERROR (ZODB's CRITICAL). [`set_pool_size`](Pool::set_pool_size)
/// changes the limit live and shrinks the stack at once.
///
/// # The hard limit
///
/// With `max_size`, callers beyond it wait in FIFO order, for at most the
/// pool's `connection_timeout` ([`PoolError::Timeout`]) and within any
/// enclosing `with_timeout` ([`PoolError::Wait`], passed on unchanged). A
/// waiter that gives up leaves the queue; a connection handed to it
/// meanwhile goes to the next one. A connect in progress counts against
/// `max_size`.
///
/// # Examples
///
/// ```
/// use std::convert::Infallible;
/// use coro::sync::{Manager, Pool};
///
/// struct Numbers(std::cell::Cell<u32>);
/// impl Manager for Numbers {
///     type Connection = u32;
///     type Error = Infallible;
///     fn connect(&self) -> Result<u32, Infallible> {
///         self.0.set(self.0.get() + 1);
///         Ok(self.0.get())
///     }
/// }
///
/// coro::run(|| {
///     let pool = Pool::builder().pool_size(2).build(Numbers(Default::default())).unwrap();
///     let a = pool.get().unwrap();
///     let b = pool.get().unwrap();
///     assert_eq!((*a, *b), (1, 2));
///     drop(a);
///     drop(b);                          // the stack: 1, 2 (top)
///     assert_eq!(*pool.get().unwrap(), 2); // the last returned comes back first
///     assert_eq!(pool.state().connections, 2);
/// });
/// ```
pub struct Pool<M: Manager> {
    inner: Rc<Inner<M>>,
}

impl<M: Manager> Clone for Pool<M> {
    fn clone(&self) -> Pool<M> {
        Pool {
            inner: self.inner.clone(),
        }
    }
}

/// Runs `f` where it must not suspend: inside `no_suspend` on a green
/// thread; as is elsewhere (a guard dropped after its runtime ended).
#[inline]
pub(crate) fn quietly<R>(f: impl FnOnce() -> R) -> R {
    if coro_runtime::in_green_thread() {
        coro_runtime::no_suspend(f)
    } else {
        f()
    }
}

impl<M: Manager> Pool<M> {
    /// A builder with the defaults: `pool_size` 7, no `max_size`,
    /// `connection_timeout` 30 s, `test_on_check_out` on, no reaping.
    pub fn builder() -> Builder<M> {
        Builder::default()
    }

    /// A pool of `manager`'s connections with the default settings.
    ///
    /// # Errors
    ///
    /// As [`Builder::build`].
    pub fn new(manager: M) -> io::Result<Pool<M>> {
        Builder::default().build(manager)
    }

    /// Checks out a connection: the most recently returned idle one, a new
    /// one, or (at `max_size`) the first one returned while this caller is
    /// first in line.
    ///
    /// # Errors
    ///
    /// * [`PoolError::Connect`] with the manager's error if opening failed.
    /// * [`PoolError::Timeout`] after `connection_timeout`.
    /// * [`PoolError::Wait`] if the caller was interrupted or an enclosing
    ///   `with_timeout` expired.
    /// * [`PoolError::Closed`] if the pool is closed.
    ///
    /// # Panics
    ///
    /// If it has to wait or connect and the caller is not a green thread.
    #[inline]
    pub fn get(&self) -> Result<PooledConnection<M>, PoolError<M::Error>> {
        match self.try_idle() {
            Some(c) => {
                self.inner.bump(|s| s.get_direct += 1);
                Ok(PooledConnection::new(self.clone(), c))
            }
            None => self.get_slow(),
        }
    }

    /// Checks out an idle connection if there is one; never opens one or
    /// waits (it may block in [`Manager::is_valid`]).
    pub fn try_get(&self) -> Option<PooledConnection<M>> {
        let c = self.try_idle()?;
        self.inner.bump(|s| s.get_direct += 1);
        Some(PooledConnection::new(self.clone(), c))
    }

    /// Pops valid idle connections off the stack; `None` when none is left
    /// (or the pool is closed).
    #[inline]
    fn try_idle(&self) -> Option<Conn<M::Connection>> {
        let inner = &*self.inner;
        loop {
            if inner.closed.get() {
                return None;
            }
            let mut c = inner.idle.borrow_mut().pop_back()?;
            if !inner.config.test_on_check_out || inner.manager.is_valid(&mut c.conn).is_ok() {
                return Some(c);
            }
            inner.close_conn(c, Cause::Invalid);
        }
    }

    #[cold]
    fn get_slow(&self) -> Result<PooledConnection<M>, PoolError<M::Error>> {
        if self.inner.closed.get() {
            return Err(PoolError::Closed);
        }
        let start = clock::now();
        match coro_runtime::with_timeout(self.inner.config.connection_timeout, || {
            self.acquire(start)
        }) {
            Ok(r) => r,
            Err(_) => {
                self.inner.bump(|s| s.get_timed_out += 1);
                Err(PoolError::Timeout)
            }
        }
    }

    /// `get`'s slow path, inside the `connection_timeout` scope.
    fn acquire(&self, start: Instant) -> Result<PooledConnection<M>, PoolError<M::Error>> {
        let inner = &*self.inner;
        let mut waited = false;
        loop {
            if inner.closed.get() {
                return Err(PoolError::Closed);
            }
            let idle = inner.idle.borrow_mut().pop_back();
            let grant = match idle {
                Some(c) => Grant::Conn(c),
                None if inner.has_capacity() && inner.waiters.borrow().first_live().is_none() => {
                    inner.connecting.set(inner.connecting.get() + 1);
                    Grant::Slot
                }
                None => {
                    waited = true;
                    self.wait().map_err(PoolError::Wait)?
                }
            };
            let conn = match grant {
                Grant::Closed => return Err(PoolError::Closed),
                Grant::Conn(mut c) => {
                    if inner.config.test_on_check_out
                        && inner.manager.is_valid(&mut c.conn).is_err()
                    {
                        inner.close_conn(c, Cause::Invalid);
                        continue;
                    }
                    c
                }
                Grant::Slot => inner.connect_in_slot().map_err(PoolError::Connect)?,
            };
            if waited {
                let w = start.elapsed();
                inner.bump(|s| {
                    s.get_waited += 1;
                    s.get_wait_time += w;
                });
            } else {
                inner.bump(|s| s.get_direct += 1);
            }
            return Ok(PooledConnection::new(self.clone(), conn));
        }
    }

    /// Queues the caller and waits to be handed a grant.
    #[track_caller]
    fn wait(&self) -> Result<Grant<M::Connection>, WaitError> {
        let inner = &*self.inner;
        let coro = waitlist::current_coro("Pool::get");
        let key = inner.waiters.borrow_mut().push_back(coro, None);
        let g = waitlist::wait(
            &inner.waiters,
            key,
            "Pool::get",
            || inner.dispatch(),
            |g| {
                if let Some(g) = g {
                    inner.pass_on(g);
                }
            },
        )?;
        Ok(g.expect("a handed pool waiter has a grant"))
    }

    /// Changes the soft limit; the idle stack shrinks to it at once (the
    /// oldest connections are pushed out). Never blocks.
    ///
    /// # Errors
    ///
    /// `InvalidInput` for 0.
    pub fn set_pool_size(&self, n: usize) -> io::Result<()> {
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "pool '{}': pool_size must be at least 1",
                    self.inner.config.name
                ),
            ));
        }
        self.inner.pool_size.set(n);
        quietly(|| self.inner.reduce(n));
        Ok(())
    }

    /// The soft limit.
    pub fn pool_size(&self) -> usize {
        self.inner.pool_size.get()
    }

    /// The hard limit, if any.
    pub fn max_size(&self) -> Option<usize> {
        self.inner.config.max_size
    }

    /// The pool's name.
    pub fn name(&self) -> &str {
        &self.inner.config.name
    }

    /// What the pool holds now.
    pub fn state(&self) -> State {
        let inner = &*self.inner;
        let idle = inner.idle.borrow().len();
        State {
            connections: inner.all.get(),
            idle_connections: idle,
            in_use: inner.all.get() - idle,
            connecting: inner.connecting.get(),
            waiting: inner.waiters.borrow().len(),
        }
    }

    /// What the pool has done since it was built.
    pub fn statistics(&self) -> Statistics {
        self.inner.stats.get()
    }

    /// `f` applied to each idle connection, oldest (bottom of the stack)
    /// first; the last one is the next handed out. `f` must not use the
    /// pool.
    pub fn idle_connections<R>(&self, mut f: impl FnMut(&M::Connection) -> R) -> Vec<R> {
        self.inner
            .idle
            .borrow()
            .iter()
            .map(|c| f(&c.conn))
            .collect()
    }

    /// The manager.
    pub fn manager(&self) -> &M {
        &self.inner.manager
    }

    /// Closes the pool: idle connections are closed, waiting callers and
    /// later `get`s fail with [`PoolError::Closed`], connections in use are
    /// closed when they come back. Never blocks.
    pub fn close(&self) {
        let inner = &*self.inner;
        inner.closed.set(true);
        quietly(|| {
            loop {
                let c = inner.idle.borrow_mut().pop_front();
                match c {
                    Some(c) => inner.close_conn(c, Cause::ByPool),
                    None => break,
                }
            }
            inner.dispatch();
        });
        inner.reaper.borrow_mut().take();
    }

    /// Whether [`close`](Pool::close) was called.
    pub fn is_closed(&self) -> bool {
        self.inner.closed.get()
    }
}

impl<M: Manager> Inner<M> {
    #[inline]
    fn bump(&self, f: impl FnOnce(&mut Statistics)) {
        let mut s = self.stats.get();
        f(&mut s);
        self.stats.set(s);
    }

    fn has_capacity(&self) -> bool {
        self.config
            .max_size
            .is_none_or(|m| self.all.get() + self.connecting.get() < m)
    }

    /// Opens a connection in a slot already counted in `connecting`.
    fn connect_in_slot(&self) -> Result<Conn<M::Connection>, M::Error> {
        /// Gives the slot back if `connect` fails or unwinds.
        struct Slot<'a, M: Manager>(&'a Inner<M>, bool);
        impl<M: Manager> Drop for Slot<'_, M> {
            fn drop(&mut self) {
                let inner = self.0;
                inner.connecting.set(inner.connecting.get() - 1);
                if !self.1 {
                    quietly(|| inner.dispatch());
                }
            }
        }
        let mut slot = Slot(self, false);
        let r = self.manager.connect();
        match r {
            Ok(conn) => {
                slot.1 = true;
                drop(slot);
                Ok(self.opened(conn))
            }
            Err(e) => {
                self.bump(|s| s.connect_failed += 1);
                Err(e)
            }
        }
    }

    /// Counts a new connection in and logs past the soft limit.
    fn opened(&self, conn: M::Connection) -> Conn<M::Connection> {
        let n = self.all.get() + 1;
        self.all.set(n);
        self.bump(|s| s.connections_created += 1);
        let limit = self.pool_size.get();
        if n > limit {
            let level = if n > 2 * limit {
                log::Level::Error
            } else {
                log::Level::Warn
            };
            log::log!(
                target: LOG_TARGET,
                level,
                "{}.get() has {n} open connections with a pool_size of {limit}",
                self.config.name
            );
        }
        let now = clock::now();
        Conn {
            conn,
            created: now,
            idle_since: now,
        }
    }

    /// A connection comes back from a guard (never suspends).
    pub(crate) fn give_back(&self, mut c: Conn<M::Connection>, broken: bool) {
        if self.closed.get() {
            self.close_conn(c, Cause::ByPool);
        } else if broken || self.manager.has_broken(&mut c.conn) {
            self.close_conn(c, Cause::Broken);
        } else if self
            .config
            .max_lifetime
            .is_some_and(|l| c.created.elapsed() >= l)
        {
            self.close_conn(c, Cause::MaxLifetime);
        } else {
            self.put_back(c);
        }
    }

    /// Hands a good connection to the first waiter, or pushes it on the
    /// stack (pushing the oldest out if the stack is full).
    fn put_back(&self, mut c: Conn<M::Connection>) {
        {
            let mut w = self.waiters.borrow_mut();
            if let Some(k) = w.first_live() {
                *w.data_mut(k) = Some(Grant::Conn(c));
                w.hand(k);
                return;
            }
        }
        if self.config.idle_timeout.is_some() {
            c.idle_since = clock::now();
        }
        self.reduce(self.pool_size.get() - 1);
        self.idle.borrow_mut().push_back(c);
    }

    /// Pushes the oldest idle connections out until at most `target` are left.
    fn reduce(&self, target: usize) {
        loop {
            let c = {
                let mut idle = self.idle.borrow_mut();
                if idle.len() <= target {
                    return;
                }
                idle.pop_front()
            };
            if let Some(mut c) = c {
                self.manager.clear(&mut c.conn);
                self.close_conn(c, Cause::PushedOut);
            }
        }
    }

    /// A connection leaves the pool for good.
    fn close_conn(&self, c: Conn<M::Connection>, cause: Cause) {
        self.all.set(self.all.get() - 1);
        self.bump(|s| match cause {
            Cause::Broken => s.closed_broken += 1,
            Cause::Invalid => s.closed_invalid += 1,
            Cause::IdleTimeout => s.closed_idle_timeout += 1,
            Cause::MaxLifetime => s.closed_max_lifetime += 1,
            Cause::PushedOut => s.closed_pushed_out += 1,
            Cause::ByPool => s.closed_by_pool += 1,
        });
        match &self.closer {
            Some(d) => d.push(c.conn),
            None => quietly(|| self.manager.close(c.conn)),
        }
        self.dispatch();
    }

    /// A connection left the pool without being closed by it.
    pub(crate) fn detached(&self) {
        self.all.set(self.all.get() - 1);
        self.bump(|s| s.detached += 1);
        quietly(|| self.dispatch());
    }

    /// Hands what can be handed out to the waiters at the head of the line:
    /// idle connections, then free slots; `Closed` once the pool is closed.
    fn dispatch(&self) {
        loop {
            let mut w = self.waiters.borrow_mut();
            let Some(k) = w.first_live() else { return };
            let grant = if self.closed.get() {
                Grant::Closed
            } else if let Some(c) = self.idle.borrow_mut().pop_back() {
                Grant::Conn(c)
            } else if self.has_capacity() {
                self.connecting.set(self.connecting.get() + 1);
                Grant::Slot
            } else {
                return;
            };
            *w.data_mut(k) = Some(grant);
            w.hand(k);
        }
    }

    /// A waiter gave up after it was handed `g`: it goes to the next one.
    fn pass_on(&self, g: Grant<M::Connection>) {
        match g {
            Grant::Conn(c) => quietly(|| self.put_back(c)),
            Grant::Slot => {
                self.connecting.set(self.connecting.get() - 1);
                self.dispatch();
            }
            Grant::Closed => {}
        }
    }

    /// The reaper's run: closes idle connections past `idle_timeout` (keeping
    /// `min_idle`) or `max_lifetime`, oldest first, then opens connections up
    /// to `min_idle`.
    fn reap(&self) {
        if self.closed.get() {
            return;
        }
        let now = clock::now();
        let mut i = 0;
        loop {
            let expired = {
                let mut idle = self.idle.borrow_mut();
                let n = idle.len();
                let Some(c) = idle.get(i) else { break };
                let cause = if self
                    .config
                    .max_lifetime
                    .is_some_and(|l| now - c.created >= l)
                {
                    Some(Cause::MaxLifetime)
                } else if n > self.config.min_idle
                    && self
                        .config
                        .idle_timeout
                        .is_some_and(|t| now - c.idle_since >= t)
                {
                    Some(Cause::IdleTimeout)
                } else {
                    None
                };
                cause.and_then(|cause| idle.remove(i).map(|c| (c, cause)))
            };
            match expired {
                Some((c, cause)) => quietly(|| self.close_conn(c, cause)),
                None => i += 1,
            }
        }
        while !self.closed.get()
            && self.idle.borrow().len() < self.config.min_idle
            && self.has_capacity()
        {
            self.connecting.set(self.connecting.get() + 1);
            match self.connect_in_slot() {
                Ok(c) => quietly(|| self.put_back(c)),
                Err(e) => {
                    log::warn!(
                        target: LOG_TARGET,
                        "{}: cannot open a connection for min_idle: {e}",
                        self.config.name
                    );
                    break;
                }
            }
        }
    }
}

impl<M: Manager> Drop for Inner<M> {
    /// Closes the idle connections (through the closer if closing blocks).
    fn drop(&mut self) {
        let idle = std::mem::take(self.idle.get_mut());
        quietly(|| {
            for c in idle {
                match &self.closer {
                    Some(d) => d.push(c.conn),
                    None => self.manager.close(c.conn),
                }
            }
        });
    }
}

impl<M: Manager> fmt::Debug for Pool<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pool")
            .field("name", &self.inner.config.name)
            .field("pool_size", &self.inner.pool_size.get())
            .field("max_size", &self.inner.config.max_size)
            .field("state", &self.state())
            .finish()
    }
}
