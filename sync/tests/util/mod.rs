//! Helpers shared by the sync tests: a bounded runtime, a way to let every
//! ready thread run, and a log of what each waiter got.

#![allow(dead_code)]

use std::cell::RefCell;
use std::fmt::Debug;
use std::rc::Rc;
use std::time::Duration;

pub mod conns;
pub mod workers;

/// No test may block longer than this: a hang guard, loose enough for the
/// longest test (a model run of thousands of steps) under an emulator on a
/// loaded machine.
pub const LIMIT: Duration = Duration::from_secs(120);

/// Runs `f` as the main green thread of a fresh runtime; the test fails if
/// `f` is still blocked after [`LIMIT`].
#[track_caller]
pub fn run<T: 'static>(f: impl FnOnce() -> T + 'static) -> T {
    coro_runtime::run(move || {
        coro_runtime::with_timeout(LIMIT, f).expect("test ran past its time limit")
    })
}

/// Yields enough times for every chain of wake-ups started so far to run to
/// its end (each yield lets the threads made ready before it run once).
pub fn settle() {
    for _ in 0..64 {
        coro_runtime::yield_now();
    }
}

/// Yields (no timers involved) until `cond` holds, to force an
/// interleaving; panics after 100 000 yields, saying what it waited for.
#[track_caller]
pub fn yield_until(what: &str, cond: impl Fn() -> bool) {
    for _ in 0..100_000 {
        if cond() {
            return;
        }
        coro_runtime::yield_now();
    }
    panic!("still waiting for {what}");
}

/// What each waiter ended with, in the order they finished.
#[derive(Clone, Default)]
pub struct Log(Rc<RefCell<Vec<(usize, String)>>>);

impl Log {
    pub fn new() -> Log {
        Log::default()
    }

    /// Records that waiter `i` finished with `what`.
    pub fn push(&self, i: usize, what: impl Debug) {
        self.0
            .borrow_mut()
            .push((i, format!("{what:?}").trim_matches('"').to_string()));
    }

    /// The entries so far.
    pub fn entries(&self) -> Vec<(usize, String)> {
        self.0.borrow().clone()
    }

    /// The waiters that finished, in order.
    pub fn order(&self) -> Vec<usize> {
        self.0.borrow().iter().map(|(i, _)| *i).collect()
    }

    /// The waiters whose outcome's text is `what`, in finishing order.
    pub fn with(&self, what: &str) -> Vec<usize> {
        self.0
            .borrow()
            .iter()
            .filter(|(_, s)| s == what)
            .map(|(i, _)| *i)
            .collect()
    }

    pub fn len(&self) -> usize {
        self.0.borrow().len()
    }
}

/// Interrupts every thread of `handles` whose index is in `which`.
#[track_caller]
pub fn interrupt<T>(
    handles: &[coro_runtime::JoinHandle<T>],
    which: impl IntoIterator<Item = usize>,
) {
    for i in which {
        handles[i].thread().interrupt().expect("waiter is alive");
    }
}

/// Joins every handle, failing on a panic.
#[track_caller]
pub fn join_all<T>(handles: Vec<coro_runtime::JoinHandle<T>>) -> Vec<T> {
    handles
        .into_iter()
        .map(|h| h.join().expect("green thread failed"))
        .collect()
}

/// A `log` logger for tests: records every message with the OS thread that
/// logged it, so a test (one runtime on one OS thread) sees only its own.
pub mod logs {
    use std::sync::{Mutex, Once};
    use std::thread::{self, ThreadId};

    static RECORDS: Mutex<Vec<(ThreadId, log::Level, String, String)>> = Mutex::new(Vec::new());

    struct Capture;
    impl log::Log for Capture {
        fn enabled(&self, _: &log::Metadata<'_>) -> bool {
            true
        }
        fn log(&self, r: &log::Record<'_>) {
            RECORDS.lock().unwrap_or_else(|e| e.into_inner()).push((
                thread::current().id(),
                r.level(),
                r.target().to_string(),
                r.args().to_string(),
            ));
        }
        fn flush(&self) {}
    }

    /// Installs the capturing logger (once per process).
    pub fn capture() {
        static INIT: Once = Once::new();
        INIT.call_once(|| {
            log::set_logger(&Capture).expect("no other logger in tests");
            log::set_max_level(log::LevelFilter::Trace);
        });
    }

    /// Takes this OS thread's records whose target starts with `target`:
    /// (level, message), oldest first.
    pub fn take(target: &str) -> Vec<(log::Level, String)> {
        let me = thread::current().id();
        let mut all = RECORDS.lock().unwrap_or_else(|e| e.into_inner());
        let mut mine = Vec::new();
        all.retain(|(t, level, tgt, msg)| {
            if *t == me && tgt.starts_with(target) {
                mine.push((*level, msg.clone()));
                false
            } else {
                true
            }
        });
        mine
    }
}
