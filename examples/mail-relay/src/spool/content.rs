//! A queued message's content where the spool keeps it, read back a
//! chunk at a time when it is delivered: the queue holds envelopes only,
//! so memory does not grow with what waits, however large it is.
//!
//! # Design
//!
//! A [`Content`] is a handle (cheap to clone): the batch file, where the
//! message's content starts in it and its length, and optionally a few
//! octets to send first (a `DKIM-Signature:` field). A message received
//! whole (under 64 KiB) may also keep its content in memory for its first
//! attempt, a [`Held`] counted against a fixed budget the queue sets: a
//! message that is delivered at once costs no read, and the budget bounds
//! what that takes however many messages are in their first attempt. A green thread reads
//! it through a [`Reader`], one [`CHUNK`] per `coro::blocking` job (the
//! open file moves into each job and back, as the spill does when it
//! writes); code already on the blocking pool (the Maildir's batch, DKIM's
//! digest) reads it in place with [`Content::read_sync`]. A batch file
//! stays until its last message is done, so a message being delivered
//! always has its file.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use super::{Envelope, Message};

/// A message in the queue: its envelope in memory, its content where the
/// spool keeps it.
#[derive(Debug)]
pub struct Stored {
    /// The envelope.
    pub env: Envelope,
    /// The content.
    pub content: Content,
}

/// The most octets read at a time: what one delivery holds of a message.
pub const CHUNK: usize = 64 * 1024;

/// Where a message's content is, and what goes before it.
#[derive(Debug, Clone)]
pub struct Content {
    /// Octets sent before the stored content (a `DKIM-Signature:` field);
    /// empty for most messages.
    head: Arc<[u8]>,
    /// The stored content.
    src: Source,
    /// The same content in memory, when it is held (then it is read from
    /// there).
    held: Option<Arc<Held>>,
}

/// A message's content kept in memory, counted in a budget until dropped.
#[derive(Debug)]
pub struct Held {
    /// The message as committed (its `data` is the content).
    msg: Arc<Message>,
    /// The octets held in all, this content's among them.
    budget: Arc<AtomicUsize>,
}

impl Held {
    /// Holds `msg`'s content if `budget` (the octets held now) stays at
    /// most `limit` with it.
    pub fn new(msg: Arc<Message>, budget: &Arc<AtomicUsize>, limit: usize) -> Option<Held> {
        let len = msg.data.len();
        let before = budget.fetch_add(len, Ordering::Relaxed);
        if before + len > limit {
            budget.fetch_sub(len, Ordering::Relaxed);
            return None;
        }
        Some(Held {
            msg,
            budget: budget.clone(),
        })
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.budget
            .fetch_sub(self.msg.data.len(), Ordering::Relaxed);
    }
}

#[derive(Debug, Clone)]
enum Source {
    /// In a batch file of the spool, `len` octets from `offset`.
    File {
        path: Arc<Path>,
        offset: u64,
        len: u64,
    },
    /// In memory (a message not in the spool: tests).
    #[cfg(test)]
    Memory(Arc<[u8]>),
}

impl Content {
    /// The `len` octets at `offset` of the file at `path`.
    pub fn in_file(path: Arc<Path>, offset: u64, len: u64) -> Content {
        Content {
            head: Arc::from(&[][..]),
            src: Source::File { path, offset, len },
            held: None,
        }
    }

    /// The same content, read from `held` (the same octets in memory).
    pub fn with_held(&self, held: Held) -> Content {
        Content {
            held: Some(Arc::new(held)),
            ..self.clone()
        }
    }

    /// The same content, no longer held in memory (read from the file).
    pub fn unheld(&self) -> Content {
        Content {
            held: None,
            ..self.clone()
        }
    }

    /// Whether the content is held in memory.
    pub fn is_held(&self) -> bool {
        self.held.is_some()
    }

    /// The stored content, when it is in memory.
    fn in_memory_now(&self) -> Option<&[u8]> {
        match (&self.held, &self.src) {
            (Some(h), _) => Some(&h.msg.data),
            #[cfg(test)]
            (None, Source::Memory(d)) => Some(d),
            (None, _) => None,
        }
    }

    /// Content held in memory.
    #[cfg(test)]
    pub fn in_memory(data: Vec<u8>) -> Content {
        Content {
            head: Arc::from(&[][..]),
            src: Source::Memory(data.into()),
            held: None,
        }
    }

    /// The same content with `head` sent before it (after any head it
    /// has).
    pub fn with_head(&self, head: &[u8]) -> Content {
        let mut h = self.head.to_vec();
        h.extend_from_slice(head);
        Content {
            head: h.into(),
            ..self.clone()
        }
    }

    /// Its length in octets, the head included.
    pub fn len(&self) -> u64 {
        self.head.len() as u64 + self.stored_len()
    }

    fn stored_len(&self) -> u64 {
        match &self.src {
            Source::File { len, .. } => *len,
            #[cfg(test)]
            Source::Memory(d) => d.len() as u64,
        }
    }

    /// A reader for a green thread: each chunk of the file is one
    /// `coro::blocking` job.
    pub fn reader(&self) -> Reader {
        Reader {
            content: self.clone(),
            pos: 0,
            file: None,
            buf: Vec::new(),
        }
    }

    /// Calls `f` with each chunk of the content in order (the head first)
    /// until it returns `false`, reading the file right here: for code
    /// that already runs on the blocking pool.
    ///
    /// # Errors
    ///
    /// Opening or reading the file (a file shorter than it should be is
    /// `UnexpectedEof`), or `f`'s error.
    pub fn read_sync(&self, mut f: impl FnMut(&[u8]) -> io::Result<bool>) -> io::Result<()> {
        if !self.head.is_empty() && !f(&self.head)? {
            return Ok(());
        }
        if let Some(d) = self.in_memory_now() {
            for c in d.chunks(CHUNK) {
                if !f(c)? {
                    break;
                }
            }
            return Ok(());
        }
        match &self.src {
            #[cfg(test)]
            Source::Memory(_) => unreachable!("in memory"),
            Source::File { path, offset, len } => {
                let file = crate::files::open_read().open(path)?;
                let mut buf = vec![0; CHUNK.min(*len as usize)];
                let mut done = 0;
                while done < *len {
                    let n = CHUNK.min((*len - done) as usize);
                    file.read_exact_at(&mut buf[..n], offset + done)?;
                    if !f(&buf[..n])? {
                        break;
                    }
                    done += n as u64;
                }
                Ok(())
            }
        }
    }

    /// The header section with its last CRLF (the whole content when no
    /// empty line ends it), at most `limit` octets of it, cut at a line
    /// end: what a bounce shows of the message. Reads on the blocking
    /// pool.
    ///
    /// # Errors
    ///
    /// As [`Reader::next`].
    pub fn header_section(&self, limit: usize) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        let mut r = self.reader();
        while let Some(chunk) = r.next()? {
            out.extend_from_slice(chunk);
            if let Some(i) = out.windows(4).position(|w| w == b"\r\n\r\n") {
                out.truncate(i + 2);
                break;
            }
            if out.len() >= limit {
                break;
            }
        }
        if out.len() > limit {
            out.truncate(limit);
            // Whole lines only.
            match out.windows(2).rposition(|w| w == b"\r\n") {
                Some(i) => out.truncate(i + 2),
                None => out.clear(),
            }
        }
        Ok(out)
    }
}

/// Reads a [`Content`] chunk by chunk from a green thread.
#[derive(Debug)]
pub struct Reader {
    content: Content,
    /// Octets of the content (head included) handed out so far.
    pos: u64,
    /// The batch file, once opened.
    file: Option<File>,
    /// The last chunk read from the file.
    buf: Vec<u8>,
}

impl Reader {
    /// The next chunk (at most [`CHUNK`] octets), `None` at the end.
    /// A chunk of the file is read by one `coro::blocking` job (the first
    /// also opens it).
    ///
    /// # Errors
    ///
    /// Opening or reading the file (a file shorter than it should be is
    /// `UnexpectedEof`); a timeout or interruption of the wait.
    pub fn next(&mut self) -> io::Result<Option<&[u8]>> {
        let head = self.content.head.len() as u64;
        if self.pos < head {
            self.pos = head;
            return Ok(Some(&self.content.head));
        }
        let at = self.pos - head;
        let total = self.content.stored_len();
        if at >= total {
            return Ok(None);
        }
        let n = CHUNK.min((total - at) as usize);
        if let Some(d) = self.content.in_memory_now() {
            self.pos += n as u64;
            return Ok(Some(&d[at as usize..at as usize + n]));
        }
        match &self.content.src {
            #[cfg(test)]
            Source::Memory(_) => unreachable!("in memory"),
            Source::File { path, offset, .. } => {
                let (path, from) = (path.clone(), offset + at);
                let file = self.file.take();
                let mut buf = std::mem::take(&mut self.buf);
                buf.resize(n, 0);
                let (file, buf, r) = coro::blocking(move || {
                    let file = match file {
                        Some(f) => f,
                        None => match crate::files::open_read().open(&path) {
                            Ok(f) => f,
                            Err(e) => return (None, buf, Err(e)),
                        },
                    };
                    let r = file.read_exact_at(&mut buf, from);
                    (Some(file), buf, r)
                })
                .map_err(io::Error::from)?;
                self.file = file;
                self.buf = buf;
                r?;
                self.pos += n as u64;
                Ok(Some(&self.buf))
            }
        }
    }

    /// Whether every octet has been handed out.
    pub fn is_done(&self) -> bool {
        self.pos >= self.content.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_of_a_file_with_a_head() {
        let dir = std::env::temp_dir().join(format!("relay-content-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("batch");
        let body: Vec<u8> = (0..CHUNK * 2 + 10).map(|i| (i % 251) as u8).collect();
        let mut file = b"envelope\n\n".to_vec();
        file.extend_from_slice(&body);
        std::fs::write(&path, &file).unwrap();
        let c =
            Content::in_file(path.as_path().into(), 10, body.len() as u64).with_head(b"H: 1\r\n");
        assert_eq!(c.len(), body.len() as u64 + 6);
        let mut want = b"H: 1\r\n".to_vec();
        want.extend_from_slice(&body);
        let mut sync = Vec::new();
        c.read_sync(|b| {
            sync.extend_from_slice(b);
            Ok(true)
        })
        .unwrap();
        assert_eq!(sync, want);
        let streamed = coro::run(move || {
            let mut r = c.reader();
            let mut out = Vec::new();
            let mut chunks = 0;
            while let Some(b) = r.next().unwrap() {
                assert!(b.len() <= CHUNK);
                out.extend_from_slice(b);
                chunks += 1;
            }
            assert!(r.is_done());
            (out, chunks)
        });
        assert_eq!(streamed.0, want);
        assert_eq!(streamed.1, 4, "the head, then three chunks of the file");
        // A file cut short is an error, not a short message.
        let short = Content::in_file(path.as_path().into(), 10, body.len() as u64 + 1);
        assert!(short.read_sync(|_| Ok(true)).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn held_contents_are_counted_in_their_budget() {
        let msg = |n: usize| {
            Arc::new(Message {
                env: crate::spool::format::tests::sample().env,
                data: vec![b'x'; n],
            })
        };
        let budget = Arc::new(AtomicUsize::new(0));
        let a = Held::new(msg(600), &budget, 1000).unwrap();
        assert!(
            Held::new(msg(500), &budget, 1000).is_none(),
            "over the limit"
        );
        assert_eq!(budget.load(Ordering::Relaxed), 600);
        let c = Content::in_file(Path::new("/nonexistent").into(), 0, 600).with_held(a);
        let mut got = 0;
        c.read_sync(|b| {
            got += b.len();
            Ok(true)
        })
        .unwrap();
        assert_eq!(got, 600, "read from memory, not the (missing) file");
        let plain = c.unheld();
        assert!(plain.read_sync(|_| Ok(true)).is_err());
        drop(c);
        assert_eq!(budget.load(Ordering::Relaxed), 0, "given back when dropped");
    }

    #[test]
    fn the_header_section_is_cut_at_a_line() {
        let c = Content::in_memory(b"A: 1\r\nB: 2\r\n\r\nbody\r\n".to_vec());
        let h = coro::run(move || c.header_section(1000).unwrap());
        assert_eq!(h, b"A: 1\r\nB: 2\r\n");
        let c = Content::in_memory(b"A: 1\r\nB: 22222\r\n\r\nbody\r\n".to_vec());
        let h = coro::run(move || c.header_section(10).unwrap());
        assert_eq!(h, b"A: 1\r\n");
        let c = Content::in_memory(b"A: 1\r\nno body".to_vec());
        let h = coro::run(move || c.header_section(1000).unwrap());
        assert_eq!(h, b"A: 1\r\nno body");
    }
}
