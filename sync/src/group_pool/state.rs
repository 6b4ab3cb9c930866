//! The group pool's data structures and the document's non-blocking steps:
//! `detach_without_lock`, `detach_group_without_lock`, the inactive-worker
//! checkout, `session_has_been_closed`, the cleaner's pass, the keys'
//! runs of failed spawns, and the invariants (checked after every
//! operation in debug builds).

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::hash::Hash;
use std::rc::Rc;
use std::time::Duration;

use coro_runtime::clock::Instant;
use coro_runtime::Coro;

use super::backoff::{Failing, SpawnBackoff};
use super::list::{Kind, Link, Linked, List, NIL};

/// What waiters of a group keep after the group leaves the pool.
pub(super) struct GroupShared {
    /// The group left the pool: its waiters start over (and may spawn).
    pub(super) detached: Cell<bool>,
    /// Callers of `get` waiting for this group (bounded by `max_queue`).
    pub(super) waiting: Cell<usize>,
}

/// The caller that started a group's spawn and waits for it: the spawn's
/// first worker is handed to it (already checked out), or its error.
pub(super) struct Ticket<E> {
    /// The worker checked out for the caller: (slab key, id).
    pub(super) got: Cell<Option<(usize, u64)>>,
    /// The spawn's error.
    pub(super) error: RefCell<Option<Rc<E>>>,
    /// The caller stopped waiting (interrupted): hand it nothing.
    pub(super) gone: Cell<bool>,
}

impl<E> Default for Ticket<E> {
    fn default() -> Self {
        Ticket {
            got: Cell::new(None),
            error: RefCell::new(None),
            gone: Cell::new(false),
        }
    }
}

/// A worker in the pool (the document's `ProcessInfo`).
pub(super) struct Proc<W> {
    pub(super) id: u64,
    /// Slab key of its group.
    pub(super) group: usize,
    pub(super) worker: Rc<W>,
    pub(super) sessions: usize,
    pub(super) processed: u64,
    pub(super) last_used: Instant,
    pub(super) start_time: Instant,
    group_link: Link,
    inactive_link: Link,
}

impl<W> Linked for Proc<W> {
    fn link(&mut self, kind: Kind) -> &mut Link {
        match kind {
            Kind::Group => &mut self.group_link,
            Kind::Inactive => &mut self.inactive_link,
        }
    }
    fn link_ref(&self, kind: Kind) -> &Link {
        match kind {
            Kind::Group => &self.group_link,
            Kind::Inactive => &self.inactive_link,
        }
    }
}

/// A group of workers for one key (the document's `Group`).
pub(super) struct Group<K, E> {
    pub(super) key: K,
    /// Inactive workers first, then active ones.
    pub(super) procs: List,
    pub(super) spawning: bool,
    pub(super) spawner: Option<Coro>,
    pub(super) max_requests: u64,
    pub(super) min_processes: usize,
    pub(super) shared: Rc<GroupShared>,
    /// The caller waiting for the spawn in flight, until its first worker
    /// or its error.
    pub(super) owner: Option<Rc<Ticket<E>>>,
}

/// Everything behind the pool's (implicit) lock: in a cooperative runtime a
/// critical section is code that does not block, so the state is a
/// `RefCell` borrowed only between blocking calls.
pub(super) struct State<K, W, E> {
    pub(super) groups: HashMap<K, usize>,
    pub(super) gslab: Vec<Option<Group<K, E>>>,
    gfree: Vec<usize>,
    pub(super) procs: Vec<Option<Proc<W>>>,
    pfree: Vec<usize>,
    next_id: u64,
    /// Workers with no session, least recently used first.
    pub(super) inactive: List,
    /// Workers in the pool (sum of the groups' sizes).
    pub(super) count: usize,
    /// Workers with at least one session.
    pub(super) active: usize,
    /// Spawns in flight (they count towards `max`).
    pub(super) spawning: usize,
    pub(super) max: usize,
    pub(super) max_per_app: usize,
    pub(super) max_idle_time: Duration,
    /// Callers waiting for a new group to become creatable.
    pub(super) waiting_for_room: usize,
    /// Keys whose last spawns failed.
    pub(super) failing: HashMap<K, Failing<E>>,
    pub(super) backoff: SpawnBackoff,
    /// `restart.txt` modification times seen, by key.
    pub(super) restart_seen: HashMap<K, Option<std::time::SystemTime>>,
    /// Workers detached since the last `take_retired`, to shut down.
    pub(super) retired: Vec<Rc<W>>,
    /// `active` went down or `max` up: a new group may be creatable.
    pub(super) room_changed: bool,
    /// `active` or `count` changed: waiters of a group may proceed.
    pub(super) queue_changed: bool,
}

impl<K: Clone + Eq + Hash, W, E> State<K, W, E> {
    pub(super) fn new(
        max: usize,
        max_per_app: usize,
        max_idle_time: Duration,
        backoff: SpawnBackoff,
    ) -> Self {
        State {
            groups: HashMap::new(),
            gslab: Vec::new(),
            gfree: Vec::new(),
            procs: Vec::new(),
            pfree: Vec::new(),
            next_id: 1,
            inactive: List::new(Kind::Inactive),
            count: 0,
            active: 0,
            spawning: 0,
            max,
            max_per_app,
            max_idle_time,
            waiting_for_room: 0,
            failing: HashMap::new(),
            backoff,
            restart_seen: HashMap::new(),
            retired: Vec::new(),
            room_changed: false,
            queue_changed: false,
        }
    }

    pub(super) fn group(&self, g: usize) -> &Group<K, E> {
        self.gslab[g].as_ref().expect("group key is live")
    }

    pub(super) fn group_mut(&mut self, g: usize) -> &mut Group<K, E> {
        self.gslab[g].as_mut().expect("group key is live")
    }

    pub(super) fn proc(&self, p: usize) -> &Proc<W> {
        self.procs[p].as_ref().expect("worker key is live")
    }

    pub(super) fn proc_mut(&mut self, p: usize) -> &mut Proc<W> {
        self.procs[p].as_mut().expect("worker key is live")
    }

    /// The worker at key `p` if it is still the one with `id`.
    pub(super) fn live(&self, p: usize, id: u64) -> bool {
        self.procs
            .get(p)
            .and_then(Option::as_ref)
            .is_some_and(|x| x.id == id)
    }

    fn mutate_active(&mut self, value: usize) {
        if value < self.active {
            self.room_changed = true;
            self.queue_changed = true;
        }
        self.active = value;
    }

    fn mutate_count(&mut self, value: usize) {
        self.queue_changed = true;
        self.count = value;
    }

    pub(super) fn mutate_max(&mut self, value: usize) {
        if value > self.max {
            self.room_changed = true;
            self.queue_changed = true;
        }
        self.max = value;
    }

    /// The document's `spawning_allowed`, counting spawns in flight.
    pub(super) fn spawning_allowed(&self, g: usize) -> bool {
        let grp = self.group(g);
        let in_group = grp.procs.len + usize::from(grp.spawning);
        self.count + self.spawning < self.max
            && (self.max_per_app == 0 || in_group < self.max_per_app)
    }

    /// A new, empty group for `key`.
    pub(super) fn add_group(&mut self, key: K, max_requests: u64, min_processes: usize) -> usize {
        let grp = Group {
            key: key.clone(),
            procs: List::new(Kind::Group),
            spawning: false,
            spawner: None,
            max_requests,
            min_processes,
            shared: Rc::new(GroupShared {
                detached: Cell::new(false),
                waiting: Cell::new(0),
            }),
            owner: None,
        };
        let g = match self.gfree.pop() {
            Some(g) => {
                self.gslab[g] = Some(grp);
                g
            }
            None => {
                self.gslab.push(Some(grp));
                self.gslab.len() - 1
            }
        };
        self.groups.insert(key, g);
        g
    }

    /// A spawned worker joins group `g`: at the front of its list (it is
    /// inactive) and at the back of the inactive list.
    pub(super) fn add_worker(&mut self, g: usize, worker: Rc<W>, now: Instant) -> usize {
        let id = self.next_id;
        self.next_id += 1;
        let proc = Proc {
            id,
            group: g,
            worker,
            sessions: 0,
            processed: 0,
            last_used: now,
            start_time: now,
            group_link: Link::default(),
            inactive_link: Link::default(),
        };
        let p = match self.pfree.pop() {
            Some(p) => {
                self.procs[p] = Some(proc);
                p
            }
            None => {
                self.procs.push(Some(proc));
                self.procs.len() - 1
            }
        };
        let mut list = self.group(g).procs;
        list.push_front(&mut self.procs, p);
        self.group_mut(g).procs = list;
        self.inactive.push_back(&mut self.procs, p);
        self.mutate_count(self.count + 1);
        p
    }

    /// Takes the group's front worker if it is inactive (the document's
    /// first branch): it moves to the back and becomes active.
    pub(super) fn take_inactive(&mut self, g: usize) -> Option<usize> {
        let mut list = self.group(g).procs;
        let front = list.head;
        if front == NIL || self.proc(front).sessions != 0 {
            return None;
        }
        list.move_to_back(&mut self.procs, front);
        self.group_mut(g).procs = list;
        self.inactive.remove(&mut self.procs, front);
        self.mutate_active(self.active + 1);
        Some(front)
    }

    /// Checks out the inactive worker `p` for the caller its group's spawn
    /// was for: it moves to the back of its group and becomes active.
    pub(super) fn take_worker(&mut self, p: usize) {
        let g = self.proc(p).group;
        let mut list = self.group(g).procs;
        list.move_to_back(&mut self.procs, p);
        self.group_mut(g).procs = list;
        self.inactive.remove(&mut self.procs, p);
        self.proc_mut(p).sessions = 1;
        self.mutate_active(self.active + 1);
    }

    /// Undoes one checkout of worker `p` that never became a session (its
    /// caller stopped waiting): the second half of `session_closed`.
    pub(super) fn give_back(&mut self, p: usize, now: Instant, session_limit: usize) {
        let g = self.proc(p).group;
        let proc = self.proc_mut(p);
        proc.last_used = now;
        proc.sessions -= 1;
        let sessions = proc.sessions;
        if sessions == 0 {
            let mut list = self.group(g).procs;
            list.move_to_front(&mut self.procs, p);
            self.group_mut(g).procs = list;
            self.inactive.push_back(&mut self.procs, p);
            self.mutate_active(self.active - 1);
        } else if session_limit != 0 && sessions + 1 == session_limit {
            self.queue_changed = true; // room for one more session
        }
    }

    /// A spawn for `key` failed with `error`: one more in its run.
    pub(super) fn spawn_failed(&mut self, key: &K, error: Rc<E>, now: Instant) -> &Failing<E> {
        let backoff = self.backoff;
        let f = self.failing.entry(key.clone()).or_insert(Failing {
            failures: 0,
            error: error.clone(),
            last: now,
            next_try: None,
        });
        f.failures = f.failures.saturating_add(1);
        f.error = error;
        f.last = now;
        f.next_try = backoff.delay(f.failures).map(|d| now.saturating_add(d));
        f
    }

    /// `key`'s run of failures if it keeps a spawn from starting now.
    pub(super) fn in_backoff(&self, key: &K, now: Instant) -> Option<&Failing<E>> {
        self.failing.get(key).filter(|f| f.wait_left(now).is_some())
    }

    /// The document's `select_process` without a global queue: the active
    /// worker with the fewest sessions (the first of them in list order),
    /// if it takes one more; it moves to the back.
    pub(super) fn least_busy(&mut self, g: usize, session_limit: usize) -> Option<usize> {
        let mut list = self.group(g).procs;
        let best = list
            .keys(&self.procs)
            .into_iter()
            .min_by_key(|&p| self.proc(p).sessions)?;
        if session_limit != 0 && self.proc(best).sessions >= session_limit {
            return None;
        }
        list.move_to_back(&mut self.procs, best);
        self.group_mut(g).procs = list;
        Some(best)
    }

    /// Unlinks worker `p` from its group and the pool (the document's
    /// `detach_without_lock`); detaches its group if that leaves it empty.
    pub(super) fn detach_proc(&mut self, p: usize) {
        let g = self.proc(p).group;
        let mut list = self.group(g).procs;
        list.remove(&mut self.procs, p);
        self.group_mut(g).procs = list;
        self.forget_proc(p);
        if list.len == 0 {
            self.detach_group(g);
        }
    }

    /// Takes worker `p` (already off its group's list) out of the counts and
    /// the inactive list, frees its slot and queues it for shutdown.
    fn forget_proc(&mut self, p: usize) {
        if self.proc(p).sessions == 0 {
            self.inactive.remove(&mut self.procs, p);
        } else {
            self.mutate_active(self.active - 1);
        }
        self.mutate_count(self.count - 1);
        let proc = self.procs[p].take().expect("worker key is live");
        self.pfree.push(p);
        self.retired.push(proc.worker);
    }

    /// Removes group `g` and all its workers (the document's
    /// `detach_group_without_lock`); interrupts its spawner.
    pub(super) fn detach_group(&mut self, g: usize) {
        let keys = self.group(g).procs.keys(&self.procs);
        for p in keys {
            self.forget_proc(p);
        }
        let grp = self.gslab[g].take().expect("group key is live");
        self.gfree.push(g);
        if let Some(t) = &grp.spawner {
            let _ = t.interrupt();
        }
        grp.shared.detached.set(true);
        self.groups.remove(&grp.key);
        self.queue_changed = true;
    }

    /// The document's `session_has_been_closed`, for a worker still in the
    /// pool; `broken` detaches it.
    pub(super) fn session_closed(
        &mut self,
        p: usize,
        broken: bool,
        now: Instant,
        session_limit: usize,
    ) {
        let g = self.proc(p).group;
        let max_requests = self.group(g).max_requests;
        let proc = self.proc_mut(p);
        proc.processed += 1;
        if broken || (max_requests > 0 && proc.processed >= max_requests) {
            self.detach_proc(p);
            return;
        }
        self.give_back(p, now, session_limit);
    }

    /// The cleaner's pass: detaches inactive workers unused for longer than
    /// `max_idle_time`, keeping each group's `min_processes`.
    pub(super) fn clean(&mut self, now: Instant) -> usize {
        let forget = self.backoff.max.saturating_mul(2);
        self.failing.retain(|_, f| now - f.last <= forget);
        if self.max_idle_time.is_zero() {
            return 0;
        }
        let mut n = 0;
        for p in self.inactive.keys(&self.procs) {
            let Some(proc) = self.procs[p].as_ref() else {
                continue;
            };
            let g = proc.group;
            if now - proc.last_used > self.max_idle_time && self.gslab[g].is_some() {
                let grp = self.group(g);
                if grp.procs.len > grp.min_processes {
                    self.detach_proc(p);
                    n += 1;
                }
            }
        }
        n
    }

    /// Asserts every invariant of the document (adapted to spawns in flight).
    pub(super) fn check(&self) {
        let mut sum = 0;
        let mut inactive_seen = 0;
        for (key, &g) in &self.groups {
            let grp = self.group(g);
            assert!(grp.key == *key, "group map and group keys agree");
            assert!(
                !grp.shared.detached.get(),
                "a group in the map is not detached"
            );
            let keys = grp.procs.keys(&self.procs);
            assert_eq!(keys.len(), grp.procs.len, "group size == processes.size()");
            assert!(grp.procs.len <= self.count, "g.size <= count");
            assert!(
                grp.procs.len > 0 || grp.spawning,
                "an empty group is spawning"
            );
            assert!(
                grp.owner.is_none() || grp.spawning,
                "a caller waits for a group's spawn only while it runs"
            );
            let mut seen_active = false;
            for p in keys {
                let proc = self.proc(p);
                assert_eq!(
                    proc.group, g,
                    "a worker's group is the group it is listed in"
                );
                if proc.sessions > 0 {
                    seen_active = true;
                } else {
                    assert!(!seen_active, "inactive workers come before active ones");
                    inactive_seen += 1;
                }
            }
            sum += grp.procs.len;
        }
        assert_eq!(sum, self.count, "sum of group sizes == count");
        assert!(self.active <= self.count, "active <= count");
        assert_eq!(
            self.inactive.len,
            self.count - self.active,
            "inactive == count - active"
        );
        assert_eq!(
            inactive_seen, self.inactive.len,
            "sessions == 0 <=> on the inactive list"
        );
        for p in self.inactive.keys(&self.procs) {
            let proc = self.proc(p);
            assert_eq!(proc.sessions, 0, "inactive workers have no session");
            assert!(
                self.gslab[proc.group].is_some(),
                "inactive workers are reachable"
            );
        }
        let spawning_groups = self.gslab.iter().flatten().filter(|g| g.spawning).count();
        assert!(
            spawning_groups <= self.spawning,
            "every spawning group has a spawn in flight"
        );
    }
}
