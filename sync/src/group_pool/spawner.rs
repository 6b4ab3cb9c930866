//! [`Spawner`]: what a [`GroupPool`](super::GroupPool) needs to start
//! workers and open sessions on them.

use std::fmt;
use std::hash::Hash;
use std::path::PathBuf;

/// Starts workers for a [`GroupPool`](super::GroupPool) and opens sessions on them.
///
/// A worker is anything with a capacity of concurrent sessions: a process
/// of an application (Passenger), a connection to a mail host (one session
/// at a time). `spawn` and `connect` may block; `release` must not (it runs
/// in a session's `Drop`); `shutdown` may block (it runs on a
/// [`Deferred`](crate::Deferred) queue).
///
/// # Connections to a host
///
/// For outbound connections kept per destination (a mail relay's SMTP
/// client): the key is the destination, `spawn` connects and greets,
/// `session_limit(1)` gives each connection one session at a time,
/// `max_per_app` is the per-destination limit, `max_requests` the reuse
/// limit and `max_idle_time` the idle limit. Keep the connection in the
/// worker as `RefCell<Option<Connection>>`: `connect` takes it out (and may
/// reset it, e.g. `RSET`) so the session owns it and derefs to it mutably;
/// `release` puts it back; [`Session::mark_broken`](super::Session::mark_broken)
/// on an I/O error detaches the worker, and `shutdown` says goodbye
/// (`QUIT`) off the session's path.
pub trait Spawner: 'static {
    /// What groups workers: an application root, a destination host.
    type Key: Clone + Eq + Hash + fmt::Debug + 'static;
    /// A worker: a process, a connection.
    type Worker: 'static;
    /// What one session uses and owns: a socket to a worker process, or the
    /// connection itself taken out of the worker for the session.
    type Conn: 'static;
    /// Why spawning or connecting failed.
    type Error: std::error::Error + 'static;

    /// Starts a worker for `key`. May block; runs on a spawner green thread,
    /// which is interrupted if the group is detached meanwhile.
    ///
    /// # Errors
    ///
    /// Reaches the caller that started the spawn, removes the group and
    /// counts towards the key's backoff (see
    /// [`GroupPool::get`](super::GroupPool::get)).
    fn spawn(&self, key: &Self::Key) -> Result<Self::Worker, Self::Error>;

    /// Opens a session on `worker` (the document's `process.connect()`). May
    /// block. An error means the worker is dead: it is detached and `get`
    /// tries another, [`MAX_ATTEMPTS`](super::MAX_ATTEMPTS) times in all.
    ///
    /// # Errors
    ///
    /// Why the worker cannot take a session.
    fn connect(&self, key: &Self::Key, worker: &Self::Worker) -> Result<Self::Conn, Self::Error>;

    /// Ends a session (the document's session close): gets the session's
    /// `Conn` back. Must not block. Dropping it is the default.
    fn release(&self, worker: &Self::Worker, conn: Self::Conn) {
        let _ = worker;
        drop(conn);
    }

    /// Stops a worker that left the pool (recycled, idle, restarted,
    /// evicted, broken) once its last session ended. May block (it runs on
    /// a `Deferred` queue). Dropping it is the default.
    fn shutdown(&self, worker: Self::Worker) {
        drop(worker);
    }

    /// The directory holding the group's `restart.txt` and
    /// `always_restart.txt`, if any (the document's `restart_dir`).
    fn restart_dir(&self, key: &Self::Key) -> Option<PathBuf> {
        let _ = key;
        None
    }
}
