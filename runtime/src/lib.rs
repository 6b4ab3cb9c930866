//! The coro runtime: Shrapnel-style cooperative green threads on one OS thread.
//!
//! Code on a green thread is written in plain blocking style: it calls
//! [`sleep`], [`JoinHandle::join`], a socket's `read`, a mutex's `lock`, and
//! only that green thread waits while the others run. A runtime owns one OS
//! thread; only one of its green threads runs at a time, so code inside one
//! runtime has no data races by construction. Every call that can suspend
//! returns a `Result` whose error says why it stopped: a timeout of an
//! enclosing [`with_timeout`], a cancelled [`CancelScope`], an
//! [interrupt](Coro::interrupt), runtime shutdown. [`scope`] starts green
//! threads that borrow from the caller and have all ended when it returns.
//!
//! # Implementation
//!
//! * The OS thread that calls [`run`] (or [`Runtime::block_on`]) runs the
//!   scheduler loop (`sched`): fire due timers (`timer`, keyed by the TSC
//!   [`clock`]), run every ready green thread once in FIFO order, poll mio
//!   (`reactor`; epoll on Linux with a timerfd for sub-millisecond timers,
//!   kqueue on BSD and macOS).
//! * Green threads are corosensei coroutines on stacks carved from large
//!   mappings, each with a guard page (guard regions on Linux 6.13+), from a
//!   per-OS-thread pool (`stack`); a guard-page hit prints the thread's name
//!   and stack size and aborts. A thread parked for long has its stack
//!   copied out to the heap and its pages released (`stack::copy`).
//! * Each green thread keeps a stack of the scopes it runs inside
//!   (`with_timeout`, cancel scopes, nurseries); a thread spawned in a
//!   [`scope`] continues into its owner's stack, so cancellations reach it
//!   (`cancel`, `scope`). Deadlines get a timer only when a thread parks.
//! * A watchdog OS thread per runtime (`watchdog`) reports a green thread
//!   that runs past the latency threshold without yielding, while it still
//!   runs.
//! * A pool of OS threads (`blocking`), started on demand up to 512 and
//!   shrunk when idle, runs [`blocking`] jobs.
//! * The [`profile`]r, off by default, charges the OS thread's time and
//!   `getrusage` counters to threads, regions and the loop while it records.
//!
//! # Calls that fail at once
//!
//! The rule for every blocking call of coro (the runtime's, coro-sync's,
//! coro-net's): **a call that returns an error without having waited
//! spends one unit of the thread's selfishness, as a socket call that
//! succeeds without waiting does** (see [`try_selfish`]). So a loop that
//! ignores errors (`loop { let _ = rx.recv(); }`, an accept loop that skips
//! errors on a closed listener or at `EMFILE`, a `sleep` in an expired
//! `with_timeout` scope) is forced to yield every few calls instead of
//! starving the other green threads. This covers parks, sleeps, joins and
//! blocking jobs refused by an expired scope, an interrupt or shutdown; a
//! socket call on a closed socket or whose syscall fails at once; a
//! channel's `recv` or `send` on a disconnected channel; a lock the caller
//! already holds.
//!
//! A deadline that passed, a cancelled scope and shutdown are
//! level-triggered: every later blocking call inside fails at once, so a
//! loop that skips errors never waits again. **Iterators over blocking
//! calls end once their thread's wait was cut short**, as they end when
//! their source closes: `incoming()` yields the error once (so a loop can
//! log why it stopped) and then ends; a channel's `iter()` ends at once.
//! And a thread that makes [`SPIN_LIMIT`] blocking calls in a row that all
//! fail at once that way, without waiting, is named in a warning (with
//! the call site) and counted in [`Stats::spin_warnings`]: it is a loop
//! that ignores the error it keeps getting (see `spin`).
//!
//! `try_*` calls (`try_lock`, `try_recv`, ...) never switch threads, for
//! success or failure: destructors use them. A loop that polls them must
//! yield itself ([`yield_now`]). A primitive of your own reports an
//! immediate failure with [`failed_at_once`].
//!
//! Four invariants make the unsafe code sound, and are enforced by guards,
//! not convention (see the `context` module for where): tasks are resumed
//! and unwound only by their own scheduler with its runtime current; no panic
//! ever leaves a coroutine; a task is only woken by the runtime that owns it;
//! nothing outside a parked thread uses its stack (so an idle thread's stack
//! can be copied out and back).
//!
//! # Examples
//!
//! ```
//! use std::time::Duration;
//!
//! coro::run(|| {
//!     let sleeper = coro::spawn(|| coro::sleep(Duration::from_millis(20)));
//!     let r = coro::with_timeout(Duration::from_millis(5), || sleeper.thread().clone());
//!     assert!(r.is_ok()); // nothing blocked inside: no timeout
//!     let waited = coro::with_timeout(Duration::from_millis(5), || coro::sleep(Duration::from_secs(1)));
//!     assert!(waited.is_err());
//!     sleeper.join().unwrap().unwrap();
//!     println!("{:?}", coro::stats());
//! });
//! ```

#![warn(missing_docs, missing_debug_implementations, rust_2018_idioms)]
#![warn(clippy::undocumented_unsafe_blocks)]
#![doc(test(attr(deny(warnings))))]

mod asleep;
mod blocking;
mod borrow;
mod cancel;
mod cancel_scope;
pub mod clock;
mod context;
mod error;
pub mod flight;
pub mod future;
mod inspect;
mod latency;
mod local;
mod panic_hook;
pub mod profile;
mod reactor;
mod remote;
mod result_slot;
mod runtime;
mod sched;
mod scope;
mod shutdown_hooks;
mod spawn;
mod spin;
mod stack;
mod stats;
mod suspend;
mod sys;
mod task;
mod task_pool;
mod timeout;
mod timer;
mod waiter_queue;
mod waits;
mod watchdog;

pub use blocking::blocking;
pub use cancel::current_effective_deadline;
pub use cancel_scope::CancelScope;
pub use error::{Cancelled, JoinError, ScheduleError, Timeout, WaitError};
pub use inspect::{thread_by_id, timers, TimerInfo};
pub use latency::{latency_threshold, latency_warnings, LatencyWarning, RECENT_WARNINGS};
pub use local::{AccessError, LocalKey};
pub use panic_hook::panic_hook_line;
pub use reactor::{Direction, Registration};
pub use remote::{handle, Handle, RemoteWaker};
pub use runtime::{
    run, Runtime, RuntimeBuilder, DEFAULT_IDLE_STACK_RELEASE, DEFAULT_LATENCY_SNAPSHOTS,
    DEFAULT_LATENCY_WARNING, DEFAULT_SELFISHNESS, DEFAULT_STACK_SIZE,
};
pub use scope::{scope, Scope, ScopeError, ScopedJoinHandle};
pub use shutdown_hooks::{on_shutdown, HOOKS_LIMIT};
pub use spawn::{
    current, current_id, set_selfishness, spawn, Builder, JoinHandle, MAX_SELFISHNESS,
};
pub use spin::SPIN_LIMIT;
pub use stack::{DEFAULT_STACK_GUARD, MIN_STACK_SIZE};
pub use stats::{stats, threads, Stats, ThreadInfo};
pub use suspend::{park, park_as, park_on, sleep, sleep_until, try_selfish, yield_now};
pub use task::{Coro, ThreadState};
pub use timeout::{no_suspend, with_deadline, with_timeout};
pub use waits::{deadlocks, leaks, BlockedThread, Deadlock, LeakedThread, WaitInfo, WaitTarget};

/// Re-exported so `coro::net` and users can name mio's interest flags.
pub use mio::Interest;

/// Spends one unit of the running green thread's selfishness for a
/// blocking call that is returning an error without having waited (see
/// "Calls that fail at once" in the crate docs); does nothing outside a
/// green thread. The runtime's own calls, coro-sync and coro-net call it;
/// call it in a blocking primitive of your own.
#[inline]
pub fn failed_at_once() {
    suspend::failed_at_once_if_green();
}

/// Whether the calling code runs on a green thread of a coro runtime.
pub fn in_green_thread() -> bool {
    context::try_with_sched(|s| !s.current.get().is_null()).unwrap_or(false)
}
