//! The reader: each line of the file is one JSON object whose `type` says
//! what it holds. The header comes first, once; `entry`, `latency_warning`
//! and `slice` lines follow in any order; lines of other types are skipped.
//!
//! Each line is parsed into a map first, so the header's `format` and
//! `version` are judged before its fields (a newer version may have
//! changed them), and then into the line type's fields, which serde checks.

use std::io::{self, BufRead};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::{Entry, Kind, Profile, Slice, Usage, Warning, FORMAT_VERSION};

/// The `format` value of the header line.
const FORMAT_NAME: &str = "coro-profile";

fn bad(no: usize, msg: impl std::fmt::Display) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("coro profile, line {no}: {msg}"),
    )
}

/// serde_json's message without its position, which counts within the
/// line (the caller names the line).
fn message(e: &serde_json::Error) -> String {
    let text = e.to_string();
    match text.rsplit_once(" at line ") {
        Some((msg, _)) if e.line() > 0 => format!("{msg} (column {})", e.column()),
        _ => text,
    }
}

/// The fields of one line, as the line type `T` (a struct of some of them:
/// the others are ignored); an error names the field.
fn fields<T: DeserializeOwned>(no: usize, line: Map<String, Value>) -> io::Result<T> {
    serde_path_to_error::deserialize(Value::Object(line)).map_err(|e| {
        let field = e.path().to_string();
        let msg = message(e.inner());
        match field.as_str() {
            "." | "" => bad(no, msg),
            _ => bad(no, format!("\"{field}\": {msg}")),
        }
    })
}

#[derive(Deserialize)]
struct UsageFields {
    #[serde(default)]
    utime_ns: u64,
    #[serde(default)]
    stime_ns: u64,
    #[serde(default)]
    minflt: u64,
    #[serde(default)]
    majflt: u64,
    #[serde(default)]
    nvcsw: u64,
    #[serde(default)]
    nivcsw: u64,
}

impl From<UsageFields> for Usage {
    fn from(f: UsageFields) -> Usage {
        let mut u = Usage::default();
        u.utime = Duration::from_nanos(f.utime_ns);
        u.stime = Duration::from_nanos(f.stime_ns);
        u.minflt = f.minflt;
        u.majflt = f.majflt;
        u.nvcsw = f.nvcsw;
        u.nivcsw = f.nivcsw;
        u
    }
}

#[derive(Deserialize)]
struct HeaderLine {
    #[serde(default)]
    program: Option<String>,
    #[serde(default)]
    pid: u32,
    start_unix_ns: u64,
    wall_ns: u64,
    #[serde(default)]
    latency_threshold_ns: Option<u64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum KindField {
    Thread,
    Region,
    Wait,
    Scheduler,
}

#[derive(Deserialize)]
struct EntryLine {
    kind: KindField,
    name: String,
    #[serde(default)]
    calls: u64,
    wall_ns: u64,
}

#[derive(Deserialize)]
struct WarningLine {
    thread: u64,
    #[serde(default)]
    name: Option<String>,
    start_unix_ns: u64,
    ran_ns: u64,
    #[serde(default)]
    running: bool,
}

#[derive(Deserialize)]
struct SliceLine {
    track: u64,
    name: String,
    start_ns: u64,
    dur_ns: u64,
    what: String,
    #[serde(default)]
    latency_warning: bool,
}

fn from_unix_ns(n: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_nanos(n)
}

/// The header: a coro profile of a version this crate reads.
fn header(no: usize, line: Map<String, Value>) -> io::Result<Profile> {
    if line.get("type").and_then(Value::as_str) != Some("header")
        || line.get("format").and_then(Value::as_str) != Some(FORMAT_NAME)
    {
        return Err(bad(
            no,
            "not a coro profile (the first line must be the header, \
             {\"type\":\"header\",\"format\":\"coro-profile\",...})",
        ));
    }
    let Some(version) = line.get("version").and_then(Value::as_u64) else {
        return Err(bad(no, "the header has no \"version\" number"));
    };
    if version > FORMAT_VERSION {
        return Err(bad(
            no,
            format!(
                "profile format version {version} is newer than this build reads \
                 (up to {FORMAT_VERSION})"
            ),
        ));
    }
    let usage: UsageFields = fields(no, line.clone())?;
    let h: HeaderLine = fields(no, line)?;
    let mut p = Profile::default();
    p.program = h.program.unwrap_or_default();
    p.pid = h.pid;
    p.start = from_unix_ns(h.start_unix_ns);
    p.wall = Duration::from_nanos(h.wall_ns);
    p.latency_threshold = h.latency_threshold_ns.map(Duration::from_nanos);
    p.usage = usage.into();
    Ok(p)
}

/// Adds a line after the header to `p`.
fn add(p: &mut Profile, no: usize, line: Map<String, Value>) -> io::Result<()> {
    match line.get("type").and_then(Value::as_str) {
        Some("header") => return Err(bad(no, "a second header line")),
        Some("entry") => {
            let usage: UsageFields = fields(no, line.clone())?;
            let e: EntryLine = fields(no, line)?;
            let kind = match e.kind {
                KindField::Thread => Kind::Thread,
                KindField::Region => Kind::Region,
                KindField::Wait => Kind::Wait,
                KindField::Scheduler => Kind::Scheduler,
            };
            let mut entry = Entry::new(kind, e.name);
            entry.calls = e.calls;
            entry.wall = Duration::from_nanos(e.wall_ns);
            entry.usage = usage.into();
            p.entries.push(entry);
        }
        Some("latency_warning") => {
            let w: WarningLine = fields(no, line)?;
            let mut warning = Warning::default();
            warning.thread = w.thread;
            warning.name = w.name;
            warning.started = from_unix_ns(w.start_unix_ns);
            warning.ran = Duration::from_nanos(w.ran_ns);
            warning.running = w.running;
            p.latency_warnings.push(warning);
        }
        Some("slice") => {
            let s: SliceLine = fields(no, line)?;
            let mut slice = Slice::default();
            slice.track = s.track;
            slice.name = s.name;
            slice.start = Duration::from_nanos(s.start_ns);
            slice.dur = Duration::from_nanos(s.dur_ns);
            slice.what = s.what;
            slice.latency_warning = s.latency_warning;
            p.timeline.push(slice);
        }
        Some(_) => {} // a later addition: skipped
        None => return Err(bad(no, "no \"type\" string")),
    }
    Ok(())
}

pub(crate) fn read(r: impl BufRead) -> io::Result<Profile> {
    let mut profile: Option<Profile> = None;
    for (i, text) in r.lines().enumerate() {
        let no = i + 1;
        let text = text?;
        if text.trim().is_empty() {
            continue;
        }
        let line: Map<String, Value> = serde_json::from_str(&text)
            .map_err(|e| bad(no, format!("not a JSON object: {}", message(&e))))?;
        match profile.as_mut() {
            None => profile = Some(header(no, line)?),
            Some(p) => add(p, no, line)?,
        }
    }
    profile.ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            "coro profile: the file is empty (no header line)",
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(s: &str) -> String {
        read(s.as_bytes()).unwrap_err().to_string()
    }

    fn header(version: u64) -> String {
        format!(
            "{{\"type\":\"header\",\"format\":\"coro-profile\",\"version\":{version},\
             \"start_unix_ns\":1,\"wall_ns\":5}}\n"
        )
    }

    #[test]
    fn other_files_and_newer_versions_are_refused_naming_the_line() {
        assert!(error("").contains("empty"));
        let e = error("hello\n");
        assert!(
            e.contains("line 1") && e.contains("not a JSON object"),
            "{e}"
        );
        assert!(error("{\"type\":\"entry\"}\n").contains("not a coro profile"));
        let e = error(&header(2));
        assert!(e.contains("version 2 is newer"), "{e}");
        // A newer version is named even when its header changed shape.
        let e = error("{\"type\":\"header\",\"format\":\"coro-profile\",\"version\":3}\n");
        assert!(e.contains("version 3 is newer"), "{e}");
        let e = error("{\"type\":\"header\",\"format\":\"coro-profile\",\"version\":\"1\"}");
        assert!(e.contains("no \"version\" number"), "{e}");
        let e = error(&(header(1) + "{\"type\":\"header\"}\n"));
        assert!(e.contains("line 2") && e.contains("second header"), "{e}");
    }

    #[test]
    fn fields_of_the_wrong_kind_are_named() {
        let e = error(&(header(1) + r#"{"type":"entry","kind":"bogus","name":"x","wall_ns":1}"#));
        assert!(
            e.contains("line 2") && e.contains("\"kind\"") && e.contains("bogus"),
            "{e}"
        );
        let e = error(
            &(header(1)
                + r#"{"type":"entry","kind":"wait","name":"x","wall_ns":1,"utime_ns":"7"}"#),
        );
        assert!(e.contains("line 2") && e.contains("utime_ns"), "{e}");
        let e = error(&(header(1) + r#"{"type":"entry","kind":"thread","name":"x","wall_ns":-1}"#));
        assert!(
            e.contains("line 2") && e.contains("\"wall_ns\"") && e.contains("-1"),
            "{e}"
        );
        let e = error(&(header(1) + r#"{"type":"slice","track":1}"#));
        assert!(e.contains("line 2") && e.contains("missing field"), "{e}");
        let e = error(&(header(1) + r#"{"kind":"thread"}"#));
        assert!(e.contains("line 2") && e.contains("\"type\""), "{e}");
        let e = error(r#"{"type":"header","format":"coro-profile","version":1,"wall_ns":1}"#);
        assert!(e.contains("line 1") && e.contains("`start_unix_ns`"), "{e}");
        let e = error(&(header(1) + "[1, 2]"));
        assert!(
            e.contains("line 2") && e.contains("not a JSON object"),
            "{e}"
        );
    }

    #[test]
    fn unknown_keys_and_line_types_are_skipped() {
        let text = header(1)
            + "\n"
            + "{\"type\":\"future\",\"x\":[1,{\"y\":2}]}\n"
            + "{\"type\":\"entry\",\"kind\":\"region\",\"name\":\"x\",\"wall_ns\":3,\"new\":\"y\"}\n";
        let p = read(text.as_bytes()).unwrap();
        assert_eq!(p.entries.len(), 1);
        assert_eq!(p.entries[0].kind, Kind::Region);
        assert_eq!(p.entries[0].usage, Usage::default());
        assert_eq!(p.wall, Duration::from_nanos(5));
        assert_eq!((p.pid, p.program.as_str()), (0, ""));
        assert_eq!(p.latency_threshold, None);
    }

    #[test]
    fn escapes_read_as_the_characters_they_stand_for() {
        let text = header(1)
            + r#"{"type":"latency_warning","thread":7,"name":"a \"q\" \\ \n\t\u0001 é \ud83d\ude00","start_unix_ns":9,"ran_ns":3,"running":true}"#;
        let p = read(text.as_bytes()).unwrap();
        let w = &p.latency_warnings[0];
        assert_eq!(w.name.as_deref(), Some("a \"q\" \\ \n\t\u{1} é 😀"));
        assert!(w.running);
        assert_eq!(w.started, from_unix_ns(9));
    }
}
