//! A message's content as DATA brings it in, line by line (dot-unstuffed):
//! the limits (size, line length), the header scan (`Received:` hops,
//! `Message-ID:`, `Date:`), the headers a trusted client's submission is
//! missing, and the bounded buffer that streams the content into the
//! spool ([`Spill`]) once it passes [`SPILL_AT`] octets.
//!
//! So a session in DATA holds at most about `SPILL_AT` octets of its
//! message, however large the message is; a small message (the common
//! case) never touches a file before the commit, and goes into the
//! committer's batch file as before.

use std::io;

use crate::spool::{Envelope, Spill, Spilled, Spool, SPILL_AT};
use crate::time::Utc;

/// RFC 5321 §4.5.3.1.6: a text line, CRLF included.
pub const MAX_TEXT_LINE: usize = 1000;

/// The content of one DATA block, as it comes.
pub struct Body {
    /// Content held in memory (our `Received:` header first).
    data: Vec<u8>,
    /// The spill file, once the content passed `SPILL_AT`.
    spill: Option<Spill>,
    /// Why streaming into the spool failed (the rest is read and dropped).
    pub error: Option<io::Error>,
    /// Content octets from the client (dot-unstuffed, CRLFs included).
    pub size: u64,
    /// The content has octets over 127 (kept in the envelope, so that
    /// delivery knows before it reads the content back).
    pub has_8bit: bool,
    max: u64,
    /// Over `max`.
    pub too_big: bool,
    /// A text line over 1000 octets.
    pub too_long: bool,
    in_header: bool,
    /// `Received:` headers in the client's header section.
    pub hops: usize,
    /// The `Message-ID:` header's value.
    pub message_id: Option<String>,
    has_date: bool,
    /// Add `Date:` and `Message-ID:` if missing (a trusted client's
    /// submission, as Postfix's `always_add_missing_headers` for it).
    add_missing: Option<String>,
}

impl Body {
    /// A body after our `received` header, of at most `max` octets from
    /// the client; `add_missing` is our host name when missing `Date:` and
    /// `Message-ID:` headers are to be added (with the queue id `id`).
    pub fn new(received: Vec<u8>, max: u64, add_missing: Option<String>) -> Body {
        Body {
            data: received,
            spill: None,
            error: None,
            size: 0,
            has_8bit: false,
            max,
            too_big: false,
            too_long: false,
            in_header: true,
            hops: 0,
            message_id: None,
            has_date: false,
            add_missing,
        }
    }

    /// Takes one text line (without CRLF, dot-unstuffed), streaming into
    /// the spool past `SPILL_AT`.
    ///
    /// # Errors
    ///
    /// Only an interruption of the wait for the disk (a stop); other
    /// errors are kept in [`error`](Body::error).
    pub fn line(&mut self, text: &[u8], spool: &Spool, env: &Envelope) -> io::Result<()> {
        if text.len() + 2 > MAX_TEXT_LINE {
            self.too_long = true;
        }
        if self.in_header {
            self.header(text, &env.id);
        }
        self.size += text.len() as u64 + 2;
        if self.size > self.max {
            self.too_big = true;
        }
        if self.too_big || self.too_long || self.error.is_some() {
            return Ok(());
        }
        self.has_8bit |= text.iter().any(|&b| b >= 0x80);
        self.data.extend_from_slice(text);
        self.data.extend_from_slice(b"\r\n");
        if self.data.len() >= SPILL_AT {
            let r = match &mut self.spill {
                Some(s) => s.write(&mut self.data),
                None => spool.spill(env).and_then(|mut s| {
                    s.write(&mut self.data)?;
                    self.spill = Some(s);
                    Ok(())
                }),
            };
            if let Err(e) = r {
                let interrupted = is_interrupt(&e);
                self.spill = None; // its file goes
                self.data = Vec::new();
                if interrupted {
                    return Err(e);
                }
                self.error = Some(e);
            }
        }
        Ok(())
    }

    /// Scans a header line; at the end of the header section, adds what is
    /// missing.
    fn header(&mut self, text: &[u8], id: &str) {
        let is =
            |name: &[u8]| text.len() >= name.len() && text[..name.len()].eq_ignore_ascii_case(name);
        if text.is_empty() {
            self.in_header = false;
            self.add_missing_headers(id, false);
        } else if !is_header_line(text) {
            // No blank line before the body (RFC 5322 allows none when
            // there are no headers): the header section ended already.
            self.in_header = false;
            self.add_missing_headers(id, true);
        } else if is(b"received:") {
            self.hops += 1;
        } else if is(b"date:") {
            self.has_date = true;
        } else if is(b"message-id:") {
            let v = String::from_utf8_lossy(&text[11..]);
            let v = v.trim().trim_start_matches('<').trim_end_matches('>');
            self.message_id = Some(v.to_owned());
        }
    }

    /// Adds the missing headers; `separate` adds the blank line that ends
    /// the header section (the body starts without one).
    fn add_missing_headers(&mut self, id: &str, separate: bool) {
        let Some(host) = self.add_missing.take() else {
            return;
        };
        if self.has_date && self.message_id.is_some() {
            return;
        }
        if !self.has_date {
            let line = format!("Date: {}\r\n", Utc::now().rfc5322());
            self.data.extend_from_slice(line.as_bytes());
        }
        if self.message_id.is_none() {
            let mid = format!("{id}@{host}");
            self.data
                .extend_from_slice(format!("Message-ID: <{mid}>\r\n").as_bytes());
            self.message_id = Some(mid);
        }
        if separate {
            self.data.extend_from_slice(b"\r\n");
        }
    }

    /// The end of DATA: the content in memory (`Ok(Err(data))`), or the
    /// complete spill file (`Ok(Ok(spilled))`) for `env` (its final
    /// arrival set).
    ///
    /// # Errors
    ///
    /// The spill's write error, or one kept from before.
    pub fn finish(mut self, env: &Envelope) -> io::Result<Result<Spilled, Vec<u8>>> {
        if self.in_header {
            // Headers only, no body: still add what is missing.
            self.in_header = false;
            self.add_missing_headers(&env.id, false);
        }
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        match self.spill.take() {
            Some(s) => s.finish(&mut self.data, env).map(Ok),
            None => Ok(Err(std::mem::take(&mut self.data))),
        }
    }
}

/// Whether `text` can be a line of the header section: a continuation
/// (leading space or tab) or `name:` with a name of printable ASCII.
fn is_header_line(text: &[u8]) -> bool {
    if text.starts_with(b" ") || text.starts_with(b"\t") {
        return true;
    }
    match text.iter().position(|&b| b == b':') {
        Some(i) => i > 0 && text[..i].iter().all(|&b| b.is_ascii_graphic()),
        None => false,
    }
}

fn is_interrupt(e: &io::Error) -> bool {
    coro::WaitError::from_io(e) == Some(coro::WaitError::Interrupted)
}
