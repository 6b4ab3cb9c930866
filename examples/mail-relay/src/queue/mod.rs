//! The delivery queue, Postfix's qmgr written as coro code: every message
//! the spool holds, when it is next to be tried, and the green threads
//! delivering it.
//!
//! # Green threads
//!
//! ```text
//! queue runner (a PeriodicExecutor) ── woken when a message is committed,
//! │   at the next deferred message's time, by `flush`: routes each ready
//! │   message's recipients to destinations (route.rs) as jobs, and starts
//! │   agents up to each destination's concurrency limit
//! └── agents, per destination ── take jobs, deliver them through the
//!     destination's Transport, report: log lines, journal events, bounces,
//!     the next attempt (outcome.rs)
//! ```
//!
//! # Retries
//!
//! A message with deferred recipients is tried again after an exponential
//! backoff (`[queue]`: 300 s, doubling, at most 4000 s by default); its
//! attempt count, next attempt and reason go to the spool's journal, so
//! they survive a restart. Past `maximal_queue_lifetime` it is returned to
//! the sender. A destination that cannot be connected to at all is
//! suspended until the next attempt would be due, and what is queued for
//! it meanwhile is deferred without a connection attempt each (Postfix's
//! dead destination).
//!
//! # Memory
//!
//! The queue keeps envelopes: a message's content stays in its spool
//! file, and delivery reads it from there a chunk at a time as it sends it
//! ([`crate::spool::Content`]). Only a message received whole (under
//! 64 KiB) may keep its content in memory for its first attempt, while
//! all such contents together stay within [`HOLD_LIMIT`]: a message
//! delivered at once then costs no read of the disk, and a deferral, or
//! the limit, sends it to the disk like the others. At most `active_limit`
//! messages (Postfix's `qmgr_message_active_limit`) are in attempts at
//! once. So a long outage of the upstream, or a slow one, fills the disk,
//! not the memory.
//!
//! # Stopping
//!
//! [`Queue::halt`] closes the runner (no new attempts, agents take no
//! further jobs); [`Queue::finish`] lets the agents finish the jobs in
//! hand within a deadline, then interrupts them ([`Queue::cut`]); what
//! they had not finished stays queued as it was, for the next start.

mod mailq;
mod notify;
mod outcome;
mod runner;

use std::cell::{Cell, OnceCell, RefCell};
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::rc::Rc;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use coro::sync::{PeriodicExecutor, WaitGroup};

use crate::config;
use crate::delivery::route::{Dest, Router};
use crate::delivery::{Job, Status, Transport};
use crate::spool::{Held, Queued, Spool, Stored};

pub use mailq::{format as format_mailq, Item as MailqItem};

/// The most octets of content held in memory for messages in their first
/// attempt, all of them together (see "Memory" above).
pub const HOLD_LIMIT: usize = 8 << 20;

/// The delivery queue (cheap to clone: a handle).
#[derive(Clone)]
pub struct Queue {
    inner: Rc<Inner>,
}

/// One destination: its transport and the jobs waiting for it.
struct Slot {
    /// `local` or `smtp:host:port`.
    name: String,
    transport: Rc<dyn Transport>,
    /// Jobs not yet taken by an agent, oldest first.
    jobs: RefCell<VecDeque<Job>>,
    /// Agents running for this destination.
    agents: Cell<usize>,
    /// Until when the destination is suspended, and why.
    suspended: RefCell<Option<(SystemTime, String)>>,
}

/// A message in the queue.
struct Entry {
    /// The message (its envelope; its content is in the spool).
    msg: Arc<Stored>,
    /// Per recipient: finished (sent, bounced, or dropped).
    done: Vec<bool>,
    /// Deferred attempts so far.
    attempts: u32,
    /// When it is due again, while deferred.
    next_attempt: Option<SystemTime>,
    /// Why the last attempt was deferred.
    reason: Option<String>,
    /// Jobs of the attempt under way not yet reported; 0 when none is.
    outstanding: usize,
    /// The attempt's results so far: (recipient, status).
    results: Vec<(usize, Status)>,
    /// How long its session took to receive it (`delays=` a).
    received_in: Duration,
    /// Its sender was told of its delay (once is enough).
    delay_warned: bool,
}

struct Inner {
    /// This queue, for the threads it starts.
    me: std::rc::Weak<Inner>,
    /// Where messages are, and where their fate is written.
    spool: OnceCell<Spool>,
    /// Where each recipient goes.
    router: Router,
    /// The destinations.
    slots: Vec<Slot>,
    /// A destination's index in `slots`.
    slot_of: HashMap<Dest, usize>,
    /// Retries, lifetimes, the active limit.
    settings: config::Queue,
    /// Our host name, for bounces.
    hostname: String,
    /// Every message in the queue, by id.
    entries: RefCell<HashMap<String, Entry>>,
    /// Ids to start an attempt for, in order.
    ready: RefCell<VecDeque<String>>,
    /// Deferred messages by next attempt.
    deferred: RefCell<BTreeSet<(SystemTime, String)>>,
    /// Messages in an attempt.
    active: Cell<usize>,
    /// Octets of content held in memory ([`HOLD_LIMIT`]).
    held: Arc<AtomicUsize>,
    /// The runner, once started (taken at a stop).
    runner: RefCell<Option<PeriodicExecutor>>,
    /// Every agent is a member.
    agents: WaitGroup,
    /// The agents' threads, by id, to interrupt at a stop past its deadline.
    agent_threads: RefCell<HashMap<u64, coro::Coro>>,
    /// `stop` was called: no new attempts.
    stopping: Cell<bool>,
    /// The stop's deadline passed and agents were interrupted: outcomes
    /// from now on are not taken as deferrals.
    cut: Cell<bool>,
}

impl std::fmt::Debug for Queue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queue")
            .field("messages", &self.inner.entries.borrow().len())
            .field("deferred", &self.inner.deferred.borrow().len())
            .finish_non_exhaustive()
    }
}

impl Queue {
    /// A queue routing with `router` to the transports given for each of
    /// its destinations.
    ///
    /// # Panics
    ///
    /// If a destination of the router has no transport.
    pub fn new(
        router: Router,
        transports: Vec<(Dest, Rc<dyn Transport>)>,
        settings: config::Queue,
        hostname: &str,
    ) -> Queue {
        let mut slot_of = HashMap::new();
        let slots = transports
            .into_iter()
            .enumerate()
            .map(|(i, (dest, transport))| {
                let name = dest.to_string();
                slot_of.insert(dest, i);
                Slot {
                    name,
                    transport,
                    jobs: RefCell::new(VecDeque::new()),
                    agents: Cell::new(0),
                    suspended: RefCell::new(None),
                }
            })
            .collect();
        for d in router.destinations() {
            assert!(slot_of.contains_key(&d), "no transport for {d}");
        }
        Queue {
            inner: Rc::new_cyclic(|me| Inner {
                me: me.clone(),
                spool: OnceCell::new(),
                router,
                slots,
                slot_of,
                settings,
                hostname: hostname.to_owned(),
                entries: RefCell::new(HashMap::new()),
                ready: RefCell::new(VecDeque::new()),
                deferred: RefCell::new(BTreeSet::new()),
                active: Cell::new(0),
                held: Arc::new(AtomicUsize::new(0)),
                runner: RefCell::new(None),
                agents: WaitGroup::new(),
                agent_threads: RefCell::new(HashMap::new()),
                stopping: Cell::new(false),
                cut: Cell::new(false),
            }),
        }
    }

    /// Where mail goes, for the startup line.
    pub fn describe(&self) -> String {
        let inner = &self.inner;
        let of = |d: &Dest| inner.slots[inner.slot_of[d]].transport.describe();
        match inner.router.relayhost() {
            None if inner.slot_of.contains_key(&Dest::Mx) => format!(
                "delivering to {} (local domains into {})",
                of(&Dest::Mx),
                of(&Dest::Local)
            ),
            None => format!(
                "delivering into {} (no upstream configured)",
                of(&Dest::Local)
            ),
            Some(up) if inner.router.has_local_domains() => format!(
                "relaying to {} (local domains into {})",
                of(&Dest::Smtp(up.clone())),
                of(&Dest::Local)
            ),
            Some(up) => format!("relaying to {}", of(&Dest::Smtp(up.clone()))),
        }
    }

    /// Gives the queue its spool (once, before [`start`](Queue::start)).
    ///
    /// # Panics
    ///
    /// If called twice.
    pub fn attach(&self, spool: Spool) {
        assert!(self.inner.spool.set(spool).is_ok(), "a queue has one spool");
    }

    /// Queues a committed message for an attempt at once.
    pub fn enqueue(&self, q: Queued) {
        self.restore(q);
        self.wake();
    }

    /// Queues a message found in the spool at start, with its journal
    /// state: due at once, or at its next attempt.
    pub fn restore(&self, q: Queued) {
        let inner = &self.inner;
        let Queued {
            msg,
            memory,
            state,
            received_in,
        } = q;
        // Received whole and due now: its first attempt reads it from
        // memory, if the budget has room.
        let held = memory
            .filter(|_| state.next_attempt.is_none())
            .and_then(|m| Held::new(m, &inner.held, HOLD_LIMIT));
        let msg = match held {
            Some(h) => match Arc::try_unwrap(msg) {
                Ok(mut m) => {
                    m.content = m.content.with_held(h);
                    Arc::new(m)
                }
                Err(msg) => Arc::new(Stored {
                    env: msg.env.clone(),
                    content: msg.content.with_held(h),
                }),
            },
            None => msg,
        };
        let id = msg.env.id.clone();
        let mut done = vec![false; msg.env.rcpts.len()];
        for &i in &state.done_rcpts {
            if let Some(d) = done.get_mut(i) {
                *d = true;
            }
        }
        let now = SystemTime::now();
        match state.next_attempt.filter(|&t| t > now) {
            Some(t) => {
                inner.deferred.borrow_mut().insert((t, id.clone()));
            }
            None => inner.ready.borrow_mut().push_back(id.clone()),
        }
        let e = Entry {
            msg,
            done,
            attempts: state.attempts,
            next_attempt: state.next_attempt,
            reason: state.reason,
            outstanding: 0,
            results: Vec::new(),
            received_in,
            delay_warned: state.delay_warned,
        };
        inner.entries.borrow_mut().insert(id, e);
    }

    /// Starts the queue runner.
    ///
    /// # Errors
    ///
    /// If its thread cannot start.
    ///
    /// # Panics
    ///
    /// Without a spool ([`attach`](Queue::attach)).
    pub fn start(&self) -> std::io::Result<()> {
        assert!(self.inner.spool.get().is_some(), "attach a spool first");
        let ex = PeriodicExecutor::with_owner(
            &self.inner,
            Duration::from_secs(3600),
            Duration::ZERO,
            "queue runner",
            |inner: &Inner| {
                runner::run_once(inner);
                true
            },
        );
        ex.open()?;
        *self.inner.runner.borrow_mut() = Some(ex);
        Ok(())
    }

    /// Asks the runner for a pass soon.
    fn wake(&self) {
        self.inner.wake();
    }

    /// Makes every deferred message due now and lifts destination
    /// suspensions; returns how many messages were deferred.
    pub fn flush(&self) -> usize {
        let n = self.make_due();
        log::info!(
            "flush: {} due now",
            crate::logger::count(n, "deferred message")
        );
        n
    }

    /// At start: what waited out a backoff in the last run is due now (the
    /// outage that deferred it may be what the restart was for); attempts
    /// and reasons are kept. Returns how many.
    pub fn retry_at_start(&self) -> usize {
        let n = self.make_due();
        if n > 0 {
            log::info!(
                "{} due now: a restart retries what waited",
                crate::logger::count(n, "deferred message")
            );
        }
        n
    }

    fn make_due(&self) -> usize {
        let inner = &self.inner;
        let due: Vec<(SystemTime, String)> = std::mem::take(&mut *inner.deferred.borrow_mut())
            .into_iter()
            .collect();
        let mut entries = inner.entries.borrow_mut();
        let mut ready = inner.ready.borrow_mut();
        for (_, id) in &due {
            if let Some(e) = entries.get_mut(id) {
                e.next_attempt = None;
                ready.push_back(id.clone());
            }
        }
        for s in &inner.slots {
            s.suspended.borrow_mut().take();
            s.transport.resume();
        }
        drop((entries, ready));
        self.wake();
        due.len()
    }

    /// When the oldest message in the queue arrived.
    pub fn oldest_arrival(&self) -> Option<SystemTime> {
        let entries = self.inner.entries.borrow();
        entries.values().map(|e| e.msg.env.arrival).min()
    }

    /// Messages in the queue.
    pub fn len(&self) -> usize {
        self.inner.entries.borrow().len()
    }

    /// The queue as `mailq` lists it, oldest first.
    pub fn items(&self) -> Vec<MailqItem> {
        let entries = self.inner.entries.borrow();
        let mut items: Vec<MailqItem> = entries
            .values()
            .map(|e| MailqItem {
                id: e.msg.env.id.clone(),
                size: e.msg.content.len(),
                arrival: e.msg.env.arrival,
                from: e.msg.env.from.clone(),
                rcpts: pending(&e.msg, &e.done),
                active: e.outstanding > 0,
                attempts: e.attempts,
                next_attempt: e.next_attempt,
                reason: e.reason.clone(),
            })
            .collect();
        items.sort_by(|a, b| (a.arrival, &a.id).cmp(&(b.arrival, &b.id)));
        items
    }

    /// Deliveries in flight (agents running).
    pub fn in_flight(&self) -> usize {
        self.inner.agents.len()
    }

    /// The first step of a stop: no new attempts start (the runner is
    /// closed, agents take no further jobs). Never blocks.
    pub fn halt(&self) {
        let inner = &self.inner;
        inner.stopping.set(true);
        if let Some(ex) = inner.runner.borrow_mut().take() {
            ex.close();
        }
    }

    /// The rest of a stop: lets the agents finish the jobs in hand within
    /// `deadline`, then [`cut`](Queue::cut)s them. Returns when every agent
    /// has ended.
    pub fn finish(&self, deadline: Duration) {
        let inner = &self.inner;
        self.halt();
        if !inner.agents.is_empty() {
            log::info!(
                "waiting up to {deadline:?} for {} in flight",
                crate::logger::count(inner.agents.len(), "delivery")
            );
        }
        if coro::with_timeout(deadline, || inner.agents.wait()).is_err() {
            self.cut();
        }
        let _ = inner.agents.wait();
    }

    /// Interrupts the deliveries in flight; their messages stay queued as
    /// they were before the attempt (recipients already sent stay done).
    pub fn cut(&self) {
        let inner = &self.inner;
        inner.cut.set(true);
        let threads: Vec<coro::Coro> = inner.agent_threads.borrow().values().cloned().collect();
        if !threads.is_empty() {
            log::info!(
                "cutting {} short; their messages stay queued",
                crate::logger::count(threads.len(), "delivery")
            );
        }
        for t in threads {
            let _ = t.interrupt();
        }
    }
}

impl Inner {
    /// Asks the runner for a pass soon; starts it again if something (the
    /// back door's `interrupt`) ended it while the relay runs.
    fn wake(&self) {
        if let Some(ex) = &*self.runner.borrow() {
            if !ex.is_running() && !self.stopping.get() {
                log::warn!(
                    "queue runner ended ({:?}, by the back door?): restarted, the relay needs it",
                    ex.exit()
                );
                if let Err(e) = ex.open() {
                    log::error!("queue runner: cannot start it again: {e}");
                }
            }
            ex.wake();
        }
    }

    fn spool(&self) -> &Spool {
        self.spool.get().expect("a queue is attached to its spool")
    }
}

/// The recipients of `msg` not yet finished.
fn pending(msg: &Stored, done: &[bool]) -> Vec<String> {
    msg.env
        .rcpts
        .iter()
        .zip(done)
        .filter(|(_, d)| !**d)
        .map(|(r, _)| r.clone())
        .collect()
}
