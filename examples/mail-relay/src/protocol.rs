//! SMTP command syntax (RFC 5321 §4.1, RFC 1870 SIZE, RFC 6152 8BITMIME,
//! RFC 6531 SMTPUTF8, RFC 4954 AUTH, RFC 3461 DSN): a command line in, a
//! [`Command`] or the exact reply that rejects it out. No session state
//! lives here.

use std::fmt;

use crate::dsn::{self, RcptDsn, Ret};

/// A reply: code, enhanced status code (RFC 3463) and text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// The three-digit code.
    pub code: u16,
    /// `x.y.z`, without the class digit's dot-prefix repeated.
    pub status: &'static str,
    /// Human text.
    pub text: String,
}

impl Reply {
    /// A reply.
    pub fn new(code: u16, status: &'static str, text: impl Into<String>) -> Reply {
        Reply {
            code,
            status,
            text: text.into(),
        }
    }
}

impl fmt::Display for Reply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} {}", self.code, self.status, self.text)
    }
}

/// The parameters of MAIL FROM.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MailParams {
    /// SIZE=n: the size the client declares.
    pub size: Option<u64>,
    /// BODY=8BITMIME.
    pub eight_bit: bool,
    /// SMTPUTF8.
    pub smtputf8: bool,
    /// RET= (RFC 3461).
    pub ret: Option<Ret>,
    /// ENVID= as given (xtext).
    pub envid: Option<String>,
}

/// A parsed command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// EHLO with the client's name.
    Ehlo(String),
    /// HELO with the client's name.
    Helo(String),
    /// MAIL FROM: the reverse path (empty for the null sender).
    Mail(String, MailParams),
    /// RCPT TO: the forward path and its DSN parameters.
    Rcpt(String, RcptDsn),
    /// DATA.
    Data,
    /// RSET.
    Rset,
    /// NOOP.
    Noop,
    /// QUIT.
    Quit,
    /// VRFY (answered 252).
    Vrfy,
    /// HELP.
    Help,
    /// STARTTLS.
    StartTls,
    /// AUTH with its mechanism and, if given, its initial response.
    Auth(String, Option<String>),
}

/// A command's entry in the command table: what a session needs to know
/// of it besides its arguments (the shape of Postfix's `smtpd_cmd_table`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spec {
    /// The verb, for logs ("after RCPT").
    pub verb: &'static str,
    /// Whether it counts toward `junk_command_limit`: it moves no mail
    /// and changes nothing a client needs (Postfix's
    /// `smtpd_junk_command_limit`).
    pub junk: bool,
}

impl Spec {
    const fn new(verb: &'static str) -> Spec {
        Spec { verb, junk: false }
    }

    const fn junk(verb: &'static str) -> Spec {
        Spec { verb, junk: true }
    }
}

impl Command {
    /// This command's entry in the command table.
    pub fn spec(&self) -> Spec {
        match self {
            Command::Ehlo(_) => Spec::new("EHLO"),
            Command::Helo(_) => Spec::new("HELO"),
            Command::Mail(..) => Spec::new("MAIL"),
            Command::Rcpt(..) => Spec::new("RCPT"),
            Command::Data => Spec::new("DATA"),
            Command::Rset => Spec::junk("RSET"),
            Command::Noop => Spec::junk("NOOP"),
            Command::Quit => Spec::new("QUIT"),
            Command::Vrfy => Spec::junk("VRFY"),
            Command::Help => Spec::junk("HELP"),
            Command::StartTls => Spec::new("STARTTLS"),
            Command::Auth(..) => Spec::new("AUTH"),
        }
    }

    /// The verb, for logs ("after RCPT").
    pub fn verb(&self) -> &'static str {
        self.spec().verb
    }
}

/// Parses one command line (without CRLF). `esmtp` says whether the
/// session began with EHLO (MAIL parameters are allowed only then).
pub fn parse(line: &[u8], esmtp: bool) -> Result<Command, Reply> {
    let verb = verb_of(line);
    if verb == "EHLO" || verb == "HELO" {
        check_helo(&line[4..], verb)?;
    }
    let line = std::str::from_utf8(line)
        .map_err(|_| Reply::new(500, "5.5.2", "Error: command is not valid UTF-8"))?;
    let (verb, rest) = match line.find(' ') {
        Some(i) => (&line[..i], &line[i + 1..]),
        None => (line, ""),
    };
    let no_args = |c: Command| {
        if rest.trim().is_empty() {
            Ok(c)
        } else {
            Err(Reply::new(501, "5.5.4", format!("Syntax: {}", c.verb())))
        }
    };
    match verb.to_ascii_uppercase().as_str() {
        "EHLO" | "HELO" => {
            let name = rest.trim();
            if name.is_empty() || name.contains(char::is_whitespace) {
                return Err(Reply::new(
                    501,
                    "5.5.4",
                    format!("Syntax: {} hostname", verb.to_ascii_uppercase()),
                ));
            }
            Ok(if verb.eq_ignore_ascii_case("EHLO") {
                Command::Ehlo(name.to_owned())
            } else {
                Command::Helo(name.to_owned())
            })
        }
        "MAIL" => parse_mail(rest, esmtp),
        "RCPT" => parse_rcpt(rest, esmtp),
        "DATA" => no_args(Command::Data),
        "RSET" => no_args(Command::Rset),
        "NOOP" => Ok(Command::Noop),
        "QUIT" => no_args(Command::Quit),
        "VRFY" => Ok(Command::Vrfy),
        "HELP" => Ok(Command::Help),
        "STARTTLS" => no_args(Command::StartTls),
        "AUTH" => parse_auth(rest),
        _ => Err(Reply::new(500, "5.5.2", "Error: command not recognized")),
    }
}

/// The longest host name (RFC 1035 §2.3.4), or address literal we take.
const MAX_HELO: usize = 255;

/// The EHLO/HELO argument (after the verb): one name of printable ASCII
/// (no NUL, no control or 8-bit octets, which would otherwise end up in
/// our `Received:` header and make a 7-bit message 8-bit), at most 255
/// octets.
fn check_helo(rest: &[u8], verb: &str) -> Result<(), Reply> {
    let name = rest.trim_ascii();
    let why = if name.is_empty() || name.contains(&b' ') {
        return Err(Reply::new(501, "5.5.4", format!("Syntax: {verb} hostname")));
    } else if name.len() > MAX_HELO {
        "longer than 255 octets"
    } else if name.iter().any(|&b| !b.is_ascii_graphic()) {
        "control or 8-bit octets in it"
    } else {
        return Ok(());
    };
    Err(Reply::new(
        501,
        "5.5.2",
        format!("Error: {verb} argument rejected: {why}"),
    ))
}

/// The verb of a command line, upper-cased, if it is one we know
/// (`UNKNOWN` otherwise): so that a rejected MAIL is logged as MAIL.
pub fn verb_of(line: &[u8]) -> &'static str {
    let end = line.iter().position(|&b| b == b' ').unwrap_or(line.len());
    const VERBS: [&str; 12] = [
        "EHLO", "HELO", "MAIL", "RCPT", "DATA", "RSET", "NOOP", "QUIT", "VRFY", "HELP", "STARTTLS",
        "AUTH",
    ];
    VERBS
        .into_iter()
        .find(|v| line[..end].eq_ignore_ascii_case(v.as_bytes()))
        .unwrap_or("UNKNOWN")
}

/// `MAIL FROM:<path> [params]`.
fn parse_mail(rest: &str, esmtp: bool) -> Result<Command, Reply> {
    let syntax = || Reply::new(501, "5.5.4", "Syntax: MAIL FROM:<address>");
    let after = strip_keyword(rest, "FROM:").ok_or_else(syntax)?;
    let (path, params) = split_path(after).ok_or_else(syntax)?;
    let mut p = MailParams::default();
    for_each_param(params, esmtp, |key, value, param| {
        match (key, value) {
            ("RET", Some(v)) => set_once(&mut p.ret, key, || dsn::parse_ret(v))?,
            ("ENVID", Some(v)) => set_once(&mut p.envid, key, || dsn::parse_envid(v))?,
            ("RET" | "ENVID", None) => return Err(no_value(param)),
            ("SIZE", Some(v)) => {
                p.size =
                    Some(v.parse().map_err(|_| {
                        Reply::new(501, "5.5.4", format!("Bad SIZE parameter: {v}"))
                    })?)
            }
            ("BODY", Some(v)) if v.eq_ignore_ascii_case("8BITMIME") => p.eight_bit = true,
            ("BODY", Some(v)) if v.eq_ignore_ascii_case("7BIT") => p.eight_bit = false,
            ("SMTPUTF8", None) => p.smtputf8 = true,
            // RFC 4954 §5: who submitted the message, as another relay
            // vouches; taken (a server that offers AUTH must) and not
            // trusted, so not kept.
            ("AUTH", Some(v)) if !v.is_empty() => {}
            _ => return Err(unsupported(param)),
        }
        Ok(())
    })?;
    let addr = address(path, p.smtputf8, true).map_err(|why| {
        if why == NEEDS_UTF8 {
            needs_utf8()
        } else {
            Reply::new(501, "5.1.7", format!("Bad sender address syntax: {why}"))
        }
    })?;
    Ok(Command::Mail(addr, p))
}

/// `AUTH mechanism [initial-response]`.
fn parse_auth(rest: &str) -> Result<Command, Reply> {
    let mut words = rest.split(' ').filter(|w| !w.is_empty());
    match (words.next(), words.next(), words.next()) {
        (Some(mech), initial, None) => {
            Ok(Command::Auth(mech.to_owned(), initial.map(str::to_owned)))
        }
        _ => Err(Reply::new(
            501,
            "5.5.4",
            "Syntax: AUTH mechanism [initial-response]",
        )),
    }
}

/// `RCPT TO:<path> [NOTIFY=...] [ORCPT=...]` (RFC 3461's parameters, the
/// only ones announced). Non-ASCII addresses are checked against SMTPUTF8
/// by the session, which knows what MAIL declared.
fn parse_rcpt(rest: &str, esmtp: bool) -> Result<Command, Reply> {
    let syntax = || Reply::new(501, "5.5.4", "Syntax: RCPT TO:<address>");
    let after = strip_keyword(rest, "TO:").ok_or_else(syntax)?;
    let (path, params) = split_path(after).ok_or_else(syntax)?;
    let mut d = RcptDsn::default();
    for_each_param(params, esmtp, |key, value, param| match (key, value) {
        ("NOTIFY", Some(v)) => set_once(&mut d.notify, key, || dsn::parse_notify(v)),
        ("ORCPT", Some(v)) => set_once(&mut d.orcpt, key, || dsn::parse_orcpt(v)),
        ("NOTIFY" | "ORCPT", None) => Err(no_value(param)),
        _ => Err(unsupported(param)),
    })?;
    let addr = address(path, true, false)
        .map_err(|why| Reply::new(501, "5.1.3", format!("Bad recipient address syntax: {why}")))?;
    Ok(Command::Rcpt(addr, d))
}

/// The `KEY[=value]` parameters after a MAIL or RCPT path (space
/// separated), each handed to `take` as its upper-cased key, its value, and
/// the parameter as written (for replies). Parameters need EHLO.
fn for_each_param(
    params: &str,
    esmtp: bool,
    mut take: impl FnMut(&str, Option<&str>, &str) -> Result<(), Reply>,
) -> Result<(), Reply> {
    for param in params.split(' ').filter(|s| !s.is_empty()) {
        if !esmtp {
            return Err(Reply::new(
                555,
                "5.5.4",
                "Unsupported option: parameters need EHLO",
            ));
        }
        let (key, value) = match param.split_once('=') {
            Some((k, v)) => (k, Some(v)),
            None => (param, None),
        };
        take(&key.to_ascii_uppercase(), value, param)?;
    }
    Ok(())
}

/// Sets a parameter that may be given once to what `parse` makes of its
/// value; refuses it given twice (before looking at its value).
fn set_once<T>(
    slot: &mut Option<T>,
    key: &str,
    parse: impl FnOnce() -> Result<T, Reply>,
) -> Result<(), Reply> {
    if slot.is_some() {
        return Err(Reply::new(
            501,
            "5.5.4",
            format!("{key} parameter given twice"),
        ));
    }
    *slot = Some(parse()?);
    Ok(())
}

/// The reply to a parameter that needs a value given without one.
fn no_value(param: &str) -> Reply {
    Reply::new(501, "5.5.4", format!("Bad {param} parameter: no value"))
}

/// The reply to a parameter that is not announced (or not of this command).
fn unsupported(param: &str) -> Reply {
    Reply::new(555, "5.5.4", format!("Unsupported option: {param}"))
}

/// The reply to a non-ASCII address without SMTPUTF8.
pub fn needs_utf8() -> Reply {
    Reply::new(
        553,
        "5.6.7",
        "Must declare SMTPUTF8 to send a non-ASCII address",
    )
}

const NEEDS_UTF8: &str = "non-ASCII address without SMTPUTF8";

/// `rest` after a case-insensitive `kw`, leading spaces skipped (Postfix's
/// leniency for `MAIL FROM: <a>`).
fn strip_keyword<'a>(rest: &'a str, kw: &str) -> Option<&'a str> {
    let head = rest.get(..kw.len())?;
    head.eq_ignore_ascii_case(kw)
        .then(|| rest[kw.len()..].trim_start_matches(' '))
}

/// Splits `<path> params` into the path's inside and the parameters.
fn split_path(s: &str) -> Option<(&str, &str)> {
    let s = s.strip_prefix('<')?;
    let end = s.find('>')?;
    let rest = &s[end + 1..];
    if !rest.is_empty() && !rest.starts_with(' ') {
        return None;
    }
    Some((&s[..end], rest))
}

/// Checks a path's inside: an empty path only for the sender, a source
/// route (`@a,@b:`) dropped, then `local@domain` (or the bare
/// `postmaster` for a recipient).
fn address(path: &str, utf8: bool, sender: bool) -> Result<String, &'static str> {
    if path.is_empty() {
        return if sender {
            Ok(String::new())
        } else {
            Err("empty address")
        };
    }
    let path = match (path.starts_with('@'), path.find(':')) {
        (true, Some(i)) => &path[i + 1..],
        (true, None) => return Err("bad source route"),
        _ => path,
    };
    if path.len() > 254 {
        return Err("address too long");
    }
    if path
        .chars()
        .any(|c| c.is_control() || c == ' ' || c == '<' || c == '>')
    {
        return Err("bad character");
    }
    if !path.is_ascii() && !utf8 {
        return Err(NEEDS_UTF8);
    }
    if !sender && path.eq_ignore_ascii_case("postmaster") {
        return Ok(path.to_owned());
    }
    let at = path.rfind('@').ok_or("no domain")?;
    let (local, domain) = (&path[..at], &path[at + 1..]);
    if local.is_empty() || domain.is_empty() {
        return Err("empty local part or domain");
    }
    let literal = domain.starts_with('[') && domain.ends_with(']');
    if !literal
        && (domain.starts_with('.')
            || domain.ends_with('.')
            || domain.contains("..")
            || domain
                .chars()
                .any(|c| !(c.is_alphanumeric() || c == '-' || c == '.')))
    {
        return Err("bad domain");
    }
    Ok(path.to_owned())
}

/// The domain of an address (after the last `@`), lower-cased; `None` for
/// the bare `postmaster`.
pub fn domain(addr: &str) -> Option<String> {
    addr.rfind('@').map(|i| addr[i + 1..].to_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(s: &str) -> Command {
        parse(s.as_bytes(), true).unwrap()
    }

    fn code(s: &str) -> u16 {
        parse(s.as_bytes(), true).unwrap_err().code
    }

    #[test]
    fn command_table() {
        let table = [
            ("EHLO client.test", false),
            ("HELO client.test", false),
            ("MAIL FROM:<>", false),
            ("RCPT TO:<a@b.test>", false),
            ("DATA", false),
            ("RSET", true),
            ("NOOP", true),
            ("QUIT", false),
            ("VRFY someone", true),
            ("HELP", true),
            ("STARTTLS", false),
            ("AUTH PLAIN", false),
        ];
        for (line, junk) in table {
            let spec = ok(line).spec();
            assert_eq!(spec.junk, junk, "{line}");
            assert_eq!(spec.verb, verb_of(line.as_bytes()), "{line}");
        }
    }

    #[test]
    fn commands() {
        assert_eq!(ok("ehlo client.test"), Command::Ehlo("client.test".into()));
        assert_eq!(
            ok("MAIL FROM:<>"),
            Command::Mail(String::new(), MailParams::default())
        );
        assert_eq!(
            ok("MAIL FROM: <a@b.test> SIZE=100 BODY=8BITMIME"),
            Command::Mail(
                "a@b.test".into(),
                MailParams {
                    size: Some(100),
                    eight_bit: true,
                    ..MailParams::default()
                }
            )
        );
        assert_eq!(
            ok("RCPT TO:<@relay.test:x@y.test>"),
            Command::Rcpt("x@y.test".into(), RcptDsn::default())
        );
        assert_eq!(
            ok("rcpt to:<Postmaster>"),
            Command::Rcpt("Postmaster".into(), RcptDsn::default())
        );
        let Command::Mail(_, p) = ok("MAIL FROM:<a@b.test> RET=hdrs ENVID=QQ+2B1") else {
            panic!("MAIL")
        };
        assert_eq!(
            (p.ret, p.envid.as_deref()),
            (Some(Ret::Hdrs), Some("QQ+2B1"))
        );
        let Command::Rcpt(_, d) =
            ok("RCPT TO:<x@y.test> NOTIFY=SUCCESS,FAILURE ORCPT=rfc822;x@y.test")
        else {
            panic!("RCPT")
        };
        assert!(d.notify.is_some_and(|n| n.success && n.failure && !n.delay));
        assert_eq!(d.orcpt.as_deref(), Some("rfc822;x@y.test"));
        assert_eq!(ok("DATA"), Command::Data);
        assert_eq!(
            ok("AUTH PLAIN AGEAYg=="),
            Command::Auth("PLAIN".into(), Some("AGEAYg==".into()))
        );
        assert_eq!(ok("auth login"), Command::Auth("login".into(), None));
        assert!(matches!(
            ok("MAIL FROM:<a@b.test> AUTH=<>"),
            Command::Mail(..)
        ));
    }

    #[test]
    fn syntax_errors() {
        assert_eq!(code("EHLO"), 501);
        assert_eq!(code("MAIL TO:<a@b>"), 501);
        assert_eq!(code("MAIL FROM:a@b.test"), 501);
        assert_eq!(code("MAIL FROM:<a@b.test> FOO=1"), 555);
        assert_eq!(code("RCPT TO:<a@b.test> FOO=1"), 555);
        assert_eq!(code("MAIL FROM:<a@b.test> RET=SOME"), 501);
        assert_eq!(code("MAIL FROM:<a@b.test> RET=FULL RET=HDRS"), 501);
        assert_eq!(code("MAIL FROM:<a@b.test> RET"), 501);
        assert_eq!(code("MAIL FROM:<a@b.test> ENVID=a+2"), 501);
        assert_eq!(
            code(&format!("MAIL FROM:<a@b.test> ENVID={}", "x".repeat(101))),
            501
        );
        assert_eq!(code("RCPT TO:<a@b.test> NOTIFY=NEVER,DELAY"), 501);
        assert_eq!(code("RCPT TO:<a@b.test> ORCPT=a@b.test"), 501);
        assert_eq!(
            parse(b"RCPT TO:<a@b.test> NOTIFY=NEVER", false)
                .unwrap_err()
                .code,
            555
        );
        assert_eq!(code("MAIL FROM:<a@b.test> SIZE=x"), 501);
        assert_eq!(code("RCPT TO:<>"), 501);
        assert_eq!(code("RCPT TO:<a@b..c>"), 501);
        assert_eq!(code("DATA now"), 501);
        assert_eq!(code("WHAT"), 500);
        assert_eq!(code("AUTH"), 501);
        assert_eq!(code("AUTH PLAIN a b"), 501);
        assert_eq!(verb_of(b"auth plain x"), "AUTH");
        assert_eq!(code("EHLO a\x01b"), 501);
        assert_eq!(code(&format!("HELO {}", "a".repeat(256))), 501);
        assert!(matches!(parse(b"EHLO \xffbad", true), Err(r) if r.code == 501));
        assert_eq!(verb_of(b"mail FROM:x"), "MAIL");
        assert_eq!(verb_of(b"MAILX"), "UNKNOWN");
        assert_eq!(code("MAIL FROM:<ü@b.test>"), 553);
        assert!(matches!(
            ok("MAIL FROM:<ü@b.test> SMTPUTF8"),
            Command::Mail(..)
        ));
        assert_eq!(
            parse(b"MAIL FROM:<a@b.test> SIZE=1", false)
                .unwrap_err()
                .code,
            555
        );
    }
}
