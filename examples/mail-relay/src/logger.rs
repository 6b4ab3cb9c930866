//! The binary's `log` backend: one line per record on stderr, or appended
//! to a log file (`--log-file`), in the shape of Postfix's maillog
//! (`time host mail-relay[pid]: level: message`). Control characters in a
//! message (which may come from a client) are escaped.
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
            escape(&r.args().to_string())
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

/// `text` with control characters (which may come from a client: ESC
/// sequences that would drive an admin's terminal, a NUL, a CR that would
/// forge a line) written as `\xNN` (or `\u{NNNN}`), and a backslash as
/// `\\`, so that a line means what it says.
pub fn escape(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(|c| c.is_control() || c == '\\') {
        return text.into();
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            c if c.is_control() && (c as u32) < 0x100 => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if c.is_control() => out.push_str(&format!("\\u{{{:04x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out.into()
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
    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(super::escape("plain text"), "plain text");
        assert_eq!(
            super::escape("a\x1b[31mb\0c\\d\r\u{85}"),
            "a\\x1b[31mb\\x00c\\\\d\\x0d\\x85"
        );
    }
}
