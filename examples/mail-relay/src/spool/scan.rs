//! Reading the queue directory back: at start (recovery, which also
//! cleans up) and for `mail-relay mailq` while the relay is not running
//! (read only). Only the envelopes are read; the contents stay on disk.

use std::fs;
use std::io::{self, BufReader};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::content::{Content, Stored};
use super::format::{read_records, replay, Message, MsgState};
use super::{sync_dir, Placed};

/// A message still queued, as committed or read back from the spool:
/// its envelope, where its content is, and its delivery state.
#[derive(Debug)]
pub struct Queued {
    /// The message (its content is in the spool).
    pub msg: Arc<Stored>,
    /// The message as committed, when it was received whole (its content
    /// still in memory): the queue may hold it for the first attempt.
    pub memory: Option<Arc<Message>>,
    /// What its batch's journal says about it.
    pub state: MsgState,
    /// How long its receiving session took, from MAIL to the commit (the
    /// `a` of `delays=`; zero when not known, as after a restart).
    pub received_in: Duration,
}

/// A batch file and what is still queued of it.
#[derive(Debug)]
pub struct ScannedBatch {
    /// Its file name in `queue/`.
    pub name: String,
    /// Its messages that are not done.
    pub messages: Vec<Queued>,
}

/// What `queue/` holds.
#[derive(Debug, Default)]
pub struct QueueScan {
    /// Readable batch files, in directory order.
    pub batches: Vec<ScannedBatch>,
    /// Files that failed to parse, with why.
    pub corrupt: Vec<(String, String)>,
    /// Journals without their batch file (a crash between the two unlinks).
    pub orphans: Vec<String>,
}

/// The journal's file name for batch `name`.
pub fn journal_name(name: &str) -> String {
    format!("{name}.state")
}

/// Reads every batch file in `dir/queue` with its journal: the envelopes
/// and where each content is (the contents stay on disk). Files that go
/// away while it reads (delivered meanwhile) are skipped. Changes nothing.
///
/// # Errors
///
/// If the directory or a file that exists cannot be read.
pub fn read_queue(dir: &Path) -> io::Result<QueueScan> {
    let queue = std::path::absolute(dir.join("queue"))?;
    let mut out = QueueScan::default();
    let mut journals = Vec::new();
    for e in fs::read_dir(&queue)? {
        let name = e?.file_name().to_string_lossy().into_owned();
        match name.strip_suffix(".state") {
            Some(batch) => journals.push(batch.to_owned()),
            None if name.contains('.') => {} // not ours
            None => match read_batch(&queue, &name) {
                Ok(Some(b)) => out.batches.push(b),
                Ok(None) => {}
                Err(why) => out.corrupt.push((name, why)),
            },
        }
    }
    for j in journals {
        if !queue.join(&j).exists() {
            out.orphans.push(journal_name(&j));
        }
    }
    Ok(out)
}

/// One batch file and its journal; `Ok(None)` if it is gone.
fn read_batch(queue: &Path, name: &str) -> Result<Option<ScannedBatch>, String> {
    let path: PathBuf = queue.join(name);
    let file = match crate::files::open_read().open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    let len = file.metadata().map_err(|e| e.to_string())?.len();
    let records = read_records(&mut BufReader::new(file), len)?;
    if records[0].env.id != name {
        return Err(format!("first message is {}", records[0].env.id));
    }
    let journal = match fs::read(queue.join(journal_name(name))) {
        Ok(b) => String::from_utf8_lossy(&b).into_owned(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(format!("{}: {e}", journal_name(name))),
    };
    let mut states = replay(&journal);
    let path: Arc<Path> = path.into();
    let messages = records
        .into_iter()
        .filter_map(|r| {
            let state = match states.remove(&r.env.id) {
                Some(None) => return None, // done
                Some(Some(state)) => state,
                None => MsgState::default(),
            };
            let msg = Stored {
                env: r.env,
                content: Content::in_file(path.clone(), r.offset, r.size),
            };
            Some(Queued {
                msg: Arc::new(msg),
                memory: None,
                state,
                received_in: Duration::ZERO,
            })
        })
        .collect();
    Ok(Some(ScannedBatch {
        name: name.to_owned(),
        messages,
    }))
}

/// What [`Spool::open`](super::Spool::open) found.
#[derive(Debug, Default)]
pub struct Recovered {
    /// Acknowledged messages not yet delivered, oldest first, with what the
    /// journals say about them.
    pub messages: Vec<Queued>,
    /// Half-written files removed from `tmp/`.
    pub removed_tmp: usize,
    /// Queue files moved to `corrupt/`, with why.
    pub corrupt: Vec<(String, String)>,
    /// Batch files still holding messages: (name, their locations).
    pub(super) batches: Vec<(String, Placed)>,
}

/// At start: makes the directories, empties `tmp/`, reads `queue/`, sets
/// unreadable files aside, and removes batches that are all done and
/// journals without a batch.
pub(super) fn recover(dir: &Path) -> io::Result<Recovered> {
    for sub in ["tmp", "queue", "corrupt"] {
        crate::files::private_subdir(&dir.join(sub))?;
    }
    sync_dir(dir)?;
    let mut out = Recovered::default();
    for e in fs::read_dir(dir.join("tmp"))? {
        fs::remove_file(e?.path())?;
        out.removed_tmp += 1;
    }
    let scan = read_queue(dir)?;
    let queue = dir.join("queue");
    for name in &scan.orphans {
        fs::remove_file(queue.join(name))?;
    }
    for (name, _) in &scan.corrupt {
        fs::rename(queue.join(name), dir.join("corrupt").join(name))?;
        let _ = fs::rename(
            queue.join(journal_name(name)),
            dir.join("corrupt").join(journal_name(name)),
        );
    }
    out.corrupt = scan.corrupt;
    let mut msgs = Vec::new();
    for b in scan.batches {
        if b.messages.is_empty() {
            // Every message done, the removal lost in a crash.
            fs::remove_file(queue.join(&b.name))?;
            let _ = fs::remove_file(queue.join(journal_name(&b.name)));
            continue;
        }
        let placed = b.messages.iter().map(|q| q.msg.env.id.clone()).collect();
        out.batches.push((b.name, placed));
        msgs.extend(b.messages);
    }
    msgs.sort_by(|a, b| {
        let (a, b) = (&a.msg.env, &b.msg.env);
        (a.arrival, &a.id).cmp(&(b.arrival, &b.id))
    });
    out.messages = msgs;
    Ok(out)
}
