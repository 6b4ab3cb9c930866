//! One console session: a green thread that reads command lines under a
//! length limit and a read timeout, runs them, and writes their output
//! under a write timeout.
//!
//! # Bounds
//!
//! A session holds at most `max_line` bytes of unread input plus one read
//! chunk, and [`OUT_BUFFER`] bytes of unsent output (a command's output
//! streams through that buffer, so a long listing never sits in memory
//! whole). A client that sends no line within the idle timeout, never
//! reads its output within the write timeout, or sends a line over the
//! limit, is told why (as far as it listens) and disconnected.

use std::io::{self, Read, Write};
use std::panic::{self, AssertUnwindSafe};
use std::rc::Rc;

use super::commands;
use super::secure::Peer;
use super::server::{OpenSession, Shared};
use crate::UnixStream;

/// Output buffered before it is written to the client.
pub(crate) const OUT_BUFFER: usize = 8 * 1024;

/// Bytes read from the client at a time.
const READ_CHUNK: usize = 4 * 1024;

/// The prompt written before each command line is read.
const PROMPT: &[u8] = b"> ";

/// A client's connection to the back door, as a command handler sees it:
/// an [`io::Write`] whose output goes to the client.
///
/// Writes are buffered and sent with the back door's write timeout; a
/// client that does not read ends its session. A handler should return the
/// error of a failed write (`?`): the session then ends.
///
/// # Examples
///
/// A command that prints its arguments back, registered on a back door:
///
/// ```no_run
/// use std::io::Write;
/// use coro::net::backdoor;
///
/// coro::run(|| -> std::io::Result<()> {
///     let door = backdoor::Builder::new("/run/myapp/backdoor")
///         .command("echo", "echo ARGS: prints ARGS", |s, args| writeln!(s, "{args}"))?
///         .serve()?;
///     # door.close();
///     Ok(())
/// })
/// .unwrap();
/// ```
pub struct Session<'a> {
    stream: &'a UnixStream,
    out: Vec<u8>,
    /// A write to the client failed: the session ends after this command.
    broken: bool,
    peer: Peer,
    /// The id of the session's green thread.
    thread: u64,
    shared: &'a Shared,
}

impl std::fmt::Debug for Session<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("peer_uid", &self.peer.uid)
            .field("peer_pid", &self.peer.pid)
            .field("thread", &self.thread)
            .finish_non_exhaustive()
    }
}

impl Session<'_> {
    /// The client's user id.
    pub fn peer_uid(&self) -> u32 {
        self.peer.uid
    }

    /// The client's process id, where the OS tells (Linux).
    pub fn peer_pid(&self) -> Option<i32> {
        self.peer.pid
    }

    /// The id of the green thread running this session.
    pub fn thread_id(&self) -> u64 {
        self.thread
    }

    pub(crate) fn shared(&self) -> &Shared {
        self.shared
    }

    fn send(&mut self) -> io::Result<()> {
        if self.broken {
            return Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "back door session: an earlier write to the client failed",
            ));
        }
        let r = self.stream.write_all(&self.out);
        self.out.clear();
        if r.is_err() {
            self.broken = true;
        }
        r
    }
}

impl Write for Session<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.out.len() + buf.len() > OUT_BUFFER {
            self.send()?;
        }
        if buf.len() > OUT_BUFFER {
            self.out.extend_from_slice(buf);
            self.send()?;
        } else {
            self.out.extend_from_slice(buf);
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        if self.out.is_empty() {
            return Ok(());
        }
        self.send()
    }
}

/// Reads lines of at most `max` bytes.
struct Lines {
    buf: Vec<u8>,
    max: usize,
}

/// What the client sent next.
enum Input {
    Line(Vec<u8>),
    /// The client closed its side.
    End,
    /// Over `max` bytes without a newline.
    TooLong,
}

impl Lines {
    fn next(&mut self, stream: &UnixStream) -> io::Result<Input> {
        loop {
            if let Some(i) = self.buf.iter().position(|&b| b == b'\n') {
                let mut line: Vec<u8> = self.buf.drain(..=i).collect();
                line.pop();
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                if line.len() > self.max {
                    return Ok(Input::TooLong);
                }
                return Ok(Input::Line(line));
            }
            if self.buf.len() > self.max {
                return Ok(Input::TooLong);
            }
            let old = self.buf.len();
            self.buf.resize(old + READ_CHUNK, 0);
            let n = (&*stream).read(&mut self.buf[old..]);
            self.buf.truncate(old + *n.as_ref().unwrap_or(&0));
            if n? == 0 {
                return Ok(if self.buf.is_empty() {
                    Input::End
                } else {
                    // A last line without its newline.
                    Input::Line(std::mem::take(&mut self.buf))
                });
            }
        }
    }
}

/// Runs one session to its end; the connection is closed when it returns.
pub(crate) fn run(shared: Rc<Shared>, stream: UnixStream, peer: Peer, me: &OpenSession) {
    let limits = &shared.limits;
    if stream.set_read_timeout(Some(limits.idle_timeout)).is_err()
        || stream
            .set_write_timeout(Some(limits.write_timeout))
            .is_err()
    {
        return;
    }
    let mut s = Session {
        stream: &stream,
        out: Vec::with_capacity(OUT_BUFFER),
        broken: false,
        peer,
        thread: coro_runtime::current().id(),
        shared: &shared,
    };
    let mut lines = Lines {
        buf: Vec::new(),
        max: limits.max_line,
    };
    let end = serve(&mut s, &mut lines, me);
    let why = match &end {
        Ok(why) => why.to_string(),
        Err(e) => e.to_string(),
    };
    log::debug!(
        target: "coro::backdoor",
        "back door {}: session #{} (uid {}) ended: {why}",
        shared.path.display(),
        s.thread,
        peer.uid
    );
    let _ = s.flush();
    stream.close();
}

/// Reads and runs commands until the client leaves; says why it ended.
fn serve(s: &mut Session<'_>, lines: &mut Lines, me: &OpenSession) -> io::Result<&'static str> {
    commands::greet(s)?;
    loop {
        s.write_all(PROMPT)?;
        s.flush()?;
        // Only while it waits here may the session give way to a newcomer
        // (`server::evict_idlest`).
        me.idle_since.set(Some(std::time::Instant::now()));
        let next = lines.next(s.stream);
        me.idle_since.set(None);
        if me.evicted.get() {
            let _ = writeln!(
                s,
                "\nthe back door is full and this session waited longest for a command; closing it for a newcomer"
            );
            return Ok("closed for a newcomer (the back door was full)");
        }
        let line = match next {
            Ok(Input::Line(l)) => l,
            Ok(Input::End) => return Ok("the client closed the connection"),
            Ok(Input::TooLong) => {
                writeln!(
                    s,
                    "error: line longer than {} bytes; closing the session",
                    lines.max
                )?;
                return Ok("line too long");
            }
            Err(e) if e.kind() == io::ErrorKind::TimedOut => {
                let _ = writeln!(s, "\nidle for too long; closing the session");
                return Ok("idle timeout");
            }
            Err(e) => return Err(e),
        };
        let Ok(line) = std::str::from_utf8(&line) else {
            writeln!(s, "error: the line is not UTF-8")?;
            continue;
        };
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let (name, args) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
        match run_command(s, name, args.trim()) {
            Ok(commands::Next::Continue) => {}
            Ok(commands::Next::Quit) => return Ok("quit"),
            Err(e) if s.broken => return Err(e),
            Err(e) => writeln!(s, "error: {e}")?,
        }
        if s.broken {
            return Ok("a write to the client failed");
        }
    }
}

/// Runs one command; a panic in it is reported to the client and logged,
/// and the session goes on (a runtime shutdown unwinding the thread is
/// passed on, not caught).
fn run_command(s: &mut Session<'_>, name: &str, args: &str) -> io::Result<commands::Next> {
    match panic::catch_unwind(AssertUnwindSafe(|| commands::dispatch(s, name, args))) {
        Ok(r) => r,
        Err(p) => {
            let msg = p
                .downcast_ref::<&str>()
                .map(|m| m.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned());
            let Some(msg) = msg else {
                panic::resume_unwind(p)
            };
            log::error!(
                target: "coro::backdoor",
                "back door {}: command '{name}' panicked: {msg}",
                s.shared.path.display()
            );
            Err(io::Error::other(format!(
                "command '{name}' panicked: {msg}"
            )))
        }
    }
}
