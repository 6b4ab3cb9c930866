//! The `mailq` listing, in Postfix's shape: per message its id (`*` when
//! an attempt is under way), size, arrival and sender; for a deferred one
//! a line saying why it waits (attempts, when it is tried next, the last
//! reason); then its unfinished recipients.
//!
//! ```text
//! -Queue ID-          --Size-- ----Arrival Time---- -Sender/Recipient-------
//! 18F3A0C2B1D4E00001*     1093 Mon Nov 23 07:44:59  s@example.test
//!                                                   a@example.test
//!
//! 18F3A0C2B1D4E00002      1093 Mon Nov 23 07:44:59  s@example.test
//! (attempt 2, next in 9m58s: host 10.0.0.1[10.0.0.1]:25 said: 450 4.3.0 busy (in reply to RCPT TO command))
//!                                                   b@example.test
//!
//! -- 3 Kbytes in 2 Requests.
//! ```
//!
//! Addresses and reasons came from the network (a client's envelope, an
//! upstream's reply): they are shown [escaped](crate::escape), whether the
//! listing comes from the running relay or from the spool.

use std::fmt::Write as _;
use std::time::{Duration, SystemTime};

use crate::escape::escape;
use crate::time::Utc;

/// One message as `mailq` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    /// Queue id.
    pub id: String,
    /// Content size in octets.
    pub size: u64,
    /// Arrival.
    pub arrival: SystemTime,
    /// Sender (empty: the null sender).
    pub from: String,
    /// Recipients not finished yet.
    pub rcpts: Vec<String>,
    /// An attempt is under way.
    pub active: bool,
    /// Deferred attempts so far.
    pub attempts: u32,
    /// The next attempt, while deferred.
    pub next_attempt: Option<SystemTime>,
    /// The last deferral's reason.
    pub reason: Option<String>,
}

/// Width of the id column (our ids are 18 characters).
const ID: usize = 18;

/// The listing of `items` (already in the order to show).
pub fn format(items: &[Item], now: SystemTime) -> String {
    if items.is_empty() {
        return "Mail queue is empty\n".into();
    }
    let mut out = String::new();
    let pad = ID + 1 + 9 + 1 + 19 + 2;
    // Infallible: writing into a String.
    let _ = writeln!(
        out,
        "{:<w$} --Size-- ----Arrival Time---- -Sender/Recipient-------",
        "-Queue ID-",
        w = ID + 1
    );
    let mut bytes = 0u64;
    for it in items {
        bytes += it.size;
        // Everything but our own numbers and dates came from the network.
        let from = if it.from.is_empty() {
            "MAILER-DAEMON".into()
        } else {
            escape(&it.from)
        };
        let _ = writeln!(
            out,
            "{:<w$}{}{:>9} {}  {from}",
            escape(&it.id),
            if it.active { '*' } else { ' ' },
            it.size,
            Utc::from(it.arrival).short(),
            w = ID
        );
        if let (Some(reason), false) = (&it.reason, it.active) {
            let when = match it.next_attempt {
                Some(t) => match t.duration_since(now) {
                    Ok(d) if d >= Duration::from_secs(1) => format!("next in {}", human(d)),
                    _ => "due now".to_owned(),
                },
                None => "due now".to_owned(),
            };
            let _ = writeln!(out, "(attempt {}, {when}: {})", it.attempts, escape(reason));
        }
        for r in &it.rcpts {
            let _ = writeln!(out, "{:pad$}{}", "", escape(r));
        }
        out.push('\n');
    }
    let _ = writeln!(
        out,
        "-- {} Kbytes in {} Request{}.",
        bytes.div_ceil(1024),
        items.len(),
        if items.len() == 1 { "" } else { "s" }
    );
    out
}

/// `1h2m`, `9m58s`, `42s`.
fn human(d: Duration) -> String {
    let s = d.as_secs();
    match (s / 3600, s / 60 % 60, s % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, s) => format!("{m}m{s:02}s"),
        (h, m, _) => format!("{h}h{m:02}m"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

    #[test]
    fn listing() {
        let t0 = UNIX_EPOCH + Duration::from_secs(1_795_419_899);
        let a = Item {
            id: "18F3A0C2B1D4E00001".into(),
            size: 1093,
            arrival: t0,
            from: "s@example.test".into(),
            rcpts: vec!["a@example.test".into()],
            active: true,
            attempts: 0,
            next_attempt: None,
            reason: None,
        };
        let b = Item {
            id: "18F3A0C2B1D4E00002".into(),
            from: String::new(),
            active: false,
            attempts: 2,
            next_attempt: Some(t0 + Duration::from_secs(598)),
            reason: Some("host said: 450 busy".into()),
            rcpts: vec!["b@example.test".into(), "c@example.test".into()],
            ..a.clone()
        };
        let text = format(&[a, b], t0);
        let want = "\
-Queue ID-          --Size-- ----Arrival Time---- -Sender/Recipient-------
18F3A0C2B1D4E00001*     1093 Mon Nov 23 07:44:59  s@example.test
                                                  a@example.test

18F3A0C2B1D4E00002      1093 Mon Nov 23 07:44:59  MAILER-DAEMON
(attempt 2, next in 9m58s: host said: 450 busy)
                                                  b@example.test
                                                  c@example.test

-- 3 Kbytes in 2 Requests.
";
        assert_eq!(text, want);
        assert_eq!(format(&[], t0), "Mail queue is empty\n");
        assert_eq!(human(Duration::from_secs(3725)), "1h02m");
    }

    #[test]
    fn what_came_from_the_network_is_escaped() {
        let t0 = UNIX_EPOCH + Duration::from_secs(1_795_419_899);
        let it = Item {
            id: "18F3A0C2B1D4E00003".into(),
            size: 1,
            arrival: t0,
            from: "s\x1b]0;owned\x07@example.test".into(),
            rcpts: vec!["r\r@example.test".into()],
            active: false,
            attempts: 1,
            next_attempt: Some(t0),
            reason: Some("host said: 450 \x1b[2J\x07busy\rfake".into()),
        };
        let text = format(&[it], t0);
        assert!(
            !text.contains(['\x1b', '\x07', '\r']),
            "raw control characters: {text:?}"
        );
        assert!(text.contains("s\\x1b]0;owned\\x07@example.test"), "{text}");
        assert!(text.contains("r\\x0d@example.test"), "{text}");
        assert!(text.contains("450 \\x1b[2J\\x07busy\\x0dfake"), "{text}");
    }
}
