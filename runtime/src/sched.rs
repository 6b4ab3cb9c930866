//! The scheduler: the ready queue and the loop that drives it (the suspend
//! points green threads use to give the CPU back are in `suspend`).
//!
//! # The loop
//!
//! ```text
//! loop {
//!     fire expired timers          // when the heap's head is due
//!     run the batch                // the threads ready when the pass began,
//!                                  // FIFO, no priorities
//!     poll mio                     // when nothing is ready: block until the
//! }                                // next timer; otherwise every 256 resumes
//! ```
//!
//! A green thread runs until it suspends. `yield_now` puts it at the back of
//! the queue; `park` leaves it off the queue until someone wakes it. Threads
//! made ready during a pass run in the next pass, so a thread that yields in a
//! loop cannot starve the others.
//!
//! # Invariants the unsafe code relies on
//!
//! * **Tasks are resumed and unwound only by their own scheduler, with its
//!   runtime current.** [`Scheduler::resume`] sets `current` for exactly the
//!   duration of a resume and resets it on every path (a panic that would
//!   escape is caught there). Shutdown (`runtime::shutdown`, run by a guard
//!   in `block_on` also when the loop panics) finishes every task before
//!   `block_on` returns; it unwinds a task by resuming it with its unwind
//!   requested: the task raises [`ForcedUnwind`] itself at its next blocking
//!   call (the one it was parked in, usually), so the unwind runs on its own
//!   stack with its runtime current. `Drop for Task` leaks a coroutine that
//!   escaped this rather than unwinding it elsewhere.
//! * **No panic leaves a coroutine** (`spawn::entry` and `resume` catch).
//! * **A task is woken only by the runtime that owns it** (`task::make_ready`).
//!
//! Polling the OS costs a syscall (about as much as 40 switches here), so
//! while threads are ready the loop polls without blocking only every
//! [`POLL_INTERVAL`] resumes (tokio: every 61 ticks). While threads keep
//! yielding, I/O readiness therefore waits at most that many slices; due
//! timers are still checked every pass.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::panic::{self, AssertUnwindSafe};
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use corosensei::CoroutineResult;
use slab::Slab;

use crate::blocking::BlockingPool;
use crate::cancel;
use crate::clock::{self, Instant};
use crate::reactor::Reactor;
use crate::stack::{self, StackPool};
use crate::sys::PreciseTimer;
use crate::task::{make_ready, Task, ThreadState};
use crate::timer::{TimerHeap, TimerKind};
use crate::watchdog::Watchdog;

/// Resumes between two non-blocking polls while threads are ready.
pub(crate) const POLL_INTERVAL: u64 = 256;

/// Polls between two looks at whether the clock's rate is due a refinement
/// ([`clock::recalibrate`]), and the least time between refinements.
const RECALIBRATE_POLLS: u64 = 1024;
const RECALIBRATE_INTERVAL: Duration = Duration::from_secs(60);

/// Passes with at least this many ready threads prefetch the ones about to
/// run (see `Scheduler::prefetch_ahead`).
const PREFETCH_BATCH: usize = 32;

/// Threads whose stack tops are prefetched together, once every this many
/// resumes. Four, eight and sixteen were measured (echo at 1 000
/// connections); eight was best by a little, sixteen worse than eight.
const PREFETCH_AHEAD: usize = 8;

/// Non-blocking polls between two stack-pool trims while threads keep the
/// loop busy (see `stack`, "What the pool keeps").
const TRIM_POLLS: u64 = 64;

/// Settings a runtime was built with.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub(crate) stack_size: usize,
    pub(crate) stack_guard: usize,
    pub(crate) selfishness: u32,
    pub(crate) latency_warning: Option<Duration>,
    pub(crate) blocking_threads: usize,
    pub(crate) blocking_keep_alive: Duration,
    pub(crate) stack_pool: usize,
    pub(crate) idle_stack_release: Option<Duration>,
    pub(crate) idle_stack_copy_out: bool,
    pub(crate) deadlock_check: Option<Duration>,
    pub(crate) latency_snapshots: Option<Duration>,
}

/// Counters behind [`Stats`](crate::Stats).
#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) switches: Cell<u64>,
    pub(crate) polls: Cell<u64>,
    pub(crate) forced_yields: Cell<u64>,
    pub(crate) spawned: Cell<u64>,
    pub(crate) panicked: Cell<u64>,
    pub(crate) timers_fired: Cell<u64>,
    /// Threads warned about for spinning on refused calls (`spin`).
    pub(crate) spin_warnings: Cell<u64>,
}

/// Ids of runtimes: unique per process, never reused.
static NEXT_RUNTIME_ID: AtomicU64 = AtomicU64::new(1);

/// The panic payload that unwinds a green thread at shutdown (raised by
/// the thread itself, see [`forced_unwind_point`]; `spawn::entry` turns it
/// into `JoinError::Cancelled`).
#[derive(Debug)]
pub(crate) struct ForcedUnwind;

/// Blocking calls refused to a thread being unwound while the OS thread
/// panics before the runtime gives up on it (see [`refusal`]).
pub(crate) const UNWIND_REFUSAL_LIMIT: u32 = 10_000;

/// Everything one runtime owns.
pub(crate) struct Scheduler {
    /// This runtime's id: tasks and I/O registrations record it, and are
    /// only scheduled or waited on while it is the current runtime.
    pub(crate) id: u64,
    pub(crate) config: Config,
    pub(crate) ready: RefCell<VecDeque<Rc<Task>>>,
    /// Every live green thread, by key.
    pub(crate) tasks: RefCell<Slab<Rc<Task>>>,
    /// # Invariant
    /// Null, or the task being resumed (the scheduler holds an `Rc` to it for
    /// the whole resume).
    pub(crate) current: Cell<*const Task>,
    pub(crate) timers: RefCell<TimerHeap>,
    /// The wakers of pending `future::Sleep`s, named by their timer entries.
    pub(crate) timer_wakers: RefCell<crate::future::TimerWakers>,
    pub(crate) reactor: Reactor,
    pub(crate) precise: PreciseTimer,
    pub(crate) stacks: RefCell<StackPool>,
    pub(crate) blocking: BlockingPool,
    /// The `Send` inbox: spawns and wake-ups from other OS threads.
    pub(crate) remote: crate::remote::Remote,
    pub(crate) watchdog: Option<Watchdog>,
    pub(crate) profiler: crate::profile::Profiler,
    /// The flight recorder (always on).
    pub(crate) flight: crate::flight::Recorder,
    pub(crate) counters: Counters,
    pub(crate) next_id: Cell<u64>,
    /// Shutdown is stopping the threads (the main closure returned, or the
    /// loop panicked): blocking calls now fail with `Interrupted`.
    pub(crate) shutting_down: Cell<bool>,
    since_poll: Cell<u64>,
    /// Clock ticks at the loop's last look at the clock (each poll): the
    /// start of a park, without a clock read on the park path.
    pub(crate) coarse_now: Cell<u64>,
    /// Who waits on whom: leak counts, the periodic deadlock check.
    pub(crate) waits: crate::waits::Waits,
}

impl Drop for Scheduler {
    /// Leaves its ready queue and thread table, if empty, to the next
    /// runtime on this OS thread (`task_pool::keep_tables`).
    fn drop(&mut self) {
        let ready = std::mem::take(self.ready.get_mut());
        let tasks = std::mem::take(self.tasks.get_mut());
        crate::task_pool::keep_tables((ready, tasks));
    }
}

impl Scheduler {
    pub(crate) fn new(config: Config) -> std::io::Result<Scheduler> {
        let reactor = Reactor::new()?;
        let precise = reactor.registry(PreciseTimer::new)?;
        let blocking = BlockingPool::new(
            config.blocking_threads,
            config.blocking_keep_alive,
            reactor.waker.clone(),
        );
        let watchdog = match config.latency_warning {
            Some(t) => Some(Watchdog::start(t)?),
            None => None,
        };
        let id = NEXT_RUNTIME_ID.fetch_add(1, Ordering::Relaxed);
        let (ready, tasks) = crate::task_pool::take_tables();
        Ok(Scheduler {
            id,
            remote: crate::remote::Remote::new(id, reactor.waker.clone()),
            stacks: RefCell::new(StackPool::new(
                config.stack_size,
                config.stack_guard,
                config.stack_pool,
                config.idle_stack_release,
                config.idle_stack_copy_out,
            )),
            config,
            ready: RefCell::new(ready),
            tasks: RefCell::new(tasks),
            current: Cell::new(std::ptr::null()),
            timers: RefCell::new(TimerHeap::default()),
            timer_wakers: RefCell::default(),
            reactor,
            precise,
            blocking,
            watchdog,
            profiler: Default::default(),
            flight: Default::default(),
            counters: Counters::default(),
            next_id: Cell::new(1),
            shutting_down: Cell::new(false),
            since_poll: Cell::new(0),
            coarse_now: Cell::new(clock::now().ticks()),
            waits: Default::default(),
        })
    }

    /// Runs the loop until `main` is dead.
    pub(crate) fn run_until(&self, main: &Rc<Task>) {
        loop {
            self.fire_timers();
            let n = self.ready.borrow().len();
            let prefetch = n >= PREFETCH_BATCH;
            for i in 0..n {
                if prefetch && i % PREFETCH_AHEAD == 0 {
                    self.prefetch_ahead();
                }
                let task = self.ready.borrow_mut().pop_front();
                match task {
                    Some(t) => self.resume(t),
                    None => break,
                }
            }
            if main.state.get() == ThreadState::Dead {
                return;
            }
            let since = self.since_poll.get() + n as u64;
            let idle = self.ready.borrow().is_empty();
            if idle || since >= POLL_INTERVAL {
                self.since_poll.set(0);
                self.poll(idle);
            } else {
                self.since_poll.set(since);
            }
        }
    }

    /// Starts bringing the stack tops of the next `PREFETCH_AHEAD` ready
    /// threads (after the one about to run) into the cache, all at once,
    /// and the control blocks of the `PREFETCH_AHEAD` after them, whose
    /// stack pointers the next call reads.
    ///
    /// With thousands of threads alive, a resume would otherwise wait on
    /// its stack top: each thread's is in a page of its own, the TLB no
    /// longer maps it after the syscalls of the threads that ran since, and
    /// a software prefetch that misses the TLB holds the core until the
    /// page walk is done. One at a time, each walk costs its whole latency;
    /// issued together, the walks overlap.
    /// With a few threads everything is in the cache already and the hints
    /// would only cost: the caller prefetches only in passes of
    /// `PREFETCH_BATCH` or more.
    #[inline]
    fn prefetch_ahead(&self) {
        let ready = self.ready.borrow();
        for next in ready.iter().skip(1).take(PREFETCH_AHEAD) {
            stack::prefetch_stack(next.stack.sp.get());
        }
        let head = std::mem::offset_of!(Task, tail);
        for after in ready.iter().skip(1 + PREFETCH_AHEAD).take(PREFETCH_AHEAD) {
            stack::prefetch_range(Rc::as_ptr(after) as *const i8, head);
        }
    }

    /// Runs passes without blocking until nothing is ready or `max_passes`
    /// ran (used at shutdown).
    pub(crate) fn run_passes(&self, max_passes: usize) {
        for _ in 0..max_passes {
            self.fire_timers();
            let n = self.ready.borrow().len();
            if n == 0 {
                self.poll(false);
                if self.ready.borrow().is_empty() {
                    return;
                }
                continue;
            }
            for _ in 0..n {
                let task = self.ready.borrow_mut().pop_front();
                match task {
                    Some(t) => self.resume(t),
                    None => break,
                }
            }
        }
    }

    /// Resumes one task until it suspends or finishes.
    ///
    /// `current` points at the task for exactly the duration of the resume.
    /// Nothing unwinds out of here: `spawn::entry` catches every panic of the
    /// thread, and whatever would still escape the coroutine is caught here
    /// and counted as that thread's panic (the thread is then finished).
    #[inline]
    pub(crate) fn resume(&self, task: Rc<Task>) {
        if self.profiler.on.get() {
            return crate::profile::resume(self, task);
        }
        self.resume_unprofiled(task)
    }

    /// [`resume`](Self::resume) without the profiler's samples around it.
    #[inline(always)]
    pub(crate) fn resume_unprofiled(&self, task: Rc<Task>) {
        debug_assert_eq!(task.runtime, self.id, "a task resumed by another runtime");
        task.state.set(ThreadState::Running);
        self.current.set(Rc::as_ptr(&task));
        let n = self.counters.switches.get() + 1;
        self.counters.switches.set(n);
        if let Some(w) = &self.watchdog {
            w.shared.slice.store(n, Ordering::Relaxed);
            w.shared.running.store(task.id, Ordering::Relaxed);
        }
        if task.stack.is_copied_out() {
            self.copy_in(&task);
        }
        let result = {
            let mut co = task.coroutine.borrow_mut();
            let co = co.as_mut().expect("ready task has a coroutine");
            panic::catch_unwind(AssertUnwindSafe(|| co.resume(())))
        };
        self.flight.resume_ended(&task, n);
        if let Some(w) = &self.watchdog {
            w.shared.running.store(0, Ordering::Relaxed);
            let hog = w.shared.hog_slice.load(Ordering::Acquire);
            if hog != self.flight.hog_seen.get() {
                let returned = !matches!(result, Ok(CoroutineResult::Yield(())));
                crate::flight::hog(self, &task, hog, n, returned);
            }
        }
        self.current.set(std::ptr::null());
        match result {
            Ok(CoroutineResult::Yield(())) => {
                if task.state.get() == ThreadState::Ready {
                    self.ready.borrow_mut().push_back(task);
                } else {
                    self.flight.ended(&task, n);
                }
            }
            Ok(CoroutineResult::Return(())) => {
                self.finish(&task);
                self.flight.ended(&task, n);
                crate::task_pool::recycle(task);
            }
            Err(p) => {
                self.escaped(&task, p);
                self.flight.ended(&task, n);
            }
        }
    }

    /// Writes a copied-out thread's stack back before it runs (`stack::copy`).
    #[cold]
    #[inline(never)]
    fn copy_in(&self, task: &Task) {
        stack::copy_in(task);
        let mut stacks = self.stacks.borrow_mut();
        stacks.idle.out = stacks.idle.out.saturating_sub(1);
    }

    /// A panic escaped a task's coroutine (which `entry` is built to
    /// prevent): the coroutine is over; count it as the thread's panic.
    #[cold]
    #[inline(never)]
    fn escaped(&self, task: &Rc<Task>, p: Box<dyn std::any::Any + Send>) {
        self.counters.panicked.set(self.counters.panicked.get() + 1);
        // Its payload's destructor could panic too: leak it.
        std::mem::forget(p);
        self.finish(task);
        crate::panic_hook::caught(|| {
            log::error!(
                target: "coro",
                "green thread #{} '{}': a panic escaped the thread; it is finished",
                task.id,
                task.display_name(),
            )
        });
    }

    /// A task's coroutine returned: recycle its stack and forget it.
    pub(crate) fn finish(&self, task: &Rc<Task>) {
        task.state.set(ThreadState::Dead);
        let stack = {
            let mut slot = task.coroutine.borrow_mut();
            if slot.as_ref().is_some_and(crate::task::GreenCoroutine::done) {
                slot.take().map(crate::task::GreenCoroutine::into_stack)
            } else {
                // Never dropped unfinished: that would unwind it from here
                // (see `Drop for Task`).
                std::mem::forget(slot.take());
                None
            }
        };
        if let Some(stack) = stack {
            self.stacks.borrow_mut().put(stack, self.coarse_now.get());
        }
        let key = task.key.get();
        let mut tasks = self.tasks.borrow_mut();
        if tasks.get(key).is_some_and(|t| Rc::ptr_eq(t, task)) {
            tasks.remove(key);
            crate::flight::Recorder::untag(self, task.flight_tag);
        }
        drop(tasks);
        if self.waits.parked_on_held.get() > 0 {
            crate::waits::thread_finished(self, task.id);
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

    /// Fires every timer whose deadline has passed, in deadline order.
    #[inline]
    pub(crate) fn fire_timers(&self) {
        if self.timers.borrow().len() != 0 {
            self.fire_due_timers();
        }
    }

    /// [`fire_timers`](Self::fire_timers) when there are timers.
    #[inline(never)]
    fn fire_due_timers(&self) {
        let mut timers = self.timers.borrow_mut();
        let now = clock::now().ticks();
        // Wakers of futures run after the heap is released: they are user
        // code, which may touch the timers.
        let mut wakers = Vec::new();
        let key = crate::flight::key(self);
        self.flight.tick(key, now);
        while let Some(e) = timers.pop_expired(now) {
            if !e.is_live() {
                continue;
            }
            timers.fired();
            self.counters
                .timers_fired
                .set(self.counters.timers_fired.get() + 1);
            match e.kind {
                TimerKind::Wake { .. } => {
                    self.flight.timer(key, e.task.id, 0);
                    e.task.timer_fired.set(true);
                    make_ready(&e.task);
                }
                TimerKind::Scope { id } => {
                    self.flight.timer(key, e.task.id, 1);
                    // A deadline moved later re-arms (see `cancel`).
                    if let Some(d) = cancel::timer_fired(&e.task, id) {
                        timers.insert(d, e.task, TimerKind::Scope { id });
                    }
                }
                TimerKind::Waker { key: slot, seq } => {
                    self.flight.timer(key, 0, 2);
                    wakers.extend(self.timer_wakers.borrow_mut().take(slot, seq));
                }
            }
        }
        drop(timers);
        for w in wakers {
            w.wake();
        }
    }

    /// Polls the reactor; blocks until the next timer (or an event) if `block`.
    fn poll(&self, block: bool) {
        let polls = self.counters.polls.get() + 1;
        self.counters.polls.set(polls);
        let now = clock::now();
        self.coarse_now.set(now.ticks());
        let check_due = self.deadlock_check_due(now.ticks());
        let timeout = if !block {
            if polls.is_multiple_of(TRIM_POLLS) {
                self.stacks_housekeeping(now.ticks());
            }
            Some(Duration::ZERO)
        } else {
            let (sweeping, stacks_due) = self.stacks_housekeeping(now.ticks());
            let next = self.timers.borrow_mut().next_live_deadline();
            if next.is_none() {
                self.check_deadlock();
            }
            // Wake for the next timer, or for the next stack trim or sweep
            // (at once while a sweep pass has threads left to visit).
            let stacks_due = if sweeping {
                Some(now.ticks())
            } else {
                stacks_due
            };
            match next.into_iter().chain(stacks_due).chain(check_due).min() {
                Some(d) => {
                    let d = Instant::from_ticks(d);
                    if d <= now {
                        Some(Duration::ZERO)
                    } else {
                        self.reactor.registry(|r| self.precise.arm(r, d));
                        self.precise.poll_timeout(d)
                    }
                }
                None => None,
            }
        };
        if polls.is_multiple_of(RECALIBRATE_POLLS) {
            clock::recalibrate(RECALIBRATE_INTERVAL);
        }
        let key = crate::flight::key(self);
        self.flight.tick(key, clock::now().ticks());
        let polled = crate::profile::around_poll(self, block, || self.reactor.poll(timeout));
        let after = clock::now().ticks();
        self.coarse_now.set(after);
        if let Ok(out) = &polled {
            self.flight.poll(key, after, out.events, block);
        }
        match polled {
            Ok(out) => {
                if out.timer {
                    self.precise.fired();
                }
                if out.woken {
                    self.blocking.drain_completions();
                }
                self.remote.drain(self);
            }
            Err(e) => panic!("coro: polling the OS for events failed: {e}"),
        }
    }

    /// Runs the periodic deadlock check when it is due; returns when it is
    /// next due (`None` when it is off).
    fn deadlock_check_due(&self, now: u64) -> Option<u64> {
        let every = self.config.deadlock_check?;
        let next = self.waits.next_check.get();
        if next == 0 || now >= next {
            if next != 0 {
                crate::waits::periodic_check(self);
            }
            let next = now + clock::duration_to_ticks(every);
            self.waits.next_check.set(next);
            return Some(next);
        }
        Some(next)
    }

    /// Trims the stack pool and sweeps idle threads' stacks (see `stack`).
    /// Returns whether a sweep pass has threads left to visit, and when
    /// this is next due.
    fn stacks_housekeeping(&self, now: u64) -> (bool, Option<u64>) {
        let mut stacks = self.stacks.borrow_mut();
        let trim_due = stacks.trim(now);
        let (sweeping, sweep_due) = stacks.idle.step(&self.tasks.borrow(), now);
        (sweeping, trim_due.into_iter().chain(sweep_due).min())
    }

    /// Nothing is ready and no timer is pending: if nothing else can wake
    /// a thread either, every parked thread is leaked (see `asleep`).
    fn check_deadlock(&self) {
        crate::asleep::check(self);
    }

    pub(crate) fn task_rc(&self, t: &Task) -> Rc<Task> {
        self.tasks.borrow()[t.key.get()].clone()
    }
}
