//! Checkouts of a [`GroupPool`](super::GroupPool): the document's
//! `checkout_without_lock`, with its waits.
//!
//! A `get` runs in phases, each a function here: [`decide`] looks at the
//! state in one critical section and picks a [`Step`] (a worker now, a
//! failure, or what to wait for), for a group the key already has
//! ([`join_group`]) or a new one ([`open_group`]); [`wait`] does the step's
//! wait outside the state; [`claim`] takes the worker if it is still in
//! the pool. A wait that ends without a worker starts over at [`decide`],
//! which sees the state as it is then.
//!
//! [`decide`]: Inner::decide
//! [`join_group`]: Inner::join_group
//! [`open_group`]: Inner::open_group
//! [`wait`]: Inner::wait
//! [`claim`]: Inner::claim

use std::rc::Rc;

use coro_runtime::clock;

use super::state::{GroupShared, State, Ticket};
use super::{Checkout, GetError, GroupOptions, Inner, Spawner, LOG_TARGET};

/// What one look at the state decided a `get` does next.
enum Step<E> {
    /// Worker (slab key, id) is checked out for the caller.
    Got(usize, u64),
    /// The pool is full: wait for room, then look again.
    WaitRoom,
    /// The group has no worker to give: wait for one, then look again.
    WaitQueue(Rc<GroupShared>),
    /// The caller started the group's spawn: wait for its first worker.
    WaitSpawn(Rc<GroupShared>, Rc<Ticket<E>>),
    /// The `get` fails.
    Fail(GetError<E>),
}

/// The state of a pool whose spawner is `S`.
type PoolState<S> = State<<S as Spawner>::Key, <S as Spawner>::Worker, <S as Spawner>::Error>;

impl<S: Spawner> Inner<S> {
    /// The document's `checkout_without_lock`, with its waits.
    pub(super) fn checkout(
        &self,
        key: &S::Key,
        options: GroupOptions,
    ) -> Result<Checkout<S::Worker>, GetError<S::Error>> {
        // Once per get: the waits below start over, and with an
        // `always_restart.txt` a second look would detach the group the
        // caller is waiting for.
        let mut restart = self.needs_restart(key);
        loop {
            let restart = std::mem::take(&mut restart);
            let step = self.with_state(|st| self.decide(st, key, options, restart));
            let Some((p, id)) = self.wait(step)? else {
                continue;
            };
            if let Some(got) = self.claim(p, id) {
                return Ok(got);
            }
        }
    }

    /// One look at the state (a critical section): the key's group, after
    /// detaching it when it needs a restart, or a new one.
    fn decide(
        &self,
        st: &mut PoolState<S>,
        key: &S::Key,
        options: GroupOptions,
        restart: bool,
    ) -> Step<S::Error> {
        let mut g = st.groups.get(key).copied();
        if restart {
            if let Some(gk) = g.take() {
                log::info!(target: LOG_TARGET, "{}: restarting {key:?}", self.config.name);
                st.detach_group(gk);
            }
        }
        match g {
            Some(g) => self.join_group(st, g, key, options),
            None => self.open_group(st, key, options),
        }
    }

    /// A `get` for group `g`, which is in the pool: an idle worker, else a
    /// spawn started (when allowed) and a busy worker shared (unless callers
    /// queue for the group), else a wait in the group's queue.
    fn join_group(
        &self,
        st: &mut PoolState<S>,
        g: usize,
        key: &S::Key,
        options: GroupOptions,
    ) -> Step<S::Error> {
        let grp = st.group_mut(g);
        grp.max_requests = options.max_requests;
        grp.min_processes = options.min_processes;
        if let Some(p) = st.take_inactive(g) {
            st.proc_mut(p).sessions = 1;
            return Step::Got(p, st.proc(p).id);
        }
        let mut started = false;
        if st.spawning_allowed(g)
            && !st.group(g).spawning
            && st.in_backoff(key, clock::now()).is_none()
        {
            if let Err(e) = self.spawn_in_background(st, g) {
                return Step::Fail(GetError::Thread(e));
            }
            started = true;
        }
        let busy_wait = self.config.global_queue || st.group(g).procs.len == 0;
        if !busy_wait {
            if let Some(p) = st.least_busy(g, self.config.session_limit) {
                st.proc_mut(p).sessions += 1;
                return Step::Got(p, st.proc(p).id);
            }
        }
        let shared = st.group(g).shared.clone();
        if shared.waiting.get() >= self.config.max_queue {
            return Step::Fail(GetError::QueueFull {
                max_queue: self.config.max_queue,
            });
        }
        if started {
            // This caller waits for the spawn it started.
            let t = Rc::new(Ticket::default());
            st.group_mut(g).owner = Some(t.clone());
            return Step::WaitSpawn(shared, t);
        }
        Step::WaitQueue(shared)
    }

    /// A `get` for a key with no group in the pool: a failure while the key
    /// is in backoff; room made (the least recently used idle worker
    /// evicted) or waited for when the pool is full; then a new group whose
    /// spawn the caller waits for.
    fn open_group(
        &self,
        st: &mut PoolState<S>,
        key: &S::Key,
        options: GroupOptions,
    ) -> Step<S::Error> {
        let now = clock::now();
        if let Some(f) = st.in_backoff(key, now) {
            return Step::Fail(GetError::Backoff {
                error: f.error.clone(),
                failures: f.failures,
                retry_in: f.wait_left(now).unwrap_or_default(),
            });
        }
        if st.active >= st.max || st.count + st.spawning >= st.max {
            if st.active < st.max && st.inactive.len > 0 {
                // Full, but some worker is idle: evict the least recently
                // used one.
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
        let g = st.add_group(key.clone(), options.max_requests, options.min_processes);
        if let Err(e) = self.spawn_in_background(st, g) {
            st.detach_group(g);
            return Step::Fail(GetError::Thread(e));
        }
        let t = Rc::new(Ticket::default());
        let grp = st.group_mut(g);
        grp.owner = Some(t.clone());
        Step::WaitSpawn(grp.shared.clone(), t)
    }

    /// Does `step`'s wait, outside the state: the worker it ended with,
    /// `None` to look again, or the `get`'s error.
    fn wait(&self, step: Step<S::Error>) -> Result<Option<(usize, u64)>, GetError<S::Error>> {
        match step {
            Step::Got(p, id) => Ok(Some((p, id))),
            Step::Fail(e) => Err(e),
            Step::WaitRoom => {
                self.state.borrow_mut().waiting_for_room += 1;
                let r = self.room.notified();
                self.state.borrow_mut().waiting_for_room -= 1;
                r.map_err(GetError::Wait)?;
                Ok(None)
            }
            Step::WaitQueue(shared) => {
                shared.waiting.set(shared.waiting.get() + 1);
                let r = self.queue.notified();
                shared.waiting.set(shared.waiting.get() - 1);
                r.map_err(GetError::Wait)?;
                Ok(None)
            }
            Step::WaitSpawn(shared, ticket) => self.wait_spawn(&shared, &ticket),
        }
    }

    /// Takes worker (`p`, `id`) for the caller, or `None` when it left the
    /// pool while its caller was being woken (the caller starts over).
    fn claim(&self, p: usize, id: u64) -> Option<Checkout<S::Worker>> {
        self.with_state(|st| {
            if !st.live(p, id) {
                return None;
            }
            let x = st.proc_mut(p);
            x.last_used = clock::now();
            Some((p, id, x.worker.clone()))
        })
    }

    /// Waits for the spawn `ticket`'s caller started: its first worker
    /// (checked out for the caller), its error, or `None` when the group
    /// left the pool otherwise (the caller starts over).
    fn wait_spawn(
        &self,
        shared: &GroupShared,
        ticket: &Ticket<S::Error>,
    ) -> Result<Option<(usize, u64)>, GetError<S::Error>> {
        shared.waiting.set(shared.waiting.get() + 1);
        let r = loop {
            if let Some(got) = ticket.got.get() {
                break Ok(Some(got));
            }
            if let Some(e) = ticket.error.borrow_mut().take() {
                break Err(GetError::Spawn(e));
            }
            if shared.detached.get() {
                break Ok(None);
            }
            if let Err(e) = self.queue.notified() {
                break Err(GetError::Wait(e));
            }
        };
        shared.waiting.set(shared.waiting.get() - 1);
        ticket.gone.set(true);
        if r.is_err() {
            // A worker handed over as the wait was cut short goes back.
            if let Some((p, id)) = ticket.got.take() {
                let limit = self.config.session_limit;
                self.with_state(|st| {
                    if st.live(p, id) {
                        st.give_back(p, clock::now(), limit);
                    }
                });
            }
        }
        r
    }
}
