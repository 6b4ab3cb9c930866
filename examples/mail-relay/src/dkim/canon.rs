//! DKIM's relaxed canonicalisation (RFC 6376 §3.4.2, §3.4.4), the choice
//! of header fields to sign (§5.4.2), and the base64 of its tags.
//!
//! The header form and base64 are used as they are; the body and the
//! choice of fields are computed a chunk at a time by [`scan`](super::scan),
//! and their whole-message forms here (test only) are the reference it is
//! checked against.

#[cfg(test)]
/// The body, relaxed: in each line, runs of spaces and tabs become one
/// space and trailing ones go; empty lines at the end go; a non-empty
/// body ends in CRLF. Lines end in CRLF (the spool's form).
pub fn relaxed_body(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len());
    let mut pending_empty = 0usize;
    let mut lines: Vec<&[u8]> = split_crlf(body).collect();
    // A body ending in CRLF leaves an empty piece after the last line.
    if lines.last().is_some_and(|l| l.is_empty()) {
        lines.pop();
    }
    for line in lines {
        let l = compress_wsp(line);
        if l.is_empty() {
            pending_empty += 1;
            continue;
        }
        for _ in 0..pending_empty {
            out.extend_from_slice(b"\r\n");
        }
        pending_empty = 0;
        out.extend_from_slice(&l);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// One header field (name, colon, value with its folding, no final
/// CRLF), relaxed: the name lower-cased, the value unfolded, runs of
/// spaces and tabs one space, none around the colon or at the end; then
/// CRLF.
pub fn relaxed_header(field: &[u8]) -> Vec<u8> {
    let colon = field.iter().position(|&b| b == b':').unwrap_or(field.len());
    let (name, value) = field.split_at(colon);
    let value = value.get(1..).unwrap_or(&[]);
    let mut out: Vec<u8> = trim_wsp(name).to_ascii_lowercase();
    out.push(b':');
    let unfolded: Vec<u8> = value
        .iter()
        .copied()
        .filter(|&b| b != b'\r' && b != b'\n')
        .collect();
    out.extend_from_slice(&compress_wsp(trim_start_wsp(&unfolded)));
    out.extend_from_slice(b"\r\n");
    out
}

#[cfg(test)]
/// The message's header fields, each with its folded continuation lines
/// (no final CRLF), and the body after the empty line.
pub fn split_message(data: &[u8]) -> (Vec<&[u8]>, &[u8]) {
    let mut fields: Vec<&[u8]> = Vec::new();
    let mut pos = 0;
    let mut start = None::<usize>;
    loop {
        let end = find_crlf(data, pos);
        let line = &data[pos..end.unwrap_or(data.len())];
        let next = end.map_or(data.len(), |e| e + 2);
        if line.is_empty() {
            if let Some(s) = start {
                fields.push(&data[s..pos - 2]);
            }
            return (fields, &data[next.min(data.len())..]);
        }
        if line[0] == b' ' || line[0] == b'\t' {
            // A continuation of the field before.
        } else {
            if let Some(s) = start {
                fields.push(&data[s..pos - 2]);
            }
            start = Some(pos);
        }
        if end.is_none() {
            if let Some(s) = start {
                fields.push(&data[s..]);
            }
            return (fields, &[]);
        }
        pos = next;
    }
}

#[cfg(test)]
/// The fields to sign among `fields`, for the `names` wanted: each name
/// present once, its last occurrence (§5.4.2: an `h=` name matches from
/// the bottom up). Returns the `h=` names and the fields, in order.
pub fn select<'a>(fields: &[&'a [u8]], names: &[&str]) -> (Vec<String>, Vec<&'a [u8]>) {
    let mut h = Vec::new();
    let mut chosen = Vec::new();
    for name in names {
        let found = fields.iter().rev().find(|f| {
            let n = f.split(|&b| b == b':').next().unwrap_or(&[]);
            trim_wsp(n).eq_ignore_ascii_case(name.as_bytes())
        });
        if let Some(f) = found {
            h.push(name.to_ascii_lowercase());
            chosen.push(*f);
        }
    }
    (h, chosen)
}

/// Standard base64 with padding (RFC 4648 §4).
pub fn base64(data: &[u8]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ABC[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
fn split_crlf(data: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut pos = Some(0);
    std::iter::from_fn(move || {
        let p = pos?;
        match find_crlf(data, p) {
            Some(e) => {
                pos = Some(e + 2);
                Some(&data[p..e])
            }
            None => {
                pos = None;
                Some(&data[p..])
            }
        }
    })
}

#[cfg(test)]
fn find_crlf(data: &[u8], from: usize) -> Option<usize> {
    data.get(from..)?
        .windows(2)
        .position(|w| w == b"\r\n")
        .map(|i| from + i)
}

fn is_wsp(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

/// Runs of WSP as one space; none at the end.
fn compress_wsp(s: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len());
    let mut in_wsp = false;
    for &b in s {
        if is_wsp(b) {
            in_wsp = true;
        } else {
            if in_wsp {
                out.push(b' ');
            }
            in_wsp = false;
            out.push(b);
        }
    }
    out
}

fn trim_start_wsp(s: &[u8]) -> &[u8] {
    let i = s.iter().position(|&b| !is_wsp(b)).unwrap_or(s.len());
    &s[i..]
}

fn trim_wsp(s: &[u8]) -> &[u8] {
    let s = trim_start_wsp(s);
    let j = s.iter().rposition(|&b| !is_wsp(b)).map_or(0, |j| j + 1);
    &s[..j]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc6376_example() {
        // RFC 6376 §3.4.6's worked example ("Canonicalization Examples"),
        // relaxed/relaxed.
        let msg = b"A: X\r\nB : Y\t\r\n\tZ  \r\n\r\n C \r\nD \t E\r\n\r\n\r\n";
        let (fields, body) = split_message(msg);
        let headers: Vec<u8> = fields.iter().flat_map(|f| relaxed_header(f)).collect();
        assert_eq!(headers, b"a:X\r\nb:Y Z\r\n");
        assert_eq!(relaxed_body(body), b" C\r\nD E\r\n");
        assert_eq!(relaxed_body(b"\r\n\r\n"), b"");
        assert_eq!(relaxed_body(b"no newline"), b"no newline\r\n");
    }

    /// The relaxed header form of each field of `msg`'s header, joined.
    fn headers(msg: &[u8]) -> Vec<u8> {
        let (fields, _) = split_message(msg);
        fields.iter().flat_map(|f| relaxed_header(f)).collect()
    }

    #[test]
    fn body_trailing_wsp_goes_inner_runs_shrink() {
        // §3.4.4 a, b: WSP at a line's end is ignored, runs of it inside
        // become one space; a line's leading WSP stays (as one space).
        assert_eq!(relaxed_body(b"a  \t\r\nb\t\r\n"), b"a\r\nb\r\n");
        assert_eq!(
            relaxed_body(b"\t lead  in \t\tthe middle \r\n"),
            b" lead in the middle\r\n"
        );
        // A line of WSP only becomes an empty line, kept inside the body.
        assert_eq!(relaxed_body(b"a\r\n \t \r\nb\r\n"), b"a\r\n\r\nb\r\n");
        assert_eq!(relaxed_body(b"a\r\n\r\n\r\nb\r\n"), b"a\r\n\r\n\r\nb\r\n");
    }

    #[test]
    fn body_empty_lines_at_the_end_go() {
        // §3.4.4 c: all empty lines at the end are ignored, also those that
        // were WSP only before the rule above.
        assert_eq!(relaxed_body(b"x\r\n\r\n\r\n"), b"x\r\n");
        assert_eq!(relaxed_body(b"x\r\n \r\n\t\r\n\r\n"), b"x\r\n");
        assert_eq!(relaxed_body(b"x\r\n\r\ny \r\n\r\n"), b"x\r\n\r\ny\r\n");
        // A missing final CRLF is added (a non-empty body ends in CRLF),
        // after trailing WSP is dropped.
        assert_eq!(relaxed_body(b"x\r\ny \t"), b"x\r\ny\r\n");
    }

    #[test]
    fn empty_body() {
        // §3.4.4: an empty body, or one of empty lines only, is empty under
        // relaxed (a CRLF is added only to a non-empty body), so its bh= is
        // the SHA-256 of nothing.
        for body in [&b""[..], b"\r\n", b"\r\n\r\n", b" \r\n\t\r\n"] {
            let c = relaxed_body(body);
            assert_eq!(c, b"", "{body:?}");
            let digest = ring::digest::digest(&ring::digest::SHA256, &c);
            assert_eq!(
                base64(digest.as_ref()),
                "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="
            );
        }
        // The header ends the data: the body is empty.
        let (fields, body) = split_message(b"From: a@b\r\nTo: c@d\r\n\r\n");
        assert_eq!((fields.len(), body), (2, &b""[..]));
        let (fields, body) = split_message(b"From: a@b\r\nTo: c@d");
        assert_eq!((fields.len(), body), (2, &b""[..]));
    }

    #[test]
    fn folded_headers_are_unfolded() {
        // §3.4.2: unfold (CRLF before WSP removed), WSP runs one space, no
        // WSP at the value's end nor around the colon, name lower-cased.
        let msg = b"Subject: one\r\n  two\r\n\tthree \r\nTo:\r\n  c@d\r\n\r\nbody\r\n";
        assert_eq!(headers(msg), b"subject:one two three\r\nto:c@d\r\n");
        let (fields, body) = split_message(msg);
        assert_eq!(fields[0], b"Subject: one\r\n  two\r\n\tthree ");
        assert_eq!(body, b"body\r\n");
        // WSP before the colon, a colon in the value, empty values.
        assert_eq!(
            headers(b"X-Name \t:\t a:b  c \r\nX-Empty:\r\nX-Blank: \r\n \r\n\r\n"),
            b"x-name:a:b c\r\nx-empty:\r\nx-blank:\r\n"
        );
        // The value's case is kept; only the name is lower-cased.
        assert_eq!(
            headers(b"DKIM-Test: MiXeD Case\r\n\r\n"),
            b"dkim-test:MiXeD Case\r\n"
        );
    }

    #[test]
    fn selection_and_base64() {
        let msg = b"Received: x\r\nFrom: a@b\r\nSubject: one\r\nsubject: two\r\n\r\nbody";
        let (fields, body) = split_message(msg);
        assert_eq!(body, b"body");
        let (h, chosen) = select(&fields, &["From", "Subject", "To"]);
        assert_eq!(h, ["from", "subject"]);
        assert_eq!(chosen[1], b"subject: two");
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
    }
}
