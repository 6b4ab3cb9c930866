//! The binary's `log` backend: one line per record on stderr, or appended
//! to a log file (`--log-file`), in the shape of Postfix's maillog
//! (`time host mail-relay[pid]: level: message`). Control characters in a
//! message (which may come from a client or an upstream) are escaped
//! ([`crate::escape`]).
//!
//! A few dozen lines of our own rather than `env_logger`: the relay needs
//! only the maillog shape, a level from its own configuration (changed at
//! SIGHUP), a file it can reopen after rotation, and the date formatting
//! that already lives in `time`.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;
use std::sync::{Mutex, OnceLock};

use crate::time::Utc;

/// The log file, when there is one (reopened at SIGHUP).
static LOG_FILE: OnceLock<Mutex<File>> = OnceLock::new();

/// Writes records at the current maximum level and above.
#[derive(Debug)]
struct Logger {
    pid: u32,
}

impl log::Log for Logger {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        m.level() <= log::max_level()
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
            crate::escape::escape(&r.args().to_string())
        );
        match LOG_FILE.get() {
            // O_APPEND: each line lands whole at the end of the file.
            Some(f) => {
                let f = f.lock().unwrap_or_else(|p| p.into_inner());
                let _ = (&*f).write_all(line.as_bytes());
            }
            None => {
                let _ = std::io::stderr().lock().write_all(line.as_bytes());
            }
        }
    }

    fn flush(&self) {}
}

fn open_log(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    OpenOptions::new()
        .create(true)
        .append(true)
        .mode(crate::files::FILE_MODE)
        .open(path)
        .map_err(|e| {
            let note = crate::privilege::dropped_note();
            io::Error::new(e.kind(), format!("log_file {}: {e}{note}", path.display()))
        })
}

/// Installs the logger (once per process; later calls change nothing):
/// lines go to `file` when given (appended), else to stderr.
///
/// # Errors
///
/// If the log file cannot be opened.
pub fn init(level: log::LevelFilter, file: Option<&Path>) -> io::Result<()> {
    if let Some(p) = file {
        let _ = LOG_FILE.set(Mutex::new(open_log(p)?));
    }
    let logger = Logger {
        pid: std::process::id(),
    };
    if log::set_boxed_logger(Box::new(logger)).is_ok() {
        log::set_max_level(level);
    }
    Ok(())
}

/// At SIGHUP: sets the level, and reopens the log file at `path` (after
/// `logrotate` moved it away).
///
/// # Errors
///
/// If the file cannot be reopened (the old one stays in use).
pub fn reopen(path: Option<&Path>, level: log::LevelFilter) -> io::Result<()> {
    log::set_max_level(level);
    if let (Some(path), Some(slot)) = (path, LOG_FILE.get()) {
        let new = open_log(path)?;
        *slot.lock().unwrap_or_else(|p| p.into_inner()) = new;
    }
    Ok(())
}

/// A warning that may repeat fast (an accept failing while the open-file
/// limit is reached): logged at most once per period, with how many were
/// left out since, so that the log cannot be flooded.
#[derive(Debug)]
pub struct Throttled {
    every: std::time::Duration,
    last: Option<std::time::Instant>,
    left_out: u64,
}

impl Throttled {
    /// At most one line per `every`.
    pub fn new(every: std::time::Duration) -> Throttled {
        Throttled {
            every,
            last: None,
            left_out: 0,
        }
    }

    /// Logs `text` as a warning, unless a line was logged less than the
    /// period ago; returns whether it was logged.
    pub fn warn(&mut self, text: &str) -> bool {
        self.log(log::Level::Warn, text)
    }

    /// Logs `text` at `level`, unless a line was logged less than the
    /// period ago; returns whether it was logged.
    pub fn log(&mut self, level: log::Level, text: &str) -> bool {
        let now = std::time::Instant::now();
        if self
            .last
            .is_some_and(|t| now.duration_since(t) < self.every)
        {
            self.left_out += 1;
            return false;
        }
        match std::mem::take(&mut self.left_out) {
            0 => log::log!(level, "{text}"),
            n => log::log!(
                level,
                "{text} ({} like it not logged)",
                count(n as usize, "more line")
            ),
        }
        self.last = Some(now);
        true
    }
}

/// `n` and the noun, singular for one: "1 message", "2 messages".
pub fn count(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else if let Some(stem) = noun.strip_suffix('y') {
        format!("{n} {stem}ies")
    } else {
        format!("{n} {noun}s")
    }
}

#[cfg(test)]
mod tests {
    use super::Throttled;
    use std::time::Duration;

    #[test]
    fn a_repeated_warning_is_logged_once_per_period() {
        let mut t = Throttled::new(Duration::from_secs(3600));
        assert!(t.warn("accept: too many open files"));
        for _ in 0..1000 {
            assert!(!t.warn("accept: too many open files"));
        }
        assert_eq!(t.left_out, 1000);
        let mut t = Throttled::new(Duration::ZERO);
        assert!(t.warn("a") && t.warn("b"));
    }
}
