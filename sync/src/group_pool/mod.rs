//! [`GroupPool`]: Passenger's ApplicationPool algorithm
//! (`passenger-application-pool-algorithm.txt`), generalised: workers of
//! any kind, started by a [`Spawner`], grouped by any key.
//!
//! # Design
//!
//! The document guards its state with a lock and waits on two condition
//! variables. In a cooperative runtime the lock is implicit: the state is a
//! `RefCell` borrowed only by code that does not block (`state.rs`), and the
//! waits are coro [`Condvar`]s (`new_app_group_creatable`,
//! `global_queue_position_became_available`) notified as the document's
//! `mutate_*` functions say. Spawning never happens inside a caller's
//! critical section: every spawn (also a group's first) runs on a spawner
//! green thread of its group, counts towards `max` while it runs, and the
//! callers wait for the worker it adds. The caller that started a spawn
//! and waits for it holds a ticket: the spawn's first worker is checked
//! out for it at once (the document's caller gets the process it spawned),
//! or its error is put there. A failed spawn removes its group, as the
//! document says; the other callers waiting for the group start over (and
//! may spawn for themselves), and keys that keep failing are backed off
//! (`backoff.rs`); the spawns themselves are in `spawn.rs`. The cleaner
//! is a [`PeriodicExecutor`]; detached workers are shut down on a
//! [`Deferred`] queue, since that may block and detaching happens in a
//! session's `Drop`.

mod backoff;
mod builder;
mod checkout;
mod error;
mod list;
mod session;
mod spawn;
mod spawner;
mod state;

use std::cell::RefCell;
use std::fmt;
use std::rc::Rc;
use std::time::{Duration, SystemTime};

use coro_runtime::clock;

use crate::condvar::Condvar;
use crate::deferred::Deferred;
use crate::executor::{CloseOnDrop, PeriodicExecutor};
use crate::pool::quietly;
pub use backoff::{GroupPoolStats, KeyBackoff, SpawnBackoff};
use builder::cleaner_interval;
pub use builder::{GroupOptions, GroupPoolBuilder};
pub use error::GetError;
pub use session::Session;
pub use spawner::Spawner;
use state::State;

/// Attempts of `get` when connecting to the checked-out worker fails (the
/// document's `MAX_ATTEMPTS`).
pub const MAX_ATTEMPTS: usize = 10;
/// Passenger's default `max` (`PassengerMaxPoolSize`).
pub const DEFAULT_MAX: usize = 6;
/// Passenger's default `max_idle_time` (`PassengerPoolIdleTime`).
pub const DEFAULT_MAX_IDLE_TIME: Duration = Duration::from_secs(300);
/// Passenger's default `max_queue` (`PassengerMaxRequestQueueSize`).
pub const DEFAULT_MAX_QUEUE: usize = 100;

const LOG_TARGET: &str = "coro_sync::group_pool";

struct Inner<S: Spawner> {
    /// This pool, for its spawner threads to hold.
    me: std::rc::Weak<Inner<S>>,
    config: GroupPoolBuilder<S>,
    spawner: Rc<S>,
    state: RefCell<State<S::Key, S::Worker, S::Error>>,
    /// The document's `new_app_group_creatable`.
    room: Condvar,
    /// The document's `global_queue_position_became_available`; also
    /// notified when a spawn adds a worker or a group is detached.
    queue: Condvar,
    /// Shuts detached workers down.
    retirer: Deferred<S::Worker>,
    cleaner: RefCell<Option<CloseOnDrop>>,
    cleaner_ex: RefCell<Option<PeriodicExecutor>>,
}

/// A pool of workers grouped by key: Passenger's ApplicationPool algorithm
/// for any [`Spawner`]. Cloning gives another handle to the same pool.
///
/// [`get`](GroupPool::get) returns a [`Session`] on a worker of the key's
/// group: an idle worker if there is one; otherwise a new one is spawned in
/// the background if `max`, `max_per_app` allow (evicting the least recently
/// used idle worker of another group when the pool is full), and the caller
/// either queues at the least busy worker or (in global-queue mode, or at
/// `session_limit`) waits for a worker to become free. Dropping the session
/// is the document's `session_has_been_closed`: a worker that served
/// `max_requests` sessions is recycled. The cleaner detaches workers idle
/// for `max_idle_time` (keeping `min_processes`); touching the group's
/// `restart.txt` (or having an `always_restart.txt`) restarts the group at
/// its next `get`. A spawn that fails removes its group, and its error goes
/// to the caller that started it; a key whose spawns keep failing is backed
/// off ([`SpawnBackoff`]); see [`get`](GroupPool::get).
///
/// In debug builds every operation ends by asserting the document's
/// invariants.
///
/// # Examples
///
/// ```
/// use std::convert::Infallible;
/// use coro::sync::{GroupPool, Spawner};
///
/// /// Workers are numbers; a session is a copy of the number.
/// struct Numbers(std::cell::Cell<u32>);
/// impl Spawner for Numbers {
///     type Key = &'static str;
///     type Worker = u32;
///     type Conn = u32;
///     type Error = Infallible;
///     fn spawn(&self, _: &&'static str) -> Result<u32, Infallible> {
///         self.0.set(self.0.get() + 1);
///         Ok(self.0.get())
///     }
///     fn connect(&self, _: &&'static str, w: &u32) -> Result<u32, Infallible> {
///         Ok(*w)
///     }
/// }
///
/// coro::run(|| {
///     let pool = GroupPool::builder().max(2).build(Numbers(Default::default())).unwrap();
///     let s = pool.get(&"app").unwrap();  // waits for the first spawn
///     assert_eq!(*s, 1);
///     drop(s);
///     assert_eq!(*pool.get(&"app").unwrap(), 1); // reused
///     assert_eq!((pool.count(), pool.active()), (1, 0));
/// });
/// ```
pub struct GroupPool<S: Spawner> {
    inner: Rc<Inner<S>>,
}

impl<S: Spawner> Clone for GroupPool<S> {
    fn clone(&self) -> Self {
        GroupPool {
            inner: self.inner.clone(),
        }
    }
}

/// What a checkout hands out: the worker's slab key, id and handle.
type Checkout<W> = (usize, u64, Rc<W>);

impl<S: Spawner> GroupPool<S> {
    /// A builder with Passenger's defaults: `max` 6, no `max_per_app`,
    /// `max_idle_time` 300 s, `max_queue` 100, least-sessions routing.
    pub fn builder() -> GroupPoolBuilder<S> {
        GroupPoolBuilder::default()
    }

    /// A session on a worker of `key`'s group, with the builder's
    /// [`GroupOptions`].
    ///
    /// # Spawn failures
    ///
    /// A failed spawn's error reaches the caller whose `get` started the
    /// spawn and waits for it ([`GetError::Spawn`]), and nobody else: the
    /// group is removed (the document's rule, also when it still has
    /// workers; their sessions go on), and the callers that were only
    /// waiting for the group start over, each able to spawn for itself. So
    /// one failure of a flaky spawner costs one caller. A spawn that no
    /// caller waits for (a background one, the `min_processes` ones) fails
    /// in the log only; the next `get` finds no group and spawns itself.
    ///
    /// A key's spawns that fail [`SpawnBackoff::after`] times in a row put
    /// it in backoff: until the delay is over, no spawn starts for it, and
    /// a `get` that needs one fails at once with [`GetError::Backoff`]
    /// (the last error, and the time until the next try). The first spawn
    /// that succeeds ends the run. [`stats`](GroupPool::stats) lists the
    /// keys in backoff.
    ///
    /// The caller that started a spawn waits for it (even if another
    /// worker frees up meanwhile) and gets its first worker as soon as that
    /// one is ready, even while more are spawned for `min_processes`.
    ///
    /// # Errors
    ///
    /// See [`GetError`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::io;
    /// use coro::sync::{GetError, GroupPool, Spawner};
    ///
    /// /// An application that never starts.
    /// struct Broken;
    /// impl Spawner for Broken {
    ///     type Key = &'static str;
    ///     type Worker = ();
    ///     type Conn = ();
    ///     type Error = io::Error;
    ///     fn spawn(&self, _: &&'static str) -> io::Result<()> {
    ///         Err(io::Error::other("exit status 1"))
    ///     }
    ///     fn connect(&self, _: &&'static str, _: &()) -> io::Result<()> {
    ///         Ok(())
    ///     }
    /// }
    ///
    /// coro::run(|| {
    ///     let pool = GroupPool::builder().build(Broken).unwrap();
    ///     for _ in 0..3 {
    ///         // Each caller's own spawn, and its error.
    ///         assert!(matches!(pool.get(&"app"), Err(GetError::Spawn(_))));
    ///     }
    ///     // Three in a row: the key backs off (1 s by default).
    ///     match pool.get(&"app") {
    ///         Err(GetError::Backoff { error, failures: 3, retry_in }) => {
    ///             assert_eq!(error.to_string(), "exit status 1");
    ///             assert!(retry_in.as_secs_f64() <= 1.0);
    ///         }
    ///         other => panic!("{other:?}"),
    ///     }
    ///     assert_eq!(pool.stats().in_backoff().count(), 1);
    /// });
    /// ```
    pub fn get(&self, key: &S::Key) -> Result<Session<S>, GetError<S::Error>> {
        self.get_with(key, self.inner.config.options)
    }

    /// A session on a worker of `key`'s group, setting the group's options
    /// (the document's `get(app_root, options)` with its retry loop).
    /// Spawn failures are handled as [`get`](GroupPool::get) says.
    ///
    /// # Errors
    ///
    /// See [`GetError`].
    ///
    /// # Panics
    ///
    /// If it has to wait and the caller is not a green thread.
    pub fn get_with(
        &self,
        key: &S::Key,
        options: GroupOptions,
    ) -> Result<Session<S>, GetError<S::Error>> {
        let inner = &*self.inner;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let (p, id, worker) = inner.checkout(key, options)?;
            match inner.spawner.connect(key, &worker) {
                Ok(conn) => {
                    return Ok(Session {
                        pool: self.clone(),
                        key: key.clone(),
                        p,
                        id,
                        worker: Some(worker),
                        conn: Some(conn),
                        broken: false,
                    })
                }
                Err(e) => {
                    log::warn!(
                        target: LOG_TARGET,
                        "{}: connecting to worker #{id} of {key:?} failed (attempt {attempt}): {e}; detaching it",
                        inner.config.name
                    );
                    inner.with_state(|st| {
                        if st.live(p, id) {
                            st.detach_proc(p);
                        }
                    });
                    inner.retire(worker);
                    if attempt == MAX_ATTEMPTS {
                        return Err(GetError::Connect(e));
                    }
                }
            }
        }
    }

    /// Detaches the worker `id` (as [`Session::worker_id`] names it) from the
    /// pool (the document's `detach(identifier)`); its sessions go on, and it
    /// is shut down after the last one. Returns whether it was in the pool.
    pub fn detach(&self, id: u64) -> bool {
        self.inner.with_state(|st| {
            let found = st
                .procs
                .iter()
                .position(|x| x.as_ref().is_some_and(|x| x.id == id));
            if let Some(p) = found {
                st.detach_proc(p);
            }
            found.is_some()
        })
    }

    /// Detaches `key`'s group and all its workers. Returns whether it existed.
    pub fn detach_group(&self, key: &S::Key) -> bool {
        self.inner
            .with_state(|st| match st.groups.get(key).copied() {
                Some(g) => {
                    st.detach_group(g);
                    true
                }
                None => false,
            })
    }

    /// Runs the cleaner's pass now; returns how many workers it detached.
    pub fn clean(&self) -> usize {
        self.inner.clean()
    }

    /// Changes `max` live; waiters are woken if it grew.
    pub fn set_max(&self, n: usize) {
        assert!(n > 0, "GroupPool::set_max: max must be at least 1");
        self.inner.with_state(|st| st.mutate_max(n));
    }

    /// Changes `max_per_app` live (0: no limit).
    pub fn set_max_per_app(&self, n: usize) {
        self.inner.with_state(|st| {
            st.max_per_app = n;
            st.queue_changed = true;
        });
    }

    /// Changes `max_idle_time` live; the cleaner follows at once.
    pub fn set_max_idle_time(&self, d: Duration) {
        self.inner.with_state(|st| st.max_idle_time = d);
        if let Some(ex) = &*self.inner.cleaner_ex.borrow() {
            ex.update_interval(cleaner_interval(d));
        }
    }

    /// Workers in the pool (the document's `count`).
    pub fn count(&self) -> usize {
        self.inner.state.borrow().count
    }

    /// Workers with at least one session (the document's `active`).
    pub fn active(&self) -> usize {
        self.inner.state.borrow().active
    }

    /// Spawns in flight.
    pub fn spawning(&self) -> usize {
        self.inner.state.borrow().spawning
    }

    /// The current `max`.
    pub fn max(&self) -> usize {
        self.inner.state.borrow().max
    }

    /// Workers of `key`'s group (its `size`); `None` if there is no group.
    pub fn group_size(&self, key: &S::Key) -> Option<usize> {
        let st = self.inner.state.borrow();
        st.groups.get(key).map(|&g| st.group(g).procs.len)
    }

    /// The keys of the groups in the pool.
    pub fn groups(&self) -> Vec<S::Key> {
        self.inner.state.borrow().groups.keys().cloned().collect()
    }

    /// The idle workers, least recently used first: (key, worker id).
    pub fn inactive(&self) -> Vec<(S::Key, u64)> {
        let st = self.inner.state.borrow();
        st.inactive
            .keys(&st.procs)
            .into_iter()
            .map(|p| (st.group(st.proc(p).group).key.clone(), st.proc(p).id))
            .collect()
    }

    /// The workers of `key`'s group in the group's list order (idle ones
    /// first): (worker id, sessions, sessions served).
    pub fn workers(&self, key: &S::Key) -> Vec<(u64, usize, u64)> {
        let st = self.inner.state.borrow();
        let Some(&g) = st.groups.get(key) else {
            return Vec::new();
        };
        st.group(g)
            .procs
            .keys(&st.procs)
            .into_iter()
            .map(|p| {
                let x = st.proc(p);
                (x.id, x.sessions, x.processed)
            })
            .collect()
    }

    /// How long worker `id` has been in the pool, if it is.
    pub fn worker_age(&self, id: u64) -> Option<Duration> {
        let st = self.inner.state.borrow();
        st.procs
            .iter()
            .flatten()
            .find(|x| x.id == id)
            .map(|x| x.start_time.elapsed())
    }

    /// Asserts the document's invariants (done after every operation in
    /// debug builds anyway).
    ///
    /// # Panics
    ///
    /// If one does not hold, naming it.
    pub fn check_invariants(&self) {
        self.inner.state.borrow().check();
    }

    /// The spawner.
    pub fn spawner(&self) -> &S {
        &self.inner.spawner
    }

    /// The pool's counts and the keys whose spawns failed (those in
    /// backoff among them); its `Display` is what a back door prints.
    pub fn stats(&self) -> GroupPoolStats<S::Key> {
        let st = self.inner.state.borrow();
        let now = clock::now();
        let mut failing: Vec<KeyBackoff<S::Key>> = st
            .failing
            .iter()
            .map(|(k, f)| KeyBackoff {
                key: k.clone(),
                failures: f.failures,
                retry_in: f.wait_left(now),
                error: f.error.to_string(),
            })
            .collect();
        failing.sort_by_key(|k| std::cmp::Reverse(k.failures));
        GroupPoolStats {
            name: self.inner.config.name.clone(),
            count: st.count,
            active: st.active,
            spawning: st.spawning,
            max: st.max,
            groups: st.groups.len(),
            failing,
        }
    }

    /// Forgets `key`'s run of failed spawns, ending its backoff: the next
    /// `get` spawns (an operator's "try now", like a mail queue's flush).
    /// Returns whether the key had failures.
    pub fn reset_backoff(&self, key: &S::Key) -> bool {
        self.inner.with_state(|st| st.failing.remove(key).is_some())
    }
}

impl<S: Spawner> Inner<S> {
    /// Runs `f` on the state (a critical section: it must not block), then
    /// sends the notifications it asked for, checks the invariants (debug)
    /// and hands detached workers on for shutdown.
    fn with_state<R>(&self, f: impl FnOnce(&mut State<S::Key, S::Worker, S::Error>) -> R) -> R {
        let (r, retired) = quietly(|| {
            let mut st = self.state.borrow_mut();
            let r = f(&mut st);
            if std::mem::take(&mut st.room_changed) {
                self.room.notify_all();
            }
            if std::mem::take(&mut st.queue_changed) {
                self.queue.notify_all();
            }
            #[cfg(debug_assertions)]
            st.check();
            (r, std::mem::take(&mut st.retired))
        });
        for w in retired {
            self.retire(w);
        }
        r
    }

    /// Hands a detached worker to the shutdown queue once no session holds it.
    fn retire(&self, w: Rc<S::Worker>) {
        if let Ok(w) = Rc::try_unwrap(w) {
            self.retirer.push(w);
        }
    }

    /// The document's `needs_restart`: `always_restart.txt` exists, or
    /// `restart.txt` appeared, changed or went away since the last look.
    fn needs_restart(&self, key: &S::Key) -> bool {
        let Some(dir) = self.spawner.restart_dir(key) else {
            return false;
        };
        if dir.join("always_restart.txt").exists() {
            return true;
        }
        let mtime: Option<SystemTime> = std::fs::metadata(dir.join("restart.txt"))
            .and_then(|m| m.modified())
            .ok();
        let mut st = self.state.borrow_mut();
        match st.restart_seen.insert(key.clone(), mtime) {
            None => mtime.is_some(),
            Some(before) => before != mtime,
        }
    }

    /// The cleaner's pass.
    fn clean(&self) -> usize {
        self.with_state(|st| st.clean(clock::now()))
    }
}

impl<S: Spawner> fmt::Debug for GroupPool<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let st = self.inner.state.try_borrow();
        let mut d = f.debug_struct("GroupPool");
        d.field("name", &self.inner.config.name);
        if let Ok(st) = st {
            d.field("count", &st.count)
                .field("active", &st.active)
                .field("spawning", &st.spawning)
                .field("max", &st.max);
        }
        d.finish_non_exhaustive()
    }
}
