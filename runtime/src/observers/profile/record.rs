//! The recording: which account the runtime's OS thread is working for at
//! each moment, and what each account has been charged.
//!
//! # Design
//!
//! At every *boundary* (a resume begins or ends, the loop starts or stops
//! waiting in the poller, a region is entered or left) the recorder reads a
//! [`Sample`] (tick clock and `getrusage`) and charges the difference from
//! the previous sample to the account that was current, then makes the next
//! account current. Every moment between two samples is charged to exactly
//! one account, so the accounts add up to the interval's wall time exactly,
//! and their usage to the thread's usage over the interval.
//!
//! Accounts ([`Key`]): a green thread's region (the innermost open one), else
//! the thread itself by name; `<wait>` while the loop blocks in the poller;
//! `<scheduler>` for the rest of the loop (timers, non-blocking polls, the
//! ready queue, the samples themselves).
//!
//! Region stacks are kept here, by thread id, not in the task: the profiler
//! costs the runtime nothing while it is off.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::usage::{self, Sample, Usage};
use super::{Entry, Kind, Profile, Warning};
use crate::kernel::clock;
use crate::kernel::sched::Scheduler;
use crate::kernel::task::Task;

/// An account time is charged to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Key {
    /// Green threads of this name (`None`: unnamed ones).
    Thread(Option<Arc<str>>),
    /// A region of this name, in any thread.
    Region(&'static str),
    /// The loop blocked in the poller.
    Wait,
    /// The rest of the scheduler loop.
    Scheduler,
}

/// What one account has been charged.
#[derive(Debug, Clone, Copy, Default)]
struct Counts {
    calls: u64,
    ticks: u64,
    usage: Usage,
}

/// One profiled interval in progress.
struct Recording {
    /// Tells region guards of an earlier recording from this one's.
    epoch: u64,
    start: Sample,
    start_wall: SystemTime,
    /// The previous boundary.
    last: Sample,
    /// Charged with the time since `last`.
    current: Key,
    entries: HashMap<Key, Counts>,
    /// Open regions per thread id, innermost last; no empty vectors.
    regions: HashMap<u64, Vec<&'static str>>,
}

impl Recording {
    /// The boundary: charges the time since the last one to the current
    /// account and makes `next` current.
    fn switch(&mut self, next: Key) {
        let now = usage::sample();
        let prev = std::mem::replace(&mut self.current, next);
        let c = self.entries.entry(prev).or_default();
        c.ticks += now.ticks.saturating_sub(self.last.ticks);
        c.usage += now.usage - self.last.usage;
        self.last = now;
    }

    fn call(&mut self, k: Key) {
        self.entries.entry(k).or_default().calls += 1;
    }

    /// The account of `task` when it runs.
    fn key_of(&self, task: &Task) -> Key {
        match self.regions.get(&task.id).and_then(|v| v.last()) {
            Some(r) => Key::Region(r),
            None => Key::Thread(task.name.clone()),
        }
    }

    /// The interval up to the last boundary, as a [`Profile`].
    fn profile(
        &self,
        threshold: Option<Duration>,
        recent: Vec<crate::observers::latency::LatencyWarning>,
    ) -> Profile {
        let ticks = self.last.ticks.saturating_sub(self.start.ticks);
        let wall = clock::ticks_to_duration(ticks);
        let mut entries: Vec<Entry> = self
            .entries
            .iter()
            .map(|(k, c)| {
                let (kind, name) = match k {
                    Key::Thread(n) => (Kind::Thread, n.as_deref().unwrap_or("<unnamed>").into()),
                    Key::Region(n) => (Kind::Region, (*n).into()),
                    Key::Wait => (Kind::Wait, "<wait>".into()),
                    Key::Scheduler => (Kind::Scheduler, "<scheduler>".into()),
                };
                Entry {
                    kind,
                    name,
                    calls: c.calls,
                    wall: clock::ticks_to_duration(c.ticks),
                    usage: c.usage,
                }
            })
            .collect();
        entries.sort_by(|a, b| b.wall.cmp(&a.wall).then_with(|| a.name.cmp(&b.name)));
        let (from, to) = (self.start.ticks, self.last.ticks);
        let latency_warnings = recent
            .into_iter()
            .filter(|w| {
                let begin = w.started.ticks();
                let end = (w.started + w.ran).ticks();
                begin <= to && end >= from
            })
            .map(|w| Warning {
                thread: w.thread,
                name: w.name,
                started: w.started_wall,
                ran: w.ran,
                running: w.running,
            })
            .collect();
        Profile {
            program: program_name(),
            pid: std::process::id(),
            start: self.start_wall,
            wall,
            latency_threshold: threshold,
            usage: self.last.usage - self.start.usage,
            entries,
            latency_warnings,
            timeline: Vec::new(),
        }
    }
}

fn program_name() -> String {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_default()
}

/// The profiler of one runtime; a field of its scheduler.
#[derive(Default)]
pub(crate) struct Profiler {
    /// A recording is in progress. The switch path reads only this.
    pub(crate) on: Cell<bool>,
    rec: RefCell<Option<Recording>>,
    epoch: Cell<u64>,
}

impl Profiler {
    pub(crate) fn start(&self, caller: &Task) -> bool {
        let mut rec = self.rec.borrow_mut();
        if rec.is_some() {
            return false;
        }
        let epoch = self.epoch.get() + 1;
        self.epoch.set(epoch);
        let now = usage::sample();
        let mut r = Recording {
            epoch,
            start: now,
            start_wall: SystemTime::now(),
            last: now,
            current: Key::Thread(caller.name.clone()),
            entries: HashMap::new(),
            regions: HashMap::new(),
        };
        r.call(r.current.clone());
        *rec = Some(r);
        self.on.set(true);
        true
    }

    /// Ends the recording at this boundary and returns it.
    pub(crate) fn stop(&self, s: &Scheduler) -> Option<Profile> {
        let r = self.rec.borrow_mut().take()?;
        self.on.set(false);
        let mut p = finish(r, s);
        p.timeline = crate::observers::flight::timeline(s, p.start);
        Some(p)
    }

    /// The recording so far; it goes on.
    pub(crate) fn snapshot(&self, s: &Scheduler) -> Option<Profile> {
        let mut rec = self.rec.borrow_mut();
        let r = rec.as_mut()?;
        let cur = r.current.clone();
        r.switch(cur);
        let (threshold, recent) = warnings(s);
        let mut p = r.profile(threshold, recent);
        drop(rec);
        p.timeline = crate::observers::flight::timeline(s, p.start);
        Some(p)
    }

    fn with<R>(&self, f: impl FnOnce(&mut Recording) -> R) -> Option<R> {
        self.rec.borrow_mut().as_mut().map(f)
    }
}

fn finish(mut r: Recording, s: &Scheduler) -> Profile {
    let cur = r.current.clone();
    r.switch(cur);
    let (threshold, recent) = warnings(s);
    r.profile(threshold, recent)
}

fn warnings(
    s: &Scheduler,
) -> (
    Option<Duration>,
    Vec<crate::observers::latency::LatencyWarning>,
) {
    let recent = s.observers.watchdog.as_ref().map_or_else(Vec::new, |w| {
        w.shared
            .recent
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .to_vec()
    });
    (s.config.latency_warning, recent)
}

/// `Scheduler::resume` while profiling: the resume with a boundary on each
/// side. No borrow of the recording is held while the thread runs (it may
/// enter regions or stop the profiler).
#[cold]
#[inline(never)]
pub(crate) fn resume(s: &Scheduler, task: Rc<Task>) {
    s.observers.profiler.with(|r| {
        r.call(Key::Thread(task.name.clone()));
        let k = r.key_of(&task);
        r.switch(k);
    });
    s.resume_plain(task);
    s.observers.profiler.with(|r| r.switch(Key::Scheduler));
}

/// Runs the loop's poll; a poll that may block is charged to `<wait>`.
#[inline]
pub(crate) fn around_poll<R>(s: &Scheduler, may_block: bool, poll: impl FnOnce() -> R) -> R {
    if !may_block || !s.observers.profiler.on.get() {
        return poll();
    }
    s.observers.profiler.with(|r| {
        r.call(Key::Wait);
        r.switch(Key::Wait);
    });
    let out = poll();
    s.observers.profiler.with(|r| r.switch(Key::Scheduler));
    out
}

/// An open region of the running thread; closing it (on every path, also
/// an unwind) is a boundary back to the enclosing account.
pub(crate) struct RegionGuard {
    epoch: u64,
    /// Not `Send`: closed on the thread (and runtime) that opened it.
    _local: std::marker::PhantomData<*const ()>,
}

pub(crate) fn enter(s: &Scheduler, t: &Task, name: &'static str) -> Option<RegionGuard> {
    if !s.observers.profiler.on.get() {
        return None;
    }
    s.observers.profiler.with(|r| {
        r.regions.entry(t.id).or_default().push(name);
        r.call(Key::Region(name));
        r.switch(Key::Region(name));
        RegionGuard {
            epoch: r.epoch,
            _local: std::marker::PhantomData,
        }
    })
}

impl RegionGuard {
    pub(crate) fn exit(&self, s: &Scheduler, t: &Task) {
        s.observers.profiler.with(|r| {
            if r.epoch != self.epoch {
                return; // opened in an earlier recording
            }
            if let Some(stack) = r.regions.get_mut(&t.id) {
                stack.pop();
                if stack.is_empty() {
                    r.regions.remove(&t.id);
                }
            }
            let k = r.key_of(t);
            r.switch(k);
        });
    }
}
