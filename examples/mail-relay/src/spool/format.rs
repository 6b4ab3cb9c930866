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
//! body 7bit                   or 8bitmime
//! smtputf8 no
//! size 1093                   octets of content
//!                             a blank line, then exactly `size` octets
//! ```
//!
//! # A state journal
//!
//! Lines appended as delivery goes on (never rewritten), one event each:
//!
//! ```text
//! rcpt ID INDEX                       recipient INDEX of ID is finished (sent or bounced)
//! defer ID ATTEMPTS NEXT_MS REASON    ID was deferred: attempts so far, next attempt
//!                                     (ms since the epoch), why
//! done ID                             ID left the queue
//! ```
//!
//! The journal is not synced: a crash of the machine can lose its tail,
//! which means a message or recipient is attempted once more, never that
//! one is lost. A line that does not parse (a torn last line) is skipped.

use std::collections::{BTreeSet, HashMap};
use std::net::SocketAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

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
}

/// A message: its envelope and its content (with our `Received:` header
/// first, lines ending in CRLF, dot-unstuffed).
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
    for r in &env.rcpts {
        h.push_str("rcpt ");
        h.push_str(r);
        h.push('\n');
    }
    h.push_str(&format!(
        "body {}\nsmtputf8 {}\nsize {size}\n\n",
        if env.eight_bit { "8bitmime" } else { "7bit" },
        if env.smtputf8 { "yes" } else { "no" }
    ));
    h.into_bytes()
}

/// `secs.micros` since the epoch.
fn micros(t: SystemTime) -> String {
    let t = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    format!("{}.{:06}", t.as_secs(), t.subsec_micros())
}

/// Parses a batch file: every message in it, in order, each with where
/// its content starts in the file.
pub fn decode_all(bytes: &[u8]) -> Result<Vec<(Message, u64)>, String> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let (m, used) = decode(&bytes[at..])?;
        let content = at + used - m.data.len();
        out.push((m, content as u64));
        at += used;
    }
    if out.is_empty() {
        return Err("empty batch file".into());
    }
    Ok(out)
}

/// Parses one message at the start of `bytes`; returns it and the bytes
/// it took.
pub fn decode(bytes: &[u8]) -> Result<(Message, usize), String> {
    let split = bytes
        .windows(2)
        .position(|w| w == b"\n\n")
        .ok_or("no end of envelope")?;
    let head = std::str::from_utf8(&bytes[..split]).map_err(|_| "envelope is not UTF-8")?;
    let rest = &bytes[split + 2..];
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
    };
    let mut size = None;
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
            "body" => env.eight_bit = v == "8bitmime",
            "smtputf8" => env.smtputf8 = v == "yes",
            "size" => size = Some(v.parse::<usize>().map_err(|_| format!("bad size {v:?}"))?),
            _ => {} // a later version's key
        }
    }
    if env.id.is_empty() || env.rcpts.is_empty() {
        return Err("envelope without id or recipients".into());
    }
    match size {
        Some(n) if n <= rest.len() => Ok((
            Message {
                env,
                data: rest[..n].to_vec(),
            },
            split + 2 + n,
        )),
        Some(n) => Err(format!("size {n} but {} bytes of content", rest.len())),
        None => Err("no size".into()),
    }
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
            Update::Rcpt { id, .. } | Update::Defer { id, .. } | Update::Done { id } => id,
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
            Update::Done { .. } => *slot = None,
        }
    }
    out
}

#[cfg(test)]
mod tests {
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
            },
            data: b"Subject: hi\r\n\r\nbody\r\n\r\n\n".to_vec(),
        }
    }

    #[test]
    fn round_trip() {
        let m = sample();
        let mut bytes = encode(&m.env, m.data.len());
        bytes.extend_from_slice(&m.data);
        assert_eq!(decode(&bytes).unwrap(), (m, bytes.len()));
    }

    #[test]
    fn a_fixed_width_size_reads_back() {
        let m = sample();
        let short = encode_fixed(&m.env, 0);
        let mut bytes = encode_fixed(&m.env, m.data.len());
        assert_eq!(short.len(), bytes.len());
        bytes.extend_from_slice(&m.data);
        assert_eq!(decode(&bytes).unwrap(), (m, bytes.len()));
    }

    #[test]
    fn truncated_or_foreign_files_are_refused() {
        let m = sample();
        let mut bytes = encode(&m.env, m.data.len());
        bytes.extend_from_slice(&m.data);
        assert!(decode(&bytes[..bytes.len() - 1])
            .unwrap_err()
            .contains("size"));
        assert!(decode(b"hello\n\n").is_err());
        let later = String::from_utf8(bytes.clone())
            .unwrap()
            .replace("size", "retry 3\nsize");
        assert_eq!(
            decode(later.as_bytes()).unwrap().0,
            m,
            "unknown keys are skipped"
        );
    }

    #[test]
    fn batch_files_hold_messages_in_order() {
        let (a, mut b) = (sample(), sample());
        b.env.id = "ABC124".into();
        b.data = b"second\r\n".to_vec();
        let mut bytes = Vec::new();
        for m in [&a, &b] {
            bytes.extend_from_slice(&encode(&m.env, m.data.len()));
            bytes.extend_from_slice(&m.data);
        }
        let head = encode(&a.env, a.data.len()).len() as u64;
        let second = head + a.data.len() as u64 + encode(&b.env, b.data.len()).len() as u64;
        assert_eq!(decode_all(&bytes).unwrap(), vec![(a, head), (b, second)]);
        assert!(decode_all(&bytes[..bytes.len() - 3]).is_err());
        assert!(decode_all(b"").is_err());
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
