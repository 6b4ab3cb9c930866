//! Text from the network, made safe to show: a client's or an upstream's
//! words (a reply, an address, a host name) reach the log, `mailq` (from
//! the back door or the spool), the back door's `pools` and bounce reports
//! only through [`escape`], so that an escape sequence cannot drive an
//! operator's terminal, a CR cannot forge a line, a BEL cannot ring.

use std::borrow::Cow;

/// `text` with control characters written as `\xNN` (or `\u{NNNN}`
/// beyond Latin-1: U+0085, the C1 controls) and a backslash as `\\`, so
/// that a line means what it says and nothing in it acts on a terminal.
///
/// ```text
/// "a\x1b[31mb\x07\r" -> "a\x1b[31mb\x07\x0d" (as literal backslash escapes)
/// ```
pub fn escape(text: &str) -> Cow<'_, str> {
    if !text.chars().any(|c| c.is_control() || c == '\\') {
        return text.into();
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            c if c.is_control() && (c as u32) < 0x100 => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if c.is_control() => out.push_str(&format!("\\u{{{:04x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out.into()
}

/// Each line of `text` escaped, the line breaks kept: for our own
/// multi-line output that quotes the network (the back door's `pools`).
pub fn escape_lines(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&escape(line));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(escape("plain text"), "plain text");
        assert_eq!(
            escape("a\x1b[31mb\0c\\d\r\u{85}\x07"),
            "a\\x1b[31mb\\x00c\\\\d\\x0d\\x85\\x07"
        );
        assert_eq!(escape_lines("one\r\ntwo\x1b\n"), "one\\x0d\ntwo\\x1b\n");
    }
}
