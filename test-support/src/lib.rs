//! Helpers shared by coro's integration tests.
//!
//! Every crate's `tests/` uses the same bounds and the same tools, so a
//! test reads the same whichever crate it is in:
//!
//! - [`run`]: a fresh runtime for one test body, with a watchdog that turns
//!   a hang into a failure naming the test;
//! - [`settle`] and [`yield_until`]: forced interleavings, without timers;
//!   [`wait_until`]: a wait for another OS thread or process;
//! - [`within`] and [`bounded`]: a body on an OS thread of its own, bounded
//!   in time;
//! - [`child`]: a test re-run in a child process (for behaviour that aborts
//!   or faults), and a chatty command run with its pipes drained;
//! - [`hog`]: green threads that run long without yielding, until the
//!   runtime's watchdog has warned about them;
//! - [`logs`]: a `log` logger that records what the code under test logs;
//! - [`memory`]: the process's resident pages, as the kernel counts them;
//! - [`TempDir`]: a directory removed on drop.
//!
//! # Bounds
//!
//! Every bound here only turns a hang into a failure; none decides an
//! outcome. They are sized for a slow, loaded machine (two cores shared
//! with other builds, or valgrind): [`LIMIT`] is two minutes, [`yield_until`]
//! gives up after [`LIMIT`] of wall-clock time rather than after a count of
//! yields (how far a count of yields gets depends on the machine, and the
//! condition may wait on an OS thread the machine has not scheduled).
//!
//! This crate is not published: it is a dev-dependency of the workspace's
//! crates, never a dependency.

#![warn(missing_docs, missing_debug_implementations, rust_2018_idioms)]

pub mod child;
pub mod hog;
pub mod logs;
pub mod memory;
mod temp;

pub use temp::TempDir;

use std::io;
use std::panic::{self, AssertUnwindSafe};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Upper bound on one test body, and on any one wait of a test: only turns
/// a hang into a failure, never a speed check.
///
/// Two minutes, the largest bound any test needs: the slowest bodies (a
/// warm blocking pool under valgrind, a runtime per core) take seconds on a
/// loaded 2-core machine; the bound is only reached by a step that never
/// happens, and then costs that much once.
pub const LIMIT: Duration = Duration::from_secs(120);

/// Runs `f` as the main green thread of a fresh runtime, with an OS-thread
/// watchdog that aborts the process, naming the test, if `f` runs past
/// [`LIMIT`].
///
/// The watchdog adds nothing to what `f` sees: no deadline (a
/// `with_timeout` around `f` would bound its effective deadline and keep a
/// timer pending, which hides a deadlock the runtime would report), no
/// cancellation scope. It also catches a green thread that never yields,
/// which no timeout can interrupt.
#[track_caller]
pub fn run<T: 'static>(f: impl FnOnce() -> T + 'static) -> T {
    let name = std::thread::current().name().unwrap_or("test").to_owned();
    let (done, wait) = mpsc::channel::<()>();
    let dog = std::thread::spawn(move || {
        if let Err(mpsc::RecvTimeoutError::Timeout) = wait.recv_timeout(LIMIT) {
            eprintln!("{name}: ran past {LIMIT:?}; aborting");
            std::process::abort();
        }
    });
    let r = coro_runtime::run(f);
    drop(done);
    dog.join().unwrap();
    r
}

/// Yields enough times for every chain of wake-ups started so far (without
/// I/O) to run to its end: each yield lets the threads made ready before it
/// run once.
pub fn settle() {
    for _ in 0..64 {
        coro_runtime::yield_now();
    }
}

/// Waits, sleeping a millisecond at a time (so the scheduler polls the OS),
/// until `cond` holds: for conditions another OS thread or process brings
/// about.
///
/// # Panics
///
/// After [`LIMIT`], saying what it waited for; also when the sleep fails
/// (the calling thread was interrupted or cancelled).
#[track_caller]
pub fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        if start.elapsed() > LIMIT {
            panic!("still waiting for {what} after {LIMIT:?}");
        }
        if let Err(e) = coro_runtime::sleep(Duration::from_millis(1)) {
            panic!("still waiting for {what}: {e}");
        }
    }
}

/// Yields (no timer involved) until `cond` holds, for forcing an
/// interleaving: the scheduler polls the OS every few hundred resumes while
/// threads are ready, so I/O readiness and wake-ups from OS threads are
/// seen too.
///
/// # Panics
///
/// After [`LIMIT`] of wall-clock time (read from the clock, not a timer),
/// saying what it waited for.
#[track_caller]
pub fn yield_until(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    let mut yields = 0u64;
    while !cond() {
        if start.elapsed() > LIMIT {
            panic!("still waiting for {what} after {yields} yields in {LIMIT:?}");
        }
        coro_runtime::yield_now();
        yields += 1;
    }
}

/// Runs `f` on an OS thread of its own; `Err` if it does not finish within
/// [`LIMIT`] (a thread that hangs is left behind: the test process exits
/// anyway). A panic in `f` is resumed.
pub fn within<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Result<T, String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let r = panic::catch_unwind(AssertUnwindSafe(f));
        let _ = tx.send(r);
    });
    match rx.recv_timeout(LIMIT) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(p)) => panic::resume_unwind(p),
        Err(_) => Err(format!("did not finish within {LIMIT:?}")),
    }
}

/// [`within`], failing the test on a timeout.
#[track_caller]
pub fn bounded<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    within(f).unwrap_or_else(|e| panic!("{e}"))
}

/// Asserts that `r` failed with `kind`; returns the error.
#[track_caller]
pub fn assert_kind<T: std::fmt::Debug>(r: io::Result<T>, kind: io::ErrorKind) -> io::Error {
    match r {
        Ok(v) => panic!("expected an error of kind {kind:?}, got Ok({v:?})"),
        Err(e) => {
            assert_eq!(e.kind(), kind, "unexpected error: {e}");
            e
        }
    }
}

/// The text of a panic payload (`panic!` with a literal or a format).
pub fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_else(|| "<non-string panic payload>".to_owned())
}
