//! The spool: nothing acknowledged is ever lost. Messages become durable
//! here before the session answers 250, in batches (group commit), and
//! leave only when delivered.
//!
//! # On disk
//!
//! ```text
//! spool/
//!   tmp/      files being written; never read; emptied at start
//!   queue/    one file per accepted message, named by its queue id
//!   corrupt/  queue files that failed to parse at start (kept for a human)
//! ```
//!
//! A queue file is the envelope, a blank line, then the message (see
//! [`encode`]). It is written under `tmp/`, fsynced, renamed into `queue/`,
//! and `queue/` is fsynced: only then is the commit reported. A crash at
//! any point leaves either no file in `queue/` (the client got no 250) or a
//! complete one; `tmp/` leftovers are removed at the next start, so the
//! scanner never sees half a file. The envelope is line-oriented
//! `key value` text led by a version line; readers skip keys they do not
//! know, so later versions can add per-recipient and retry state (part 2
//! keeps that mutable state in a sidecar `queue/ID.state` written by
//! rename, leaving the message file immutable).
//!
//! # Group commit
//!
//! Sessions hand finished messages to one committer green thread through a
//! [`Fifo`] and wait for their result. The committer takes everything
//! queued, writes and fsyncs the whole batch in one `coro::blocking` job,
//! renames it, fsyncs the directory once, and answers every waiter; what
//! arrives meanwhile forms the next batch. One directory fsync (and one
//! journal commit, on ext4) is shared by every session that finished DATA
//! at about the same time, so throughput is not one fsync latency per
//! message.

use std::cell::RefCell;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use coro::sync::{Event, Fifo};

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

/// The first line of every queue file.
const MAGIC: &str = "mail-relay spool 1";

/// The queue file's bytes before the content: the envelope.
pub fn encode(env: &Envelope, data_len: usize) -> Vec<u8> {
    let t = env.arrival.duration_since(UNIX_EPOCH).unwrap_or_default();
    let mut h = format!(
        "{MAGIC}\nid {}\narrival {}.{:06}\nclient {}\nhelo {}\nfrom {}\n",
        env.id,
        t.as_secs(),
        t.subsec_micros(),
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
        "body {}\nsmtputf8 {}\nsize {data_len}\n\n",
        if env.eight_bit { "8bitmime" } else { "7bit" },
        if env.smtputf8 { "yes" } else { "no" }
    ));
    h.into_bytes()
}

/// Parses a queue file.
pub fn decode(bytes: &[u8]) -> Result<Message, String> {
    let split = bytes
        .windows(2)
        .position(|w| w == b"\n\n")
        .ok_or("no end of envelope")?;
    let head = std::str::from_utf8(&bytes[..split]).map_err(|_| "envelope is not UTF-8")?;
    let data = &bytes[split + 2..];
    let mut lines = head.lines();
    if lines.next() != Some(MAGIC) {
        return Err(format!("not a version-1 queue file (want {MAGIC:?})"));
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
                let (s, us): (u64, u64) = (
                    s.parse().map_err(|_| bad())?,
                    us.parse().map_err(|_| bad())?,
                );
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
        Some(n) if n == data.len() => Ok(Message {
            env,
            data: data.to_vec(),
        }),
        Some(n) => Err(format!("size {n} but {} bytes of content", data.len())),
        None => Err("no size".into()),
    }
}

/// What a session waits on: the committer's verdict for its message.
struct Done {
    result: RefCell<Option<io::Result<()>>>,
    event: Event,
}

enum Request {
    /// Make this message durable, then answer.
    Commit(Arc<Message>, Rc<Done>),
    /// Answer once everything queued before is committed.
    Flush(Rc<Done>),
}

/// The spool of one relay (cheap to clone: a handle).
#[derive(Clone)]
pub struct Spool {
    inner: Rc<Inner>,
}

struct Inner {
    /// The spool directory (absolute).
    dir: PathBuf,
    /// Requests for the committer, in arrival order.
    requests: Fifo<Request>,
    /// Where committed messages go next (the delivery queue).
    on_commit: Box<dyn Fn(Arc<Message>)>,
    /// Fault injection: extra time per batch.
    commit_delay: Duration,
}

impl std::fmt::Debug for Spool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Spool")
            .field("dir", &self.inner.dir)
            .field("queued", &self.inner.requests.len())
            .finish()
    }
}

/// What [`Spool::open`] found.
#[derive(Debug, Default)]
pub struct Recovered {
    /// Acknowledged messages not yet delivered, oldest first.
    pub messages: Vec<Arc<Message>>,
    /// Half-written files removed from `tmp/`.
    pub removed_tmp: usize,
    /// Queue files moved to `corrupt/`, with why.
    pub corrupt: Vec<(String, String)>,
}

impl Spool {
    /// Opens (creating) the spool at `dir`: removes what an interrupted
    /// write left in `tmp/` and reads every queued message back, on the
    /// blocking pool. Committed messages are handed to `on_commit`.
    ///
    /// # Errors
    ///
    /// If the directories cannot be made or read.
    pub fn open(
        dir: &Path,
        commit_delay: Duration,
        on_commit: impl Fn(Arc<Message>) + 'static,
    ) -> io::Result<(Spool, Recovered)> {
        let dir = std::path::absolute(dir)?;
        let d = dir.clone();
        let recovered = coro::blocking(move || recover(&d)).map_err(io::Error::from)??;
        let spool = Spool {
            inner: Rc::new(Inner {
                dir,
                requests: Fifo::new(),
                on_commit: Box::new(on_commit),
                commit_delay,
            }),
        };
        Ok((spool, recovered))
    }

    /// The spool directory.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// Makes `msg` durable (it is in `queue/` and the directory is synced)
    /// and hands it on for delivery; returns when that is done. Only the
    /// calling green thread waits; the batch it joins is shared.
    ///
    /// # Errors
    ///
    /// The write or sync error; a timeout or interruption of the wait (the
    /// commit itself still happens, and the message is delivered).
    pub fn commit(&self, msg: Arc<Message>) -> io::Result<()> {
        let done = Rc::new(Done {
            result: RefCell::new(None),
            event: Event::new(),
        });
        self.inner.requests.push(Request::Commit(msg, done.clone()));
        done.event.wait()?;
        let r = done.result.borrow_mut().take();
        r.unwrap_or_else(|| Err(io::Error::other("commit result taken twice")))
    }

    /// Waits until every commit requested before the call is done.
    ///
    /// # Errors
    ///
    /// A timeout or interruption of the wait.
    pub fn flush(&self) -> io::Result<()> {
        let done = Rc::new(Done {
            result: RefCell::new(None),
            event: Event::new(),
        });
        self.inner.requests.push(Request::Flush(done.clone()));
        done.event.wait()?;
        Ok(())
    }

    /// The committer: runs until interrupted (at shutdown).
    pub fn run_committer(&self) {
        let inner = &self.inner;
        while let Ok(batch) = inner.requests.pop_all() {
            let msgs: Vec<Arc<Message>> = batch
                .iter()
                .filter_map(|r| match r {
                    Request::Commit(m, _) => Some(m.clone()),
                    Request::Flush(_) => None,
                })
                .collect();
            let results = if msgs.is_empty() {
                Vec::new()
            } else {
                if !inner.commit_delay.is_zero() {
                    let _ = coro::sleep(inner.commit_delay);
                }
                let dir = inner.dir.clone();
                let jobs = msgs.clone();
                match coro::blocking(move || write_batch(&dir, &jobs)) {
                    Ok(r) => r,
                    Err(e) => msgs
                        .iter()
                        .map(|_| Err(io::Error::other(format!("commit cut short: {e}"))))
                        .collect(),
                }
            };
            let mut results = results.into_iter();
            for req in batch {
                match req {
                    Request::Commit(msg, done) => {
                        let r = results.next().expect("one result per message");
                        if r.is_ok() {
                            (inner.on_commit)(msg);
                        }
                        *done.result.borrow_mut() = Some(r);
                        done.event.set();
                    }
                    Request::Flush(done) => {
                        done.event.set();
                    }
                }
            }
        }
    }

    /// Removes delivered messages from `queue/` (one blocking job). Not
    /// synced: a removal lost in a crash means a second delivery attempt,
    /// which the Maildir transport recognises (same file name).
    ///
    /// # Errors
    ///
    /// A timeout or interruption of the wait.
    pub fn remove(&self, ids: Vec<String>) -> io::Result<Vec<io::Result<()>>> {
        let queue = self.inner.dir.join("queue");
        coro::blocking(move || {
            ids.iter()
                .map(|id| fs::remove_file(queue.join(id)))
                .collect()
        })
        .map_err(io::Error::from)
    }
}

/// Writes, syncs and renames a batch; one result per message. Runs on the
/// blocking pool.
fn write_batch(dir: &Path, msgs: &[Arc<Message>]) -> Vec<io::Result<()>> {
    let (tmp, queue) = (dir.join("tmp"), dir.join("queue"));
    let mut results: Vec<io::Result<()>> = msgs
        .iter()
        .map(|m| {
            let path = tmp.join(&m.env.id);
            let r = write_synced(&path, &encode(&m.env, m.data.len()), &m.data);
            if r.is_err() {
                let _ = fs::remove_file(&path);
            }
            r
        })
        .collect();
    for (m, r) in msgs.iter().zip(results.iter_mut()) {
        if r.is_ok() {
            *r = fs::rename(tmp.join(&m.env.id), queue.join(&m.env.id));
        }
    }
    if let Err(e) = sync_dir(&queue) {
        for r in results.iter_mut().filter(|r| r.is_ok()) {
            *r = Err(io::Error::new(e.kind(), format!("fsync of queue/: {e}")));
        }
    }
    results
}

/// Creates `path` (it must not exist), writes `head` and `body`, and syncs
/// its data.
pub fn write_synced(path: &Path, head: &[u8], body: &[u8]) -> io::Result<()> {
    let mut f = OpenOptions::new().write(true).create_new(true).open(path)?;
    f.write_all(head)?;
    f.write_all(body)?;
    f.sync_data()
}

/// fsyncs a directory, making renames into it durable.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// At start: makes the directories, empties `tmp/`, reads `queue/`.
fn recover(dir: &Path) -> io::Result<Recovered> {
    for sub in ["tmp", "queue", "corrupt"] {
        fs::create_dir_all(dir.join(sub))?;
    }
    sync_dir(dir)?;
    let mut out = Recovered::default();
    for e in fs::read_dir(dir.join("tmp"))? {
        fs::remove_file(e?.path())?;
        out.removed_tmp += 1;
    }
    let mut msgs = Vec::new();
    for e in fs::read_dir(dir.join("queue"))? {
        let e = e?;
        let name = e.file_name().to_string_lossy().into_owned();
        if name.contains('.') {
            continue; // a sidecar (part 2's `ID.state`), not a message
        }
        let bytes = fs::read(e.path())?;
        match decode(&bytes) {
            Ok(m) if m.env.id == name => msgs.push(Arc::new(m)),
            Ok(m) => out.corrupt.push((name, format!("holds id {}", m.env.id))),
            Err(why) => out.corrupt.push((name, why)),
        }
    }
    for (name, _) in &out.corrupt {
        fs::rename(dir.join("queue").join(name), dir.join("corrupt").join(name))?;
    }
    msgs.sort_by(|a, b| (a.env.arrival, &a.env.id).cmp(&(b.env.arrival, &b.env.id)));
    out.messages = msgs;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Message {
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
        assert_eq!(decode(&bytes).unwrap(), m);
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
            decode(later.as_bytes()).unwrap(),
            m,
            "unknown keys are skipped"
        );
    }
}
