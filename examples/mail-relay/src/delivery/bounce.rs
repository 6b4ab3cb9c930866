//! Bounces: a delivery status notification (RFC 3464) telling the sender
//! which recipients failed and why, with the original message's headers.
//!
//! The report is a new message from the null sender to the original
//! sender, queued in our own spool and delivered like any other. The queue
//! decides whether to send one: never to the null sender (so a bounce that
//! itself fails is dropped, never bounced again; RFC 5321 §6.1).
//!
//! ```text
//! multipart/report; report-type=delivery-status
//!   text/plain                 what happened, for humans
//!   message/delivery-status    Reporting-MTA, Arrival-Date; per recipient
//!                              Final-Recipient, Action, Status, Remote-MTA,
//!                              Diagnostic-Code
//!   text/rfc822-headers        the original headers
//! ```
//!
//! For a message sent with SMTPUTF8 the parts are RFC 6533's
//! `message/global-delivery-status` and `message/global-headers`.
//!
//! What the report quotes from the network (an upstream's reply and name,
//! the addresses) is [escaped](crate::escape): a CR in a reply cannot
//! start a header line of its own in the report.

use std::fmt::Write as _;
use std::time::SystemTime;

use super::Detail;
use crate::escape::escape;
use crate::spool::{Envelope, Message};

/// The most of the original's header section a report carries (cut at a
/// line end): its headers are read from the spool, and a message with
/// more is shown in part.
pub const HEADERS_LIMIT: usize = 64 * 1024;
use crate::time::Utc;

/// One recipient to report on.
#[derive(Debug, Clone, Copy)]
pub struct Failure<'a> {
    /// The recipient's address.
    pub rcpt: &'a str,
    /// Why it failed.
    pub detail: &'a Detail,
}

/// The DSN returning the message of `original` (its envelope) and
/// `headers` (its header section, at most [`HEADERS_LIMIT`]) to its sender
/// for `failed`; `expired` says the queue lifetime ran out (the recipients
/// were only deferred).
///
/// # Panics
///
/// If the original sender is the null sender (the caller must not bounce
/// to it) or `failed` is empty.
pub fn report(
    hostname: &str,
    original: &Envelope,
    headers: &[u8],
    failed: &[Failure<'_>],
    expired: bool,
) -> Message {
    assert!(!original.from.is_empty(), "never bounce to <>");
    assert!(!failed.is_empty(), "a report needs a failed recipient");
    let id = crate::id::next();
    let global = original.smtputf8;
    let boundary = format!("{id}/{hostname}");
    let now = Utc::now().rfc5322();
    let mut m = String::new();
    // Infallible: writing into a String.
    let _ = write!(
        m,
        "Date: {now}\r\nFrom: MAILER-DAEMON@{hostname} (Mail Delivery System)\r\n\
         Subject: Undelivered Mail Returned to Sender\r\nTo: <{to}>\r\n\
         Auto-Submitted: auto-replied\r\nMessage-Id: <{id}@{hostname}>\r\n\
         MIME-Version: 1.0\r\n\
         Content-Type: multipart/report; report-type=delivery-status;\r\n\
         \tboundary=\"{boundary}\"\r\n\r\n\
         This is a MIME-encapsulated message.\r\n\r\n",
        to = escape(&original.from),
    );
    let _ = write!(
        m,
        "--{boundary}\r\nContent-Description: Notification\r\n\
         Content-Type: text/plain; charset={charset}\r\n\r\n\
         This is the mail system at host {hostname}.\r\n\r\n\
         Your message could not be delivered to one or more recipients\r\n\
         {why}. Its headers are attached below.\r\n\r\n",
        charset = if global { "utf-8" } else { "us-ascii" },
        why = if expired {
            "before the queue lifetime ran out"
        } else {
            "because the receiving system refused it"
        },
    );
    for f in failed {
        let _ = write!(m, "<{}>: {}\r\n", escape(f.rcpt), escape(&f.detail.text));
    }
    let arrival = Utc::from(original.arrival).rfc5322();
    let _ = write!(
        m,
        "\r\n--{boundary}\r\nContent-Description: Delivery report\r\n\
         Content-Type: message/{g}delivery-status\r\n\r\n\
         Reporting-MTA: dns; {hostname}\r\nX-Mail-Relay-Queue-ID: {orig}\r\n\
         Arrival-Date: {arrival}\r\n",
        g = if global { "global-" } else { "" },
        orig = original.id,
    );
    for f in failed {
        let d = f.detail;
        let status = if expired { "4.4.7" } else { d.dsn.as_str() };
        let _ = write!(
            m,
            "\r\nFinal-Recipient: rfc822; {}\r\nAction: failed\r\nStatus: {}\r\n",
            escape(f.rcpt),
            escape(status)
        );
        if let Some(remote) = &d.remote {
            let _ = write!(m, "Remote-MTA: dns; {}\r\n", escape(remote));
        }
        if let Some(reply) = &d.reply {
            let _ = write!(m, "Diagnostic-Code: smtp; {}\r\n", escape(reply));
        }
    }
    let _ = write!(
        m,
        "\r\n--{boundary}\r\nContent-Description: Undelivered Message Headers\r\n\
         Content-Type: {}\r\n\r\n",
        if global {
            "message/global-headers"
        } else {
            "text/rfc822-headers"
        }
    );
    let mut data = m.into_bytes();
    data.extend_from_slice(headers);
    data.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    let eight_bit = data.iter().any(|&b| b >= 0x80);
    Message {
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
        },
        data,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
        }
    }

    /// The original's header section, as the queue reads it.
    const HEADERS: &[u8] = b"Received: by relay\r\nSubject: hello\r\n";

    #[test]
    fn shape_of_a_report() {
        let d = Detail {
            dsn: "5.1.1".into(),
            text: "host mx[10.0.0.1] said: 550 5.1.1 no such user (in reply to RCPT TO command)"
                .into(),
            reply: Some("550 5.1.1 no such user".into()),
            remote: Some("mx".into()),
        };
        let m = report(
            "relay.test",
            &original("s@z.test"),
            HEADERS,
            &[Failure {
                rcpt: "b@y.test",
                detail: &d,
            }],
            false,
        );
        assert_eq!(m.env.from, "");
        assert_eq!(m.env.rcpts, ["s@z.test"]);
        assert!(!m.env.eight_bit);
        let text = String::from_utf8(m.data).unwrap();
        for want in [
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
        // Every line ends in CRLF, as the spool requires.
        assert!(!text.replace("\r\n", "").contains('\n'));
    }

    #[test]
    fn an_upstreams_words_cannot_forge_lines() {
        let d = Detail {
            dsn: "5.0.0".into(),
            text: "host x said: 550 no\rX-Forged: yes\x1b[2J".into(),
            reply: Some("550 no\rX-Forged: yes\x1b[2J".into()),
            remote: Some("mx\r".into()),
        };
        let m = report(
            "relay.test",
            &original("s@z.test"),
            HEADERS,
            &[Failure {
                rcpt: "a@x.test",
                detail: &d,
            }],
            false,
        );
        let text = String::from_utf8(m.data).unwrap();
        assert!(!text.contains('\x1b'), "{text:?}");
        assert!(!text.replace("\r\n", "").contains('\r'), "{text:?}");
        assert!(
            text.contains("Diagnostic-Code: smtp; 550 no\\x0dX-Forged: yes\\x1b[2J\r\n"),
            "{text}"
        );
    }

    #[test]
    fn expired_reports_say_so() {
        let d = Detail::local("4.4.1", "connect to 10.0.0.1:25: Connection refused");
        let m = report(
            "relay.test",
            &original("s@z.test"),
            HEADERS,
            &[Failure {
                rcpt: "a@x.test",
                detail: &d,
            }],
            true,
        );
        let text = String::from_utf8(m.data).unwrap();
        assert!(text.contains("Status: 4.4.7\r\n"), "{text}");
        assert!(text.contains("queue lifetime"), "{text}");
        assert!(!text.contains("Diagnostic-Code"), "{text}");
    }

    #[test]
    #[should_panic(expected = "never bounce to <>")]
    fn never_to_the_null_sender() {
        let d = Detail::local("5.0.0", "x");
        report(
            "relay.test",
            &original(""),
            HEADERS,
            &[Failure {
                rcpt: "a@x.test",
                detail: &d,
            }],
            false,
        );
    }
}
