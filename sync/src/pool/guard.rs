//! [`PooledConnection`]: a checked-out connection that goes back to its
//! [`Pool`] when dropped.

use std::fmt;
use std::ops::{Deref, DerefMut};

use super::{quietly, Conn, Manager, Pool};

/// A connection checked out of a [`Pool`]; dereferences to the connection
/// and returns it when dropped.
///
/// # Dropping never suspends
///
/// The return runs inside [`no_suspend`](coro_runtime::no_suspend): the
/// manager's `has_broken` and `clear` cannot block there, and a `close`
/// that must block is queued on the pool's [`Deferred`](crate::Deferred)
/// closer. So a guard may be dropped anywhere, also while the thread unwinds.
///
/// The methods are associated functions (`PooledConnection::detach(c)`), so
/// they never hide the connection's own methods.
#[must_use = "dropping the guard returns the connection to the pool at once"]
pub struct PooledConnection<M: Manager> {
    pool: Pool<M>,
    /// `None` only after `detach` (the guard is then forgotten).
    conn: Option<Conn<M::Connection>>,
    broken: bool,
}

impl<M: Manager> PooledConnection<M> {
    pub(super) fn new(pool: Pool<M>, conn: Conn<M::Connection>) -> PooledConnection<M> {
        PooledConnection {
            pool,
            conn: Some(conn),
            broken: false,
        }
    }

    /// Takes the connection out of the pool for good: the pool forgets it
    /// (it no longer counts against any limit) and the caller owns it.
    pub fn detach(mut this: Self) -> M::Connection {
        let c = this.conn.take().expect("a guard holds its connection");
        this.pool.inner.detached();
        c.conn
    }

    /// Marks the connection broken: when the guard drops it is closed
    /// instead of reused (as when [`Manager::has_broken`] says so).
    pub fn mark_broken(this: &mut Self) {
        this.broken = true;
    }

    /// The pool the connection came from.
    pub fn pool(this: &Self) -> &Pool<M> {
        &this.pool
    }
}

impl<M: Manager> Deref for PooledConnection<M> {
    type Target = M::Connection;
    fn deref(&self) -> &M::Connection {
        &self
            .conn
            .as_ref()
            .expect("a guard holds its connection")
            .conn
    }
}

impl<M: Manager> DerefMut for PooledConnection<M> {
    fn deref_mut(&mut self) -> &mut M::Connection {
        &mut self
            .conn
            .as_mut()
            .expect("a guard holds its connection")
            .conn
    }
}

impl<M: Manager> Drop for PooledConnection<M> {
    /// Returns the connection (or closes it if broken); never suspends.
    #[inline]
    fn drop(&mut self) {
        if let Some(c) = self.conn.take() {
            let broken = self.broken;
            let inner = &self.pool.inner;
            quietly(|| inner.give_back(c, broken));
        }
    }
}

impl<M: Manager> fmt::Debug for PooledConnection<M>
where
    M::Connection: fmt::Debug,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PooledConnection")
            .field("conn", &self.conn.as_ref().map(|c| &c.conn))
            .field("pool", &self.pool.name())
            .finish()
    }
}
