//! SMTP replies as the client reads them (RFC 5321 §4.2): a three-digit
//! code, `-` on every line but the last, text. Lenient where it costs
//! nothing (a bare LF ends a line, a last line may be just the code or the
//! code and a space, as smtp-sink's `250 ` is), strict where it matters
//! (the code must be three digits and the same on every line; a line and
//! a reply are bounded).

use std::fmt;

/// Longest reply line we accept (RFC 5321 allows 512; be generous).
pub const MAX_LINE: usize = 4096;
/// Most lines in one reply (an EHLO reply has a dozen).
pub const MAX_LINES: usize = 100;

/// A complete reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// The three-digit code.
    pub code: u16,
    /// Each line's text after the code and separator (may be empty).
    pub lines: Vec<String>,
}

impl Reply {
    /// 2 for success, 3 for "go on", 4 for a temporary failure, 5 for a
    /// permanent one.
    pub fn class(&self) -> u16 {
        self.code / 100
    }

    /// The enhanced status code (RFC 3463) at the start of the first line,
    /// if the server gave one of the reply's class.
    pub fn status(&self) -> Option<&str> {
        let first = self.lines.first()?;
        let word = first.split(' ').next()?;
        let mut parts = word.split('.');
        let class = parts.next()?;
        let ok = class.len() == 1
            && class.parse::<u16>().ok() == Some(self.class())
            && parts.clone().count() == 2
            && parts.all(|p| (1..=3).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_digit()));
        ok.then_some(word)
    }

    /// The status code to report: the server's, or one made from the
    /// reply's class.
    pub fn dsn(&self) -> String {
        match self.status() {
            Some(s) => s.to_owned(),
            None => format!("{}.0.0", self.class()),
        }
    }

    /// Whether the server says it is closing the connection.
    pub fn closing(&self) -> bool {
        self.code == 421
    }
}

impl fmt::Display for Reply {
    /// `250 2.0.0 Ok`, lines joined with a space.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.code)?;
        for l in &self.lines {
            if !l.is_empty() {
                write!(f, " {l}")?;
            }
        }
        Ok(())
    }
}

/// One reply line, parsed: its code, whether it is the last, its text.
pub fn parse_line(line: &[u8]) -> Result<(u16, bool, String), String> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let bad = || {
        format!(
            "malformed reply line {:?}",
            String::from_utf8_lossy(&line[..line.len().min(80)])
        )
    };
    if line.len() < 3 || !line[..3].iter().all(u8::is_ascii_digit) || line[0] == b'0' {
        return Err(bad());
    }
    let code = line[..3]
        .iter()
        .fold(0u16, |n, d| n * 10 + u16::from(d - b'0'));
    let (last, text) = match line.get(3) {
        None => (true, &line[3..]),
        Some(b' ') => (true, &line[4..]),
        Some(b'-') => (false, &line[4..]),
        Some(_) => return Err(bad()),
    };
    Ok((code, last, String::from_utf8_lossy(text).into_owned()))
}

/// Gathers lines into replies.
#[derive(Debug, Default)]
pub struct Assembler {
    code: Option<u16>,
    lines: Vec<String>,
}

impl Assembler {
    /// Takes one line; returns the reply when the line was its last.
    ///
    /// # Errors
    ///
    /// A malformed line, a code that changes within a reply, or too many
    /// lines.
    pub fn push(&mut self, line: &[u8]) -> Result<Option<Reply>, String> {
        let (code, last, text) = parse_line(line)?;
        if self.code.is_some_and(|c| c != code) {
            return Err(format!(
                "reply code changed from {} to {code} within a reply",
                self.code.unwrap_or_default()
            ));
        }
        if self.lines.len() == MAX_LINES {
            return Err(format!("reply longer than {MAX_LINES} lines"));
        }
        self.code = Some(code);
        self.lines.push(text);
        if !last {
            return Ok(None);
        }
        self.code = None;
        Ok(Some(Reply {
            code,
            lines: std::mem::take(&mut self.lines),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn replies(bytes: &[u8]) -> Result<Vec<Reply>, String> {
        let mut a = Assembler::default();
        let mut out = Vec::new();
        for line in bytes.split_inclusive(|&b| b == b'\n') {
            let line = line.strip_suffix(b"\n").unwrap_or(line);
            out.extend(a.push(line)?);
        }
        Ok(out)
    }

    #[test]
    fn smtp_sinks_ehlo_reply() {
        let r = replies(b"250-smtp-sink\r\n250-PIPELINING\r\n250-8BITMIME\r\n250-DSN\r\n250 \r\n")
            .unwrap();
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].code, 250);
        assert_eq!(
            r[0].lines,
            ["smtp-sink", "PIPELINING", "8BITMIME", "DSN", ""]
        );
        assert_eq!(r[0].to_string(), "250 smtp-sink PIPELINING 8BITMIME DSN");
    }

    #[test]
    fn bare_codes_lf_and_status() {
        let r = replies(b"250\n354 go ahead\n550 5.1.1 <x@y>: no such user\r\n").unwrap();
        assert_eq!(r.len(), 3);
        assert_eq!(
            (r[0].code, r[0].lines.as_slice()),
            (250, &[String::new()][..])
        );
        assert_eq!(r[1].status(), None);
        assert_eq!(r[1].dsn(), "3.0.0");
        assert_eq!(r[2].status(), Some("5.1.1"));
        assert_eq!(r[2].class(), 5);
        // A status of another class than the code is not taken.
        let r = replies(b"450 5.1.1 odd\r\n").unwrap();
        assert_eq!(r[0].dsn(), "4.0.0");
    }

    #[test]
    fn malformed_replies() {
        assert!(replies(b"25\r\n").is_err());
        assert!(replies(b"2x0 Ok\r\n").is_err());
        assert!(replies(b"250_Ok\r\n").is_err());
        assert!(replies(b"250-a\r\n354 b\r\n")
            .unwrap_err()
            .contains("changed"));
        let long: Vec<u8> = (0..=MAX_LINES).flat_map(|_| b"250-x\n".to_vec()).collect();
        assert!(replies(&long).unwrap_err().contains("lines"));
    }
}
