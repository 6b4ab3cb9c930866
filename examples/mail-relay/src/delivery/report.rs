//! Delivery status notifications (RFC 3464): the report telling a sender
//! what became of its message: which recipients failed and why (a
//! bounce), which are still delayed, or which were delivered or relayed
//! (when the sender asked, RFC 3461).
//!
//! A report is a new message from the null sender to the original
//! sender, queued in our own spool and delivered like any other. The queue
//! decides which to send (`queue::outcome`): never to the null sender (so
//! a report that itself fails is dropped, never bounced again; RFC 5321
//! §6.1), and only what each recipient's NOTIFY asked for.
//!
//! ```text
//! multipart/report; report-type=delivery-status
//!   text/plain                 what happened, for humans
//!   message/delivery-status    Reporting-MTA, Original-Envelope-Id,
//!                              Arrival-Date; per recipient
//!                              Original-Recipient, Final-Recipient, Action,
//!                              Status, Remote-MTA, Diagnostic-Code
//!   text/rfc822-headers        the original's header section (RET=HDRS),
//!   or message/rfc822          or the whole original (RET=FULL)
//! ```
//!
//! For a message sent with SMTPUTF8 the parts are RFC 6533's
//! `message/global-delivery-status`, `message/global-headers` and
//! `message/global`.
//!
//! A [`Report`] is its text before the returned part, the part itself
//! (read from the spool by the queue: the header section, bounded, or the
//! whole content, streamed), and its text after. What the report quotes
//! from the network (an upstream's reply and name, the addresses, the
//! ENVID and ORCPT the client gave) is [escaped](crate::escape): a CR in
//! it cannot start a header line of its own in the report.

use std::fmt::Write as _;
use std::time::SystemTime;

use super::Detail;
use crate::dsn::{Dsn, Ret};
use crate::escape::escape;
use crate::spool::Envelope;
use crate::time::Utc;

/// The most of the original's header section a report carries (cut at a
/// line end): its headers are read from the spool, and a message with
/// more is shown in part.
pub const HEADERS_LIMIT: usize = 64 * 1024;

/// What a report says happened to a recipient (RFC 3464 §2.3.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// It failed for good (or the queue lifetime ran out).
    Failed,
    /// It is deferred and still being tried.
    Delayed,
    /// It was delivered here.
    Delivered,
    /// It was sent on to a next hop that sends no reports.
    Relayed,
}

impl Action {
    fn as_str(self) -> &'static str {
        match self {
            Action::Failed => "failed",
            Action::Delayed => "delayed",
            Action::Delivered => "delivered",
            Action::Relayed => "relayed",
        }
    }
}

/// One recipient to report on.
#[derive(Debug, Clone, Copy)]
pub struct Notice<'a> {
    /// Its index in the original envelope.
    pub index: usize,
    /// What happened to it.
    pub action: Action,
    /// Why (the status code, the reply).
    pub detail: &'a Detail,
}

/// What a report needs to say about the original beyond its envelope.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    /// Our host name.
    pub hostname: &'a str,
    /// The queue lifetime ran out (the failed recipients were deferred).
    pub expired: bool,
    /// Until when a delayed message is tried (`Will-Retry-Until`).
    pub retry_until: Option<SystemTime>,
    /// What to return when the original's MAIL gave no RET.
    pub default_ret: Ret,
}

/// A report, the returned part left to the caller.
#[derive(Debug)]
pub struct Report {
    /// Its envelope: from `<>` to the original sender.
    pub env: Envelope,
    /// The text before the returned part.
    pub head: Vec<u8>,
    /// What to put between `head` and `tail`.
    pub returns: Ret,
    /// The text after it.
    pub tail: Vec<u8>,
}

/// The report to the sender of `original` on `notices` (all of one kind:
/// failures, delays, or deliveries).
///
/// # Panics
///
/// If the original sender is the null sender (the caller must not report
/// to it) or `notices` is empty.
pub fn report(cx: &Context<'_>, original: &Envelope, notices: &[Notice<'_>]) -> Report {
    assert!(!original.from.is_empty(), "never report to <>");
    assert!(!notices.is_empty(), "a report needs a recipient");
    let hostname = cx.hostname;
    let id = crate::id::next();
    let global = original.smtputf8;
    let dsn: &Dsn = &original.dsn;
    let returns = dsn.ret.unwrap_or(cx.default_ret);
    let boundary = format!("{id}/{hostname}");
    let now = Utc::now().rfc5322();
    let action = notices[0].action;
    let subject = match action {
        Action::Failed => "Undelivered Mail Returned to Sender",
        Action::Delayed => "Delayed Mail (still being retried)",
        Action::Delivered | Action::Relayed => "Successful Mail Delivery Report",
    };
    let mut m = String::new();
    // Infallible: writing into a String.
    let _ = write!(
        m,
        "Date: {now}\r\nFrom: MAILER-DAEMON@{hostname} (Mail Delivery System)\r\n\
         Subject: {subject}\r\nTo: <{to}>\r\n\
         Auto-Submitted: auto-replied\r\nMessage-Id: <{id}@{hostname}>\r\n\
         MIME-Version: 1.0\r\n\
         Content-Type: multipart/report; report-type=delivery-status;\r\n\
         \tboundary=\"{boundary}\"\r\n\r\n\
         This is a MIME-encapsulated message.\r\n\r\n",
        to = escape(&original.from),
    );
    let attached = match returns {
        Ret::Hdrs => "Its headers are attached below.",
        Ret::Full => "It is attached below.",
    };
    let what = match action {
        Action::Failed if cx.expired => format!(
            "Your message could not be delivered to one or more recipients\r\n\
             before the queue lifetime ran out. {attached}"
        ),
        Action::Failed => format!(
            "Your message could not be delivered to one or more recipients\r\n\
             because the receiving system refused it. {attached}"
        ),
        Action::Delayed => format!(
            "Your message could not be delivered yet to one or more recipients.\r\n\
             The mail system is still trying; you need not send it again.\r\n\
             This is a warning only. {attached}"
        ),
        Action::Delivered | Action::Relayed => format!(
            "Your message was delivered to the recipients below, as you asked\r\n\
             (\"relayed\": to a system that sends no further notice). {attached}"
        ),
    };
    let _ = write!(
        m,
        "--{boundary}\r\nContent-Description: Notification\r\n\
         Content-Type: text/plain; charset={charset}\r\n\r\n\
         This is the mail system at host {hostname}.\r\n\r\n{what}\r\n\r\n",
        charset = if global { "utf-8" } else { "us-ascii" },
    );
    for n in notices {
        let _ = write!(
            m,
            "<{}>: {}\r\n",
            escape(&original.rcpts[n.index]),
            escape(&n.detail.text)
        );
    }
    let arrival = Utc::from(original.arrival).rfc5322();
    let _ = write!(
        m,
        "\r\n--{boundary}\r\nContent-Description: Delivery report\r\n\
         Content-Type: message/{g}delivery-status\r\n\r\n\
         Reporting-MTA: dns; {hostname}\r\n",
        g = if global { "global-" } else { "" },
    );
    if let Some(envid) = dsn.original_envid() {
        let _ = write!(m, "Original-Envelope-Id: {}\r\n", escape(&envid));
    }
    let _ = write!(
        m,
        "X-Mail-Relay-Queue-ID: {}\r\nArrival-Date: {arrival}\r\n",
        original.id
    );
    for n in notices {
        recipient_fields(&mut m, cx, original, n);
    }
    let (returned_type, description) = match (returns, global) {
        (Ret::Hdrs, false) => ("text/rfc822-headers", "Undelivered Message Headers"),
        (Ret::Hdrs, true) => ("message/global-headers", "Undelivered Message Headers"),
        (Ret::Full, false) => ("message/rfc822", "Undelivered Message"),
        (Ret::Full, true) => ("message/global", "Undelivered Message"),
    };
    let description = match action {
        Action::Failed => description.to_owned(),
        _ => description.replace("Undelivered ", ""),
    };
    let _ = write!(
        m,
        "\r\n--{boundary}\r\nContent-Description: {description}\r\n\
         Content-Type: {returned_type}\r\n\r\n"
    );
    let head = m.into_bytes();
    let tail = format!("\r\n--{boundary}--\r\n").into_bytes();
    let eight_bit =
        head.iter().chain(&tail).any(|&b| b >= 0x80) || (returns == Ret::Full && original.has_8bit);
    Report {
        env: Envelope {
            id,
            arrival: SystemTime::now(),
            client: "127.0.0.1:0".parse().expect("a valid address"),
            helo: hostname.to_owned(),
            from: String::new(),
            rcpts: vec![original.from.clone()],
            eight_bit,
            smtputf8: global,
            has_8bit: eight_bit,
            // Our own mail.
            trusted: true,
            dsn: Dsn::default(),
        },
        head,
        returns,
        tail,
    }
}

/// The per-recipient fields of `n`.
fn recipient_fields(m: &mut String, cx: &Context<'_>, original: &Envelope, n: &Notice<'_>) {
    let rcpt = &original.rcpts[n.index];
    let d = n.detail;
    let status = match n.action {
        Action::Failed if cx.expired => "4.4.7".to_owned(),
        Action::Delivered | Action::Relayed if !d.dsn.starts_with('2') => "2.0.0".to_owned(),
        _ => d.dsn.clone(),
    };
    let _ = write!(m, "\r\n");
    if let Some(orcpt) = original.dsn.rcpt(n.index).original() {
        let _ = write!(m, "Original-Recipient: {}\r\n", escape(&orcpt));
    }
    let kind = if rcpt.is_ascii() { "rfc822" } else { "utf-8" };
    let _ = write!(
        m,
        "Final-Recipient: {kind}; {}\r\nAction: {}\r\nStatus: {}\r\n",
        escape(rcpt),
        n.action.as_str(),
        escape(&status)
    );
    if let Some(remote) = &d.remote {
        let _ = write!(m, "Remote-MTA: dns; {}\r\n", escape(remote));
    }
    match &d.reply {
        Some(reply) => {
            let _ = write!(m, "Diagnostic-Code: smtp; {}\r\n", escape(reply));
        }
        None => {
            let _ = write!(m, "Diagnostic-Code: X-mail-relay; {}\r\n", escape(&d.text));
        }
    }
    if n.action == Action::Delayed {
        if let Some(until) = cx.retry_until {
            let _ = write!(m, "Will-Retry-Until: {}\r\n", Utc::from(until).rfc5322());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dsn::{Notify, RcptDsn};
    use std::time::UNIX_EPOCH;

    fn original(from: &str) -> Envelope {
        Envelope {
            id: "ORIG1".into(),
            arrival: UNIX_EPOCH,
            client: "127.0.0.1:9".parse().unwrap(),
            helo: "c.test".into(),
            from: from.into(),
            rcpts: vec!["a@x.test".into(), "b@y.test".into()],
            eight_bit: false,
            smtputf8: false,
            has_8bit: false,
            trusted: false,
            dsn: Dsn::default(),
        }
    }

    fn cx() -> Context<'static> {
        Context {
            hostname: "relay.test",
            expired: false,
            retry_until: None,
            default_ret: Ret::Hdrs,
        }
    }

    /// The original's header section, as the queue reads it.
    const HEADERS: &[u8] = b"Received: by relay\r\nSubject: hello\r\n";

    /// The whole report with `part` as its returned part.
    fn text(r: &Report, part: &[u8]) -> String {
        let mut all = r.head.clone();
        all.extend_from_slice(part);
        all.extend_from_slice(&r.tail);
        String::from_utf8(all).unwrap()
    }

    /// The report of one notice: `action` on the recipient of `o` at
    /// `index`, with `d`.
    fn report_one(
        c: &Context<'_>,
        o: &Envelope,
        index: usize,
        action: Action,
        d: &Detail,
    ) -> Report {
        report(
            c,
            o,
            &[Notice {
                index,
                action,
                detail: d,
            }],
        )
    }

    #[test]
    fn shape_of_a_bounce() {
        let d = Detail {
            dsn: "5.1.1".into(),
            text: "host mx[10.0.0.1] said: 550 5.1.1 no such user (in reply to RCPT TO command)"
                .into(),
            reply: Some("550 5.1.1 no such user".into()),
            remote: Some("mx".into()),
        };
        let r = report_one(&cx(), &original("s@z.test"), 1, Action::Failed, &d);
        assert_eq!(r.env.from, "");
        assert_eq!(r.env.rcpts, ["s@z.test"]);
        assert!(!r.env.eight_bit);
        assert_eq!(r.returns, Ret::Hdrs);
        let text = text(&r, HEADERS);
        for want in [
            "Subject: Undelivered Mail Returned to Sender\r\n",
            "Content-Type: multipart/report; report-type=delivery-status;",
            "Content-Type: message/delivery-status",
            "Reporting-MTA: dns; relay.test\r\n",
            "X-Mail-Relay-Queue-ID: ORIG1\r\n",
            "Final-Recipient: rfc822; b@y.test\r\nAction: failed\r\nStatus: 5.1.1\r\n",
            "Remote-MTA: dns; mx\r\n",
            "Diagnostic-Code: smtp; 550 5.1.1 no such user\r\n",
            "Content-Type: text/rfc822-headers\r\n\r\nReceived: by relay\r\nSubject: hello\r\n\r\n--",
            "<b@y.test>: host mx[10.0.0.1] said: 550 5.1.1 no such user",
        ] {
            assert!(text.contains(want), "{want:?} not in\n{text}");
        }
        assert!(text.ends_with("--\r\n"));
        assert!(!text.contains("a@x.test"), "only failed recipients");
        assert!(!text.contains("Original-"), "none was given");
        // Every line ends in CRLF, as the spool requires.
        assert!(!text.replace("\r\n", "").contains('\n'));
    }

    #[test]
    fn envid_orcpt_and_the_whole_message() {
        let mut o = original("s@z.test");
        o.dsn = Dsn {
            ret: Some(Ret::Full),
            envid: Some("QQ+2B1".into()),
            rcpts: vec![RcptDsn {
                notify: Some(Notify::parse("SUCCESS").unwrap()),
                orcpt: Some("rfc822;A+2BB@X.test".into()),
            }],
        };
        o.has_8bit = true;
        let d = Detail::local("2.0.0", "delivered to maildir as x");
        let r = report_one(&cx(), &o, 0, Action::Delivered, &d);
        assert_eq!(r.returns, Ret::Full);
        assert!(r.env.eight_bit && r.env.has_8bit, "the original is 8-bit");
        let text = text(&r, b"Subject: hello\r\n\r\ncaf\xc3\xa9\r\n");
        for want in [
            "Subject: Successful Mail Delivery Report\r\n",
            "Original-Envelope-Id: QQ+1\r\n",
            "Original-Recipient: rfc822;A+B@X.test\r\nFinal-Recipient: rfc822; a@x.test\r\n\
             Action: delivered\r\nStatus: 2.0.0\r\n",
            "Diagnostic-Code: X-mail-relay; delivered to maildir as x\r\n",
            "Content-Type: message/rfc822\r\n\r\nSubject: hello\r\n\r\ncaf\u{e9}\r\n\r\n--",
        ] {
            assert!(text.contains(want), "{want:?} not in\n{text}");
        }
    }

    #[test]
    fn delays_say_until_when() {
        let d = Detail::local("4.4.1", "connect to 10.0.0.1:25: Connection refused");
        let c = Context {
            retry_until: Some(UNIX_EPOCH + std::time::Duration::from_secs(86_400)),
            ..cx()
        };
        let r = report_one(&c, &original("s@z.test"), 0, Action::Delayed, &d);
        let text = text(&r, HEADERS);
        assert!(
            text.contains("Subject: Delayed Mail (still being retried)"),
            "{text}"
        );
        assert!(
            text.contains(
                "Action: delayed\r\nStatus: 4.4.1\r\nDiagnostic-Code: X-mail-relay; connect to"
            ),
            "{text}"
        );
        assert!(
            text.contains("Will-Retry-Until: Fri, 2 Jan 1970 00:00:00 +0000"),
            "{text}"
        );
        assert!(
            text.contains("Content-Description: Message Headers"),
            "{text}"
        );
    }

    #[test]
    fn the_network_s_words_cannot_forge_lines() {
        let d = Detail {
            dsn: "5.0.0".into(),
            text: "host x said: 550 no\rX-Forged: yes\x1b[2J".into(),
            reply: Some("550 no\rX-Forged: yes\x1b[2J".into()),
            remote: Some("mx\r".into()),
        };
        let mut o = original("s@z.test");
        // An ENVID and ORCPT whose xtext stands for CR LF.
        o.dsn.envid = Some("x+0D+0AX-Forged:+20yes".into());
        o.dsn.rcpts = vec![RcptDsn {
            notify: None,
            orcpt: Some("rfc822;a+0D+0AX-Forged:+20yes".into()),
        }];
        let r = report_one(&cx(), &o, 0, Action::Failed, &d);
        let text = text(&r, HEADERS);
        assert!(!text.contains('\x1b'), "{text:?}");
        assert!(!text.replace("\r\n", "").contains('\r'), "{text:?}");
        assert!(!text.contains("\r\nX-Forged"), "{text:?}");
        assert!(
            text.contains("Diagnostic-Code: smtp; 550 no\\x0dX-Forged: yes\\x1b[2J\r\n"),
            "{text}"
        );
        assert!(
            text.contains("Original-Envelope-Id: x\\x0d\\x0aX-Forged: yes\r\n"),
            "{text}"
        );
    }

    #[test]
    fn expired_reports_say_so() {
        let d = Detail::local("4.4.1", "connect to 10.0.0.1:25: Connection refused");
        let c = Context {
            expired: true,
            ..cx()
        };
        let r = report_one(&c, &original("s@z.test"), 0, Action::Failed, &d);
        let text = text(&r, HEADERS);
        assert!(text.contains("Status: 4.4.7\r\n"), "{text}");
        assert!(text.contains("queue lifetime"), "{text}");
        assert!(
            text.contains("Diagnostic-Code: X-mail-relay; connect to"),
            "{text}"
        );
    }

    #[test]
    #[should_panic(expected = "never report to <>")]
    fn never_to_the_null_sender() {
        let d = Detail::local("5.0.0", "x");
        report_one(&cx(), &original(""), 0, Action::Failed, &d);
    }
}
