//! A message streamed into the spool as it arrives: its content goes to a
//! file in `tmp/` through a bounded buffer, so a session in DATA holds at
//! most [`SPILL_AT`] octets of it in memory however large the message is.
//!
//! The file is a batch file of one message from the start: the envelope
//! (with a placeholder arrival and a zero-padded size of fixed width), a
//! blank line, the content. At the final dot the envelope is written again
//! over the placeholder (same length), and the committer syncs the file
//! and renames it into `queue/` with the other messages of its round, so
//! the group commit's promise holds (durable before the 250). A message
//! that is abandoned (client gone, timeout, refused) has its file removed
//! when its [`Spill`] is dropped; after a crash, the next start empties
//! `tmp/`, so a half-received message is never delivered.

use std::fs::{self, File};
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

use super::format::encode_fixed;
use super::{Envelope, Spool};

/// The most content a session holds before it writes it to its spill file.
pub const SPILL_AT: usize = 64 * 1024;

/// A message being written to its own file in `tmp/`.
#[derive(Debug)]
pub struct Spill {
    /// `tmp/<id>`; `None` once handed to the committer.
    path: Option<PathBuf>,
    file: Option<File>,
    /// The envelope's length (where the content starts).
    header_len: u64,
    /// Content octets written so far.
    written: u64,
}

/// A spill file complete and ready for the committer.
#[derive(Debug)]
pub struct Spilled {
    /// `tmp/<id>`.
    pub(super) path: PathBuf,
    /// The file, for the sync.
    pub(super) file: File,
    /// Where the content starts.
    pub(super) header_len: u64,
    /// The content's length.
    pub(super) size: usize,
}

impl Spool {
    /// Starts streaming the message of `env` into `tmp/` (one
    /// `coro::blocking` job).
    ///
    /// # Errors
    ///
    /// If the file cannot be created or written; a timeout or interruption
    /// of the wait.
    pub fn spill(&self, env: &Envelope) -> io::Result<Spill> {
        let path = self.inner.dir.join("tmp").join(&env.id);
        let head = encode_fixed(env, 0);
        let p = path.clone();
        let file = coro::blocking(move || -> io::Result<File> {
            let mut f = crate::files::create_new().open(&p)?;
            if let Err(e) = f.write_all(&head) {
                let _ = fs::remove_file(&p);
                return Err(e);
            }
            Ok(f)
        })
        .map_err(io::Error::from)??;
        Ok(Spill {
            path: Some(path),
            file: Some(file),
            header_len: encode_fixed(env, 0).len() as u64,
            written: 0,
        })
    }
}

impl Spill {
    /// Appends `buf` to the file (one `coro::blocking` job) and empties
    /// it, keeping its capacity.
    ///
    /// # Errors
    ///
    /// The write's error (a full disk); a timeout or interruption.
    pub fn write(&mut self, buf: &mut Vec<u8>) -> io::Result<()> {
        let file = self
            .file
            .take()
            .ok_or_else(|| io::Error::other("spill file closed"))?;
        let at = self.header_len + self.written;
        let chunk = std::mem::take(buf);
        let (file, chunk, r) = coro::blocking(move || {
            let r = file.write_all_at(&chunk, at);
            (file, chunk, r)
        })
        .map_err(io::Error::from)?;
        self.file = Some(file);
        r?;
        self.written += chunk.len() as u64;
        *buf = chunk;
        buf.clear();
        Ok(())
    }

    /// Writes the rest (`buf`) and the final envelope over the placeholder:
    /// the file is complete (not yet synced).
    ///
    /// # Errors
    ///
    /// As [`write`](Spill::write).
    pub fn finish(mut self, buf: &mut Vec<u8>, env: &Envelope) -> io::Result<Spilled> {
        if !buf.is_empty() {
            self.write(buf)?;
        }
        let size = self.written as usize;
        let head = encode_fixed(env, size);
        if head.len() as u64 != self.header_len {
            return Err(io::Error::other("spill envelope changed length"));
        }
        let file = self
            .file
            .take()
            .ok_or_else(|| io::Error::other("spill file closed"))?;
        let (file, r) = coro::blocking(move || {
            let r = file.write_all_at(&head, 0);
            (file, r)
        })
        .map_err(io::Error::from)?;
        self.file = Some(file);
        r?;
        Ok(Spilled {
            path: self
                .path
                .take()
                .expect("a spill has its path until handed on"),
            file: self.file.take().expect("put back"),
            header_len: self.header_len,
            size,
        })
    }
}

impl Drop for Spill {
    /// An abandoned message: its file goes. A single unlink of a file in
    /// our own `tmp/`, done in place (it cannot wait on a client).
    fn drop(&mut self) {
        if let Some(p) = self.path.take() {
            let _ = fs::remove_file(p);
        }
    }
}
