//! [`Session`]: a session on a worker of a [`GroupPool`]; dropping it is
//! the document's `session_has_been_closed`.

use std::fmt;
use std::ops::{Deref, DerefMut};
use std::rc::Rc;

use coro_runtime::clock;

use super::{GroupPool, Spawner};
use crate::pool::quietly;

/// A session on a worker, from [`GroupPool::get`](super::GroupPool::get): dereferences to the
/// session's [`Spawner::Conn`]; dropping it closes the session (the
/// document's `session_has_been_closed`).
///
/// # Dropping never suspends
///
/// The close runs inside [`no_suspend`](coro_runtime::no_suspend):
/// [`Spawner::release`] gets the connection back, the pool's counts are
/// updated, and a worker that leaves the pool is shut down on the pool's
/// `Deferred` queue.
#[must_use = "dropping the session closes it at once"]
pub struct Session<S: Spawner> {
    pub(super) pool: GroupPool<S>,
    pub(super) key: S::Key,
    pub(super) p: usize,
    pub(super) id: u64,
    pub(super) worker: Option<Rc<S::Worker>>,
    pub(super) conn: Option<S::Conn>,
    pub(super) broken: bool,
}

impl<S: Spawner> Session<S> {
    /// The worker this session runs on.
    pub fn worker(&self) -> &S::Worker {
        self.worker.as_ref().expect("a session holds its worker")
    }

    /// The worker's id in the pool (for [`GroupPool::detach`]).
    pub fn worker_id(&self) -> u64 {
        self.id
    }

    /// The group's key.
    pub fn key(&self) -> &S::Key {
        &self.key
    }

    /// Marks the worker broken: when the session closes, the worker is
    /// detached from the pool and shut down, never handed out again.
    pub fn mark_broken(&mut self) {
        self.broken = true;
    }
}

impl<S: Spawner> Deref for Session<S> {
    type Target = S::Conn;
    fn deref(&self) -> &S::Conn {
        self.conn.as_ref().expect("a session holds its connection")
    }
}

impl<S: Spawner> DerefMut for Session<S> {
    fn deref_mut(&mut self) -> &mut S::Conn {
        self.conn.as_mut().expect("a session holds its connection")
    }
}

impl<S: Spawner> Drop for Session<S> {
    fn drop(&mut self) {
        let inner = &*self.pool.inner;
        let worker = self.worker.take().expect("a session holds its worker");
        let (p, id, broken) = (self.p, self.id, self.broken);
        if let Some(conn) = self.conn.take() {
            quietly(|| inner.spawner.release(&worker, conn));
        }
        // Checked without a borrow first, as the document does.
        if inner.state.borrow().live(p, id) {
            let limit = inner.config.session_limit;
            inner.with_state(|st| st.session_closed(p, broken, clock::now(), limit));
        }
        inner.retire(worker);
    }
}

impl<S: Spawner> fmt::Debug for Session<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Session")
            .field("key", &self.key)
            .field("worker_id", &self.id)
            .finish_non_exhaustive()
    }
}
