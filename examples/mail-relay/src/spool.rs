//! The spool: nothing acknowledged is ever lost. Messages become durable
//! here before the session answers 250, in batches (group commit), and
//! leave only when delivered.
//!
//! # On disk
//!
//! ```text
//! spool/
//!   tmp/      batch files being written; never read; emptied at start
//!   queue/    committed batch files, each named by its first message's id
//!   corrupt/  queue files that failed to parse at start (kept for a human)
//! ```
//!
//! A batch file holds the messages of one commit, one after the other:
//! each is its envelope (line-oriented `key value` text led by a version
//! line, see [`encode`]), a blank line, and its content, whose length the
//! envelope gives. A batch is written under `tmp/`, fsynced, renamed into
//! `queue/`, and `queue/` is fsynced; only then is any of its messages
//! reported committed. A crash at any point leaves either no file in
//! `queue/` (no client got a 250 for it) or a complete one; `tmp/`
//! leftovers are removed at the next start, so the scanner never sees half
//! a file.
//!
//! A batch file is removed when every message in it has been delivered
//! (the spool counts them in memory). After a crash the messages of the
//! batches still present are all delivered again; delivery is idempotent
//! per message (the Maildir transport recognises a message it already
//! delivered by its file name). Readers skip envelope keys they do not
//! know, so later versions can add per-recipient and retry state; part 2
//! keeps mutable state (delivered recipients, the next retry) in a sidecar
//! `queue/<name>.state` written by rename, and re-spools a long-deferred
//! message on its own so that its batch can go.
//!
//! # Group commit
//!
//! Sessions hand finished messages to one committer green thread through a
//! [`Fifo`] and wait for their result. The committer takes everything
//! queued and makes it one batch file in one `coro::blocking` job: one
//! write, one fdatasync, one rename, one directory fsync, however many
//! messages; what arrives meanwhile forms the next batch. On ext4 here an
//! fdatasync costs about 4.6 ms whatever it syncs, and twenty of them in a
//! row cost twenty times that (each forces its own journal commit), so
//! per-message files would cap the relay near 200 messages/s; a batch file
//! makes the cost per commit, not per message.

use std::cell::RefCell;
use std::collections::HashMap;
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

/// Parses a batch file: every message in it, in order.
pub fn decode_all(mut bytes: &[u8]) -> Result<Vec<Message>, String> {
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let (m, used) = decode(bytes)?;
        out.push(m);
        bytes = &bytes[used..];
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
    /// Batch files in `queue/`: name → messages in it not yet delivered.
    batches: RefCell<HashMap<String, usize>>,
    /// Undelivered message id → the batch file holding it.
    batch_of: RefCell<HashMap<String, String>>,
}

impl std::fmt::Debug for Spool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Spool")
            .field("dir", &self.inner.dir)
            .field("queued", &self.inner.requests.len())
            .field("batches", &self.inner.batches.borrow().len())
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
    /// Batch files found (name, messages in it).
    batches: Vec<(String, Vec<String>)>,
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
        let mut recovered = coro::blocking(move || recover(&d)).map_err(io::Error::from)??;
        let spool = Spool {
            inner: Rc::new(Inner {
                dir,
                requests: Fifo::new(),
                on_commit: Box::new(on_commit),
                commit_delay,
                batches: Default::default(),
                batch_of: Default::default(),
            }),
        };
        for (name, ids) in std::mem::take(&mut recovered.batches) {
            spool.track(&name, ids);
        }
        Ok((spool, recovered))
    }

    /// Counts the messages `ids` as held by the batch file `name`.
    fn track(&self, name: &str, ids: Vec<String>) {
        let mut of = self.inner.batch_of.borrow_mut();
        self.inner
            .batches
            .borrow_mut()
            .insert(name.to_owned(), ids.len());
        for id in ids {
            of.insert(id, name.to_owned());
        }
    }

    /// The spool directory.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// Makes `msg` durable (its batch file is in `queue/` and the directory
    /// is synced) and hands it on for delivery; returns when that is done.
    /// Only the calling green thread waits; the batch it joins is shared.
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
            let result = if msgs.is_empty() {
                Ok(())
            } else {
                if !inner.commit_delay.is_zero() {
                    let _ = coro::sleep(inner.commit_delay);
                }
                let (dir, jobs) = (inner.dir.clone(), msgs.clone());
                match coro::blocking(move || write_batch(&dir, &jobs)) {
                    Ok(r) => r,
                    Err(e) => Err(io::Error::other(format!("commit cut short: {e}"))),
                }
            };
            match &result {
                Ok(()) if !msgs.is_empty() => {
                    log::debug!(
                        "batch {}: {} messages committed",
                        msgs[0].env.id,
                        msgs.len()
                    );
                    let ids = msgs.iter().map(|m| m.env.id.clone()).collect();
                    self.track(&msgs[0].env.id, ids);
                }
                Ok(()) => {}
                Err(e) => log::warn!("spool commit of {} messages failed: {e}", msgs.len()),
            }
            for req in batch {
                match req {
                    Request::Commit(msg, done) => {
                        let r = match &result {
                            Ok(()) => {
                                (inner.on_commit)(msg);
                                Ok(())
                            }
                            Err(e) => Err(io::Error::new(e.kind(), e.to_string())),
                        };
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

    /// Marks messages delivered: a batch file whose messages are all
    /// delivered is removed from `queue/` (one blocking job for all). Not
    /// synced: a removal lost in a crash means a second delivery attempt,
    /// which the transport recognises.
    ///
    /// # Errors
    ///
    /// Removing a file, or a timeout or interruption of the wait.
    pub fn remove(&self, ids: &[String]) -> io::Result<()> {
        let mut empty = Vec::new();
        {
            let mut batches = self.inner.batches.borrow_mut();
            let mut of = self.inner.batch_of.borrow_mut();
            for id in ids {
                let Some(name) = of.remove(id) else { continue };
                if let Some(n) = batches.get_mut(&name) {
                    *n -= 1;
                    if *n == 0 {
                        batches.remove(&name);
                        empty.push(name);
                    }
                }
            }
        }
        if empty.is_empty() {
            return Ok(());
        }
        let queue = self.inner.dir.join("queue");
        coro::blocking(move || {
            empty
                .iter()
                .try_for_each(|name| fs::remove_file(queue.join(name)))
        })?
    }

    /// Batch files in `queue/`.
    pub fn batches(&self) -> usize {
        self.inner.batches.borrow().len()
    }
}

/// Writes a batch file into `tmp/`, syncs it, renames it into `queue/`,
/// syncs `queue/`. Runs on the blocking pool.
fn write_batch(dir: &Path, msgs: &[Arc<Message>]) -> io::Result<()> {
    let name = &msgs[0].env.id;
    let (tmp, queue) = (dir.join("tmp").join(name), dir.join("queue").join(name));
    let mut bytes = Vec::with_capacity(msgs.iter().map(|m| m.data.len() + 256).sum());
    for m in msgs {
        bytes.extend_from_slice(&encode(&m.env, m.data.len()));
        bytes.extend_from_slice(&m.data);
    }
    let r = write_synced(&tmp, &bytes, &[]).and_then(|()| fs::rename(&tmp, &queue));
    if r.is_err() {
        let _ = fs::remove_file(&tmp);
        return r;
    }
    sync_dir(&dir.join("queue"))
        .map_err(|e| io::Error::new(e.kind(), format!("fsync of queue/: {e}")))
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
            continue; // a sidecar (part 2's `<name>.state`), not a batch
        }
        let bytes = fs::read(e.path())?;
        match decode_all(&bytes) {
            Ok(batch) if batch[0].env.id == name => {
                out.batches
                    .push((name, batch.iter().map(|m| m.env.id.clone()).collect()));
                msgs.extend(batch.into_iter().map(Arc::new));
            }
            Ok(batch) => out
                .corrupt
                .push((name, format!("first message is {}", batch[0].env.id))),
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
        assert_eq!(decode_all(&bytes).unwrap(), vec![a, b]);
        assert!(decode_all(&bytes[..bytes.len() - 3]).is_err());
        assert!(decode_all(b"").is_err());
    }
}
