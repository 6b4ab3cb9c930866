//! The seams: what the kernel says to the layers above it, and how.
//!
//! The kernel names no service and no observer. The scheduler holds one
//! [`Driver`] (the services the loop drives: timers, the reactor, the
//! remote inbox, the blocking pool) and one [`Observer`] (everything that
//! watches threads run), each of the type the layer above implements. The
//! crate root wires them ([`Layers`] for [`Wiring`]); the kernel reaches
//! them only through these traits, so every call is resolved at compile
//! time and inlined where it is small: a seam costs what the direct call
//! it replaces cost.

use std::io;
use std::rc::Rc;

use crate::kernel::clock::Instant;
use crate::kernel::error::WaitError;
use crate::kernel::sched::{Config, Scheduler};
use crate::kernel::task::Task;

/// The implementations of the layers above the kernel, as the kernel holds
/// them. Implemented once, for [`Wiring`], by the crate root.
pub(crate) trait Layers {
    /// The services the loop drives.
    type Driver: Driver;
    /// The observers, as one.
    type Observer: Observer;
    /// The services' state in each control block: its cancel scopes and
    /// deadlines.
    type Cancel: CancelSlot;
    /// The services' state in a control block's tail: the waker a future
    /// polled on the thread hands out.
    type FutureWake;
}

/// The one implementor of [`Layers`]: the runtime as the crate builds it.
pub(crate) struct Wiring;

/// The services' driver of the runtime being built.
pub(crate) type TheDriver = <Wiring as Layers>::Driver;

/// The observers of the runtime being built.
pub(crate) type TheObserver = <Wiring as Layers>::Observer;

/// The services' per-thread cancellation state of the runtime being built.
pub(crate) type TheCancel = <Wiring as Layers>::Cancel;

/// The services' per-thread future waker of the runtime being built.
pub(crate) type TheFutureWake = <Wiring as Layers>::FutureWake;

/// A thread's cancellation state, as the kernel sees it: whether a blocking
/// call must be refused, and what to do when a control block is reused.
pub(crate) trait CancelSlot: Default {
    /// A cancellation or a passed deadline waits for the thread's next
    /// blocking call (which then fails).
    fn pending(&self) -> bool;

    /// Drops what a finished thread's state refers to (its scopes, its
    /// nursery), so that a kept block holds nothing alive.
    fn release(&mut self);

    /// Makes the state of a reused block as new.
    fn renew(&mut self);
}

/// What one wait in the OS returned, as the loop's observers see it.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Parked {
    /// Events the OS returned.
    pub(crate) events: usize,
}

/// The services, as the loop sees them: what is due, and waiting until
/// something is.
///
/// A service wakes threads only through the kernel's wake rules
/// (`wake::make_ready`, `wake::Waiter`), so a late or foreign wake does
/// nothing.
pub(crate) trait Driver: Sized {
    /// The services of a new runtime with this id and configuration.
    fn new(id: u64, config: &Config) -> io::Result<Self>;

    /// Makes ready (or wakes) whatever waited for a deadline that has
    /// passed. Never fires early.
    fn fire_due(&self, s: &Scheduler);

    /// The next deadline a live timer waits for, in clock ticks.
    fn next_due(&self) -> Option<u64>;

    /// Waits in the OS until an event, or until `deadline` (`None`: no
    /// limit); a deadline at or before `now` only looks.
    fn wait(&self, deadline: Option<Instant>, now: Instant) -> io::Result<Parked>;

    /// Before `t` parks: gives the innermost deadline visible to it a
    /// timer, or fails the park if that deadline has passed.
    fn arm(&self, s: &Scheduler, t: &Task) -> Result<(), WaitError>;

    /// The error a blocking call of `t` fails with because a scope visible
    /// to it is cancelled (`None`: none is, any more). Asked only while
    /// `t`'s cancellation state is [pending](CancelSlot::pending).
    fn deliver(&self, s: &Scheduler, t: &Task) -> Option<WaitError>;

    /// Hands what the last [`wait`](Self::wait) brought to the waiters:
    /// the precise timer, the blocking pool's completions, the remote
    /// inbox.
    fn dispatch(&self, s: &Scheduler);
}

/// The kernel's events, for the observers (the flight recorder, the
/// profiler, the watchdog, the wait graph).
///
/// Observers watch and never steer: no event makes a thread ready,
/// changes the order threads run in or blocks the loop. Every method has
/// an empty default, so an observer left out costs nothing.
pub(crate) trait Observer: Sized {
    /// The observers of a new runtime with this configuration.
    fn new(config: &Config) -> io::Result<Self>;

    /// Whether [`resume`](Self::resume) must run the next resume itself
    /// (it samples around it).
    #[inline(always)]
    fn brackets_resume(&self) -> bool {
        false
    }

    /// Runs `task`'s resume (with [`Scheduler::resume_plain`]) between
    /// samples of its own; asked only when
    /// [`brackets_resume`](Self::brackets_resume) said so.
    fn resume(&self, s: &Scheduler, task: Rc<Task>) {
        s.resume_plain(task)
    }

    /// `task` is about to run as resume number `n`.
    #[inline(always)]
    fn resume_begins(&self, _s: &Scheduler, _task: &Task, _n: u64) {}

    /// `task`'s resume number `n` ended; `returned`: its body is over.
    #[inline(always)]
    fn resume_ended(&self, _s: &Scheduler, _task: &Task, _n: u64, _returned: bool) {}

    /// Resume number `n` was `task`'s last for now: it parked, or it is
    /// finished (told after [`finished`](Self::finished)).
    #[inline(always)]
    fn left(&self, _s: &Scheduler, _task: &Task, _n: u64) {}

    /// The tag by which the observers' records name thread `id`, kept in
    /// its control block (`Task::flight_tag`) until [`untag`](Self::untag).
    ///
    /// # Errors
    ///
    /// When no tag can be had (the spawn then fails with this error).
    #[inline(always)]
    fn tag(&self, _s: &Scheduler, _id: u64) -> io::Result<u32> {
        Ok(0)
    }

    /// A tag from [`tag`](Self::tag) whose thread is gone (or never
    /// started) is free again.
    #[inline(always)]
    fn untag(&self, _s: &Scheduler, _tag: u32) {}

    /// `task` was spawned.
    #[inline(always)]
    fn spawned(&self, _s: &Scheduler, _task: &Task) {}

    /// `task` was made ready by a wake.
    #[inline(always)]
    fn woken(&self, _s: &Scheduler, _task: &Task) {}

    /// A panic escaped `task`'s coroutine (which the thread's entry is
    /// built to prevent); the thread is finished.
    #[inline(always)]
    fn escaped(&self, _s: &Scheduler, _task: &Task) {}

    /// `task` is finished and forgotten by the scheduler.
    #[inline(always)]
    fn finished(&self, _s: &Scheduler, _task: &Task) {}

    /// The loop read the clock (`ticks`) before firing timers or waiting.
    #[inline(always)]
    fn tick(&self, _s: &Scheduler, _ticks: u64) {}

    /// A timer fired: for `task` (0: a future's waker), of kind `kind`
    /// (0: a sleep, 1: a scope's deadline, 2: a future's).
    #[inline(always)]
    fn timer_fired(&self, _s: &Scheduler, _task: u64, _kind: u64) {}

    /// Runs `wait` (the loop's wait in the OS; `block`: it may block).
    #[inline(always)]
    fn around_wait<R>(&self, _s: &Scheduler, _block: bool, wait: impl FnOnce() -> R) -> R {
        wait()
    }

    /// The loop's wait in the OS returned at `ticks`.
    #[inline(always)]
    fn waited(&self, _s: &Scheduler, _ticks: u64, _parked: Parked, _block: bool) {}

    /// Called before each wait in the OS, at `now`: the observer's
    /// periodic work, if due. Returns when it is next due, in ticks.
    #[inline(always)]
    fn periodic(&self, _s: &Scheduler, _now: u64) -> Option<u64> {
        None
    }

    /// Nothing is ready, no timer is pending and no service may wake a
    /// thread.
    #[inline(always)]
    fn stalled(&self, _s: &Scheduler) {}
}
