//! JSON string output, shared by the files the observers write (the
//! profile's JSON lines, the flight recorder's Chrome trace).
//!
//! The output is valid JSON for any `&str`: `"` and `\` are escaped, as
//! are all control characters (`\n`, `\r`, `\t` by their short forms, the
//! others as `\u00XX`); everything else is written as it is, in UTF-8.

use std::io::{self, Write};

/// Writes `s` as a JSON string, quotes included.
pub(crate) fn write_string(w: &mut impl Write, s: &str) -> io::Result<()> {
    w.write_all(b"\"")?;
    let bytes = s.as_bytes();
    let mut plain = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let short: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0..=0x1f => b"",
            _ => continue,
        };
        // Every byte that needs escaping is ASCII, so `plain..i` ends on a
        // character boundary.
        w.write_all(&bytes[plain..i])?;
        if short.is_empty() {
            write!(w, "\\u{b:04x}")?;
        } else {
            w.write_all(short)?;
        }
        plain = i + 1;
    }
    w.write_all(&bytes[plain..])?;
    w.write_all(b"\"")
}

#[cfg(test)]
mod tests {
    use super::write_string;

    fn json(s: &str) -> String {
        let mut out = Vec::new();
        write_string(&mut out, s).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn quotes_backslashes_and_control_characters_are_escaped() {
        assert_eq!(json(""), r#""""#);
        assert_eq!(json(r#"a "q" \ b"#), r#""a \"q\" \\ b""#);
        assert_eq!(json("l1\nl2\r\tx"), r#""l1\nl2\r\tx""#);
        assert_eq!(json("\u{0}\u{1}\u{1f}"), r#""\u0000\u0001\u001f""#);
    }

    #[test]
    fn other_characters_pass_through() {
        assert_eq!(json("é 😀 \u{7f} /"), "\"é 😀 \u{7f} /\"");
    }
}
