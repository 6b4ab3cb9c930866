//! The back door's `trace` command: the flight recorder's events (see
//! `coro_runtime::flight`) written as Chrome trace-event JSON, for Perfetto
//! (ui.perfetto.dev) or `chrome://tracing`.

use std::io::{self, Write};
use std::path::PathBuf;

use coro_runtime::{self as rt, flight};

use super::session::Session;

const USAGE: &str = "trace [dump PATH|latency PATH]";

/// `trace`: what is recorded; `trace dump PATH`: the ring now;
/// `trace latency PATH`: the newest snapshot taken on a latency warning.
pub(crate) fn trace(s: &mut Session<'_>, args: &str) -> io::Result<()> {
    let (verb, rest) = args.split_once(' ').unwrap_or((args, ""));
    let path = rest.trim();
    match verb {
        "" => {
            let now = flight::snapshot();
            let kept = flight::latency_snapshots();
            writeln!(
                s,
                "flight recorder: {} events in the ring (of the last {}); {} latency snapshots kept",
                now.events.len(),
                flight::EVENTS,
                kept.len()
            )?;
            for t in kept {
                writeln!(s, "  {} events: {}", t.events.len(), t.reason)?;
            }
            Ok(())
        }
        "dump" | "latency" if !path.is_empty() => {
            let trace = if verb == "dump" {
                flight::snapshot()
            } else {
                flight::latency_snapshots().pop().ok_or_else(|| {
                    io::Error::new(
                        io::ErrorKind::NotFound,
                        "no latency snapshot: no latency warning was reported (or snapshots are off)",
                    )
                })?
            };
            let path = std::path::absolute(PathBuf::from(path))?;
            let to = path.clone();
            let n = trace.events.len();
            rt::blocking(move || trace.save(&to))??;
            writeln!(
                s,
                "wrote {n} events to {} (open it in ui.perfetto.dev or chrome://tracing)",
                path.display()
            )
        }
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("usage: {USAGE}"),
        )),
    }
}
