//! The services as the scheduler loop sees them: one driver that fires
//! what is due and waits in the OS until something is (`seams::Driver`).
//!
//! It owns the timer heap, the futures' timer wakers, the reactor with its
//! precise timer, the blocking pool and the remote inbox. The loop asks it
//! for the next deadline, has it wait (the precise timer is armed for that
//! deadline, the reactor waits in the OS poller) and has it hand what the
//! wait returned to the waiters.

use std::cell::{Cell, RefCell};
use std::io;
use std::time::Duration;

use crate::kernel::clock::{self, Instant};
use crate::kernel::error::WaitError;
use crate::kernel::sched::{Config, Scheduler};
use crate::kernel::seams::{self, Observer, Parked};
use crate::kernel::task::Task;
use crate::kernel::wake::make_ready;
use crate::services::blocking::BlockingPool;
use crate::services::cancel;
use crate::services::future::TimerWakers;
use crate::services::reactor::Reactor;
use crate::services::remote::Remote;
use crate::services::sys::PreciseTimer;
use crate::services::timer::{TimerHeap, TimerKind};

/// Everything the services keep for one runtime.
pub(crate) struct Driver {
    pub(crate) timers: RefCell<TimerHeap>,
    /// The wakers of pending `future::Sleep`s, named by their timer entries.
    pub(crate) timer_wakers: RefCell<TimerWakers>,
    pub(crate) reactor: Reactor,
    pub(crate) precise: PreciseTimer,
    pub(crate) blocking: BlockingPool,
    /// The `Send` inbox: spawns and wake-ups from other OS threads.
    pub(crate) remote: Remote,
    /// What the last wait returned besides events: the precise timer
    /// fired, the reactor's waker was woken (blocking completions).
    waited: Cell<(bool, bool)>,
}

impl seams::Driver for Driver {
    fn new(id: u64, config: &Config) -> io::Result<Driver> {
        let reactor = Reactor::new()?;
        let precise = reactor.registry(PreciseTimer::new)?;
        let blocking = BlockingPool::new(
            config.blocking_threads,
            config.blocking_keep_alive,
            reactor.waker.clone(),
        );
        Ok(Driver {
            timers: RefCell::new(TimerHeap::default()),
            timer_wakers: RefCell::default(),
            remote: Remote::new(id, reactor.waker.clone()),
            reactor,
            precise,
            blocking,
            waited: Cell::new((false, false)),
        })
    }

    #[inline]
    fn fire_due(&self, s: &Scheduler) {
        if self.timers.borrow().len() != 0 {
            self.fire_due_timers(s);
        }
    }

    #[inline]
    fn next_due(&self) -> Option<u64> {
        self.timers.borrow_mut().next_live_deadline()
    }

    fn wait(&self, deadline: Option<Instant>, now: Instant) -> io::Result<Parked> {
        let timeout = match deadline {
            None => None,
            Some(d) if d <= now => Some(Duration::ZERO),
            Some(d) => {
                self.reactor.registry(|r| self.precise.arm(r, d));
                self.precise.poll_timeout(d)
            }
        };
        let out = self.reactor.poll(timeout)?;
        self.waited.set((out.timer, out.woken));
        Ok(Parked { events: out.events })
    }

    #[inline(always)]
    fn arm(&self, s: &Scheduler, t: &Task) -> Result<(), WaitError> {
        cancel::arm(s, t)
    }

    fn deliver(&self, s: &Scheduler, t: &Task) -> Option<WaitError> {
        cancel::deliver(s, t)
    }

    fn dispatch(&self, s: &Scheduler) {
        let (timer, woken) = self.waited.replace((false, false));
        if timer {
            self.precise.fired();
        }
        if woken {
            self.blocking.drain_completions();
        }
        self.remote.drain(s);
    }
}

impl Driver {
    /// Fires every timer whose deadline has passed, in deadline order
    /// (`fire_due` when there are timers).
    #[inline(never)]
    fn fire_due_timers(&self, s: &Scheduler) {
        let mut timers = self.timers.borrow_mut();
        let now = clock::now().ticks();
        // Wakers of futures run after the heap is released: they are user
        // code, which may touch the timers.
        let mut wakers = Vec::new();
        s.observers.tick(s, now);
        while let Some(e) = timers.pop_expired(now) {
            if !e.is_live() {
                continue;
            }
            timers.fired();
            s.counters
                .timers_fired
                .set(s.counters.timers_fired.get() + 1);
            match e.kind {
                TimerKind::Wake { .. } => {
                    s.observers.timer_fired(s, e.task.id, 0);
                    e.task.timer_fired.set(true);
                    make_ready(&e.task);
                }
                TimerKind::Scope { id } => {
                    s.observers.timer_fired(s, e.task.id, 1);
                    // A deadline moved later re-arms (see `cancel`).
                    if let Some(d) = cancel::timer_fired(&e.task, id) {
                        timers.insert(d, e.task, TimerKind::Scope { id });
                    }
                }
                TimerKind::Waker { key: slot, seq } => {
                    s.observers.timer_fired(s, 0, 2);
                    wakers.extend(self.timer_wakers.borrow_mut().take(slot, seq));
                }
            }
        }
        drop(timers);
        for w in wakers {
            w.wake();
        }
    }
}
