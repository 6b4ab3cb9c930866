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
            escape(&r.args().to_string())
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
