//! What MTA-STS says, parsed strictly: the `_mta-sts` TXT record (RFC 8461
//! §3.1), the policy file (§3.2), and whether an MX host matches the
//! policy's patterns (§4.1).
//!
//! Anything that does not follow the grammar is refused whole, with the
//! reason: a policy the relay half understood could send mail where the
//! domain did not want it. Unknown fields are ignored, as the RFC says;
//! a known one given twice counts once, the first time (`mx` excepted).

use std::fmt;

/// The longest `max_age` honoured: one year (RFC 8461 §3.2); a larger
/// value is cut to it.
pub const MAX_AGE_LIMIT: u64 = 31_557_600;

/// What a domain asks of senders when validation fails (§5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Deliver only to listed MX hosts over TLS with a valid certificate.
    Enforce,
    /// Deliver anyway; report (here: log) the failure.
    Testing,
    /// As if there were no policy.
    None,
}

impl Mode {
    /// The word the policy file uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Enforce => "enforce",
            Mode::Testing => "testing",
            Mode::None => "none",
        }
    }

    /// The mode named `s` (case-sensitive, as the grammar's `%s`).
    pub fn parse(s: &str) -> Option<Mode> {
        match s {
            "enforce" => Some(Mode::Enforce),
            "testing" => Some(Mode::Testing),
            "none" => Some(Mode::None),
            _ => None,
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A policy (the file at `https://mta-sts.DOMAIN/.well-known/mta-sts.txt`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// What to do on a validation failure.
    pub mode: Mode,
    /// How long the policy may be cached, in seconds (at most a year).
    pub max_age: u64,
    /// The MX host patterns: names, or `*.` and a name (lower case, no
    /// trailing dot).
    pub mx: Vec<String>,
}

impl Policy {
    /// Parses a policy file.
    ///
    /// # Errors
    ///
    /// Why it is not a valid policy: a line that is not `key: value`, a
    /// version other than `STSv1`, an unknown mode, a `max_age` that is not
    /// 1 to 10 digits, an `mx` that is not a pattern, a required field
    /// missing (`version`, `mode`, `max_age`; `mx` unless the mode is
    /// `none`).
    pub fn parse(text: &str) -> Result<Policy, String> {
        let (mut version, mut mode, mut max_age) = (None, None, None);
        let mut mx = Vec::new();
        let body = text
            .strip_suffix("\r\n")
            .or_else(|| text.strip_suffix('\n'))
            .unwrap_or(text);
        for (n, line) in body.split('\n').enumerate() {
            let line = line.strip_suffix('\r').unwrap_or(line);
            let at = |why: &str| format!("line {}: {why}", n + 1);
            let (key, value) = line
                .split_once(':')
                .ok_or_else(|| at("not a \"key: value\" field"))?;
            let value = value
                .trim_start_matches([' ', '\t'])
                .trim_end_matches([' ', '\t']);
            if !valid_key(key) {
                return Err(at(&format!("{key:?} is not a field name")));
            }
            if value.is_empty() || value.chars().any(|c| c.is_control() && c != '\t') {
                return Err(at(&format!("{key}: no value, or control characters in it")));
            }
            match key {
                "version" if version.is_none() => version = Some(value),
                "mode" if mode.is_none() => {
                    mode = Some(Mode::parse(value).ok_or_else(|| {
                        at(&format!("mode {value:?} is not enforce, testing or none"))
                    })?)
                }
                "max_age" if max_age.is_none() => {
                    if value.len() > 10 || !value.bytes().all(|b| b.is_ascii_digit()) {
                        return Err(at(&format!("max_age {value:?} is not 1 to 10 digits")));
                    }
                    let secs: u64 = value.parse().map_err(|_| at("max_age out of range"))?;
                    max_age = Some(secs.min(MAX_AGE_LIMIT));
                }
                "mx" => mx
                    .push(pattern(value).ok_or_else(|| {
                        at(&format!("mx {value:?} is not a host name or *.name"))
                    })?),
                _ => {} // a repeated field, or an extension: ignored
            }
        }
        match version {
            Some("STSv1") => {}
            Some(v) => return Err(format!("version {v:?} is not STSv1")),
            None => return Err("no version field".into()),
        }
        let mode = mode.ok_or("no mode field")?;
        let max_age = max_age.ok_or("no max_age field")?;
        if mx.is_empty() && mode != Mode::None {
            return Err(format!("no mx field in a policy of mode {mode}"));
        }
        Ok(Policy { mode, max_age, mx })
    }

    /// Whether the MX host `host` is one of the policy's (§4.1): equal to
    /// a pattern, or, for `*.name`, one label followed by `name`; case
    /// does not matter, nor a trailing dot.
    pub fn matches(&self, host: &str) -> bool {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        self.mx.iter().any(|p| match p.strip_prefix("*.") {
            Some(suffix) => host
                .split_once('.')
                .is_some_and(|(first, rest)| !first.is_empty() && rest == suffix),
            None => *p == host,
        })
    }
}

/// The `id` of an `_mta-sts` TXT record (§3.1), if the record is one:
/// `v=STSv1` first, then `;`-separated `key=value` fields, one of them
/// `id=` with 1 to 32 letters and digits.
///
/// # Errors
///
/// Why the record is not valid.
pub fn record_id(txt: &str) -> Result<String, String> {
    let t = txt.trim_end_matches([' ', '\t']);
    let t = t.strip_suffix(';').unwrap_or(t);
    let mut fields = t.split(';').map(|f| f.trim_matches([' ', '\t']));
    if fields.next() != Some("v=STSv1") {
        return Err("it does not start with v=STSv1".into());
    }
    let mut id = None;
    for f in fields {
        if f.is_empty() {
            return Err("an empty field".into());
        }
        let (key, value) = f
            .split_once('=')
            .ok_or_else(|| format!("{f:?} is not key=value"))?;
        let printable = |b: u8| (0x21..=0x7e).contains(&b) && b != b'=' && b != b';';
        if !valid_key(key) || value.is_empty() || !value.bytes().all(printable) {
            return Err(format!("{f:?} is not key=value"));
        }
        if key == "id" && id.is_none() {
            if value.len() > 32 || !value.bytes().all(|b| b.is_ascii_alphanumeric()) {
                return Err(format!("id {value:?} is not 1 to 32 letters and digits"));
            }
            id = Some(value.to_owned());
        }
    }
    id.ok_or_else(|| "no id field".into())
}

/// A field name: a letter or digit, then up to 31 letters, digits, `_`,
/// `-` or `.` (the grammar's `sts-policy-ext-name` and `sts-ext-name`).
fn valid_key(key: &str) -> bool {
    let b = key.as_bytes();
    !b.is_empty()
        && b.len() <= 32
        && b[0].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || b"_-.".contains(c))
}

/// An `mx` pattern: `["*."] Domain` (RFC 5321's Domain: labels of
/// letters, digits and inner hyphens), lower-cased.
fn pattern(value: &str) -> Option<String> {
    let name = value.strip_prefix("*.").unwrap_or(value);
    let ok = !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|l| {
            let b = l.as_bytes();
            !b.is_empty()
                && b.len() <= 63
                && b[0].is_ascii_alphanumeric()
                && b[b.len() - 1].is_ascii_alphanumeric()
                && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'-')
        });
    ok.then(|| value.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rfc_example_parses() {
        let p = Policy::parse(
            "version: STSv1\r\nmode: enforce\r\nmx: mail.example.com\r\nmx: *.example.net\r\n\
             mx: backupmx.example.com\r\nmax_age: 604800\r\n",
        )
        .unwrap();
        assert_eq!(p.mode, Mode::Enforce);
        assert_eq!(p.max_age, 604_800);
        assert_eq!(
            p.mx,
            ["mail.example.com", "*.example.net", "backupmx.example.com"]
        );
        // LF alone, no final newline, spaces after the colon, an extension,
        // a repeated mode (the first counts).
        let p = Policy::parse(
            "version:STSv1\nmode:   testing\nmode: enforce\next_1: some value\nmax_age: 86400\nmx: A.Example.ORG",
        )
        .unwrap();
        assert_eq!((p.mode, p.max_age), (Mode::Testing, 86_400));
        assert_eq!(p.mx, ["a.example.org"]);
    }

    #[test]
    fn max_age_is_bounded_to_a_year() {
        let p = Policy::parse("version: STSv1\nmode: none\nmax_age: 9999999999\n").unwrap();
        assert_eq!(p.max_age, MAX_AGE_LIMIT);
        assert!(p.mx.is_empty(), "mode none needs no mx");
    }

    #[test]
    fn malformed_policies_are_refused_with_the_reason() {
        let bad = |text: &str, why: &str| {
            let e = Policy::parse(text).unwrap_err();
            assert!(e.contains(why), "{text:?}: {e}");
        };
        let ok = "mode: enforce\nmx: mx.example.com\nmax_age: 86400\n";
        bad(ok, "no version");
        bad(&format!("version: STSv2\n{ok}"), "STSv2");
        bad(&format!("version: stsv1\n{ok}"), "stsv1");
        bad(
            "version: STSv1\nmode: enforce\nmax_age: 86400\n",
            "no mx field",
        );
        bad(
            "version: STSv1\nmode: Enforce\nmx: a.b\nmax_age: 86400\n",
            "Enforce",
        );
        bad("version: STSv1\nmode: enforce\nmx: a.b\n", "no max_age");
        bad(
            "version: STSv1\nmode: enforce\nmx: a.b\nmax_age: -1\n",
            "max_age",
        );
        bad(
            "version: STSv1\nmode: enforce\nmx: a.b\nmax_age: 12345678901\n",
            "max_age",
        );
        bad(
            "version: STSv1\nmode: enforce\nmx: a.*.b\nmax_age: 1\n",
            "a.*.b",
        );
        bad(
            "version: STSv1\nmode: enforce\nmx: *\nmax_age: 1\n",
            "\"*\"",
        );
        bad(
            "version: STSv1\nmode: enforce\nmx: -a.b\nmax_age: 1\n",
            "-a.b",
        );
        bad(
            "version: STSv1\n\nmode: enforce\nmx: a.b\nmax_age: 1\n",
            "line 2",
        );
        bad("<html>\n<body>not found</body>\n", "line 1");
        bad(
            "version: STSv1\nmode: enforce\nmx: a.b\nmax_age: 1\n\n",
            "line 5",
        );
    }

    #[test]
    fn a_wildcard_covers_one_label() {
        let p = Policy::parse(
            "version: STSv1\nmode: enforce\nmx: mail.example.com\nmx: *.example.net\nmax_age: 1\n",
        )
        .unwrap();
        assert!(p.matches("mail.example.com"));
        assert!(p.matches("MAIL.Example.com."));
        assert!(p.matches("mx1.example.net"));
        assert!(!p.matches("example.net"), "the wildcard needs a label");
        assert!(!p.matches("a.b.example.net"), "one label only");
        assert!(!p.matches("mail.example.com.evil.test"));
        assert!(!p.matches("xmail.example.com"));
        assert!(!p.matches(".example.net"));
    }

    #[test]
    fn txt_records() {
        assert_eq!(
            record_id("v=STSv1; id=20160831085700Z;").unwrap(),
            "20160831085700Z"
        );
        assert_eq!(record_id("v=STSv1;id=abc").unwrap(), "abc");
        assert_eq!(record_id("v=STSv1; id=abc ; ext=x;").unwrap(), "abc");
        for (txt, why) in [
            ("v=spf1 -all", "v=STSv1"),
            ("v=STSv2; id=abc", "v=STSv1"),
            ("v=STSv1", "no id"),
            ("v=STSv1; ext=1", "no id"),
            ("v=STSv1; id=", "key=value"),
            ("v=STSv1; id=a-b", "letters and digits"),
            (
                "v=STSv1; id=0123456789012345678901234567890123",
                "letters and digits",
            ),
            ("v=STSv1;; id=abc", "empty field"),
            ("id=abc; v=STSv1", "v=STSv1"),
        ] {
            let e = record_id(txt).unwrap_err();
            assert!(e.contains(why), "{txt:?}: {e}");
        }
    }
}
