//! xtext (RFC 3461 §4): how ENVID and ORCPT carry any octet in an SMTP
//! parameter. Printable ASCII but `+` and `=` stands for itself; every
//! other octet is `+` and two upper-case hex digits.

/// Whether `s` is well-formed xtext: printable ASCII other than `+` and
/// `=` (and space), or `+HH` with upper-case hex digits.
pub fn is_xtext(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => {
                let hex = |c: u8| c.is_ascii_digit() || (b'A'..=b'F').contains(&c);
                if i + 2 >= b.len() || !(hex(b[i + 1]) && hex(b[i + 2])) {
                    return false;
                }
                i += 3;
            }
            b'!'..=b'~' if b[i] != b'=' => i += 1,
            _ => return false,
        }
    }
    true
}

/// The octets `s` (well-formed xtext) stands for.
///
/// # Errors
///
/// `s` is not well-formed xtext.
pub fn decode(s: &str) -> Result<Vec<u8>, &'static str> {
    if !is_xtext(s) {
        return Err("malformed xtext");
    }
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'+' {
            let hex = std::str::from_utf8(&b[i + 1..i + 3]).map_err(|_| "malformed xtext")?;
            out.push(u8::from_str_radix(hex, 16).map_err(|_| "malformed xtext")?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    Ok(out)
}

/// `octets` as xtext.
#[cfg(test)]
pub fn encode(octets: &[u8]) -> String {
    let mut out = String::with_capacity(octets.len());
    for &c in octets {
        if (b'!'..=b'~').contains(&c) && c != b'+' && c != b'=' {
            out.push(c as char);
        } else {
            out.push_str(&format!("+{c:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_malformed_text() {
        for s in ["abc", "a+2Bb", "+3D", "x+20y+0D+0A", ""] {
            assert!(is_xtext(s), "{s}");
            assert_eq!(encode(&decode(s).unwrap()), s);
        }
        assert_eq!(decode("a+2Bb+3D").unwrap(), b"a+b=");
        assert_eq!(encode(b"a b+c=\r\n"), "a+20b+2Bc+3D+0D+0A");
        for bad in [
            "a+",
            "a+2",
            "a+2b",
            "a+GG",
            "a=b",
            "a b",
            "caf\u{e9}",
            "+\u{e9}a",
        ] {
            assert!(!is_xtext(bad), "{bad}");
            assert!(decode(bad).is_err(), "{bad}");
        }
    }
}
