//! One SMTP connection's bytes: the socket (plain or, after STARTTLS,
//! rustls over it), a read buffer cut into CRLF-terminated lines, and the
//! replies waiting to be sent.
//!
//! # Design
//!
//! Replies are queued and written only when the session is about to wait
//! for more input (RFC 2920 §3.1: a server answers a pipelined group in one
//! write), so a pipelining client gets its replies in one segment and a
//! lock-step client gets each reply at once. Lines are strict: only CRLF
//! ends a line; a bare LF, a bare CR inside a line, or a line longer than
//! the limit is reported as such (the session rejects it) instead of being
//! repaired, since each such repair has been an SMTP smuggling vector.
//! Every wait runs under a deadline, so a slow client holds nothing but
//! its own green thread; a line's deadline covers all the reads it takes.

use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use coro::clock::Instant;
use coro::net::TcpStream;

use crate::stream::{accept_tls, Stream};

/// What [`Wire::read_line`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Line {
    /// A line; its text (without CRLF) is [`Wire::line`].
    Text,
    /// A line longer than the limit (consumed and dropped).
    TooLong,
    /// A line ending in LF without CR.
    BareLf,
    /// A line with a CR not followed by LF inside it.
    BareCr,
    /// The client closed the connection (a partial line is dropped).
    Eof,
}

/// Read buffer size; also the most read in one syscall.
const READ_CHUNK: usize = 16 * 1024;

/// A connection to one client.
pub struct Wire {
    /// `None` only while STARTTLS swaps the plain stream for TLS.
    stream: Option<Stream>,
    /// Received bytes; `rbuf[rpos..]` is not yet consumed.
    rbuf: Vec<u8>,
    rpos: usize,
    /// The last line read by `read_line` (without CRLF).
    line: Vec<u8>,
    /// Replies queued for the next flush.
    out: Vec<u8>,
    /// Bound on each flush (a client that does not read its replies).
    write_timeout: Duration,
    /// The client's address.
    peer: SocketAddr,
    /// Octets received so far (for the DATA rate).
    received: u64,
    /// When the last read that brought data ended.
    last_read: Instant,
}

impl Wire {
    /// Wraps an accepted stream.
    pub fn new(stream: TcpStream, peer: SocketAddr, write_timeout: Duration) -> Wire {
        let _ = stream.set_nodelay(true);
        Wire {
            stream: Some(Stream::Plain(stream)),
            rbuf: Vec::with_capacity(READ_CHUNK),
            rpos: 0,
            line: Vec::new(),
            out: Vec::new(),
            write_timeout,
            peer,
            received: 0,
            last_read: coro::clock::now(),
        }
    }

    /// Octets received from the client so far.
    pub fn received(&self) -> u64 {
        self.received
    }

    /// The client's address.
    pub fn peer(&self) -> SocketAddr {
        self.peer
    }

    /// Whether the connection is under TLS.
    pub fn is_tls(&self) -> bool {
        self.stream.as_ref().is_some_and(Stream::is_tls)
    }

    /// The TLS version and cipher suite, under TLS.
    pub fn tls_info(&self) -> Option<String> {
        self.stream.as_ref().and_then(Stream::tls_info)
    }

    /// Queues a reply: `code` with each of `lines` (multi-line replies use
    /// `code-` on all but the last).
    pub fn reply(&mut self, code: u16, lines: &[&str]) {
        for (i, l) in lines.iter().enumerate() {
            let sep = if i + 1 == lines.len() { ' ' } else { '-' };
            // Infallible: writing into a Vec.
            let _ = write!(self.out, "{code}{sep}{l}\r\n");
        }
    }

    /// Writes the queued replies, bounded by the write timeout.
    pub fn flush(&mut self) -> io::Result<()> {
        if self.out.is_empty() {
            return Ok(());
        }
        let out = std::mem::take(&mut self.out);
        let stream = self.stream.as_mut().expect("stream present");
        let r = timed(self.write_timeout, || {
            stream.write_all(&out)?;
            stream.flush()
        });
        self.out = out;
        self.out.clear();
        r
    }

    /// The text of the last [`Line::Text`].
    pub fn line(&self) -> &[u8] {
        &self.line
    }

    /// Whether a complete line or more is already received (the client
    /// pipelined).
    pub fn has_buffered_input(&self) -> bool {
        self.rpos < self.rbuf.len()
    }

    /// Drops whatever the client sent that has not been read (after
    /// STARTTLS: plaintext injected before the handshake); returns how much.
    pub fn discard_buffered(&mut self) -> usize {
        let n = self.rbuf.len() - self.rpos;
        self.rbuf.clear();
        self.rpos = 0;
        n
    }

    /// Reads the next line of at most `max` octets including its CRLF,
    /// all of it by `deadline` (however many reads it takes: a client that
    /// drips a byte at a time gets no more time than one that is silent).
    /// Flushes queued replies first if it has to wait.
    ///
    /// # Errors
    ///
    /// `TimedOut` when `deadline` (or the write timeout of the flush)
    /// passes; otherwise the socket's error.
    ///
    /// `deadline` is asked before each read (after the replies are out),
    /// with the octets received so far and when the last read that brought
    /// any ended, so that it may move (a DATA block's deadline grows with
    /// the data that comes).
    pub fn read_line(
        &mut self,
        max: usize,
        deadline: &dyn Fn(u64, Instant) -> Instant,
    ) -> io::Result<Line> {
        let mut too_long = false;
        loop {
            let avail = &self.rbuf[self.rpos..];
            if let Some(i) = avail.iter().position(|&b| b == b'\n') {
                let raw = &avail[..=i];
                self.rpos += i + 1;
                if too_long || raw.len() > max {
                    return Ok(Line::TooLong);
                }
                if raw.len() < 2 || raw[raw.len() - 2] != b'\r' {
                    return Ok(Line::BareLf);
                }
                let text = &raw[..raw.len() - 2];
                if text.contains(&b'\r') {
                    return Ok(Line::BareCr);
                }
                self.line.clear();
                self.line.extend_from_slice(text);
                return Ok(Line::Text);
            }
            if avail.len() > max {
                // Far too long already: drop what we have (keeping a final
                // CR, which may pair with the LF of the next read) and keep
                // reading to the line's end in bounded memory.
                too_long = true;
                let keep = usize::from(avail.last() == Some(&b'\r'));
                self.rpos = self.rbuf.len() - keep;
            }
            if self.fill(deadline)? == 0 {
                return Ok(Line::Eof);
            }
        }
    }

    /// Reads more into the buffer (after flushing replies), by `deadline`
    /// (asked once the replies are out); 0 at EOF.
    fn fill(&mut self, deadline: &dyn Fn(u64, Instant) -> Instant) -> io::Result<usize> {
        self.flush()?;
        let deadline = deadline(self.received, self.last_read);
        if self.rpos > 0 {
            self.rbuf.drain(..self.rpos);
            self.rpos = 0;
        }
        let len = self.rbuf.len();
        self.rbuf.resize(len + READ_CHUNK, 0);
        let stream = self.stream.as_mut().expect("stream present");
        let buf = &mut self.rbuf[len..];
        let r = timed_until(deadline, || stream.read(buf));
        let n = *r.as_ref().unwrap_or(&0);
        if n > 0 {
            self.received += n as u64;
            self.last_read = coro::clock::now();
        }
        self.rbuf.truncate(len + n);
        r
    }

    /// Replaces the plain stream with TLS and runs the handshake (bounded
    /// by the write timeout). Buffered plaintext must have been discarded.
    pub fn start_tls(&mut self, config: Arc<rustls::ServerConfig>) -> io::Result<()> {
        debug_assert!(!self.has_buffered_input());
        let tcp = match self.stream.take() {
            Some(Stream::Plain(tcp)) => tcp,
            other => {
                self.stream = other;
                return Err(io::Error::other("TLS already active"));
            }
        };
        // The closure runs to its end also when the deadline passes (the
        // handshake's I/O fails), so the stream is always put back.
        let mut stream = None;
        let r = timed(self.write_timeout, || {
            let (s, handshake) = accept_tls(tcp, config);
            stream = Some(s);
            handshake
        });
        self.stream = stream;
        r
    }

    /// Sends what is queued (best effort, bounded) and closes the
    /// connection.
    pub fn close(mut self) {
        let _ = self.flush();
        if let Some(s) = self.stream.as_mut().filter(|s| s.is_tls()) {
            s.close_notify();
            let _ = timed(self.write_timeout, || s.flush());
        }
    }
}

/// Runs `f` under `with_deadline(deadline)`, its passing as `TimedOut`.
pub fn timed_until<T>(deadline: Instant, f: impl FnOnce() -> io::Result<T>) -> io::Result<T> {
    match coro::with_deadline(deadline, f) {
        Ok(r) => r,
        Err(_) => Err(io::ErrorKind::TimedOut.into()),
    }
}

/// Runs `f` under `with_timeout(d)`, the deadline as `TimedOut`.
pub fn timed<T>(d: Duration, f: impl FnOnce() -> io::Result<T>) -> io::Result<T> {
    match coro::with_timeout(d, f) {
        Ok(r) => r,
        Err(_) => Err(io::ErrorKind::TimedOut.into()),
    }
}
