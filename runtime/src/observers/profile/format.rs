//! The profile file: JSON lines, format version [`FORMAT_VERSION`]. The
//! layout is documented in the `profile` module; this file writes it and
//! reads it back.
//!
//! The reader accepts what the format allows and no more JSON than that:
//! one flat object per line whose values are strings, numbers, booleans or
//! `null`. Keys it does not know are ignored, and so are lines whose `type`
//! it does not know, so a later minor addition still reads; a newer
//! `version` is refused with an error that says so.

use std::io::{self, BufRead, Write};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::usage::Usage;
use super::{Entry, Kind, Profile, Slice, Warning};
use crate::observers::json::write_string;

/// The version this build writes, and the newest it reads.
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

/// A JSON value of the kinds a profile line may hold.
#[derive(Debug, Clone, PartialEq)]
enum Value {
    Str(String),
    UInt(u64),
    /// Any other number (negative, fractional, huge).
    Float(f64),
    Bool(bool),
    Null,
}

/// One parsed line: its fields, in order.
struct Line {
    no: usize,
    fields: Vec<(String, Value)>,
}

fn bad(no: usize, msg: impl std::fmt::Display) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("coro profile, line {no}: {msg}"),
    )
}

impl Line {
    fn get(&self, key: &str) -> Option<&Value> {
        self.fields.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    fn str(&self, key: &str) -> io::Result<&str> {
        match self.get(key) {
            Some(Value::Str(s)) => Ok(s),
            Some(v) => Err(bad(
                self.no,
                format!("\"{key}\" must be a string, not {v:?}"),
            )),
            None => Err(bad(self.no, format!("missing \"{key}\""))),
        }
    }

    fn opt_str(&self, key: &str) -> io::Result<Option<&str>> {
        match self.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(_) => self.str(key).map(Some),
        }
    }

    fn uint(&self, key: &str) -> io::Result<u64> {
        match self.get(key) {
            Some(Value::UInt(n)) => Ok(*n),
            Some(v) => Err(bad(
                self.no,
                format!("\"{key}\" must be a whole number >= 0, not {v:?}"),
            )),
            None => Err(bad(self.no, format!("missing \"{key}\""))),
        }
    }

    /// Unsigned, or 0 when absent (fields a later version may drop).
    fn uint_or_zero(&self, key: &str) -> io::Result<u64> {
        match self.get(key) {
            None => Ok(0),
            Some(_) => self.uint(key),
        }
    }

    fn opt_uint(&self, key: &str) -> io::Result<Option<u64>> {
        match self.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(_) => self.uint(key).map(Some),
        }
    }

    fn boolean(&self, key: &str) -> io::Result<bool> {
        match self.get(key) {
            None => Ok(false),
            Some(Value::Bool(b)) => Ok(*b),
            Some(v) => Err(bad(
                self.no,
                format!("\"{key}\" must be true or false, not {v:?}"),
            )),
        }
    }

    fn usage(&self) -> io::Result<Usage> {
        Ok(Usage {
            utime: Duration::from_nanos(self.uint_or_zero("utime_ns")?),
            stime: Duration::from_nanos(self.uint_or_zero("stime_ns")?),
            minflt: self.uint_or_zero("minflt")?,
            majflt: self.uint_or_zero("majflt")?,
            nvcsw: self.uint_or_zero("nvcsw")?,
            nivcsw: self.uint_or_zero("nivcsw")?,
        })
    }
}

fn from_unix_ns(n: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_nanos(n)
}

pub(crate) fn read(r: impl BufRead) -> io::Result<Profile> {
    let mut profile: Option<Profile> = None;
    for (i, line) in r.lines().enumerate() {
        let no = i + 1;
        let text = line?;
        if text.trim().is_empty() {
            continue;
        }
        let line = Line {
            no,
            fields: parse_object(&text).map_err(|e| bad(no, e))?,
        };
        let ty = line.str("type")?;
        let Some(p) = profile.as_mut() else {
            if ty != "header" || line.str("format").ok() != Some(FORMAT_NAME) {
                return Err(bad(
                    no,
                    "not a coro profile (the first line must be the header, \
                     {\"type\":\"header\",\"format\":\"coro-profile\",...})",
                ));
            }
            let version = line.uint("version")?;
            if version > FORMAT_VERSION {
                return Err(bad(
                    no,
                    format!(
                        "profile format version {version} is newer than this build reads \
                         (up to {FORMAT_VERSION})"
                    ),
                ));
            }
            profile = Some(Profile {
                program: line.opt_str("program")?.unwrap_or_default().to_owned(),
                pid: u32::try_from(line.uint_or_zero("pid")?).unwrap_or(0),
                start: from_unix_ns(line.uint("start_unix_ns")?),
                wall: Duration::from_nanos(line.uint("wall_ns")?),
                latency_threshold: line
                    .opt_uint("latency_threshold_ns")?
                    .map(Duration::from_nanos),
                usage: line.usage()?,
                entries: Vec::new(),
                latency_warnings: Vec::new(),
                timeline: Vec::new(),
            });
            continue;
        };
        match ty {
            "header" => return Err(bad(no, "a second header line")),
            "entry" => {
                let kind = line.str("kind")?;
                let kind = Kind::parse(kind).ok_or_else(|| {
                    bad(
                        no,
                        format!("unknown entry kind {kind:?} (thread, region, wait or scheduler)"),
                    )
                })?;
                p.entries.push(Entry {
                    kind,
                    name: line.str("name")?.to_owned(),
                    calls: line.uint_or_zero("calls")?,
                    wall: Duration::from_nanos(line.uint("wall_ns")?),
                    usage: line.usage()?,
                });
            }
            "latency_warning" => p.latency_warnings.push(Warning {
                thread: line.uint("thread")?,
                name: line.opt_str("name")?.map(str::to_owned),
                started: from_unix_ns(line.uint("start_unix_ns")?),
                ran: Duration::from_nanos(line.uint("ran_ns")?),
                running: line.boolean("running")?,
            }),
            "slice" => p.timeline.push(Slice {
                track: line.uint("track")?,
                name: line.str("name")?.to_owned(),
                start: Duration::from_nanos(line.uint("start_ns")?),
                dur: Duration::from_nanos(line.uint("dur_ns")?),
                what: line.str("what")?.to_owned(),
                latency_warning: line.boolean("latency_warning")?,
            }),
            _ => {} // a later addition: skipped
        }
    }
    profile.ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            "coro profile: the file is empty (no header line)",
        )
    })
}

/// Parses one flat JSON object.
fn parse_object(s: &str) -> Result<Vec<(String, Value)>, String> {
    let mut p = Parser {
        b: s.as_bytes(),
        i: 0,
    };
    p.ws();
    p.expect(b'{')?;
    let mut fields = Vec::new();
    p.ws();
    if p.peek() == Some(b'}') {
        p.i += 1;
    } else {
        loop {
            p.ws();
            let k = p.string()?;
            p.ws();
            p.expect(b':')?;
            p.ws();
            let v = p.value()?;
            fields.push((k, v));
            p.ws();
            match p.next() {
                Some(b',') => continue,
                Some(b'}') => break,
                _ => return Err(format!("expected ',' or '}}' at byte {}", p.i)),
            }
        }
    }
    p.ws();
    if p.i != p.b.len() {
        return Err(format!("unexpected text after the object at byte {}", p.i));
    }
    Ok(fields)
}

struct Parser<'a> {
    b: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn next(&mut self) -> Option<u8> {
        let c = self.peek();
        self.i += 1;
        c
    }

    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\r' | b'\n')) {
            self.i += 1;
        }
    }

    fn expect(&mut self, c: u8) -> Result<(), String> {
        if self.next() == Some(c) {
            Ok(())
        } else {
            Err(format!("expected '{}' at byte {}", c as char, self.i - 1))
        }
    }

    fn value(&mut self) -> Result<Value, String> {
        match self.peek() {
            Some(b'"') => self.string().map(Value::Str),
            Some(b't') => self.word("true", Value::Bool(true)),
            Some(b'f') => self.word("false", Value::Bool(false)),
            Some(b'n') => self.word("null", Value::Null),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(b'{' | b'[') => Err(format!(
                "nested objects and arrays are not part of the format (byte {})",
                self.i
            )),
            _ => Err(format!("expected a value at byte {}", self.i)),
        }
    }

    fn word(&mut self, w: &str, v: Value) -> Result<Value, String> {
        if self.b[self.i..].starts_with(w.as_bytes()) {
            self.i += w.len();
            Ok(v)
        } else {
            Err(format!("expected '{w}' at byte {}", self.i))
        }
    }

    fn number(&mut self) -> Result<Value, String> {
        let start = self.i;
        while matches!(
            self.peek(),
            Some(b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')
        ) {
            self.i += 1;
        }
        let text = std::str::from_utf8(&self.b[start..self.i]).map_err(|e| e.to_string())?;
        if let Ok(n) = text.parse::<u64>() {
            return Ok(Value::UInt(n));
        }
        text.parse::<f64>()
            .map(Value::Float)
            .map_err(|_| format!("bad number {text:?} at byte {start}"))
    }

    fn hex4(&mut self) -> Result<u32, String> {
        let h = self
            .b
            .get(self.i..self.i + 4)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u32::from_str_radix(h, 16).ok())
            .ok_or_else(|| format!("bad \\u escape at byte {}", self.i))?;
        self.i += 4;
        Ok(h)
    }

    fn string(&mut self) -> Result<String, String> {
        self.expect(b'"')?;
        let mut out = String::new();
        loop {
            let start = self.i;
            while !matches!(self.peek(), Some(b'"' | b'\\') | None) {
                self.i += 1;
            }
            out.push_str(std::str::from_utf8(&self.b[start..self.i]).map_err(|e| e.to_string())?);
            match self.next() {
                Some(b'"') => return Ok(out),
                Some(b'\\') => {}
                _ => return Err("unterminated string".into()),
            }
            let c = match self.next() {
                Some(b'"') => '"',
                Some(b'\\') => '\\',
                Some(b'/') => '/',
                Some(b'b') => '\u{8}',
                Some(b'f') => '\u{c}',
                Some(b'n') => '\n',
                Some(b'r') => '\r',
                Some(b't') => '\t',
                Some(b'u') => {
                    let hi = self.hex4()?;
                    let code = if (0xd800..0xdc00).contains(&hi) {
                        if self.next() != Some(b'\\') || self.next() != Some(b'u') {
                            return Err("unpaired surrogate in a \\u escape".into());
                        }
                        let lo = self.hex4()?;
                        if !(0xdc00..0xe000).contains(&lo) {
                            return Err("unpaired surrogate in a \\u escape".into());
                        }
                        0x10000 + ((hi - 0xd800) << 10) + (lo - 0xdc00)
                    } else {
                        hi
                    };
                    char::from_u32(code).ok_or("bad \\u escape")?
                }
                _ => return Err(format!("bad escape at byte {}", self.i - 1)),
            };
            out.push(c);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_round_trip_through_escapes() {
        let name = "a \"q\" \\ \n\t\u{1} é 😀";
        let mut buf = Vec::new();
        write_string(&mut buf, name).unwrap();
        let line = format!("{{\"k\":{}}}", String::from_utf8(buf).unwrap());
        let f = parse_object(&line).unwrap();
        assert_eq!(f, vec![("k".to_owned(), Value::Str(name.to_owned()))]);
        let f = parse_object(r#"{"k":"\ud83d\ude00\u00e9"}"#).unwrap();
        assert_eq!(f[0].1, Value::Str("😀é".into()));
    }

    #[test]
    fn values_and_malformed_lines() {
        let f = parse_object(r#" { "a" : 1 , "b":-2.5,"c":true,"d":null,"e":"x" } "#).unwrap();
        assert_eq!(
            f.iter().map(|(_, v)| v.clone()).collect::<Vec<_>>(),
            vec![
                Value::UInt(1),
                Value::Float(-2.5),
                Value::Bool(true),
                Value::Null,
                Value::Str("x".into())
            ]
        );
        assert_eq!(parse_object("{}").unwrap(), vec![]);
        for bad in [
            "",
            "{",
            "{\"a\":}",
            "{\"a\":1,}",
            "{\"a\":[1]}",
            "{\"a\":1} x",
            "{\"a\":\"\\ud800\"}",
            "{\"a\":\"open",
            "{a:1}",
        ] {
            assert!(parse_object(bad).is_err(), "{bad:?} parsed");
        }
    }
}
