//! The binary's `log` backend: one line per record on stderr, in the shape
//! of Postfix's maillog (`time host mail-relay[pid]: level: message`).
//!
//! A dozen lines of our own rather than `env_logger`: the relay needs only
//! the maillog shape and a level from its own configuration (not an
//! environment filter), and the date formatting already lives in `time`.

use std::io::Write;

use crate::time::Utc;

/// Writes records at `level` and above to stderr.
#[derive(Debug)]
struct Logger {
    level: log::LevelFilter,
    pid: u32,
}

impl log::Log for Logger {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        m.level() <= self.level
    }

    fn log(&self, r: &log::Record<'_>) {
        if !self.enabled(r.metadata()) {
            return;
        }
        let level = match r.level() {
            log::Level::Info => String::new(),
            l => format!("{}: ", l.as_str().to_lowercase()),
        };
        // One write per line, so lines from other threads never interleave.
        let line = format!(
            "{} mail-relay[{}]: {level}{}\n",
            Utc::now().iso8601(),
            self.pid,
            r.args()
        );
        let _ = std::io::stderr().lock().write_all(line.as_bytes());
    }

    fn flush(&self) {}
}

/// Installs the logger (once per process; later calls only change nothing).
pub fn init(level: log::LevelFilter) {
    let logger = Logger {
        level,
        pid: std::process::id(),
    };
    if log::set_boxed_logger(Box::new(logger)).is_ok() {
        log::set_max_level(level);
    }
}
