//! The profile file: JSON lines, format version [`FORMAT_VERSION`]. The
//! layout is documented in the `profile` module; this file writes it. The
//! `coro-profile` package reads it back.

use std::io::{self, Write};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::usage::Usage;
use super::Profile;
use crate::observers::json::write_string;

/// The version this build writes.
pub const FORMAT_VERSION: u64 = 1;

/// The `format` value of the header line.
const FORMAT_NAME: &str = "coro-profile";

fn ns(d: Duration) -> u128 {
    d.as_nanos()
}

fn unix_ns(t: SystemTime) -> u128 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos())
}

fn opt_string(w: &mut impl Write, s: Option<&str>) -> io::Result<()> {
    match s {
        Some(s) => write_string(w, s),
        None => w.write_all(b"null"),
    }
}

pub(crate) fn write(p: &Profile, w: &mut impl Write) -> io::Result<()> {
    write!(
        w,
        "{{\"type\":\"header\",\"format\":\"{FORMAT_NAME}\",\"version\":{FORMAT_VERSION},\"program\":"
    )?;
    write_string(w, &p.program)?;
    write!(
        w,
        ",\"pid\":{},\"start_unix_ns\":{},\"wall_ns\":{},\"latency_threshold_ns\":",
        p.pid,
        unix_ns(p.start),
        ns(p.wall)
    )?;
    match p.latency_threshold {
        Some(t) => write!(w, "{}", ns(t))?,
        None => w.write_all(b"null")?,
    }
    write!(w, ",")?;
    usage_fields(w, &p.usage)?;
    writeln!(w, "}}")?;
    for e in &p.entries {
        write!(
            w,
            "{{\"type\":\"entry\",\"kind\":\"{}\",\"name\":",
            e.kind.as_str()
        )?;
        write_string(w, &e.name)?;
        write!(w, ",\"calls\":{},\"wall_ns\":{},", e.calls, ns(e.wall))?;
        usage_fields(w, &e.usage)?;
        writeln!(w, "}}")?;
    }
    for l in &p.latency_warnings {
        write!(
            w,
            "{{\"type\":\"latency_warning\",\"thread\":{},\"name\":",
            l.thread
        )?;
        opt_string(w, l.name.as_deref())?;
        writeln!(
            w,
            ",\"start_unix_ns\":{},\"ran_ns\":{},\"running\":{}}}",
            unix_ns(l.started),
            ns(l.ran),
            l.running
        )?;
    }
    for sl in &p.timeline {
        write!(w, "{{\"type\":\"slice\",\"track\":{},\"name\":", sl.track)?;
        write_string(w, &sl.name)?;
        write!(
            w,
            ",\"start_ns\":{},\"dur_ns\":{},\"what\":",
            ns(sl.start),
            ns(sl.dur)
        )?;
        write_string(w, &sl.what)?;
        writeln!(w, ",\"latency_warning\":{}}}", sl.latency_warning)?;
    }
    Ok(())
}

fn usage_fields(w: &mut impl Write, u: &Usage) -> io::Result<()> {
    write!(
        w,
        "\"utime_ns\":{},\"stime_ns\":{},\"minflt\":{},\"majflt\":{},\"nvcsw\":{},\"nivcsw\":{}",
        ns(u.utime),
        ns(u.stime),
        u.minflt,
        u.majflt,
        u.nvcsw,
        u.nivcsw
    )
}
