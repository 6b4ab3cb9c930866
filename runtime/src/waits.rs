//! Who waits on whom: the objects parked threads wait on ([`WaitTarget`]),
//! who holds them, the waits-for graph's cycles ([`deadlocks`]) and the
//! threads that can never be handed what they wait for ([`leaks`]).
//!
//! # Design
//!
//! A primitive that can be *held* (a lock, a thread being joined) keeps a
//! [`WaitTarget`]: an `Rc` it makes when a thread first has to wait on it,
//! with a kind, an id and the id of the green thread holding it, which the
//! primitive updates when ownership changes hands while threads wait. A
//! thread parks on it with [`park_on`](crate::park_on), which records the
//! target, the caller and the park's start (the scheduler's last look at
//! the clock: no clock read on the park path) in the task until the park
//! ends. Nothing runs while nobody waits, and nothing is looked at until
//! someone asks ([`threads`](crate::threads), [`deadlocks`]), so the cost on
//! the blocking path is an `Rc` clone and a few stores.
//!
//! The waits-for graph has an edge from each parked thread to the holder of
//! what it waits on (a lock's owner, a joined thread). Each thread waits on
//! one thing, so every cycle is found by walking from each thread.
//!
//! # What counts as leaked
//!
//! A parked thread is *leaked* when what it waits for can never be handed
//! to it. The runtime says so only where it can know it, so a report is
//! never false:
//!
//! * it waits on a lock whose holder thread has **finished** without
//!   releasing it (a guard that was `mem::forget`-ten or leaked in an `Rc`
//!   cycle);
//! * it waits on a lock held by, or joins, a thread that is itself leaked;
//! * **nothing in the runtime can ever run again** (`asleep`): no thread is
//!   runnable, no timer or deadline is pending, no I/O source has a waiter,
//!   no blocking job is awaited, and no `Handle`, `RemoteWaker` or
//!   `block_on` waker exists for another OS thread to wake it with. Then
//!   every parked thread is leaked, whatever it waits on. This is how a
//!   receiver whose senders can never be used is found (it keeps its own
//!   last sender, they were `mem::forget`-ten, or the threads holding them
//!   are parked for good), as Go's "all goroutines are asleep"; the runtime
//!   then stops with a deadlock panic (see `asleep` for why).
//!
//! The first two hold only for parks without a deadline (inside
//! `with_timeout`, a cancel scope with a deadline): the deadline ends the
//! wait. They are checked when a thread finishes, the third where the loop
//! is about to block with no timer pending. Each leaked park is reported
//! once at WARN (target `coro::leak`: thread, call, caller, reason),
//! counted in [`Stats::leaked`](crate::Stats) and listed by [`leaks`].
//!
//! What is *not* detected, and why: while anything else in the runtime can
//! still happen, a thread parked on a channel, a `Condvar`, an `Event` or
//! a semaphore can be woken by any thread that still holds a handle to it,
//! and which threads hold one is a question of reachability that only a
//! tracing collector answers (Go's goroutine-leak profile asks its GC). So
//! a receiver that holds its own last sender is reported only when the
//! whole runtime is asleep; in a server that goes on serving (or keeps a
//! timer, a back door, a `Handle`) it waits unreported, and `deadlocks` and
//! the waits in `threads` show it parked on `Receiver::recv`, with how
//! long it has waited. When the last *other* handle really goes (a
//! channel's last sender drops), coro-sync wakes the waiter with
//! `Disconnected`, so that thread is not leaked either. A lock guard handed
//! to another green thread still names the thread that locked: if that
//! thread finishes, the waiters are reported although the new owner may
//! unlock.

use std::cell::Cell;
use std::panic::Location;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::clock::{self, Instant};
use crate::context;
use crate::sched::Scheduler;
use crate::task::{Task, ThreadState};

/// Ids of wait targets: unique per process.
static NEXT_TARGET_ID: AtomicU64 = AtomicU64::new(1);

/// An object green threads park on and another thread can hold: a lock, a
/// queue, a thread being joined. [`threads`](crate::threads) shows it as
/// what a thread waits on, [`deadlocks`] and [`leaks`] follow its holder.
///
/// Primitives make one (an `Rc`, shared with the threads parked on it) when
/// a thread first waits, keep its holder up to date while threads wait,
/// and park with [`park_on`](crate::park_on).
///
/// # Examples
///
/// ```
/// coro::run(|| {
///     let t = coro::WaitTarget::new("Mutex");
///     assert_eq!(t.holder(), None);
///     t.set_holder(coro::current_id().unwrap());
///     assert_eq!(t.holder(), coro::current_id());
/// });
/// ```
#[derive(Debug)]
pub struct WaitTarget {
    id: u64,
    kind: &'static str,
    /// The green thread holding it (0: none, or not known).
    holder: Cell<u64>,
}

impl WaitTarget {
    /// A target of this kind (`"Mutex"`, `"RwLock"`, ...), held by nobody.
    pub fn new(kind: &'static str) -> Rc<WaitTarget> {
        Rc::new(WaitTarget {
            id: NEXT_TARGET_ID.fetch_add(1, Ordering::Relaxed),
            kind,
            holder: Cell::new(0),
        })
    }

    /// Its id, unique in the process.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Its kind.
    pub fn kind(&self) -> &'static str {
        self.kind
    }

    /// Records the green thread (by [`Coro::id`](crate::Coro::id)) that
    /// holds it now; 0 for nobody.
    pub fn set_holder(&self, thread: u64) {
        self.holder.set(thread);
    }

    /// The green thread holding it, if any.
    pub fn holder(&self) -> Option<u64> {
        Some(self.holder.get()).filter(|&h| h != 0)
    }
}

/// What a parked green thread waits on: part of
/// [`ThreadInfo`](crate::ThreadInfo).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct WaitInfo {
    /// The call it is parked in (`"Mutex::lock"`, `"join"`, `"sleep"`).
    pub call: &'static str,
    /// The kind of object (`"Mutex"`, `"thread"`), or `""` when the park
    /// names no object.
    pub kind: &'static str,
    /// The object's id ([`WaitTarget::id`]; for a join, the joined
    /// thread's id); 0 when the park names no object.
    pub object: u64,
    /// The green thread holding the object, if known.
    pub holder: Option<u64>,
    /// That thread's name, if it has one (and is alive).
    pub holder_name: Option<String>,
    /// How long it has waited, to the scheduler's last look at the clock.
    pub waited: Duration,
    /// Where the blocking call was made (`file:line:column`), if known.
    pub site: Option<&'static Location<'static>>,
}

/// The waits of a parked task, for [`threads`](crate::threads).
pub(crate) fn wait_info(s: &Scheduler, t: &Task) -> Option<WaitInfo> {
    if t.state.get() != ThreadState::Parked {
        return None;
    }
    let (kind, object, holder) = edge(t);
    let holder_name = holder.and_then(|h| {
        s.tasks
            .borrow()
            .iter()
            .find(|(_, x)| x.id == h)
            .and_then(|(_, x)| x.name.as_deref().map(str::to_owned))
    });
    let since = t.wait_since.get();
    Some(WaitInfo {
        call: t.waiting_on.get(),
        kind,
        object,
        holder,
        holder_name,
        waited: clock::now().duration_since(Instant::from_ticks(since)),
        site: t.wait_site.get(),
    })
}

/// The object a parked task waits on and its holder: (kind, object id,
/// holder).
fn edge(t: &Task) -> (&'static str, u64, Option<u64>) {
    let j = t.tail.wait_thread.get();
    if j != 0 {
        return ("thread", j, Some(j));
    }
    let target = t.tail.wait_target.take();
    let r = match &target {
        Some(x) => (x.kind, x.id, x.holder()),
        None => ("", 0, None),
    };
    t.tail.wait_target.set(target);
    r
}

/// One thread of a deadlock cycle.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct BlockedThread {
    /// Its id.
    pub id: u64,
    /// Its name, if it has one.
    pub name: Option<String>,
    /// The call it is parked in.
    pub call: &'static str,
    /// Where that call was made, if known.
    pub site: Option<&'static Location<'static>>,
    /// The kind of object it waits on.
    pub kind: &'static str,
    /// The object's id.
    pub object: u64,
    /// The thread holding it: the next thread of the cycle.
    pub holder: u64,
    /// How long it has waited.
    pub waited: Duration,
}

/// A cycle of the waits-for graph: each thread waits on something the next
/// one holds, and the last on something the first holds.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Deadlock {
    /// The threads, starting from the lowest id.
    pub threads: Vec<BlockedThread>,
}

impl std::fmt::Display for Deadlock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "deadlock of {} green threads:", self.threads.len())?;
        for t in &self.threads {
            write!(
                f,
                " #{} '{}' waits in {}",
                t.id,
                t.name.as_deref().unwrap_or("<unnamed>"),
                t.call
            )?;
            if let Some(site) = t.site {
                write!(f, " at {site}")?;
            }
            write!(
                f,
                " for {} {} held by #{} ({:.3} s);",
                t.kind,
                t.object,
                t.holder,
                t.waited.as_secs_f64()
            )?;
        }
        Ok(())
    }
}

/// The deadlocks of the current runtime: the cycles of its waits-for graph
/// (a thread parked on a lock points to the lock's holder, a thread parked
/// in `join` to the thread it joins).
///
/// # Panics
///
/// Outside a runtime.
///
/// # Examples
///
/// ```
/// coro::run(|| assert!(coro::deadlocks().is_empty()));
/// ```
pub fn deadlocks() -> Vec<Deadlock> {
    context::with_sched("coro::deadlocks", find_cycles)
}

/// The cycles of `s`'s waits-for graph.
pub(crate) fn find_cycles(s: &Scheduler) -> Vec<Deadlock> {
    let tasks = s.tasks.borrow();
    let mut edges: std::collections::HashMap<u64, (&Task, u64)> = Default::default();
    for (_, t) in tasks.iter() {
        if t.state.get() != ThreadState::Parked {
            continue;
        }
        if let (_, _, Some(h)) = edge(t) {
            edges.insert(t.id, (&**t, h));
        }
    }
    let mut ids: Vec<u64> = edges.keys().copied().collect();
    ids.sort_unstable();
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    for &start in &ids {
        // Walk at most |edges| steps; a cycle through `start` returns to it.
        let mut path = vec![start];
        let mut cur = start;
        let mut cycle = false;
        while let Some(&(_, next)) = edges.get(&cur) {
            if next == start {
                cycle = true;
                break;
            }
            if path.len() > edges.len() || path.contains(&next) {
                break;
            }
            path.push(next);
            cur = next;
        }
        // Report each cycle once, from its lowest id.
        if !cycle || path.iter().any(|&p| p < start) || !seen.insert(start) {
            continue;
        }
        let now = clock::now();
        let threads = path
            .iter()
            .map(|id| {
                let (t, holder) = edges[id];
                let (kind, object, _) = edge(t);
                BlockedThread {
                    id: t.id,
                    name: t.name.as_deref().map(str::to_owned),
                    call: t.waiting_on.get(),
                    site: t.wait_site.get(),
                    kind,
                    object,
                    holder,
                    waited: now.duration_since(Instant::from_ticks(t.wait_since.get())),
                }
            })
            .collect();
        out.push(Deadlock { threads });
    }
    out
}

/// The periodic deadlock check ([`RuntimeBuilder::deadlock_check`]): logs
/// each cycle not reported before at ERROR. Runs from the scheduler loop.
///
/// [`RuntimeBuilder::deadlock_check`]: crate::RuntimeBuilder::deadlock_check
pub(crate) fn periodic_check(s: &Scheduler) {
    let found = find_cycles(s);
    let mut reported = s.waits.reported_cycles.borrow_mut();
    let keys: Vec<Vec<(u64, u64)>> = found
        .iter()
        .map(|d| d.threads.iter().map(|t| (t.id, t.object)).collect())
        .collect();
    for (d, key) in found.iter().zip(&keys) {
        if !reported.contains(key) {
            log::error!(target: "coro::deadlock", "{d}");
        }
    }
    *reported = keys;
}

/// A green thread reported as leaked.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LeakedThread {
    /// Its id.
    pub id: u64,
    /// Its name, if it has one.
    pub name: Option<String>,
    /// The call it is parked in.
    pub call: &'static str,
    /// Where that call was made, if known.
    pub site: Option<&'static Location<'static>>,
    /// Why it can never be handed what it waits for.
    pub reason: String,
    /// How long it has waited.
    pub waited: Duration,
}

/// Per-runtime state of this module.
#[derive(Default)]
pub(crate) struct Waits {
    /// The cycles the periodic check reported last time (thread, object).
    reported_cycles: std::cell::RefCell<Vec<Vec<(u64, u64)>>>,
    /// Parks reported as leaked since the runtime started.
    pub(crate) leaked: Cell<u64>,
    /// Ticks of the next periodic deadlock check (0: not scheduled).
    pub(crate) next_check: Cell<u64>,
    /// Threads parked now on a [`WaitTarget`] that had a holder when they
    /// parked (a lock): when there are none, a finishing thread cannot
    /// leave one leaked and the O(threads) check is skipped (threads
    /// parked on channels, condvars or events do not count).
    pub(crate) parked_on_held: Cell<usize>,
    /// The parks (thread id, park generation) found with nothing left in
    /// the runtime to wake them (see `asleep`).
    pub(crate) asleep: std::cell::RefCell<Vec<(u64, u64)>>,
}

impl Waits {
    /// Forgets what a run's threads left here once they are all gone
    /// (counters of the runtime's whole life stay): a thread leaked at
    /// shutdown never returns from its park to count itself out of
    /// `parked_on_held`, and the parks and cycles reported name threads
    /// that no longer exist.
    pub(crate) fn end_of_run(&self) {
        self.parked_on_held.set(0);
        self.asleep.borrow_mut().clear();
        self.reported_cycles.borrow_mut().clear();
        self.next_check.set(0);
    }
}

/// Why `t` is leaked given the leaked threads known so far, if it is.
fn leak_reason(t: &Task, gone: u64, leaked: &[u64]) -> Option<String> {
    if t.state.get() != ThreadState::Parked || t.leaked.get() || has_deadline(t) {
        return None;
    }
    let (kind, object, holder) = edge(t);
    let h = holder?;
    if kind == "thread" {
        return leaked
            .contains(&h)
            .then(|| format!("it joins #{h}, which is leaked"));
    }
    if h == gone {
        Some(format!(
            "{kind} {object} is held by #{h}, which finished without releasing it"
        ))
    } else if leaked.contains(&h) {
        Some(format!("{kind} {object} is held by #{h}, which is leaked"))
    } else {
        None
    }
}

/// Whether a deadline will end `t`'s park (a timer of one of its scopes).
fn has_deadline(t: &Task) -> bool {
    t.cancel.scopes.borrow().iter().any(|s| s.armed.is_some())
}

/// Thread `gone` finished: reports the threads that waited on what it held
/// (and, in turn, on what those hold) as leaked.
pub(crate) fn thread_finished(s: &Scheduler, gone: u64) {
    let tasks = s.tasks.borrow();
    let mut leaked: Vec<u64> = Vec::new();
    loop {
        let mut more = false;
        for (_, t) in tasks.iter() {
            if let Some(reason) = leak_reason(t, gone, &leaked) {
                leaked.push(t.id);
                more = true;
                report_leaked(
                    s,
                    t,
                    &reason,
                    "only an interrupt, a deadline or shutdown can end its wait",
                );
            }
        }
        if !more {
            return;
        }
    }
}

/// Marks the parked `t` leaked for this park, counts it, and reports it at
/// WARN (target `coro::leak`): `reason` says why, `end` what can still end
/// the wait. A logger that panics is not let through the scheduler.
pub(crate) fn report_leaked(s: &Scheduler, t: &Task, reason: &str, end: &str) {
    t.leaked.set(true);
    s.waits.leaked.set(s.waits.leaked.get() + 1);
    crate::panic_hook::caught(|| {
        log::warn!(
            target: "coro::leak",
            "green thread #{} '{}' is leaked: parked in {}{} and {reason}; {end}",
            t.id,
            t.display_name(),
            t.waiting_on.get(),
            site_suffix(t),
        )
    });
}

/// `" at file:line:col"` for the caller of `t`'s blocking call, or `""`.
pub(crate) fn site_suffix(t: &Task) -> String {
    t.wait_site
        .get()
        .map(|l| format!(" at {l}"))
        .unwrap_or_default()
}

/// The green threads of the current runtime reported as leaked and still
/// parked in the park that was reported.
///
/// # What counts as leaked
///
/// A parked thread is *leaked* when what it waits for can never be handed
/// to it. The runtime says so only where it can know it, so a report is
/// never false:
///
/// * it waits on a lock whose holder thread has **finished** without
///   releasing it (a guard that was `mem::forget`-ten or leaked in an `Rc`
///   cycle);
/// * it waits on a lock held by, or joins, a thread that is itself leaked;
/// * **nothing in the runtime can ever run again**: no thread is runnable,
///   no timer or deadline is pending, no socket, signal or other I/O
///   source has a thread waiting on it, no blocking job is awaited, and no
///   [`Handle`](crate::Handle), [`RemoteWaker`](crate::RemoteWaker) or
///   `future::block_on` waker exists (another OS thread could wake a
///   thread with one). Then every parked thread is leaked, whatever it
///   waits on: a receiver that keeps its own channel's last sender (the
///   classic `for x in rx` without `drop(tx)`), or whose senders were
///   forgotten or are held by threads parked for good, is found this way,
///   as Go's "all goroutines are asleep - deadlock!".
///
/// The first two hold only for parks without a deadline (inside
/// `with_timeout`, a cancel scope with a deadline). Each leaked park is
/// reported once at WARN (target `coro::leak`: thread, call, caller,
/// reason) and counted in [`Stats::leaked`](crate::Stats); the first two
/// when the holder finishes, the third when the loop is about to block
/// with no timer pending. After the third the runtime cannot go on: it
/// panics with `coro: deadlock: ...` naming the threads, out of
/// `block_on` once shutdown has stopped them (`on_shutdown` hooks run
/// first and still see them here).
///
/// Not detected: while anything else can still happen in the runtime, a
/// thread parked on a channel, a `Condvar`, an `Event` or a semaphore can
/// be woken by any thread that still holds a handle, and which threads
/// hold one is a question of reachability that only a tracing collector
/// answers (Go's goroutine-leak profile asks its GC). So a receiver that
/// keeps its own last sender in a server that goes on serving (or keeps a
/// timer, a back door, a `Handle`) waits unreported;
/// [`threads`](crate::threads) shows how long it has waited in
/// `Receiver::recv`. When the last other handle really goes (a channel's
/// last sender drops), coro-sync wakes the waiter with `Disconnected`
/// instead. A lock guard handed to another green thread still names the
/// thread that locked: if that one finishes, the waiters are reported
/// although the guard's new owner may still unlock.
///
/// # Panics
///
/// Outside a runtime.
pub fn leaks() -> Vec<LeakedThread> {
    context::with_sched("coro::leaks", |s| {
        let now = clock::now();
        let mut v: Vec<LeakedThread> = s
            .tasks
            .borrow()
            .iter()
            .filter(|(_, t)| t.leaked.get() && t.state.get() == ThreadState::Parked)
            .map(|(_, t)| {
                let (kind, object, holder) = edge(t);
                let h = holder.unwrap_or(0);
                let asleep = s.waits.asleep.borrow().contains(&(t.id, t.park_gen.get()));
                LeakedThread {
                    id: t.id,
                    name: t.name.as_deref().map(str::to_owned),
                    call: t.waiting_on.get(),
                    site: t.wait_site.get(),
                    reason: if asleep {
                        crate::asleep::REASON.to_owned()
                    } else if kind == "thread" {
                        format!("joins #{h}, which is leaked")
                    } else {
                        format!("{kind} {object} is held by #{h}, which is gone or leaked")
                    },
                    waited: now.duration_since(Instant::from_ticks(t.wait_since.get())),
                }
            })
            .collect();
        v.sort_by_key(|t| t.id);
        v
    })
}
