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
//! Polling the OS costs a system call, the price of many switches, so
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

use crate::kernel::clock::{self, Instant};
use crate::kernel::seams::{Driver, Observer, TheDriver, TheObserver};
use crate::kernel::stack::{self, StackPool};
use crate::kernel::task::{Task, ThreadState};

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
/// resumes: enough for their page walks to overlap, few enough that the
/// lines are still cached when their threads run (BENCHMARKS.md, echo).
const PREFETCH_AHEAD: usize = 8;

/// Non-blocking polls between two stack-pool trims while threads keep the
/// loop busy (see `stack`, "What the pool keeps").
const TRIM_POLLS: u64 = 64;

/// Largest thread table (and ready queue) kept for the OS thread's next
/// runtime, in entries: after a burst of a million threads the next runtime
/// starts small again.
const KEEP_TABLE: usize = 1 << 16;

/// A runtime's ready queue and thread table, emptied.
type Tables = (VecDeque<Rc<Task>>, Slab<Rc<Task>>);

thread_local! {
    static TABLES: RefCell<Option<Tables>> = const { RefCell::new(None) };
}

/// The ready queue and thread table the last runtime on this OS thread
/// left (empty, with their room: a new runtime does not grow them again,
/// copying as it goes), or new ones.
fn take_tables() -> Tables {
    TABLES
        .try_with(|t| t.borrow_mut().take())
        .ok()
        .flatten()
        .unwrap_or_default()
}

/// Keeps a dropped runtime's ready queue and thread table for the next
/// runtime on this OS thread, if they are empty and not too large.
fn keep_tables((ready, tasks): Tables) {
    if !ready.is_empty()
        || !tasks.is_empty()
        || ready.capacity() > KEEP_TABLE
        || tasks.capacity() > KEEP_TABLE
    {
        return;
    }
    let mut tasks = tasks;
    // Empty, but its vacant entries still count: start over.
    tasks.clear();
    let _ = TABLES.try_with(move |t| *t.borrow_mut() = Some((ready, tasks)));
}

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
    /// Threads parked now on a wait target that had a holder when they
    /// parked (a lock): when there are none, a finishing thread cannot
    /// leave one leaked and the wait graph's O(threads) check is skipped
    /// (threads parked on channels, condvars or events do not count).
    pub(crate) parked_on_held: Cell<usize>,
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
    pub(crate) stacks: RefCell<StackPool>,
    /// The services the loop drives: timers, the reactor, the remote
    /// inbox, the blocking pool (see `seams::Driver`).
    pub(crate) driver: TheDriver,
    /// What watches the threads run: the flight recorder, the profiler,
    /// the watchdog, the wait graph (see `seams::Observer`).
    pub(crate) observers: TheObserver,
    pub(crate) counters: Counters,
    pub(crate) next_id: Cell<u64>,
    /// Shutdown is stopping the threads (the main closure returned, or the
    /// loop panicked): blocking calls now fail with `Interrupted`.
    pub(crate) shutting_down: Cell<bool>,
    since_poll: Cell<u64>,
    /// Clock ticks at the loop's last look at the clock (each poll): the
    /// start of a park, without a clock read on the park path.
    pub(crate) coarse_now: Cell<u64>,
}

impl Drop for Scheduler {
    /// Leaves its ready queue and thread table, if empty, to the next
    /// runtime on this OS thread (`keep_tables`).
    fn drop(&mut self) {
        let ready = std::mem::take(self.ready.get_mut());
        let tasks = std::mem::take(self.tasks.get_mut());
        keep_tables((ready, tasks));
    }
}

impl Scheduler {
    pub(crate) fn new(config: Config) -> std::io::Result<Scheduler> {
        let id = NEXT_RUNTIME_ID.fetch_add(1, Ordering::Relaxed);
        let driver = TheDriver::new(id, &config)?;
        let observers = TheObserver::new(&config)?;
        let (ready, tasks) = take_tables();
        Ok(Scheduler {
            id,
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
            driver,
            observers,
            counters: Counters::default(),
            next_id: Cell::new(1),
            shutting_down: Cell::new(false),
            since_poll: Cell::new(0),
            coarse_now: Cell::new(clock::now().ticks()),
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
        if self.observers.brackets_resume() {
            return self.observers.resume(self, task);
        }
        self.resume_plain(task)
    }

    /// [`resume`](Self::resume) without an observer's samples around it.
    #[inline(always)]
    pub(crate) fn resume_plain(&self, task: Rc<Task>) {
        debug_assert_eq!(task.runtime, self.id, "a task resumed by another runtime");
        task.state.set(ThreadState::Running);
        self.current.set(Rc::as_ptr(&task));
        let n = self.counters.switches.get() + 1;
        self.counters.switches.set(n);
        self.observers.resume_begins(self, &task, n);
        if task.stack.is_copied_out() {
            self.copy_in(&task);
        }
        let result = {
            let mut co = task.coroutine.borrow_mut();
            let co = co.as_mut().expect("ready task has a coroutine");
            panic::catch_unwind(AssertUnwindSafe(|| co.resume(())))
        };
        let returned = !matches!(result, Ok(CoroutineResult::Yield(())));
        self.observers.resume_ended(self, &task, n, returned);
        self.current.set(std::ptr::null());
        match result {
            Ok(CoroutineResult::Yield(())) => {
                if task.state.get() == ThreadState::Ready {
                    self.ready.borrow_mut().push_back(task);
                } else {
                    self.observers.left(self, &task, n);
                }
            }
            Ok(CoroutineResult::Return(())) => {
                self.finish(&task);
                self.observers.left(self, &task, n);
                Task::recycle(task);
            }
            Err(p) => {
                self.escaped(&task, p);
                self.observers.left(self, &task, n);
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
        self.observers.escaped(self, task);
    }

    /// A task's coroutine returned: recycle its stack and forget it.
    pub(crate) fn finish(&self, task: &Rc<Task>) {
        task.state.set(ThreadState::Dead);
        let stack = {
            let mut slot = task.coroutine.borrow_mut();
            if slot
                .as_ref()
                .is_some_and(crate::kernel::task::GreenCoroutine::done)
            {
                slot.take()
                    .map(crate::kernel::task::GreenCoroutine::into_stack)
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
            self.observers.untag(self, task.flight_tag);
        }
        drop(tasks);
        self.observers.finished(self, task);
    }

    /// Fires every timer whose deadline has passed, in deadline order.
    #[inline]
    pub(crate) fn fire_timers(&self) {
        self.driver.fire_due(self);
    }

    /// Polls the reactor; blocks until the next timer (or an event) if `block`.
    fn poll(&self, block: bool) {
        let polls = self.counters.polls.get() + 1;
        self.counters.polls.set(polls);
        let now = clock::now();
        self.coarse_now.set(now.ticks());
        let check_due = self.observers.periodic(self, now.ticks());
        let deadline = if !block {
            if polls.is_multiple_of(TRIM_POLLS) {
                self.stacks_housekeeping(now.ticks());
            }
            Some(now)
        } else {
            let (sweeping, stacks_due) = self.stacks_housekeeping(now.ticks());
            let next = self.driver.next_due();
            if next.is_none() {
                self.observers.stalled(self);
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
                    Some(d.max(now))
                }
                None => None,
            }
        };
        if polls.is_multiple_of(RECALIBRATE_POLLS) {
            clock::recalibrate(RECALIBRATE_INTERVAL);
        }
        self.observers.tick(self, clock::now().ticks());
        let polled = self
            .observers
            .around_wait(self, block, || self.driver.wait(deadline, now));
        let after = clock::now().ticks();
        self.coarse_now.set(after);
        match polled {
            Ok(parked) => {
                self.observers.waited(self, after, parked, block);
                self.driver.dispatch(self);
            }
            Err(e) => panic!("coro: polling the OS for events failed: {e}"),
        }
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

    pub(crate) fn task_rc(&self, t: &Task) -> Rc<Task> {
        self.tasks.borrow()[t.key.get()].clone()
    }
}
