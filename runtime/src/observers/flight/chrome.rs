//! Writes a [`Trace`] as Chrome trace-event JSON (the object form:
//! `{"traceEvents":[...],"displayTimeUnit":"ns","otherData":{...}}`), the
//! format Perfetto and `chrome://tracing` open. Times (`ts`, `dur`) are
//! microseconds with three decimals.

use std::collections::BTreeSet;
use std::io::{self, Write};
use std::time::Duration;

use super::{After, Event, Trace};
use crate::observers::json::write_string;

/// Microseconds, three decimals.
fn us(d: Duration) -> String {
    let ns = d.as_nanos();
    format!("{}.{:03}", ns / 1000, ns % 1000)
}

pub(super) fn write(t: &Trace, w: &mut impl Write) -> io::Result<()> {
    let pid = std::process::id();
    w.write_all(b"{\"traceEvents\":[\n")?;
    write!(
        w,
        "{{\"ph\":\"M\",\"pid\":{pid},\"tid\":0,\"name\":\"process_name\",\"args\":{{\"name\":\"coro runtime\"}}}}"
    )?;
    write!(
        w,
        ",\n{{\"ph\":\"M\",\"pid\":{pid},\"tid\":0,\"name\":\"thread_name\",\"args\":{{\"name\":\"scheduler\"}}}}"
    )?;
    let threads: BTreeSet<u64> = t
        .events
        .iter()
        .filter_map(|e| match e.event {
            Event::Spawn { thread, .. }
            | Event::Resume { thread, .. }
            | Event::Wake { thread, .. }
            | Event::Timer { thread, .. } => Some(thread),
            Event::Poll { .. } => None,
        })
        .collect();
    for id in &threads {
        write!(
            w,
            ",\n{{\"ph\":\"M\",\"pid\":{pid},\"tid\":{id},\"name\":\"thread_name\",\"args\":{{\"name\":"
        )?;
        write_string(w, &t.thread_name(*id))?;
        w.write_all(b"}}")?;
        write!(
            w,
            ",\n{{\"ph\":\"M\",\"pid\":{pid},\"tid\":{id},\"name\":\"thread_sort_index\",\"args\":{{\"sort_index\":{id}}}}}"
        )?;
    }
    for e in &t.events {
        let ts = us(e.at);
        match e.event {
            Event::Resume {
                thread,
                ran,
                then,
                latency_warning,
            } => {
                write!(
                    w,
                    ",\n{{\"ph\":\"X\",\"pid\":{pid},\"tid\":{thread},\"ts\":{ts},\"dur\":{},\"cat\":\"resume\",\"name\":",
                    us(ran)
                )?;
                write_string(w, &t.thread_name(thread))?;
                w.write_all(b",\"args\":{\"then\":")?;
                match then {
                    After::Yield => w.write_all(b"\"yield\"")?,
                    After::Finish => w.write_all(b"\"finish\"")?,
                    After::Park(why) => {
                        w.write_all(b"\"park\",\"reason\":")?;
                        write_string(w, why)?;
                    }
                }
                if latency_warning {
                    w.write_all(b",\"latency_warning\":true")?;
                }
                w.write_all(b"}}")?;
            }
            Event::Poll {
                events,
                took,
                blocking,
            } => write!(
                w,
                ",\n{{\"ph\":\"X\",\"pid\":{pid},\"tid\":0,\"ts\":{ts},\"dur\":{},\"cat\":\"poll\",\"name\":\"{}\",\"args\":{{\"events\":{events}}}}}",
                us(took),
                if blocking { "wait" } else { "poll" }
            )?,
            Event::Spawn { thread, parent } => write!(
                w,
                ",\n{{\"ph\":\"i\",\"s\":\"t\",\"pid\":{pid},\"tid\":{thread},\"ts\":{ts},\"cat\":\"spawn\",\"name\":\"spawn\",\"args\":{{\"parent\":{parent}}}}}"
            )?,
            Event::Wake { thread, by } => write!(
                w,
                ",\n{{\"ph\":\"i\",\"s\":\"t\",\"pid\":{pid},\"tid\":{thread},\"ts\":{ts},\"cat\":\"wake\",\"name\":\"wake\",\"args\":{{\"by\":{by}}}}}"
            )?,
            Event::Timer { thread, kind } => {
                write!(
                    w,
                    ",\n{{\"ph\":\"i\",\"s\":\"t\",\"pid\":{pid},\"tid\":{thread},\"ts\":{ts},\"cat\":\"timer\",\"name\":\"timer\",\"args\":{{\"kind\":"
                )?;
                write_string(w, kind)?;
                w.write_all(b"}}")?;
            }
        }
    }
    w.write_all(b"\n],\"displayTimeUnit\":\"ns\",\"otherData\":{\"reason\":")?;
    write_string(w, &t.reason)?;
    let start = t
        .start_wall
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    writeln!(
        w,
        ",\"start_unix_ns\":\"{start}\",\"first_event\":\"{}\",\"events\":\"{}\"}}}}",
        t.first_event,
        t.events.len()
    )
}
