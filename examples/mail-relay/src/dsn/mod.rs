//! Delivery status notifications, the SMTP side (RFC 3461): what a client
//! asks for with MAIL's `RET=` and `ENVID=` and RCPT's `NOTIFY=` and
//! `ORCPT=`, checked, kept in the envelope (and so in the spool), and
//! passed on to a next hop that announces DSN.
//!
//! The values are kept as the client sent them (ENVID and ORCPT as
//! xtext), which is what goes on to the next hop and into the spool; they
//! are decoded only for a report (`delivery::bounce`), where what they
//! stand for is shown escaped. The queue decides which reports to send
//! (`queue::outcome`): a failure unless NOTIFY leaves it out, a delay
//! once after `delay_warning_time` when asked, a success when asked and
//! no next hop took the request on.

pub mod xtext;

use std::fmt;

use crate::protocol::Reply;

/// The longest ENVID (RFC 3461 §4.4), as sent.
pub const MAX_ENVID: usize = 100;
/// The longest ORCPT (RFC 3461 §4.2), as sent.
pub const MAX_ORCPT: usize = 500;

/// `RET=`: what a report returns of the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Ret {
    /// The whole message.
    Full,
    /// Its header section only.
    Hdrs,
}

impl Ret {
    /// The keyword's value as SMTP writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Ret::Full => "FULL",
            Ret::Hdrs => "HDRS",
        }
    }

    fn parse(v: &str) -> Option<Ret> {
        if v.eq_ignore_ascii_case("FULL") {
            Some(Ret::Full)
        } else if v.eq_ignore_ascii_case("HDRS") {
            Some(Ret::Hdrs)
        } else {
            None
        }
    }
}

/// `NOTIFY=`: which reports a recipient's sender wants. `NEVER` is all
/// false.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Notify {
    /// On delivery (`SUCCESS`).
    pub success: bool,
    /// On failure (`FAILURE`).
    pub failure: bool,
    /// While delayed (`DELAY`).
    pub delay: bool,
}

impl Notify {
    /// The value of a `NOTIFY=` parameter: `NEVER`, or one or more of
    /// `SUCCESS`, `FAILURE`, `DELAY` separated by commas (any case).
    ///
    /// # Errors
    ///
    /// Anything else, with what is wrong.
    pub fn parse(v: &str) -> Result<Notify, String> {
        if v.eq_ignore_ascii_case("NEVER") {
            return Ok(Notify::default());
        }
        let mut n = Notify::default();
        for word in v.split(',') {
            let slot = match word.to_ascii_uppercase().as_str() {
                "SUCCESS" => &mut n.success,
                "FAILURE" => &mut n.failure,
                "DELAY" => &mut n.delay,
                "NEVER" => return Err("NEVER must stand alone".into()),
                _ => {
                    return Err(format!(
                        "{:?} is not SUCCESS, FAILURE, DELAY or NEVER",
                        crate::escape::escape(word)
                    ))
                }
            };
            if *slot {
                return Err(format!("{word} given twice"));
            }
            *slot = true;
        }
        Ok(n)
    }

    /// Whether no report at all is wanted.
    pub fn is_never(self) -> bool {
        self == Notify::default()
    }
}

impl fmt::Display for Notify {
    /// As the parameter writes it: `NEVER` or `SUCCESS,FAILURE,DELAY`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_never() {
            return f.write_str("NEVER");
        }
        let words = [
            (self.success, "SUCCESS"),
            (self.failure, "FAILURE"),
            (self.delay, "DELAY"),
        ];
        let on: Vec<&str> = words.iter().filter(|(b, _)| *b).map(|(_, w)| *w).collect();
        f.write_str(&on.join(","))
    }
}

impl serde::Serialize for Notify {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> serde::Deserialize<'de> for Notify {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Notify, D::Error> {
        let s = String::deserialize(d)?;
        Notify::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// One recipient's DSN parameters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RcptDsn {
    /// `NOTIFY=`, if given.
    pub notify: Option<Notify>,
    /// `ORCPT=` as given: `addr-type;xtext`.
    pub orcpt: Option<String>,
}

impl RcptDsn {
    /// Whether neither parameter was given.
    pub fn is_empty(&self) -> bool {
        self.notify.is_none() && self.orcpt.is_none()
    }

    /// NOTIFY, or `default` for a recipient that gave none.
    pub fn notify_or(&self, default: Notify) -> Notify {
        self.notify.unwrap_or(default)
    }

    /// The ORCPT as a report shows it: `addr-type;address`, the xtext
    /// decoded (and a UTF-8 address's `\x{...}` left as it is).
    pub fn original(&self) -> Option<String> {
        let o = self.orcpt.as_deref()?;
        let (kind, value) = o.split_once(';')?;
        let decoded = decode_loose(value);
        Some(format!("{kind};{decoded}"))
    }
}

/// A message's DSN parameters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Dsn {
    /// `RET=`, if given.
    pub ret: Option<Ret>,
    /// `ENVID=` as given (xtext).
    pub envid: Option<String>,
    /// Per recipient, in the envelope's order; empty when no recipient
    /// gave any (the common case costs nothing).
    pub rcpts: Vec<RcptDsn>,
}

/// The parameters of a recipient that gave none.
static NONE: RcptDsn = RcptDsn {
    notify: None,
    orcpt: None,
};

impl Dsn {
    /// Recipient `i`'s parameters.
    pub fn rcpt(&self, i: usize) -> &RcptDsn {
        self.rcpts.get(i).unwrap_or(&NONE)
    }

    /// Records recipient `i`'s parameters (the recipients before it that
    /// gave none get empty ones).
    pub fn set_rcpt(&mut self, i: usize, p: RcptDsn) {
        if p.is_empty() && self.rcpts.len() <= i {
            return;
        }
        if self.rcpts.len() <= i {
            self.rcpts.resize(i + 1, RcptDsn::default());
        }
        self.rcpts[i] = p;
    }

    /// The ENVID decoded, for a report's `Original-Envelope-Id`.
    pub fn original_envid(&self) -> Option<String> {
        self.envid.as_deref().map(decode_loose)
    }

    /// MAIL's DSN parameters for a next hop that announces DSN (each with
    /// its leading space); empty when none was given.
    pub fn mail_params(&self) -> String {
        let mut out = String::new();
        if let Some(r) = self.ret {
            out.push_str(" RET=");
            out.push_str(r.as_str());
        }
        if let Some(e) = &self.envid {
            out.push_str(" ENVID=");
            out.push_str(e);
        }
        out
    }

    /// Recipient `i`'s DSN parameters for such a next hop.
    pub fn rcpt_params(&self, i: usize) -> String {
        let p = self.rcpt(i);
        let mut out = String::new();
        if let Some(n) = p.notify {
            out.push_str(&format!(" NOTIFY={n}"));
        }
        if let Some(o) = &p.orcpt {
            out.push_str(" ORCPT=");
            out.push_str(o);
        }
        out
    }
}

/// xtext decoded where it is well-formed, as text (invalid UTF-8
/// replaced); the rest as it is.
fn decode_loose(value: &str) -> String {
    let mut out = Vec::with_capacity(value.len());
    let b = value.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let hex = b
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .filter(|h| {
                h.bytes()
                    .all(|c| c.is_ascii_digit() || (b'A'..=b'F').contains(&c))
            })
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (b[i], hex) {
            (b'+', Some(c)) => {
                out.push(c);
                i += 3;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn bad(keyword: &str, why: impl fmt::Display) -> Reply {
    Reply::new(501, "5.5.4", format!("Bad {keyword} parameter: {why}"))
}

/// MAIL's `RET=` value.
///
/// # Errors
///
/// 501 with the reason.
pub fn parse_ret(v: &str) -> Result<Ret, Reply> {
    Ret::parse(v).ok_or_else(|| bad("RET", "FULL or HDRS"))
}

/// MAIL's `ENVID=` value: xtext of at most [`MAX_ENVID`] characters that
/// stands for printable ASCII.
///
/// # Errors
///
/// 501 with the reason.
pub fn parse_envid(v: &str) -> Result<String, Reply> {
    if v.len() > MAX_ENVID {
        return Err(bad("ENVID", format!("longer than {MAX_ENVID} characters")));
    }
    let octets = xtext::decode(v).map_err(|e| bad("ENVID", e))?;
    if octets.is_empty() || octets.iter().any(|&c| !(b' '..=b'~').contains(&c)) {
        return Err(bad("ENVID", "empty, or not printable ASCII"));
    }
    Ok(v.to_owned())
}

/// RCPT's `NOTIFY=` value.
///
/// # Errors
///
/// 501 with the reason.
pub fn parse_notify(v: &str) -> Result<Notify, Reply> {
    Notify::parse(v).map_err(|e| bad("NOTIFY", e))
}

/// RCPT's `ORCPT=` value: `addr-type;xtext` of at most [`MAX_ORCPT`]
/// characters (the `utf-8` type, RFC 6533, may also hold UTF-8).
///
/// # Errors
///
/// 501 with the reason.
pub fn parse_orcpt(v: &str) -> Result<String, Reply> {
    if v.len() > MAX_ORCPT {
        return Err(bad("ORCPT", format!("longer than {MAX_ORCPT} characters")));
    }
    let (kind, addr) = v
        .split_once(';')
        .ok_or_else(|| bad("ORCPT", "no addr-type; (as in rfc822;a@b)"))?;
    let atext = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-/=?^_`{|}~".contains(c);
    if kind.is_empty() || !kind.chars().all(atext) {
        return Err(bad("ORCPT", "malformed addr-type"));
    }
    if addr.is_empty() {
        return Err(bad("ORCPT", "empty address"));
    }
    let ok = if kind.eq_ignore_ascii_case("utf-8") {
        // Non-ASCII characters stand for themselves; the ASCII runs are
        // xtext.
        addr.split(|c: char| !c.is_ascii()).all(xtext::is_xtext)
            && !addr.chars().any(char::is_control)
    } else {
        xtext::is_xtext(addr)
    };
    if !ok {
        return Err(bad("ORCPT", "malformed xtext"));
    }
    Ok(v.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notify_values() {
        let n = Notify::parse("success,Delay").unwrap();
        assert!(n.success && n.delay && !n.failure);
        assert_eq!(n.to_string(), "SUCCESS,DELAY");
        assert!(Notify::parse("NEVER").unwrap().is_never());
        assert_eq!(Notify::parse("never").unwrap().to_string(), "NEVER");
        for bad in [
            "",
            "NEVER,SUCCESS",
            "SUCCESS,",
            "SOMETIMES",
            "FAILURE,FAILURE",
        ] {
            assert!(Notify::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn envid_and_orcpt() {
        assert_eq!(parse_envid("QQ+2B1").unwrap(), "QQ+2B1");
        assert!(parse_envid(&"a".repeat(100)).is_ok());
        let long = parse_envid(&"a".repeat(101)).unwrap_err();
        assert_eq!((long.code, long.status), (501, "5.5.4"));
        assert!(long.text.contains("longer than 100"), "{long}");
        assert!(parse_envid("a+0D+0Ab")
            .unwrap_err()
            .text
            .contains("printable"));
        assert!(parse_envid("a+2")
            .unwrap_err()
            .text
            .contains("malformed xtext"));
        assert_eq!(
            parse_orcpt("rfc822;a+2Bb@x.test").unwrap(),
            "rfc822;a+2Bb@x.test"
        );
        assert!(parse_orcpt("utf-8;j\u{f6}rg@x.test").is_ok());
        for bad in [
            "a@b",
            "rfc822;",
            ";a@b",
            "rfc 822;a@b",
            "rfc822;a b",
            "rfc822;a+zz",
        ] {
            assert_eq!(parse_orcpt(bad).unwrap_err().code, 501, "{bad}");
        }
        assert!(parse_ret("hdrs").is_ok() && parse_ret("SOME").is_err());
    }

    #[test]
    fn parameters_and_what_reports_show() {
        let mut d = Dsn {
            ret: Some(Ret::Hdrs),
            envid: Some("id+2B1".into()),
            rcpts: Vec::new(),
        };
        d.set_rcpt(0, RcptDsn::default());
        assert!(d.rcpts.is_empty(), "no parameters cost nothing");
        d.set_rcpt(
            2,
            RcptDsn {
                notify: Some(Notify::parse("SUCCESS,FAILURE").unwrap()),
                orcpt: Some("rfc822;a+2Bb@x.test".into()),
            },
        );
        assert_eq!(d.rcpts.len(), 3);
        assert_eq!(d.mail_params(), " RET=HDRS ENVID=id+2B1");
        assert_eq!(d.rcpt_params(0), "");
        assert_eq!(
            d.rcpt_params(2),
            " NOTIFY=SUCCESS,FAILURE ORCPT=rfc822;a+2Bb@x.test"
        );
        assert_eq!(d.rcpt(2).original().unwrap(), "rfc822;a+b@x.test");
        assert_eq!(d.original_envid().unwrap(), "id+1");
        assert_eq!(d.rcpt(7), &RcptDsn::default());
    }
}
