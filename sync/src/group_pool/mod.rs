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
//! callers wait for the worker it adds. A spawn error reaches the callers
//! waiting for that group. The cleaner is a [`PeriodicExecutor`];
//! detached workers are shut down on a [`Deferred`] queue, since that may
//! block and detaching happens in a session's `Drop`.

mod builder;
mod list;
mod session;
mod spawner;
mod state;

use std::cell::RefCell;
use std::fmt;
use std::io;
use std::rc::Rc;
use std::time::{Duration, SystemTime};

use coro_runtime::clock;
use coro_runtime::WaitError;

use crate::condvar::Condvar;
use crate::deferred::Deferred;
use crate::executor::{CloseOnDrop, PeriodicExecutor};
use crate::pool::quietly;
use builder::cleaner_interval;
pub use builder::{GroupOptions, GroupPoolBuilder};
pub use session::Session;
pub use spawner::Spawner;
use state::{GroupShared, State};

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

/// Why [`GroupPool::get`] returned no session.
#[derive(Debug)]
pub enum GetError<E> {
    /// The group already has `max_queue` callers waiting.
    QueueFull {
        /// The limit that was reached.
        max_queue: usize,
    },
    /// Spawning the group's worker failed; every caller waiting for the
    /// group gets the same error, and the group is removed so a later `get`
    /// tries again.
    Spawn(Rc<E>),
    /// Connecting to a worker failed [`MAX_ATTEMPTS`] times.
    Connect(E),
    /// Waiting was cut short (interrupt, an enclosing `with_timeout`,
    /// shutdown).
    Wait(WaitError),
    /// No green thread could be started for the spawn.
    Thread(io::Error),
}

impl<E: fmt::Display> fmt::Display for GetError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GetError::QueueFull { max_queue } => {
                write!(
                    f,
                    "the group's wait queue is full ({max_queue} callers waiting)"
                )
            }
            GetError::Spawn(e) => write!(f, "cannot spawn a worker: {e}"),
            GetError::Connect(e) => {
                write!(
                    f,
                    "cannot connect to a worker after {MAX_ATTEMPTS} attempts: {e}"
                )
            }
            GetError::Wait(e) => write!(f, "waiting for a worker stopped: {e}"),
            GetError::Thread(e) => write!(f, "cannot start a spawner thread: {e}"),
        }
    }
}

impl<E: std::error::Error + 'static> std::error::Error for GetError<E> {}

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
/// its next `get`.
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
    /// # Errors
    ///
    /// See [`GetError`].
    pub fn get(&self, key: &S::Key) -> Result<Session<S>, GetError<S::Error>> {
        self.get_with(key, self.inner.config.options)
    }

    /// A session on a worker of `key`'s group, setting the group's options
    /// (the document's `get(app_root, options)` with its retry loop).
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

    /// The document's `checkout_without_lock`, with its waits.
    fn checkout(
        &self,
        key: &S::Key,
        options: GroupOptions,
    ) -> Result<Checkout<S::Worker>, GetError<S::Error>> {
        enum Step<E> {
            Got(usize),
            WaitRoom,
            WaitQueue(Rc<GroupShared<E>>),
            Fail(GetError<E>),
        }
        // Once per get: the waits below restart the function, and with an
        // `always_restart.txt` a second look would detach the group the
        // caller is waiting for.
        let mut restart = self.needs_restart(key);
        loop {
            let restart = std::mem::take(&mut restart);
            let step = self.with_state(|st| {
                let mut g = st.groups.get(key).copied();
                if restart {
                    if let Some(gk) = g.take() {
                        log::info!(target: LOG_TARGET, "{}: restarting {key:?}", self.config.name);
                        st.detach_group(gk);
                    }
                }
                match g {
                    Some(g) => {
                        let grp = st.group_mut(g);
                        grp.max_requests = options.max_requests;
                        grp.min_processes = options.min_processes;
                        if let Some(p) = st.take_inactive(g) {
                            st.proc_mut(p).sessions = 1;
                            return Step::Got(p);
                        }
                        if st.spawning_allowed(g) && !st.group(g).spawning {
                            if let Err(e) = self.spawn_in_background(st, g) {
                                return Step::Fail(GetError::Thread(e));
                            }
                        }
                        let busy_wait = self.config.global_queue || st.group(g).procs.len == 0;
                        if !busy_wait {
                            if let Some(p) = st.least_busy(g, self.config.session_limit) {
                                st.proc_mut(p).sessions += 1;
                                return Step::Got(p);
                            }
                        }
                        let shared = st.group(g).shared.clone();
                        if shared.waiting.get() >= self.config.max_queue {
                            return Step::Fail(GetError::QueueFull {
                                max_queue: self.config.max_queue,
                            });
                        }
                        Step::WaitQueue(shared)
                    }
                    None => {
                        if st.active >= st.max || st.count + st.spawning >= st.max {
                            if st.active < st.max && st.inactive.len > 0 {
                                // Full, but some worker is idle: evict the
                                // least recently used one.
                                let victim = st.inactive.head;
                                st.detach_proc(victim);
                            } else {
                                if st.waiting_for_room >= self.config.max_queue {
                                    return Step::Fail(GetError::QueueFull {
                                        max_queue: self.config.max_queue,
                                    });
                                }
                                return Step::WaitRoom;
                            }
                        }
                        let g =
                            st.add_group(key.clone(), options.max_requests, options.min_processes);
                        if let Err(e) = self.spawn_in_background(st, g) {
                            st.detach_group(g);
                            return Step::Fail(GetError::Thread(e));
                        }
                        Step::WaitQueue(st.group(g).shared.clone())
                    }
                }
            });
            match step {
                Step::Got(p) => {
                    return Ok(self.with_state(|st| {
                        let now = clock::now();
                        let x = st.proc_mut(p);
                        x.last_used = now;
                        (p, x.id, x.worker.clone())
                    }))
                }
                Step::Fail(e) => return Err(e),
                Step::WaitRoom => {
                    self.state.borrow_mut().waiting_for_room += 1;
                    let r = self.room.notified();
                    self.state.borrow_mut().waiting_for_room -= 1;
                    r.map_err(GetError::Wait)?;
                }
                Step::WaitQueue(shared) => {
                    shared.waiting.set(shared.waiting.get() + 1);
                    let r = self.queue.notified();
                    shared.waiting.set(shared.waiting.get() - 1);
                    r.map_err(GetError::Wait)?;
                    if let Some(e) = shared.spawn_error.borrow().clone() {
                        return Err(GetError::Spawn(e));
                    }
                }
            }
        }
    }

    /// The document's `spawn_in_background`: a spawner green thread for
    /// group `g`, counted in `spawning` until it ends.
    fn spawn_in_background(
        self: &Inner<S>,
        st: &mut State<S::Key, S::Worker, S::Error>,
        g: usize,
    ) -> io::Result<()> {
        let me = self
            .me
            .upgrade()
            .expect("the pool is alive while it is used");
        let grp = st.group(g);
        let (key, shared) = (grp.key.clone(), grp.shared.clone());
        let h = coro_runtime::Builder::new()
            .name(format!("{} spawner {key:?}", self.config.name))
            .spawn(move || me.spawner_thread(g, key, shared))?;
        st.spawning += 1;
        let grp = st.group_mut(g);
        grp.spawning = true;
        grp.spawner = Some(h.thread().clone());
        Ok(())
    }

    /// The document's `spawner_thread_callback`.
    fn spawner_thread(&self, g: usize, key: S::Key, shared: Rc<GroupShared<S::Error>>) {
        /// Counts the spawn out on every path, also an unwind at shutdown.
        struct Done<'a, S: Spawner>(&'a Inner<S>, usize, Rc<GroupShared<S::Error>>);
        impl<S: Spawner> Drop for Done<'_, S> {
            fn drop(&mut self) {
                let (inner, g, shared) = (self.0, self.1, &self.2);
                inner.with_state(|st| {
                    st.spawning -= 1;
                    st.queue_changed = true;
                    st.room_changed = true;
                    if !shared.detached.get() {
                        let grp = st.group_mut(g);
                        grp.spawning = false;
                        grp.spawner = None;
                        if grp.procs.len == 0 {
                            st.detach_group(g);
                        }
                    }
                });
            }
        }
        let _done = Done(self, g, shared.clone());
        loop {
            let r = self.spawner.spawn(&key);
            let again = self.with_state(|st| match r {
                Err(e) => {
                    if !shared.detached.get() {
                        log::warn!(
                            target: LOG_TARGET,
                            "{}: spawning a worker for {key:?} failed: {e}",
                            self.config.name
                        );
                        if st.group(g).procs.len == 0 {
                            *shared.spawn_error.borrow_mut() = Some(Rc::new(e));
                        }
                    }
                    false
                }
                Ok(w) => {
                    if shared.detached.get() {
                        st.retired.push(Rc::new(w));
                        return false;
                    }
                    st.add_worker(g, Rc::new(w), clock::now());
                    let grp = st.group(g);
                    let size = grp.procs.len;
                    // Still counted in `spawning`: allowed if one more fits.
                    let room = st.count + st.spawning <= st.max
                        && (st.max_per_app == 0 || size < st.max_per_app);
                    size < grp.min_processes && room
                }
            });
            if !again {
                return;
            }
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
