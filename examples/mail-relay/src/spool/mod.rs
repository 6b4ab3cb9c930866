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
//! line, see [`mod@format`]), a blank line, and its content, whose length the
//! envelope gives. A batch is written under `tmp/`, fsynced, renamed into
//! `queue/`, and `queue/` is fsynced; only then is any of its messages
//! reported committed. A crash at any point leaves either no file in
//! `queue/` (no client got a 250 for it) or a complete one; `tmp/`
//! leftovers are removed at the next start, so the scanner never sees half
//! a file.
//!
//! # When the disk fails
//!
//! A 4xx after DATA means the message will not be delivered from this
//! spool; a 250 that it is on disk. A round whose write, fdatasync,
//! rename or sync of `queue/` fails answers 4xx to each of its sessions,
//! and leaves nothing: its files are removed from `tmp/`, and those
//! already renamed into `queue/` are removed again, then `queue/` is
//! synced once more so that their removal lasts. Every file of a round is
//! synced in `tmp/` before the first rename, so only a later rename or
//! the sync of `queue/` can fail after one.
//!
//! A failed fsync counts as lost data, never as something to retry.
//! After fsync reports an error, Linux may have dropped the dirty pages
//! and cleared the error, so a second fsync of the same file can succeed
//! with the data gone (PostgreSQL's "fsyncgate"). So a file whose sync
//! failed is never synced again and trusted: it is removed, its message
//! refused, and the client's next attempt writes a new file. The one
//! case a 4xx cannot cover is the machine crashing before the removal
//! reaches the disk: the file may then come back and be delivered, as
//! with every MTA. The stop's report reads `queue/` from the disk, so it
//! counts what the next start will find.
//!
//! A session that stops waiting for its commit (`timeouts.final_dot`, an
//! interruption) answers 4xx too; if the round commits its message
//! anyway, the message is recorded done at once and never delivered.
//!
//! # Delivery state
//!
//! Each batch file may have a journal beside it, `queue/<name>.state`,
//! to which delivery appends what happened to its messages: a recipient
//! finished, a message deferred (attempts, next attempt, reason), a
//! message done (see [`mod@format`]). One journal green thread takes the
//! events as they come and writes each round in one `coro::blocking` job;
//! a batch whose messages are all done is removed with its journal
//! instead. Neither the journal nor the removals are synced: a killed
//! process loses only the events not yet written, a crash of the machine
//! possibly more, and then a message (or recipient) whose upstream's 250
//! had come is delivered once more, as with every MTA; nothing is ever
//! lost. At start, [`Spool::open`] replays the journals, so deferred
//! messages keep their attempt count, next attempt and reason across a
//! restart, and finished recipients are not sent to again.
//!
//! The queue keeps only envelopes in memory: a committed message is
//! handed on with a [`Content`] handle (its batch file, where its content
//! starts, its length), and delivery reads the content from the file a
//! chunk at a time ([`mod@content`]). A batch file stays until its last
//! message is done, so a message deferred for days keeps its batch
//! companions' bytes on disk with it (never in memory).
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

mod content;
mod format;
mod journal;
mod scan;
mod spill;

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use coro::clock::Instant;
use coro::sync::{Event, Fifo};

pub use content::{Content, Held, Stored, CHUNK};
pub use format::{encode, Envelope, Message, Update};
use scan::recover;
pub use scan::{read_queue, Queued, Recovered};
pub use spill::{Spill, Spilled, SPILL_AT};

/// The ids of the messages placed into a batch file.
type Placed = Vec<String>;

/// What a session waits on: the committer's verdict for its message.
struct Done {
    result: RefCell<Option<io::Result<()>>>,
    event: Event,
    /// The session stopped waiting (its deadline, an interruption) and
    /// did not answer 250: the message, if it gets committed anyway, is
    /// removed instead of delivered.
    abandoned: Cell<bool>,
}

enum Request {
    /// Make this message durable, then answer; its content is in memory,
    /// or in its spill file when one is given; its session started
    /// receiving it at the instant given.
    Commit(Arc<Message>, Option<Spilled>, Option<Instant>, Rc<Done>),
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
    on_commit: Box<dyn Fn(Queued)>,
    /// Fault injection: extra time per batch.
    commit_delay: Duration,
    /// Batch files in `queue/`: name → messages in it not yet delivered.
    batches: RefCell<HashMap<String, usize>>,
    /// Undelivered message id → its batch file's name.
    located: RefCell<HashMap<String, Arc<str>>>,
    /// Events for the journal green thread, in order.
    journal: Fifo<journal::Request>,
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
        on_commit: impl Fn(Queued) + 'static,
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
                located: Default::default(),
                journal: Fifo::new(),
            }),
        };
        for (name, ids) in std::mem::take(&mut recovered.batches) {
            spool.track(&name, ids);
        }
        Ok((spool, recovered))
    }

    /// Counts the messages `placed` as held by the batch file `name`.
    fn track(&self, name: &str, placed: Placed) {
        let mut located = self.inner.located.borrow_mut();
        self.inner
            .batches
            .borrow_mut()
            .insert(name.to_owned(), placed.len());
        let batch: Arc<str> = name.into();
        for id in placed {
            located.insert(id, batch.clone());
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
    /// commit may still happen: the message is then removed, never
    /// delivered, since its client was not told 250).
    pub fn commit(&self, msg: Arc<Message>) -> io::Result<()> {
        self.commit_received(msg, None, None)
    }

    /// [`commit`](Spool::commit) for a message a session started receiving
    /// at `started` (its MAIL; the log's `delays=` counts from there to the
    /// commit), its content in memory or streamed into `spilled` (then
    /// `msg` has only the envelope).
    ///
    /// # Errors
    ///
    /// As [`commit`](Spool::commit).
    pub fn commit_received(
        &self,
        msg: Arc<Message>,
        spilled: Option<Spilled>,
        started: Option<Instant>,
    ) -> io::Result<()> {
        let done = Rc::new(Done {
            result: RefCell::new(None),
            event: Event::new(),
            abandoned: Cell::new(false),
        });
        self.inner
            .requests
            .push(Request::Commit(msg, spilled, started, done.clone()));
        let waited = done.event.wait();
        let r = done.result.borrow_mut().take();
        match (waited, r) {
            // Committed, even if the deadline passed at the same time.
            (_, Some(r)) => r,
            (Err(e), None) => {
                done.abandoned.set(true);
                Err(e.into())
            }
            (Ok(()), None) => Err(io::Error::other("commit result taken twice")),
        }
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
            abandoned: Cell::new(false),
        });
        self.inner.requests.push(Request::Flush(done.clone()));
        done.event.wait()?;
        Ok(())
    }

    /// The committer: runs until interrupted (at shutdown).
    pub fn run_committer(&self) {
        let inner = &self.inner;
        while let Ok(mut batch) = inner.requests.pop_all() {
            let msgs: Vec<Arc<Message>> = batch
                .iter()
                .filter_map(|r| match r {
                    Request::Commit(m, None, ..) => Some(m.clone()),
                    _ => None,
                })
                .collect();
            let spilled: Vec<Spilled> = batch
                .iter_mut()
                .filter_map(|r| match r {
                    Request::Commit(_, s, ..) => s.take(),
                    Request::Flush(_) => None,
                })
                .collect();
            let spilled_info: Vec<(String, u64, usize)> = spilled
                .iter()
                .map(|s| (file_name(&s.path), s.header_len, s.size))
                .collect();
            let result = if msgs.is_empty() && spilled.is_empty() {
                Ok(Vec::new())
            } else {
                if !inner.commit_delay.is_zero() {
                    let _ = coro::sleep(inner.commit_delay);
                }
                let (dir, jobs) = (inner.dir.clone(), msgs.clone());
                match coro::blocking(move || commit_round(&dir, &jobs, spilled)) {
                    Ok(r) => r,
                    Err(e) => Err(io::Error::other(format!("commit cut short: {e}"))),
                }
            };
            let queue = inner.dir.join("queue");
            // Where each committed message's content is.
            let mut contents: HashMap<String, Content> = HashMap::new();
            match &result {
                Ok(offsets) => {
                    if !msgs.is_empty() {
                        log::debug!(
                            "batch {}: {} committed",
                            msgs[0].env.id,
                            crate::logger::count(msgs.len(), "message")
                        );
                        let path: Arc<Path> = queue.join(&msgs[0].env.id).into();
                        for (m, &at) in msgs.iter().zip(offsets) {
                            let c = Content::in_file(path.clone(), at, m.data.len() as u64);
                            contents.insert(m.env.id.clone(), c);
                        }
                        let placed = msgs.iter().map(|m| m.env.id.clone()).collect();
                        self.track(&msgs[0].env.id, placed);
                    }
                    for (id, at, size) in &spilled_info {
                        let path: Arc<Path> = queue.join(id).into();
                        contents.insert(id.clone(), Content::in_file(path, *at, *size as u64));
                        self.track(id, vec![id.clone()]);
                    }
                }
                Err(e) => log::warn!(
                    "spool commit of {} failed: {e}",
                    crate::logger::count(msgs.len() + spilled_info.len(), "message")
                ),
            }
            for req in batch {
                match req {
                    Request::Commit(msg, _, started, done) => {
                        let received_in = started.map_or(Duration::ZERO, Instant::elapsed);
                        let r = match (&result, contents.remove(&msg.env.id)) {
                            (Ok(_), Some(_)) if done.abandoned.get() => {
                                // Its client was not told 250: it must not
                                // be delivered from here.
                                log::info!(
                                    "{}: committed after its session stopped waiting; removed",
                                    msg.env.id
                                );
                                self.record(Update::Done {
                                    id: msg.env.id.clone(),
                                });
                                Err(io::Error::other("the session stopped waiting"))
                            }
                            (Ok(_), Some(content)) => {
                                // The queue keeps the envelope; the content
                                // too for a while if it came whole (the
                                // queue decides).
                                let stored = Stored {
                                    env: msg.env.clone(),
                                    content,
                                };
                                let whole = !spilled_info.iter().any(|(id, ..)| *id == msg.env.id);
                                (inner.on_commit)(Queued {
                                    msg: Arc::new(stored),
                                    memory: whole.then_some(msg),
                                    state: Default::default(),
                                    received_in,
                                });
                                Ok(())
                            }
                            (Ok(_), None) => Err(io::Error::other("committed, but not placed")),
                            (Err(e), _) => Err(io::Error::new(e.kind(), e.to_string())),
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

    /// Batch files in `queue/` that this run tracks.
    pub fn batches(&self) -> usize {
        self.inner.batches.borrow().len()
    }

    /// What `queue/` holds, read from the disk (as the next start will
    /// read it): messages not done, and files (batch files, corrupt ones
    /// included).
    ///
    /// # Errors
    ///
    /// If `queue/` cannot be read; a timeout or interruption of the wait.
    pub fn on_disk(&self) -> io::Result<(usize, usize)> {
        let dir = self.inner.dir.clone();
        let scan = coro::blocking(move || read_queue(&dir)).map_err(io::Error::from)??;
        let messages = scan.batches.iter().map(|b| b.messages.len()).sum();
        Ok((messages, scan.batches.len() + scan.corrupt.len()))
    }
}

/// One commit round on the blocking pool: the in-memory messages as one
/// batch file and each spill file, all written and synced in `tmp/`, then
/// renamed into `queue/`, then one sync of `queue/`. Returns where each
/// in-memory message's content starts.
///
/// On failure nothing of the round is left: its files are removed from
/// `tmp/`, and those already renamed into `queue/` are taken out again
/// ([`withdraw`]), so a message whose session is told 4xx is not
/// delivered from this spool, now or after a restart.
fn commit_round(dir: &Path, msgs: &[Arc<Message>], spilled: Vec<Spilled>) -> io::Result<Vec<u64>> {
    let mut placed = Vec::new();
    let r = commit_files(dir, msgs, &spilled, &mut placed);
    if r.is_err() {
        if let Some(m) = msgs.first() {
            let _ = fs::remove_file(dir.join("tmp").join(&m.env.id));
        }
        for s in &spilled {
            let _ = fs::remove_file(&s.path);
        }
        withdraw(&dir.join("queue"), &placed);
    }
    r
}

/// The round's work; the files it renamed into `queue/` are pushed onto
/// `placed` as it goes.
fn commit_files(
    dir: &Path,
    msgs: &[Arc<Message>],
    spilled: &[Spilled],
    placed: &mut Vec<PathBuf>,
) -> io::Result<Vec<u64>> {
    let offsets = if msgs.is_empty() {
        Vec::new()
    } else {
        write_batch(dir, msgs)?
    };
    for s in spilled {
        s.file.sync_data()?;
    }
    let queue = dir.join("queue");
    let names = msgs
        .first()
        .map(|m| m.env.id.clone())
        .into_iter()
        .chain(spilled.iter().map(|s| file_name(&s.path)));
    for name in names {
        let to = queue.join(&name);
        fs::rename(dir.join("tmp").join(&name), &to)?;
        placed.push(to);
    }
    sync_dir(&queue).map_err(|e| io::Error::new(e.kind(), format!("fsync of queue/: {e}")))?;
    Ok(offsets)
}

/// Takes the files of a failed round back out of `queue/` and syncs
/// `queue/` so that their removal lasts (if that sync fails too, a crash
/// of the machine may bring them back: that is the one case where a
/// message refused with 4xx can still be delivered, as with every MTA).
/// A file that cannot be removed is logged: the next start would deliver
/// it.
fn withdraw(queue: &Path, placed: &[PathBuf]) {
    if placed.is_empty() {
        return;
    }
    for p in placed {
        if let Err(e) = fs::remove_file(p) {
            log::error!(
                "spool: {} of a failed commit cannot be removed ({e}): its sessions were told 4xx, \
                 and the next start will deliver it",
                p.display()
            );
        }
    }
    if let Err(e) = sync_dir(queue) {
        log::warn!("spool: fsync of queue/ after removing a failed commit's files: {e}");
    }
}

/// The last component of a spool path (an id).
fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Writes a batch file into `tmp/` and syncs it (the caller renames it
/// into `queue/`); returns where each message's content starts.
fn write_batch(dir: &Path, msgs: &[Arc<Message>]) -> io::Result<Vec<u64>> {
    let tmp = dir.join("tmp").join(&msgs[0].env.id);
    let mut bytes = Vec::with_capacity(msgs.iter().map(|m| m.data.len() + 256).sum());
    let mut offsets = Vec::with_capacity(msgs.len());
    for m in msgs {
        bytes.extend_from_slice(&encode(&m.env, m.data.len()));
        offsets.push(bytes.len() as u64);
        bytes.extend_from_slice(&m.data);
    }
    write_synced(&tmp, &bytes, &[])?;
    Ok(offsets)
}

/// Creates `path` (it must not exist; mode 0600), writes `head` and
/// `body`, and syncs its data.
pub fn write_synced(path: &Path, head: &[u8], body: &[u8]) -> io::Result<()> {
    let mut f = crate::files::create_new().open(path)?;
    f.write_all(head)?;
    f.write_all(body)?;
    f.sync_data()
}

/// fsyncs a directory, making renames into it durable.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}
