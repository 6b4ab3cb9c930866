//! The queue runner's pass and the agents it starts.
//!
//! A pass (on the `PeriodicExecutor`'s thread) moves deferred messages
//! whose time has come to the ready list, starts an attempt for each ready
//! message (its unfinished recipients split by destination into jobs), and
//! starts agents where jobs wait: at most the transport's concurrency per
//! destination, no more than its jobs need. It then sets the runner's
//! interval to the next deferred message's time. An agent takes a
//! destination's jobs (a batch at a time), delivers them, reports, and
//! ends when none are left, so agents never outnumber the connections a
//! destination may have and never wait for work.

use std::rc::Rc;
use std::time::{Duration, SystemTime};

use super::{outcome, Inner};
use crate::delivery::{Detail, Job, Outcome, Status};
use crate::spool::Update;

/// The runner's longest wait when nothing is deferred.
const IDLE: Duration = Duration::from_secs(3600);

/// One pass of the runner.
pub(super) fn run_once(inner: &Inner) {
    if inner.stopping.get() {
        return;
    }
    let now = SystemTime::now();
    {
        let mut deferred = inner.deferred.borrow_mut();
        let mut ready = inner.ready.borrow_mut();
        while deferred.first().is_some_and(|(t, _)| *t <= now) {
            let (_, id) = deferred.pop_first().expect("checked");
            ready.push_back(id);
        }
    }
    let room = inner
        .settings
        .active_limit
        .saturating_sub(inner.active.get());
    let batch: Vec<String> = {
        let mut ready = inner.ready.borrow_mut();
        let n = ready.len().min(room);
        ready.drain(..n).collect()
    };
    if !batch.is_empty() {
        for id in batch {
            start_attempt(inner, &id);
        }
        for slot in 0..inner.slots.len() {
            start_agents(inner, slot);
        }
    }
    let next = inner.deferred.borrow().first().map(|(t, _)| *t);
    let wait = next
        .map_or(IDLE, |t| t.duration_since(now).unwrap_or_default())
        .clamp(Duration::from_millis(1), IDLE);
    if let Some(ex) = &*inner.runner.borrow() {
        ex.update_interval(wait);
    }
}

/// Splits `id`'s unfinished recipients into one job per destination.
fn start_attempt(inner: &Inner, id: &str) {
    let mut entries = inner.entries.borrow_mut();
    let Some(e) = entries.get_mut(id) else { return };
    if e.outstanding > 0 {
        return; // an attempt is under way (a flush raced it)
    }
    e.next_attempt = None;
    let mut jobs: Vec<(usize, Vec<usize>)> = Vec::new();
    for (i, rcpt) in e.msg.env.rcpts.iter().enumerate() {
        if e.done[i] {
            continue;
        }
        let slot = inner.slot_of[inner.router.route(rcpt)];
        match jobs.iter_mut().find(|(s, _)| *s == slot) {
            Some((_, rcpts)) => rcpts.push(i),
            None => jobs.push((slot, vec![i])),
        }
    }
    if jobs.is_empty() {
        // Every recipient finished, the journal's `done` lost in a crash.
        entries.remove(id);
        inner.spool().record(Update::Done { id: id.to_owned() });
        return;
    }
    e.outstanding = jobs.len();
    inner.active.set(inner.active.get() + 1);
    for (slot, rcpts) in jobs {
        inner.slots[slot].jobs.borrow_mut().push_back(Job {
            msg: e.msg.clone(),
            rcpts,
        });
    }
}

/// Starts agents for `slot` as its jobs need and its concurrency allows.
fn start_agents(inner: &Inner, slot: usize) {
    let s = &inner.slots[slot];
    let jobs = s.jobs.borrow().len();
    let want = jobs
        .div_ceil(s.transport.batch_limit().max(1))
        .min(s.transport.concurrency());
    while s.agents.get() < want {
        let Some(me) = inner.me.upgrade() else { return };
        s.agents.set(s.agents.get() + 1);
        let builder = coro::Builder::new().name(format!("deliver {}", s.name));
        match inner.agents.spawn_with(builder, move || agent(&me, slot)) {
            Ok(h) => {
                let t = h.thread().clone();
                inner.agent_threads.borrow_mut().insert(t.id(), t);
            }
            Err(e) => {
                s.agents.set(s.agents.get() - 1);
                log::warn!("cannot start a delivery agent for {}: {e}", s.name);
                return;
            }
        }
    }
}

/// An agent: delivers `slot`'s jobs until none are left or the queue stops.
fn agent(inner: &Rc<Inner>, slot: usize) {
    /// Counts the agent out on every path, an unwind included.
    struct Leave<'a>(&'a Inner, usize);
    impl Drop for Leave<'_> {
        fn drop(&mut self) {
            let s = &self.0.slots[self.1];
            s.agents.set(s.agents.get() - 1);
            if let Some(id) = coro::current_id() {
                self.0.agent_threads.borrow_mut().remove(&id);
            }
        }
    }
    let _leave = Leave(inner, slot);
    let s = &inner.slots[slot];
    let batch = s.transport.batch_limit().max(1);
    while !inner.stopping.get() {
        let jobs: Vec<Job> = {
            let mut q = s.jobs.borrow_mut();
            let n = q.len().min(batch);
            q.drain(..n).collect()
        };
        if jobs.is_empty() {
            return;
        }
        let now = SystemTime::now();
        let started = coro::clock::now();
        let suspended = s
            .suspended
            .borrow()
            .clone()
            .filter(|(until, _)| *until > now);
        let outcomes = match suspended {
            Some((_, why)) => jobs
                .iter()
                .map(|j| {
                    let d =
                        Detail::local("4.4.1", format!("delivery temporarily suspended: {why}"));
                    Outcome::all("none", j, Status::Deferred(d))
                })
                .collect(),
            None => s.transport.deliver(&jobs),
        };
        if let Some(o) = outcomes.iter().find(|o| o.dest_failed) {
            suspend(inner, slot, o);
        }
        outcome::report(inner, &jobs, outcomes, (now, started.elapsed()));
    }
}

/// Suspends a destination that could not be reached, until a first
/// retry would be due.
fn suspend(inner: &Inner, slot: usize, o: &Outcome) {
    let s = &inner.slots[slot];
    let why = o
        .rcpts
        .first()
        .map(|st| st.detail().text.clone())
        .unwrap_or_default();
    let pause = inner.settings.minimal_backoff_time;
    let mut suspended = s.suspended.borrow_mut();
    if suspended
        .as_ref()
        .is_some_and(|(t, _)| *t > SystemTime::now())
    {
        return;
    }
    log::warn!(
        "{}: delivery suspended for {pause:?}: {why}; mail for it is deferred meanwhile",
        s.name
    );
    *suspended = Some((SystemTime::now() + pause, why));
}
