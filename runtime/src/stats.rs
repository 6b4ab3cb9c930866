//! Introspection: counters of the running runtime ([`stats`]) and a listing of
//! its green threads ([`threads`]).

use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::context;
use crate::task::ThreadState;

/// A snapshot of a runtime's counters.
///
/// # Examples
///
/// ```
/// coro::run(|| {
///     coro::spawn(|| ()).join().unwrap();
///     let s = coro::stats();
///     assert_eq!(s.live, 1); // just this thread
///     assert!(s.spawned >= 2 && s.switches >= 2);
/// });
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Green threads alive (spawned and not finished).
    pub live: usize,
    /// Green threads in the ready queue.
    pub ready: usize,
    /// Timers that will still fire (sleeps, armed deadlines of scopes).
    pub pending_timers: usize,
    /// Entries in the timer heap, stale ones included (bounded slack).
    pub timer_heap_len: usize,
    /// Resumes of green threads since the runtime started.
    pub switches: u64,
    /// Calls into the OS poller.
    pub polls: u64,
    /// Yields forced by an exhausted selfishness budget.
    pub forced_yields: u64,
    /// Green threads that ran past the latency threshold without yielding.
    pub latency_warnings: u64,
    /// Green threads warned about for spinning: [`SPIN_LIMIT`](crate::SPIN_LIMIT)
    /// blocking calls in a row failed at once, without waiting, because
    /// their wait was cut short (a deadline passed, a scope was cancelled,
    /// shutdown), as in a loop that skips errors. Counted once per run of
    /// such calls.
    pub spin_warnings: u64,
    /// Green threads spawned since the runtime started.
    pub spawned: u64,
    /// Green threads that ended with a panic.
    pub panicked: u64,
    /// Timers that fired.
    pub timers_fired: u64,
    /// I/O sources registered with the reactor (sockets and such).
    pub io_sources: usize,
    /// Blocking-offload jobs waited for.
    pub blocking_in_flight: usize,
    /// Worker threads of the blocking-offload pool alive now.
    pub blocking_threads: usize,
    /// Blocking-offload jobs waiting for a worker.
    pub blocking_queued: usize,
    /// Stacks waiting in the pool for reuse (on this OS thread).
    pub pooled_stacks: usize,
    /// Parked threads whose stacks are copied out to the heap now (only
    /// with the opt-in
    /// [`RuntimeBuilder::idle_stack_copy_out`](crate::RuntimeBuilder::idle_stack_copy_out)).
    pub idle_stacks: usize,
    /// Parks in which a thread's stack pages below its stack pointer were
    /// given back, since the runtime started (see
    /// [`RuntimeBuilder::idle_stack_release`](crate::RuntimeBuilder::idle_stack_release)).
    pub idle_stack_trims: u64,
    /// Parks in which a thread's stack was left whole, neither trimmed nor
    /// copied out, because the thread parked while running on a stack
    /// other than its own (a `corosensei` coroutine resumed inside it,
    /// `stacker::maybe_grow`, a generator): where its own live frames end
    /// is unknown then. Counted by the idle sweep, once per park, since
    /// the runtime started (see
    /// [`RuntimeBuilder::idle_stack_release`](crate::RuntimeBuilder::idle_stack_release)).
    pub idle_stack_foreign: u64,
    /// Parks reported as leaked (waits that can never be served; see
    /// [`leaks`](crate::leaks)) since the runtime started.
    pub leaked: u64,
}

/// What one green thread is doing.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ThreadInfo {
    /// Its id.
    pub id: u64,
    /// Its name, if it has one.
    pub name: Option<String>,
    /// Its state.
    pub state: ThreadState,
    /// What it is parked on (`"sleep"`, `"join"`, `"readable"`, a primitive's
    /// name, ...); empty when not parked.
    pub waiting_on: &'static str,
    /// Time it has spent running, sampled by the latency watchdog every few
    /// milliseconds; `None` when latency warnings are disabled.
    pub run_time: Option<Duration>,
    /// Time since it was spawned, counted from the scheduler's last clock
    /// reading before the spawn (taken when `block_on` starts and at each
    /// poll of the OS, not on every spawn): a thread spawned late in a long
    /// stretch without polls (a pass over many ready threads, or one
    /// thread spawning in a loop without yielding) can appear older by up
    /// to that stretch.
    pub age: Duration,
    /// Usable bytes of its stack.
    pub stack_size: usize,
    /// For a thread spawned in a [`scope`](crate::scope): the id of the
    /// thread that runs the scope.
    pub parent: Option<u64>,
    /// For a parked thread: the object it waits on, who holds it, how long
    /// it has waited and where the call was made (see
    /// [`park_on`](crate::park_on)).
    pub wait: Option<crate::WaitInfo>,
}

/// Counters of the current runtime.
///
/// # Panics
///
/// Outside a runtime.
#[track_caller]
pub fn stats() -> Stats {
    context::with_sched("coro::stats", |s| {
        let timers = s.timers.borrow();
        let (blocking_threads, blocking_queued) = s.blocking.threads_and_queued();
        Stats {
            live: s.tasks.borrow().len(),
            ready: s.ready.borrow().len(),
            pending_timers: timers.pending(),
            timer_heap_len: timers.len(),
            switches: s.counters.switches.get(),
            polls: s.counters.polls.get(),
            forced_yields: s.counters.forced_yields.get(),
            latency_warnings: s
                .watchdog
                .as_ref()
                .map_or(0, |w| w.shared.warnings.load(Ordering::Relaxed)),
            spin_warnings: s.counters.spin_warnings.get(),
            spawned: s.counters.spawned.get(),
            panicked: s.counters.panicked.get(),
            timers_fired: s.counters.timers_fired.get(),
            io_sources: s.reactor.sources(),
            blocking_in_flight: s.blocking.in_flight(),
            blocking_threads,
            blocking_queued,
            pooled_stacks: s.stacks.borrow().pooled(),
            idle_stacks: s.stacks.borrow().idle.out,
            idle_stack_trims: s.stacks.borrow().idle.trims,
            idle_stack_foreign: s.stacks.borrow().idle.foreign,
            leaked: s.waits.leaked.get(),
        }
    })
}

/// The live green threads of the current runtime, by id.
///
/// # Panics
///
/// Outside a runtime.
#[track_caller]
pub fn threads() -> Vec<ThreadInfo> {
    context::with_sched("coro::threads", |s| {
        let run = s.watchdog.as_ref().map(|w| {
            w.shared
                .run_ns
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone()
        });
        let mut v: Vec<ThreadInfo> = s
            .tasks
            .borrow()
            .iter()
            .map(|(_, t)| ThreadInfo {
                id: t.id,
                name: t.name.as_deref().map(str::to_owned),
                state: t.state.get(),
                waiting_on: t.waiting_on.get(),
                run_time: run
                    .as_ref()
                    .map(|r| Duration::from_nanos(r.get(&t.id).copied().unwrap_or(0))),
                stack_size: t.stack_size,
                parent: t.cancel.parent.get().map(|p| p.owner.id),
                age: crate::clock::Instant::from_ticks(t.spawned_at).elapsed(),
                wait: crate::waits::wait_info(s, t),
            })
            .collect();
        v.sort_by_key(|t| t.id);
        v
    })
}
