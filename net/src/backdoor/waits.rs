//! The back door's views of who waits on whom: `deadlocks` (cycles of the
//! waits-for graph) and `leaks` (threads whose wait can never be served),
//! and the detail line `threads` prints under a parked thread.

use std::fmt::Write as _;
use std::io::{self, Write};

use coro_runtime::{self as rt, WaitInfo};

use super::session::Session;

/// `  └ Mutex 3 held by #8 'b', waiting 1.200 s, at src/x.rs:40:13`, for a
/// parked thread whose wait names an object, a holder or a caller.
pub(crate) fn wait_detail(w: &WaitInfo) -> Option<String> {
    if w.kind.is_empty() && w.site.is_none() {
        return None;
    }
    let mut line = String::from("  └ ");
    if !w.kind.is_empty() {
        let _ = write!(line, "{} {}", w.kind, w.object);
        match w.holder {
            Some(h) => {
                let _ = write!(
                    line,
                    " held by #{h} '{}'",
                    w.holder_name.as_deref().unwrap_or("<unnamed>")
                );
            }
            None => line.push_str(" (holder unknown)"),
        }
        line.push_str(", ");
    }
    let _ = write!(line, "waiting {:.3} s", w.waited.as_secs_f64());
    if let Some(site) = w.site {
        let _ = write!(line, ", at {site}");
    }
    Some(line)
}

/// `deadlocks`: each cycle, one thread a line.
pub(crate) fn deadlocks(s: &mut Session<'_>) -> io::Result<()> {
    let found = rt::deadlocks();
    if found.is_empty() {
        return writeln!(s, "no deadlocks");
    }
    writeln!(s, "{} deadlocks", found.len())?;
    for (i, d) in found.iter().enumerate() {
        writeln!(s, "deadlock {} ({} threads):", i + 1, d.threads.len())?;
        for t in &d.threads {
            writeln!(
                s,
                "  #{} '{}' parked in {}{} on {} {} held by #{} ({:.3} s)",
                t.id,
                t.name.as_deref().unwrap_or("<unnamed>"),
                t.call,
                t.site.map(|l| format!(" at {l}")).unwrap_or_default(),
                t.kind,
                t.object,
                t.holder,
                t.waited.as_secs_f64()
            )?;
        }
    }
    Ok(())
}

/// `leaks`: the threads reported as leaked that are still parked.
pub(crate) fn leaks(s: &mut Session<'_>) -> io::Result<()> {
    let list = rt::leaks();
    writeln!(
        s,
        "{} leaked green threads parked now ({} reported since start)",
        list.len(),
        rt::stats().leaked
    )?;
    for t in list {
        writeln!(
            s,
            "  #{} '{}' parked in {}{} for {:.3} s: {}",
            t.id,
            t.name.as_deref().unwrap_or("<unnamed>"),
            t.call,
            t.site.map(|l| format!(" at {l}")).unwrap_or_default(),
            t.waited.as_secs_f64(),
            t.reason
        )?;
    }
    Ok(())
}
