//! The spool's file formats: a message record (envelope and content, as a
//! batch file holds them one after the other) and the lines of a batch's
//! state journal (`<batch>.state`).
//!
//! # A message record
//!
//! ```text
//! mail-relay spool 1          version line
//! id 18F3A0C2B1D4E00001       key value lines; readers skip keys they do not know
//! arrival 1795419899.123456
//! client 127.0.0.1:41234
//! helo client.test
//! from sender@example.test    (empty for the null sender)
//! rcpt a@example.test         one per recipient, in envelope order
//! notify SUCCESS,FAILURE      that recipient's NOTIFY= (RFC 3461), if given
//! orcpt rfc822;a@example.test that recipient's ORCPT= (xtext), if given
//! body 7bit                   or 8bitmime (as declared)
//! smtputf8 no
//! octets 7bit                 or 8bit: whether the content has octets over 127
//! trusted yes                 the client was trusted (mynetworks): may be DKIM-signed
//! ret HDRS                    RET= (RFC 3461), if given
//! envid QQ314159              ENVID= (xtext), if given
//! size 1093                   octets of content
//!                             a blank line, then exactly `size` octets
//! ```
//!
//! A record written before `octets` and `trusted` existed reads as
//! untrusted, and its content is scanned once for 8-bit octets when it is
//! read back; one written before the DSN keys reads as a message whose
//! client asked for nothing (RFC 3461's defaults). A `notify` or `orcpt`
//! line belongs to the `rcpt` line before it. Every value is one line of
//! printable text by construction (xtext, keywords, addresses checked by
//! the session), so no value can end a key or start another.
//!
//! # A state journal
//!
//! Lines appended as delivery goes on (never rewritten), one event each:
//!
//! ```text
//! rcpt ID INDEX                       recipient INDEX of ID is finished (sent or bounced)
//! defer ID ATTEMPTS NEXT_MS REASON    ID was deferred: attempts so far, next attempt
//!                                     (ms since the epoch), why
//! delayed ID                          ID's sender was told of the delay (once)
//! done ID                             ID left the queue
//! ```
//!
//! The journal is not synced: a crash of the machine can lose its tail,
//! which means a message or recipient is attempted once more, never that
//! one is lost. A line that does not parse (a torn last line) is skipped.

use std::collections::{BTreeSet, HashMap};
use std::io::{self, BufRead, Read, Seek};
use std::net::SocketAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::dsn::{Dsn, Notify, Ret};

/// The envelope of a message: what the SMTP session said about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope {
    /// The queue id (unique, also the file name).
    pub id: String,
    /// When DATA ended.
    pub arrival: SystemTime,
    /// The client's address.
    pub client: SocketAddr,
    /// The name the client gave in EHLO/HELO.
    pub helo: String,
    /// The reverse path (empty for the null sender).
    pub from: String,
    /// The forward paths.
    pub rcpts: Vec<String>,
    /// BODY=8BITMIME was declared.
    pub eight_bit: bool,
    /// SMTPUTF8 was declared.
    pub smtputf8: bool,
    /// The content has octets over 127 (whatever BODY= said).
    pub has_8bit: bool,
    /// The message came from a trusted source: a client in `mynetworks`
    /// (or an authenticated submission), or the relay itself (a bounce).
    /// Only such mail is DKIM-signed.
    pub trusted: bool,
    /// What the client asked of delivery status notifications (RFC 3461).
    pub dsn: Dsn,
}

/// A message in memory, as a session received it or the relay made it
/// (a bounce), to be committed: its envelope and its content (with our
/// `Received:` header first, lines ending in CRLF, dot-unstuffed).
#[derive(Debug, PartialEq, Eq)]
pub struct Message {
    /// The envelope.
    pub env: Envelope,
    /// The content.
    pub data: Vec<u8>,
}

/// The first line of every message record.
const MAGIC: &str = "mail-relay spool 1";

/// The record's bytes before the content: the envelope.
pub fn encode(env: &Envelope, data_len: usize) -> Vec<u8> {
    encode_size(env, &data_len.to_string())
}

/// [`encode`] with the size zero-padded to 20 digits, so that the envelope
/// of a message being streamed has the same length before and after its
/// size is known (readers parse the padded number as any other).
pub fn encode_fixed(env: &Envelope, data_len: usize) -> Vec<u8> {
    encode_size(env, &format!("{data_len:020}"))
}

fn encode_size(env: &Envelope, size: &str) -> Vec<u8> {
    let mut h = format!(
        "{MAGIC}\nid {}\narrival {}\nclient {}\nhelo {}\nfrom {}\n",
        env.id,
        micros(env.arrival),
        env.client,
        env.helo,
        env.from
    );
    for (i, r) in env.rcpts.iter().enumerate() {
        h.push_str("rcpt ");
        h.push_str(r);
        h.push('\n');
        let d = env.dsn.rcpt(i);
        if let Some(n) = d.notify {
            h.push_str(&format!("notify {n}\n"));
        }
        if let Some(o) = &d.orcpt {
            h.push_str("orcpt ");
            h.push_str(o);
            h.push('\n');
        }
    }
    h.push_str(&format!(
        "body {}\nsmtputf8 {}\noctets {}\ntrusted {}\n",
        if env.eight_bit { "8bitmime" } else { "7bit" },
        if env.smtputf8 { "yes" } else { "no" },
        if env.has_8bit { "8bit" } else { "7bit" },
        if env.trusted { "yes" } else { "no" },
    ));
    if let Some(r) = env.dsn.ret {
        h.push_str(&format!("ret {}\n", r.as_str()));
    }
    if let Some(e) = &env.dsn.envid {
        h.push_str("envid ");
        h.push_str(e);
        h.push('\n');
    }
    h.push_str(&format!("size {size}\n\n"));
    h.into_bytes()
}

/// `secs.micros` since the epoch.
fn micros(t: SystemTime) -> String {
    let t = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    format!("{}.{:06}", t.as_secs(), t.subsec_micros())
}

/// The most octets an envelope may take in a batch file (a record whose
/// envelope does not end within it is corrupt).
pub const MAX_ENVELOPE: usize = 16 << 20;

/// One message of a batch file, as read back: its envelope and where its
/// content is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// The envelope.
    pub env: Envelope,
    /// Where the content starts in the file.
    pub offset: u64,
    /// The content's length.
    pub size: u64,
}

/// Reads every record of a batch file of `len` octets: the envelopes,
/// skipping the contents (a record from before `octets` has its content
/// scanned for 8-bit octets, a chunk at a time).
///
/// # Errors
///
/// What is wrong with the file (a truncated record, a bad envelope), or
/// the read error.
pub fn read_records<R: BufRead + Seek>(r: &mut R, len: u64) -> Result<Vec<Record>, String> {
    let mut out = Vec::new();
    let mut at = 0u64;
    let mut head = Vec::new();
    while at < len {
        head.clear();
        loop {
            // A line is read only as far as the envelope may still go.
            let room = (MAX_ENVELOPE + 1).saturating_sub(head.len()) as u64;
            let n = r
                .by_ref()
                .take(room)
                .read_until(b'\n', &mut head)
                .map_err(|e| e.to_string())?;
            if head.ends_with(b"\n\n") {
                break;
            }
            if head.len() > MAX_ENVELOPE {
                return Err(format!("an envelope over {MAX_ENVELOPE} octets"));
            }
            if n == 0 {
                return Err("no end of envelope".into());
            }
        }
        let text =
            std::str::from_utf8(&head[..head.len() - 2]).map_err(|_| "envelope is not UTF-8")?;
        let (mut env, size, octets_known) = decode_envelope(text)?;
        let offset = at + head.len() as u64;
        if size > len - offset {
            return Err(format!("size {size} but {} bytes of content", len - offset));
        }
        if octets_known {
            r.seek_relative(size as i64).map_err(|e| e.to_string())?;
        } else {
            env.has_8bit = scan_8bit(r, size).map_err(|e| e.to_string())?;
        }
        out.push(Record { env, offset, size });
        at = offset + size;
    }
    if out.is_empty() {
        return Err("empty batch file".into());
    }
    Ok(out)
}

/// Whether the next `size` octets of `r` have one over 127 (reads them
/// all, a chunk at a time).
fn scan_8bit(r: &mut impl Read, size: u64) -> io::Result<bool> {
    let mut buf = vec![0; super::content::CHUNK];
    let (mut left, mut found) = (size, false);
    while left > 0 {
        let n = buf.len().min(left as usize);
        r.read_exact(&mut buf[..n])?;
        found |= buf[..n].iter().any(|&b| b >= 0x80);
        left -= n as u64;
    }
    Ok(found)
}

/// Parses an envelope (its text before the blank line): the envelope, the
/// content's size, and whether `octets` was given.
pub fn decode_envelope(head: &str) -> Result<(Envelope, u64, bool), String> {
    let mut lines = head.lines();
    if lines.next() != Some(MAGIC) {
        return Err(format!("not a version-1 queue record (want {MAGIC:?})"));
    }
    let mut env = Envelope {
        id: String::new(),
        arrival: UNIX_EPOCH,
        client: "0.0.0.0:0".parse().expect("valid"),
        helo: String::new(),
        from: String::new(),
        rcpts: Vec::new(),
        eight_bit: false,
        smtputf8: false,
        has_8bit: false,
        trusted: false,
        dsn: Dsn::default(),
    };
    let mut size = None;
    let mut octets = false;
    for line in lines {
        let (k, v) = line.split_once(' ').unwrap_or((line, ""));
        match k {
            "id" => env.id = v.to_owned(),
            "arrival" => {
                let bad = || format!("bad arrival {v:?}");
                let (s, us) = v.split_once('.').ok_or_else(bad)?;
                let s: u64 = s.parse().map_err(|_| bad())?;
                let us: u64 = us.parse().map_err(|_| bad())?;
                env.arrival = UNIX_EPOCH + Duration::from_secs(s) + Duration::from_micros(us);
            }
            "client" => env.client = v.parse().map_err(|_| format!("bad client {v:?}"))?,
            "helo" => env.helo = v.to_owned(),
            "from" => env.from = v.to_owned(),
            "rcpt" => env.rcpts.push(v.to_owned()),
            "notify" | "orcpt" => {
                let i = env
                    .rcpts
                    .len()
                    .checked_sub(1)
                    .ok_or_else(|| format!("{k} before any rcpt"))?;
                let mut d = env.dsn.rcpt(i).clone();
                if k == "notify" {
                    d.notify = Some(Notify::parse(v).map_err(|e| format!("bad notify: {e}"))?);
                } else {
                    d.orcpt = Some(v.to_owned());
                }
                env.dsn.set_rcpt(i, d);
            }
            "ret" => {
                env.dsn.ret = Some(match v {
                    "FULL" => Ret::Full,
                    "HDRS" => Ret::Hdrs,
                    _ => return Err(format!("bad ret {v:?}")),
                })
            }
            "envid" => env.dsn.envid = Some(v.to_owned()),
            "body" => env.eight_bit = v == "8bitmime",
            "smtputf8" => env.smtputf8 = v == "yes",
            "octets" => {
                env.has_8bit = v == "8bit";
                octets = true;
            }
            "trusted" => env.trusted = v == "yes",
            "size" => size = Some(v.parse::<u64>().map_err(|_| format!("bad size {v:?}"))?),
            _ => {} // a later version's key
        }
    }
    if env.id.is_empty() || env.rcpts.is_empty() {
        return Err("envelope without id or recipients".into());
    }
    let size = size.ok_or("no size")?;
    Ok((env, size, octets))
}

/// What the journal says about one message that is still queued.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MsgState {
    /// Recipients (envelope indices) already finished.
    pub done_rcpts: BTreeSet<usize>,
    /// Delivery attempts that ended in a deferral.
    pub attempts: u32,
    /// When the next attempt is due (`None`: at once).
    pub next_attempt: Option<SystemTime>,
    /// Why the last attempt was deferred.
    pub reason: Option<String>,
    /// Its sender was told that it is delayed (that goes once).
    pub delay_warned: bool,
}

/// One event of a state journal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Update {
    /// Recipient `index` of `id` is finished (sent, or bounced and the
    /// bounce committed).
    Rcpt {
        /// The queue id.
        id: String,
        /// The recipient's index in the envelope.
        index: usize,
    },
    /// `id` was deferred.
    Defer {
        /// The queue id.
        id: String,
        /// Deferred attempts so far.
        attempts: u32,
        /// When to try again.
        next: SystemTime,
        /// Why.
        reason: String,
    },
    /// `id`'s sender was sent its delay notification.
    Delayed {
        /// The queue id.
        id: String,
    },
    /// `id` left the queue (all recipients finished, or dropped).
    Done {
        /// The queue id.
        id: String,
    },
}

impl Update {
    /// The message the event is about.
    pub fn id(&self) -> &str {
        match self {
            Update::Rcpt { id, .. }
            | Update::Defer { id, .. }
            | Update::Delayed { id }
            | Update::Done { id } => id,
        }
    }

    /// The event as a journal line (with its newline).
    pub fn line(&self) -> String {
        match self {
            Update::Rcpt { id, index } => format!("rcpt {id} {index}\n"),
            Update::Defer {
                id,
                attempts,
                next,
                reason,
            } => {
                let ms = next
                    .duration_since(UNIX_EPOCH)
                    .unwrap_or_default()
                    .as_millis();
                let reason: String = reason
                    .chars()
                    .map(|c| if c.is_control() { ' ' } else { c })
                    .collect();
                format!("defer {id} {attempts} {ms} {reason}\n")
            }
            Update::Delayed { id } => format!("delayed {id}\n"),
            Update::Done { id } => format!("done {id}\n"),
        }
    }

    /// Parses a journal line (without its newline).
    pub fn parse(line: &str) -> Option<Update> {
        let mut f = line.splitn(5, ' ');
        let (kind, id) = (f.next()?, f.next()?.to_owned());
        if id.is_empty() {
            return None;
        }
        match kind {
            "rcpt" => Some(Update::Rcpt {
                id,
                index: f.next()?.parse().ok()?,
            }),
            "defer" => Some(Update::Defer {
                id,
                attempts: f.next()?.parse().ok()?,
                next: UNIX_EPOCH + Duration::from_millis(f.next()?.parse().ok()?),
                reason: f.next().unwrap_or("").to_owned(),
            }),
            "delayed" => Some(Update::Delayed { id }),
            "done" => Some(Update::Done { id }),
            _ => None,
        }
    }
}

/// Replays a journal: the state of each message it mentions; `None` for
/// one that is done. Only complete lines count.
pub fn replay(journal: &str) -> HashMap<String, Option<MsgState>> {
    let mut out: HashMap<String, Option<MsgState>> = HashMap::new();
    let complete = match journal.rfind('\n') {
        Some(i) => &journal[..i],
        None => "",
    };
    for u in complete.lines().filter_map(Update::parse) {
        let slot = out
            .entry(u.id().to_owned())
            .or_insert_with(|| Some(MsgState::default()));
        let Some(state) = slot else { continue };
        match u {
            Update::Rcpt { index, .. } => {
                state.done_rcpts.insert(index);
            }
            Update::Defer {
                attempts,
                next,
                reason,
                ..
            } => {
                state.attempts = attempts;
                state.next_attempt = Some(next);
                state.reason = Some(reason);
            }
            Update::Delayed { .. } => state.delay_warned = true,
            Update::Done { .. } => *slot = None,
        }
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn sample() -> Message {
        Message {
            env: Envelope {
                id: "ABC123".into(),
                arrival: UNIX_EPOCH + Duration::from_micros(1_795_419_899_123_456),
                client: "127.0.0.1:4000".parse().unwrap(),
                helo: "client.test".into(),
                from: String::new(),
                rcpts: vec!["a@x.test".into(), "ü@y.test".into()],
                eight_bit: true,
                smtputf8: true,
                has_8bit: false,
                trusted: true,
                dsn: Dsn::default(),
            },
            data: b"Subject: hi\r\n\r\nbody\r\n\r\n\n".to_vec(),
        }
    }

    /// The records of `msgs` written one after the other, read back.
    fn records(bytes: &[u8]) -> Result<Vec<Record>, String> {
        read_records(&mut std::io::Cursor::new(bytes), bytes.len() as u64)
    }

    fn batch(msgs: &[&Message], fixed: bool) -> Vec<u8> {
        let mut bytes = Vec::new();
        for m in msgs {
            let head = if fixed {
                encode_fixed(&m.env, m.data.len())
            } else {
                encode(&m.env, m.data.len())
            };
            bytes.extend_from_slice(&head);
            bytes.extend_from_slice(&m.data);
        }
        bytes
    }

    #[test]
    fn round_trip() {
        let m = sample();
        let bytes = batch(&[&m], false);
        let r = records(&bytes).unwrap();
        let head = encode(&m.env, m.data.len()).len() as u64;
        assert_eq!(
            r,
            [Record {
                env: m.env.clone(),
                offset: head,
                size: m.data.len() as u64
            }]
        );
    }

    #[test]
    fn a_fixed_width_size_reads_back() {
        let m = sample();
        let short = encode_fixed(&m.env, 0);
        assert_eq!(short.len(), encode_fixed(&m.env, m.data.len()).len());
        let r = records(&batch(&[&m], true)).unwrap();
        assert_eq!((&r[0].env, r[0].size), (&m.env, m.data.len() as u64));
    }

    #[test]
    fn truncated_or_foreign_files_are_refused() {
        let m = sample();
        let bytes = batch(&[&m], false);
        assert!(records(&bytes[..bytes.len() - 1])
            .unwrap_err()
            .contains("size"));
        assert!(records(b"hello\n\n").is_err());
        assert!(records(b"").is_err());
        // A file of junk without an end of envelope is read no further
        // than an envelope may go.
        let junk = vec![b'x'; MAX_ENVELOPE + 4096];
        assert!(records(&junk).unwrap_err().contains("an envelope over"));
        let later = String::from_utf8(bytes.clone())
            .unwrap()
            .replace("size", "retry 3\nsize");
        assert_eq!(
            records(later.as_bytes()).unwrap()[0].env,
            m.env,
            "unknown keys are skipped"
        );
    }

    #[test]
    fn dsn_parameters_round_trip_and_older_records_ask_for_nothing() {
        use crate::dsn::RcptDsn;
        let mut m = sample();
        m.env.dsn.ret = Some(Ret::Full);
        m.env.dsn.envid = Some("QQ+2B1".into());
        m.env.dsn.set_rcpt(
            1,
            RcptDsn {
                notify: Some(Notify::parse("SUCCESS,DELAY").unwrap()),
                orcpt: Some("utf-8;\u{fc}@y.test".into()),
            },
        );
        let bytes = batch(&[&m], false);
        let text = String::from_utf8_lossy(&bytes);
        assert!(
            text.contains("rcpt \u{fc}@y.test\nnotify SUCCESS,DELAY\norcpt utf-8;\u{fc}@y.test\n"),
            "{text}"
        );
        assert!(text.contains("ret FULL\nenvid QQ+2B1\nsize "), "{text}");
        assert_eq!(records(&bytes).unwrap()[0].env, m.env);
        // What an older relay wrote: no DSN keys.
        let head = String::from_utf8(encode(&m.env, m.data.len())).unwrap();
        let mut old: Vec<u8> = head
            .split_inclusive('\n')
            .filter(|l| {
                !["notify ", "orcpt ", "ret ", "envid "]
                    .iter()
                    .any(|k| l.starts_with(k))
            })
            .collect::<String>()
            .into_bytes();
        old.extend_from_slice(&m.data);
        let env = &records(&old).unwrap()[0].env;
        assert_eq!(env.dsn, Dsn::default());
        assert_eq!(env.rcpts, m.env.rcpts);
        assert!(records(b"mail-relay spool 1\nid A\nnotify NEVER\nrcpt a@b\nsize 0\n\n").is_err());
        let replayed = replay("defer A 1 0 x\ndelayed A\n");
        assert!(replayed["A"].as_ref().unwrap().delay_warned);
    }

    #[test]
    fn an_older_record_is_scanned_for_8bit_and_untrusted() {
        let mut m = sample();
        let old = |m: &Message| {
            let text = String::from_utf8(encode(&m.env, m.data.len())).unwrap();
            let text = text
                .lines()
                .filter(|l| {
                    !l.is_empty() && !l.starts_with("octets ") && !l.starts_with("trusted ")
                })
                .collect::<Vec<_>>()
                .join("\n");
            let mut bytes = format!("{text}\n\n").into_bytes();
            bytes.extend_from_slice(&m.data);
            bytes
        };
        let r = records(&old(&m)).unwrap();
        assert!(!r[0].env.has_8bit && !r[0].env.trusted);
        m.data = "caf\u{e9}\r\n".as_bytes().to_vec();
        let r = records(&old(&m)).unwrap();
        assert!(r[0].env.has_8bit);
    }

    #[test]
    fn batch_files_hold_messages_in_order() {
        let (a, mut b) = (sample(), sample());
        b.env.id = "ABC124".into();
        b.data = b"second\r\n".to_vec();
        let bytes = batch(&[&a, &b], false);
        let head = encode(&a.env, a.data.len()).len() as u64;
        let second = head + a.data.len() as u64 + encode(&b.env, b.data.len()).len() as u64;
        let r = records(&bytes).unwrap();
        let got: Vec<(&str, u64, u64)> = r
            .iter()
            .map(|r| (r.env.id.as_str(), r.offset, r.size))
            .collect();
        assert_eq!(
            got,
            [("ABC123", head, a.data.len() as u64), ("ABC124", second, 8)]
        );
        assert!(records(&bytes[..bytes.len() - 3]).is_err());
    }

    #[test]
    fn journal_lines_round_trip_and_replay() {
        let next = UNIX_EPOCH + Duration::from_millis(1_795_419_899_123);
        let events = [
            Update::Rcpt {
                id: "A".into(),
                index: 1,
            },
            Update::Defer {
                id: "A".into(),
                attempts: 1,
                next,
                reason: "host said: 450 4.3.0\r\nbusy".into(),
            },
            Update::Done { id: "B".into() },
            Update::Defer {
                id: "C".into(),
                attempts: 2,
                next,
                reason: "refused".into(),
            },
        ];
        let mut journal = String::new();
        for e in &events {
            journal.push_str(&e.line());
        }
        assert_eq!(
            Update::parse(events[1].line().trim_end()),
            Some(Update::Defer {
                id: "A".into(),
                attempts: 1,
                next,
                reason: "host said: 450 4.3.0  busy".into(),
            }),
            "control characters in a reason become spaces"
        );
        // A torn last line is not replayed.
        journal.push_str("done C");
        let states = replay(&journal);
        let a = states["A"].clone().unwrap();
        assert_eq!(a.done_rcpts, BTreeSet::from([1]));
        assert_eq!((a.attempts, a.next_attempt), (1, Some(next)));
        assert_eq!(states["B"], None);
        assert_eq!(states["C"].as_ref().unwrap().attempts, 2);
        assert!(replay("garbage\nrcpt\n\0\0\0\n").is_empty());
    }
}
