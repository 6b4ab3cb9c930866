//! One pass over a message's content, a chunk at a time, for signing:
//! the domain of its first `From:`, the header fields to sign (the last of
//! each name, RFC 6376 §5.4.2) and the SHA-256 of its relaxed body
//! (§3.4.4). Nothing but those fields is kept: the body is hashed as it
//! goes, so signing a message of any size holds a chunk of it.
//!
//! It gives what [`canon`](super::canon)'s whole-message forms give
//! (`split_message`, `select`, `relaxed_body`); the tests check the two
//! agree, cut into chunks anywhere.

use ring::digest::{Context, SHA256};

/// The longest header field kept for signing (with its folding): a
/// message with a longer one is not signed.
pub const MAX_FIELD: usize = 256 * 1024;

/// What the pass found.
#[derive(Debug)]
pub struct Scanned {
    /// The lower-cased domain of the first address of the first `From:`.
    pub from_domain: Option<String>,
    /// For each name of the list given, its last field (name, colon,
    /// value with its folding, no final CRLF), if the message has one.
    pub fields: Vec<Option<Vec<u8>>>,
    /// The SHA-256 of the relaxed body.
    pub body_hash: Vec<u8>,
}

/// The pass in progress.
pub struct Scanner<'a> {
    /// The header field names to keep.
    names: &'a [&'a str],
    /// Still in the header section.
    in_header: bool,
    /// The header line being read (up to its CRLF).
    line: Vec<u8>,
    /// The field being read (its lines so far, joined by CRLF); `None`
    /// before the first field.
    field: Option<Vec<u8>>,
    /// The first `From:` was seen.
    from_seen: bool,
    from_domain: Option<String>,
    fields: Vec<Option<Vec<u8>>>,
    body: RelaxedBody,
    /// A field over [`MAX_FIELD`].
    too_long: bool,
}

impl<'a> Scanner<'a> {
    /// A pass keeping the fields named in `names`.
    pub fn new(names: &'a [&'a str]) -> Scanner<'a> {
        Scanner {
            names,
            in_header: true,
            line: Vec::new(),
            field: None,
            from_seen: false,
            from_domain: None,
            fields: vec![None; names.len()],
            body: RelaxedBody::default(),
            too_long: false,
        }
    }

    /// Whether the header section has been read (the `From:` domain is
    /// known).
    pub fn header_done(&self) -> bool {
        !self.in_header
    }

    /// The `From:` domain, once the header section is read.
    pub fn sender_domain(&self) -> Option<&str> {
        self.from_domain.as_deref()
    }

    /// Takes the next chunk of the content.
    pub fn feed(&mut self, mut data: &[u8]) {
        while self.in_header && !data.is_empty() {
            let b = data[0];
            data = &data[1..];
            self.line.push(b);
            if b == b'\n' && self.line.ends_with(b"\r\n") {
                self.line.truncate(self.line.len() - 2);
                let line = std::mem::take(&mut self.line);
                self.header_line(&line);
                self.line = line;
                self.line.clear();
            } else if self.line.len() > MAX_FIELD {
                self.too_long = true;
                self.line.clear();
            }
        }
        if !self.in_header {
            self.body.feed(data);
        }
    }

    /// One line of the header section (without its CRLF).
    fn header_line(&mut self, line: &[u8]) {
        if line.is_empty() {
            self.end_field();
            self.in_header = false;
            return;
        }
        if line[0] == b' ' || line[0] == b'\t' {
            // A continuation of the field before (dropped before any).
            if let Some(f) = &mut self.field {
                if f.len() + line.len() + 2 > MAX_FIELD {
                    self.too_long = true;
                } else {
                    f.extend_from_slice(b"\r\n");
                    f.extend_from_slice(line);
                }
            }
            return;
        }
        self.end_field();
        self.field = Some(line.to_vec());
    }

    /// The field read so far is complete.
    fn end_field(&mut self) {
        let Some(f) = self.field.take() else { return };
        let colon = f.iter().position(|&b| b == b':').unwrap_or(f.len());
        let name = trim_wsp(&f[..colon]);
        if !self.from_seen && name.eq_ignore_ascii_case(b"from") {
            self.from_seen = true;
            self.from_domain = from_value_domain(f.get(colon + 1..).unwrap_or(&[]));
        }
        if let Some(i) = self
            .names
            .iter()
            .position(|n| name.eq_ignore_ascii_case(n.as_bytes()))
        {
            self.fields[i] = Some(f);
        }
    }

    /// The end of the content.
    ///
    /// # Errors
    ///
    /// A header field over [`MAX_FIELD`].
    pub fn finish(mut self) -> Result<Scanned, String> {
        if self.in_header {
            // No empty line: everything was header, the body is empty.
            if !self.line.is_empty() {
                let line = std::mem::take(&mut self.line);
                self.header_line(&line);
            }
            self.end_field();
        }
        if self.too_long {
            return Err(format!(
                "a header field over {} KiB: not signed",
                MAX_FIELD / 1024
            ));
        }
        Ok(Scanned {
            from_domain: self.from_domain,
            fields: self.fields,
            body_hash: self.body.finish(),
        })
    }
}

/// The lower-cased domain of the first address of a `From:` value (its
/// folding included).
pub fn from_value_domain(value: &[u8]) -> Option<String> {
    let value: String = String::from_utf8_lossy(value)
        .chars()
        .filter(|&c| c != '\r' && c != '\n')
        .collect();
    // The first address: inside <...> if there is one.
    let addr = match (value.find('<'), value.find('>')) {
        (Some(a), Some(b)) if a < b => &value[a + 1..b],
        _ => value.split(',').next().unwrap_or(""),
    };
    let domain = addr.rsplit_once('@')?.1;
    let domain: String = domain
        .chars()
        .take_while(|c| !c.is_whitespace() && !matches!(c, '>' | ',' | ';' | '(' | ')'))
        .collect();
    let domain = domain.trim_end_matches('.').to_ascii_lowercase();
    (!domain.is_empty()).then_some(domain)
}

/// The relaxed body (RFC 6376 §3.4.4) hashed as it comes: WSP runs
/// inside a line become one space, WSP at a line's end goes, empty lines
/// at the end go, a non-empty body ends in CRLF.
struct RelaxedBody {
    hash: Context,
    /// Output waiting to be hashed.
    out: Vec<u8>,
    /// WSP seen since the line's last other octet.
    wsp: bool,
    /// The current line has an octet other than WSP.
    line: bool,
    /// Empty lines seen and not yet written (written only when a
    /// non-empty line follows).
    empties: usize,
    /// The last octet was a CR, not yet known to end the line.
    cr: bool,
}

impl Default for RelaxedBody {
    fn default() -> RelaxedBody {
        RelaxedBody {
            hash: Context::new(&SHA256),
            out: Vec::new(),
            wsp: false,
            line: false,
            empties: 0,
            cr: false,
        }
    }
}

impl RelaxedBody {
    fn feed(&mut self, data: &[u8]) {
        for &b in data {
            if std::mem::take(&mut self.cr) {
                if b == b'\n' {
                    self.end_line();
                    continue;
                }
                self.octet(b'\r');
            }
            match b {
                b'\r' => self.cr = true,
                b' ' | b'\t' => self.wsp = true,
                b => self.octet(b),
            }
        }
        if self.out.len() >= 8 * 1024 {
            self.hash.update(&self.out);
            self.out.clear();
        }
    }

    /// An octet of a line that is not WSP.
    fn octet(&mut self, b: u8) {
        if !self.line {
            for _ in 0..std::mem::take(&mut self.empties) {
                self.out.extend_from_slice(b"\r\n");
            }
            self.line = true;
        }
        if std::mem::take(&mut self.wsp) {
            self.out.push(b' ');
        }
        self.out.push(b);
    }

    fn end_line(&mut self) {
        if std::mem::take(&mut self.line) {
            self.out.extend_from_slice(b"\r\n");
        } else {
            self.empties += 1;
        }
        self.wsp = false;
    }

    fn finish(mut self) -> Vec<u8> {
        if std::mem::take(&mut self.cr) {
            self.octet(b'\r');
        }
        if self.line {
            self.out.extend_from_slice(b"\r\n");
        }
        self.hash.update(&self.out);
        self.hash.finish().as_ref().to_vec()
    }
}

fn trim_wsp(s: &[u8]) -> &[u8] {
    let is_wsp = |b: &u8| *b == b' ' || *b == b'\t';
    let i = s.iter().position(|b| !is_wsp(b)).unwrap_or(s.len());
    let s = &s[i..];
    let j = s.iter().rposition(|b| !is_wsp(b)).map_or(0, |j| j + 1);
    &s[..j]
}

#[cfg(test)]
mod tests {
    use super::super::canon::{relaxed_body, select, split_message};
    use super::*;

    const NAMES: &[&str] = &["From", "Subject", "To", "Date"];

    /// `msg` scanned in two chunks cut at `cut`.
    fn scan(msg: &[u8], cut: usize) -> Scanned {
        let mut s = Scanner::new(NAMES);
        s.feed(&msg[..cut]);
        s.feed(&msg[cut..]);
        s.finish().unwrap()
    }

    #[test]
    fn agrees_with_the_whole_message_forms_cut_anywhere() {
        let msgs: [&[u8]; 8] = [
            b"A: X\r\nB : Y\t\r\n\tZ  \r\n\r\n C \r\nD \t E\r\n\r\n\r\n",
            b"From: A <a@Example.ORG>\r\nSubject: one\r\n  two\r\nsubject: last\r\n\r\nbody  \r\n\r\n",
            b"Subject: x\r\nFrom: \"A, B\" <a@b.test>\r\n\r\nFrom: a@body.test\r\n",
            b"From: a@x.test (comment), b@y.test\r\nTo:\r\n  c@d\r\n\r\nx\r\n \t \r\ny \t",
            b"From: a@b\r\nTo: c@d",
            b"\r\nno header\r\n",
            b" continuation first\r\nFrom: f@g\r\n\r\nbare\rcr\r\n\r\r\n",
            b"",
        ];
        for msg in msgs {
            let (fields, body) = split_message(msg);
            let (names, chosen) = select(&fields, NAMES);
            let want_hash = ring::digest::digest(&SHA256, &relaxed_body(body));
            for cut in 0..=msg.len() {
                let s = scan(msg, cut);
                let got: Vec<&[u8]> = s.fields.iter().flatten().map(Vec::as_slice).collect();
                assert_eq!(
                    got,
                    chosen,
                    "{:?} cut at {cut}",
                    String::from_utf8_lossy(msg)
                );
                assert_eq!(s.fields.iter().filter(|f| f.is_some()).count(), names.len());
                assert_eq!(s.body_hash, want_hash.as_ref(), "{msg:?} cut at {cut}");
            }
        }
    }

    #[test]
    fn from_domains() {
        let d = |h: &str| scan(format!("{h}\r\n\r\nbody\r\n").as_bytes(), 0).from_domain;
        assert_eq!(d("From: a@Example.ORG").as_deref(), Some("example.org"));
        assert_eq!(
            d("Subject: x\r\nfrom: \"A, B\" <a@b.test>").as_deref(),
            Some("b.test")
        );
        assert_eq!(
            d("From: A\r\n <a@folded.test>").as_deref(),
            Some("folded.test")
        );
        assert_eq!(
            d("From: a@x.test (comment), b@y.test").as_deref(),
            Some("x.test")
        );
        assert_eq!(
            d("From: first@one.test\r\nFrom: second@two.test").as_deref(),
            Some("one.test")
        );
        assert_eq!(d("Subject: no from"), None);
        assert_eq!(
            scan(b"Subject: x\r\n\r\nFrom: a@body.test\r\n", 0).from_domain,
            None
        );
    }

    #[test]
    fn a_field_too_long_is_refused() {
        let mut msg = b"From: a@b.test\r\nSubject: x".to_vec();
        for _ in 0..MAX_FIELD / 8 {
            msg.extend_from_slice(b"\r\n folded");
        }
        msg.extend_from_slice(b"\r\n\r\nbody\r\n");
        let mut s = Scanner::new(NAMES);
        for c in msg.chunks(1000) {
            s.feed(c);
        }
        assert!(s.finish().unwrap_err().contains("KiB"));
    }
}
