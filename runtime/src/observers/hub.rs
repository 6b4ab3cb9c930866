//! The observers as the kernel sees them: one hub that takes the kernel's
//! events (`seams::Observer`) and hands each to the observers that want
//! it: the flight recorder, the profiler, the watchdog, the wait graph and
//! its deadlock and leak reports.

use std::io;
use std::rc::Rc;
use std::sync::atomic::Ordering;

use crate::kernel::clock;
use crate::kernel::panic_hook;
use crate::kernel::sched::{Config, Scheduler};
use crate::kernel::seams::{self, Parked};
use crate::kernel::task::Task;
use crate::observers::asleep;
use crate::observers::flight::{self, Recorder};
use crate::observers::profile::{self, Profiler};
use crate::observers::waits::{self, Waits};
use crate::observers::watchdog::Watchdog;

/// Everything the observers keep for one runtime.
pub(crate) struct Hub {
    pub(crate) watchdog: Option<Watchdog>,
    pub(crate) profiler: Profiler,
    /// The flight recorder (always on).
    pub(crate) flight: Recorder,
    /// Who waits on whom: leak counts, the periodic deadlock check.
    pub(crate) waits: Waits,
}

impl seams::Observer for Hub {
    fn new(config: &Config) -> io::Result<Hub> {
        let watchdog = match config.latency_warning {
            Some(t) => Some(Watchdog::start(t)?),
            None => None,
        };
        Ok(Hub {
            watchdog,
            profiler: Profiler::default(),
            flight: Recorder::default(),
            waits: Waits::default(),
        })
    }

    #[inline(always)]
    fn brackets_resume(&self) -> bool {
        self.profiler.on.get()
    }

    fn resume(&self, s: &Scheduler, task: Rc<Task>) {
        profile::resume(s, task)
    }

    #[inline(always)]
    fn resume_begins(&self, _s: &Scheduler, task: &Task, n: u64) {
        if let Some(w) = &self.watchdog {
            w.shared.slice.store(n, Ordering::Relaxed);
            w.shared.running.store(task.id, Ordering::Relaxed);
        }
    }

    #[inline(always)]
    fn resume_ended(&self, s: &Scheduler, task: &Task, n: u64, returned: bool) {
        self.flight.resume_ended(task, n);
        if let Some(w) = &self.watchdog {
            w.shared.running.store(0, Ordering::Relaxed);
            let hog = w.shared.hog_slice.load(Ordering::Acquire);
            if hog != self.flight.hog_seen.get() {
                flight::hog(s, task, hog, n, returned);
            }
        }
    }

    #[inline(always)]
    fn left(&self, _s: &Scheduler, task: &Task, n: u64) {
        self.flight.ended(task, n);
    }

    #[inline]
    fn tag(&self, s: &Scheduler, id: u64) -> io::Result<u32> {
        Recorder::tag(s, id)
    }

    #[inline]
    fn untag(&self, s: &Scheduler, tag: u32) {
        Recorder::untag(s, tag);
    }

    #[inline]
    fn spawned(&self, s: &Scheduler, task: &Task) {
        if let (Some(w), Some(n)) = (&self.watchdog, &task.name) {
            w.shared
                .names
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(task.id, n.clone());
        }
        self.flight.spawned(flight::key(s), task);
    }

    #[inline(always)]
    fn woken(&self, s: &Scheduler, task: &Task) {
        self.flight.woken(flight::key(s), task.id);
    }

    #[inline]
    fn finished(&self, s: &Scheduler, task: &Task) {
        if s.counters.parked_on_held.get() > 0 {
            waits::thread_finished(s, task.id);
        }
        if let Some(w) = &self.watchdog {
            if task.name.is_some() {
                w.shared
                    .names
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(&task.id);
            }
            w.shared
                .run_ns
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&task.id);
        }
    }

    #[cold]
    fn escaped(&self, _s: &Scheduler, task: &Task) {
        panic_hook::caught(|| {
            log::error!(
                target: "coro",
                "green thread #{} '{}': a panic escaped the thread; it is finished",
                task.id,
                task.display_name(),
            )
        });
    }

    #[inline(always)]
    fn tick(&self, s: &Scheduler, ticks: u64) {
        self.flight.tick(flight::key(s), ticks);
    }

    #[inline(always)]
    fn timer_fired(&self, s: &Scheduler, task: u64, kind: u64) {
        self.flight.timer(flight::key(s), task, kind);
    }

    #[inline(always)]
    fn around_wait<R>(&self, s: &Scheduler, block: bool, wait: impl FnOnce() -> R) -> R {
        profile::around_poll(s, block, wait)
    }

    #[inline(always)]
    fn waited(&self, s: &Scheduler, ticks: u64, parked: Parked, block: bool) {
        self.flight
            .poll(flight::key(s), ticks, parked.events, block);
    }

    /// Runs the periodic deadlock check when it is due; returns when it is
    /// next due (`None` when it is off).
    fn periodic(&self, s: &Scheduler, now: u64) -> Option<u64> {
        let every = s.config.deadlock_check?;
        let next = self.waits.next_check.get();
        if next == 0 || now >= next {
            if next != 0 {
                waits::periodic_check(s);
            }
            let next = now + clock::duration_to_ticks(every);
            self.waits.next_check.set(next);
            return Some(next);
        }
        Some(next)
    }

    /// Nothing is ready and no timer is pending: if nothing else can wake
    /// a thread either, every parked thread is leaked (see `asleep`).
    fn stalled(&self, s: &Scheduler) {
        asleep::check(s);
    }
}
