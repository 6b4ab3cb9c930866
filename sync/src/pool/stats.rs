//! [`State`] and [`Statistics`]: what a [`Pool`](crate::Pool) holds now and
//! what it has done (bb8's shapes, plus ZODB's pushed-out count).

use std::time::Duration;

/// What a pool holds at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct State {
    /// Live connections: idle plus in use (ZODB's `len(pool.all)`).
    pub connections: usize,
    /// Idle connections on the stack (ZODB's `len(pool.available)`).
    pub idle_connections: usize,
    /// Connections handed out and not yet returned.
    pub in_use: usize,
    /// Connections being opened (they count against `max_size`).
    pub connecting: usize,
    /// Callers waiting in `get` for a connection.
    pub waiting: usize,
}

/// What a pool has done since it was built.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Statistics {
    /// `get`s served without waiting (an idle connection, or a free slot).
    pub get_direct: u64,
    /// `get`s that waited for a connection or a slot, then got one.
    pub get_waited: u64,
    /// `get`s that failed on the pool's `connection_timeout`.
    pub get_timed_out: u64,
    /// Time spent waiting by the `get`s that waited.
    pub get_wait_time: Duration,
    /// Connections opened.
    pub connections_created: u64,
    /// `connect` calls that failed.
    pub connect_failed: u64,
    /// Connections closed because `has_broken` said so, or the guard was
    /// marked broken.
    pub closed_broken: u64,
    /// Connections closed because `is_valid` failed on checkout.
    pub closed_invalid: u64,
    /// Idle connections closed after `idle_timeout`.
    pub closed_idle_timeout: u64,
    /// Connections closed after `max_lifetime`.
    pub closed_max_lifetime: u64,
    /// Idle connections pushed out of the stack because it held
    /// `pool_size` (cleared with `Manager::clear`, then closed).
    pub closed_pushed_out: u64,
    /// Connections closed by [`Pool::close`](crate::Pool::close).
    pub closed_by_pool: u64,
    /// Connections taken out of the pool with
    /// [`PooledConnection::detach`](crate::PooledConnection::detach).
    pub detached: u64,
}
