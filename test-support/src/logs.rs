//! A `log` logger that records every message, for tests that check what
//! the code under test logs.
//!
//! One logger per process ([`capture`] installs it once, at level
//! `Trace`). Tests of one binary run at once, each on an OS thread of its
//! own, and their runtimes log on that thread: [`take`] reads only the
//! calling thread's records; [`lines`] and [`logged`] read everyone's, for
//! messages a test makes unique (a thread name, a tag).

use std::sync::{Mutex, MutexGuard, Once};
use std::thread::{self, ThreadId};

/// One logged message.
#[derive(Debug, Clone)]
pub struct Record {
    /// The OS thread that logged it.
    pub thread: ThreadId,
    /// Its level.
    pub level: log::Level,
    /// Its target (the module path unless the call named one).
    pub target: String,
    /// The formatted message.
    pub message: String,
}

static RECORDS: Mutex<Vec<Record>> = Mutex::new(Vec::new());

fn records() -> MutexGuard<'static, Vec<Record>> {
    // A test that panicked while holding it left whole records behind.
    RECORDS.lock().unwrap_or_else(|e| e.into_inner())
}

struct Capture;

impl log::Log for Capture {
    fn enabled(&self, _: &log::Metadata<'_>) -> bool {
        true
    }
    fn log(&self, r: &log::Record<'_>) {
        let record = Record {
            thread: thread::current().id(),
            level: r.level(),
            target: r.target().to_owned(),
            message: r.args().to_string(),
        };
        records().push(record);
    }
    fn flush(&self) {}
}

/// Installs the capturing logger (once per process; later calls do
/// nothing).
///
/// # Panics
///
/// If another logger was installed first.
pub fn capture() {
    static INIT: Once = Once::new();
    INIT.call_once(|| {
        log::set_logger(&Capture).expect("no other logger in tests");
        log::set_max_level(log::LevelFilter::Trace);
    });
}

/// Every record so far, from every thread, oldest first.
pub fn all() -> Vec<Record> {
    records().clone()
}

/// (level, message) of every record so far, from every thread.
pub fn lines() -> Vec<(log::Level, String)> {
    records()
        .iter()
        .map(|r| (r.level, r.message.clone()))
        .collect()
}

/// The messages at `level` that contain `needle`, from every thread.
pub fn logged(level: log::Level, needle: &str) -> Vec<String> {
    records()
        .iter()
        .filter(|r| r.level == level && r.message.contains(needle))
        .map(|r| r.message.clone())
        .collect()
}

/// Takes (removes) the calling thread's records whose target starts with
/// `target`: (level, message), oldest first.
pub fn take(target: &str) -> Vec<(log::Level, String)> {
    let me = thread::current().id();
    let mut mine = Vec::new();
    records().retain(|r| {
        if r.thread == me && r.target.starts_with(target) {
            mine.push((r.level, r.message.clone()));
            false
        } else {
            true
        }
    });
    mine
}
