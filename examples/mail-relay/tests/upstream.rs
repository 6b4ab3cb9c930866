//! Delivery to an SMTP upstream, with Postfix's `smtp-sink` as the
//! upstream: content arrives byte-identical after dot-stuffing both ways,
//! connections are reused (counted by the sink's sessions), limited by
//! count and idle time, or not cached at all; the client falls back to
//! HELO and to commands in turn, will not send 8-bit content to a server
//! without 8BITMIME, and uses STARTTLS (verified or opportunistic) with
//! another mail-relay as the upstream.

mod util;

use std::path::Path;
use std::time::{Duration, Instant};

use util::{relay_to, sent_content, Relay, Sink, TempDir, LIMIT};

/// A body with every line dot-stuffing cares about, stuffed as a client
/// sends it, and what must arrive (unstuffed, LF line ends as the sink
/// writes them).
const STUFFED: &str = concat!(
    "Subject: dots\r\n",
    "\r\n",
    "..leading dot\r\n",
    "...two dots\r\n",
    "..\r\n",
    " . space dot\r\n",
    "trailing spaces   \r\n",
    "caf\u{e9} 8-bit \u{2713}\r\n",
    "\r\n",
    "last line\r\n",
);
const ARRIVES: &str = concat!(
    "Subject: dots\n",
    "\n",
    ".leading dot\n",
    "..two dots\n",
    ".\n",
    " . space dot\n",
    "trailing spaces   \n",
    "caf\u{e9} 8-bit \u{2713}\n",
    "\n",
    "last line\n",
);

#[test]
fn content_arrives_byte_identical() {
    let tmp = TempDir::new("up-content");
    let sink = Sink::start(&tmp.0, &[]);
    let relay = Relay::start_in(&tmp.0, &format!("relayhost = \"{}\"\n", sink.addr()));
    let mut c = relay.client();
    c.cmd("EHLO client.test", 250);
    c.cmd("MAIL FROM:<s@example.test> BODY=8BITMIME", 250);
    c.cmd("RCPT TO:<a@example.test>", 250);
    c.cmd("RCPT TO:<b@example.test>", 250);
    c.cmd("DATA", 354);
    c.send_raw(STUFFED.as_bytes());
    c.cmd(".", 250);
    let got = sink.wait_messages(1);
    let dump = &got[0];
    assert!(
        dump.contains("X-Mail-Args: <s@example.test> BODY=8BITMIME\n"),
        "{dump}"
    );
    assert!(dump.contains("X-Rcpt-Args: <a@example.test>\nX-Rcpt-Args: <b@example.test>\n"));
    let content = sent_content(dump);
    assert!(content.starts_with("Received: from client.test ([127.0.0.1])\n\tby relay.test"));
    // The sink ends each dump with an empty line of its own.
    let body = content.strip_suffix('\n').unwrap();
    assert!(body.ends_with(&format!("\n{ARRIVES}")), "{body:?}");
    relay.wait_spool_empty();
    let log = relay.log();
    assert_eq!(
        log.matches("status=sent (250 2.0.0 Ok)").count(),
        2,
        "{log}"
    );
    assert!(
        log.contains(&format!(
            "to=<a@example.test>, relay=127.0.0.1[127.0.0.1]:{}",
            sink.port
        )),
        "{log}"
    );
}

/// Sends `n` messages one after the other, each delivered at the sink
/// before the next is sent.
fn one_by_one(relay: &Relay, sink: &Sink, n: usize) {
    let before = sink.counters().2 as usize;
    let mut c = relay.client();
    c.cmd("EHLO client.test", 250);
    for i in 0..n {
        c.cmd("MAIL FROM:<s@example.test>", 250);
        c.cmd("RCPT TO:<a@example.test>", 250);
        c.cmd("DATA", 354);
        c.send_raw(format!("Subject: {i}\r\n\r\nmessage {i}\r\n").as_bytes());
        c.cmd(".", 250);
        sink.wait_messages(before + i + 1);
    }
    relay.wait_spool_empty();
}

/// Stops the relay (its cached connections get QUIT) and returns the
/// sink's counters: (sessions, QUITs, messages).
fn stop(relay: &mut Relay, sink: &Sink, sessions: u64) -> (u64, u64, u64) {
    relay.terminate();
    assert!(relay.wait_exit().success(), "{}", relay.log());
    let t0 = Instant::now();
    while sink.counters().0 < sessions {
        assert!(t0.elapsed() < LIMIT, "{:?} sessions", sink.counters());
        std::thread::sleep(Duration::from_millis(10));
    }
    sink.counters()
}

#[test]
fn one_connection_carries_every_message() {
    let tmp = TempDir::new("up-reuse");
    let sink = Sink::start(&tmp.0, &[]);
    let mut relay = Relay::start_in(
        &tmp.0,
        &relay_to(
            &sink.addr(),
            "[smtp]\nconnection_idle_time_limit = \"1h\"\n",
        ),
    );
    one_by_one(&relay, &sink, 12);
    assert_eq!(sink.counters(), (0, 0, 12), "the connection is still open");
    // The log counts the connection's uses.
    assert!(relay.log().contains("conn_use=12, "), "{}", relay.log());
    assert_eq!(
        stop(&mut relay, &sink, 1),
        (1, 1, 12),
        "one session, ended by QUIT"
    );
}

#[test]
fn reuse_count_limit_opens_new_connections() {
    let tmp = TempDir::new("up-reuse-count");
    let sink = Sink::start(&tmp.0, &[]);
    let mut relay = Relay::start_in(
        &tmp.0,
        &relay_to(
            &sink.addr(),
            "[smtp]\nconnection_idle_time_limit = \"1h\"\nconnection_reuse_count_limit = 4\n",
        ),
    );
    one_by_one(&relay, &sink, 12);
    assert_eq!(stop(&mut relay, &sink, 3), (3, 3, 12));
}

#[test]
fn without_the_cache_every_message_has_its_session() {
    let tmp = TempDir::new("up-nocache");
    let sink = Sink::start(&tmp.0, &[]);
    let mut relay = Relay::start_in(
        &tmp.0,
        &relay_to(&sink.addr(), "[smtp]\nconnection_cache = false\n"),
    );
    one_by_one(&relay, &sink, 6);
    assert_eq!(stop(&mut relay, &sink, 6), (6, 6, 6));
}

#[test]
fn idle_connections_are_closed() {
    let tmp = TempDir::new("up-idle");
    let sink = Sink::start(&tmp.0, &[]);
    let relay = Relay::start_in(
        &tmp.0,
        &relay_to(
            &sink.addr(),
            "[smtp]\nconnection_idle_time_limit = \"200ms\"\n",
        ),
    );
    one_by_one(&relay, &sink, 1);
    // Closed with QUIT once idle (while the one above, with an hour's
    // limit, stays open).
    let t0 = Instant::now();
    while sink.counters().0 < 1 {
        assert!(t0.elapsed() < LIMIT, "the idle connection was never closed");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(sink.counters(), (1, 1, 1));
    one_by_one(&relay, &sink, 1);
    let t0 = Instant::now();
    while sink.counters().0 < 2 {
        assert!(
            t0.elapsed() < LIMIT,
            "the second connection was never closed"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(
        sink.counters(),
        (2, 2, 2),
        "a new connection for the second"
    );
}

#[test]
fn helo_fallback_and_commands_in_turn() {
    let tmp = TempDir::new("up-helo");
    // -e: no ESMTP (EHLO gets 500); -p: no PIPELINING.
    for flags in [&["-e"][..], &["-p"][..]] {
        let sink = Sink::start(&tmp.0, flags);
        let mut relay = Relay::start_in(
            &tmp.0,
            &relay_to(
                &sink.addr(),
                "[smtp]\nconnection_idle_time_limit = \"1h\"\n",
            ),
        );
        one_by_one(&relay, &sink, 3);
        let proto = if flags == ["-e"] { "SMTP" } else { "ESMTP" };
        for m in sink.messages() {
            assert!(
                m.contains(&format!("X-Client-Proto: {proto}\n")),
                "{flags:?}: {m}"
            );
        }
        // Reused in turn too: RSET, then the next transaction.
        assert_eq!(stop(&mut relay, &sink, 1), (1, 1, 3), "{flags:?}");
        drop(relay);
        std::fs::remove_dir_all(tmp.0.join("spool")).unwrap();
    }
}

#[test]
fn eight_bit_content_waits_for_8bitmime() {
    let tmp = TempDir::new("up-8bit");
    let sink = Sink::start(&tmp.0, &["-8"]);
    let relay = Relay::start_in(&tmp.0, &relay_to(&sink.addr(), ""));
    let mut c = relay.client();
    let id8 = c
        .message(
            "s@example.test",
            &["a@example.test"],
            "Subject: x\r\n\r\nna\u{ef}ve\r\n",
        )
        .rsplit(' ')
        .next()
        .unwrap()
        .to_owned();
    c.message(
        "s@example.test",
        &["a@example.test"],
        "Subject: y\r\n\r\nplain\r\n",
    );
    let got = sink.wait_messages(1);
    assert!(got[0].contains("\nplain\n"), "{}", got[0]);
    let log = relay.wait_log("does not announce 8BITMIME", 1);
    assert!(
        log.contains(&format!("{id8}: to=<a@example.test>")),
        "{log}"
    );
    assert!(
        log.contains("dsn=4.6.3, status=deferred (message has 8-bit content"),
        "{log}"
    );
    let q = relay.mailq();
    assert!(
        q.contains(&id8) && q.contains("does not announce 8BITMIME"),
        "{q}"
    );
    assert_eq!(sink.counters().2, 1, "nothing 8-bit was sent");
}

/// A certificate for 127.0.0.1 (and localhost), its key, in `dir`.
fn certificate(dir: &Path, name: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let c =
        rcgen::generate_simple_self_signed(vec!["127.0.0.1".into(), "localhost".into()]).unwrap();
    let (cert, key) = (
        dir.join(format!("{name}.pem")),
        dir.join(format!("{name}.key")),
    );
    std::fs::write(&cert, c.cert.pem()).unwrap();
    util::write_private(&key, c.signing_key.serialize_pem().as_bytes());
    (cert, key)
}

/// Another mail-relay with STARTTLS as the upstream, delivering into its
/// Maildir.
fn tls_upstream(tmp: &TempDir) -> (Relay, std::path::PathBuf) {
    let dir = tmp.0.join("upstream");
    std::fs::create_dir_all(&dir).unwrap();
    let (cert, key) = certificate(&dir, "up");
    let up = Relay::start_in(
        &dir,
        &format!(
            "[tls]\ncert = \"{}\"\nkey = \"{}\"\n",
            cert.display(),
            key.display()
        ),
    );
    (up, cert)
}

#[test]
fn starttls_verified_against_its_ca() {
    let tmp = TempDir::new("up-tls");
    let (up, ca) = tls_upstream(&tmp);
    let relay = Relay::start_in(
        &tmp.0,
        &relay_to(
            &up.addr.to_string(),
            &format!(
                "[smtp]\ntls_security_level = \"verify\"\ntls_ca_file = \"{}\"\n",
                ca.display()
            ),
        ),
    );
    relay.client().message(
        "s@example.test",
        &["a@example.test"],
        "Subject: tls\r\n\r\nsecret\r\n",
    );
    let got = up.wait_delivered(1);
    // The upstream's Received: header says ESMTPS.
    assert!(got[0].contains("(mail-relay) with ESMTPS id"), "{}", got[0]);
    assert!(got[0].ends_with("\nsecret\n"));
    let log = relay.wait_log("status=sent", 1);
    assert!(
        log.contains("TLS connection established to 127.0.0.1[127.0.0.1]"),
        "{log}"
    );
}

#[test]
fn starttls_with_an_unknown_certificate() {
    let tmp = TempDir::new("up-tls-bad");
    let (up, _) = tls_upstream(&tmp);
    let (other_ca, _) = certificate(&tmp.0, "other");
    // verify: the handshake fails, the message waits with the reason.
    let strict = Relay::start_in(
        &tmp.0,
        &relay_to(
            &up.addr.to_string(),
            &format!(
                "[smtp]\ntls_security_level = \"verify\"\ntls_ca_file = \"{}\"\n",
                other_ca.display()
            ),
        ),
    );
    strict.client().message(
        "s@example.test",
        &["a@example.test"],
        "Subject: tls\r\n\r\nx\r\n",
    );
    let log = strict.wait_log("status=deferred", 1);
    assert!(
        log.contains("dsn=4.7.5, status=deferred (TLS handshake with 127.0.0.1[127.0.0.1]"),
        "{log}"
    );
    assert!(log.contains("invalid peer certificate"), "{log}");
    assert_eq!(util::count(&up.maildir_new()), 0);
    // may: opportunistic, the certificate is not checked.
    let dir = tmp.0.join("may");
    std::fs::create_dir_all(&dir).unwrap();
    let may = Relay::start_in(&dir, &relay_to(&up.addr.to_string(), ""));
    may.client().message(
        "s@example.test",
        &["a@example.test"],
        "Subject: tls\r\n\r\ny\r\n",
    );
    let got = up.wait_delivered(1);
    assert!(got[0].contains("with ESMTPS id"), "{}", got[0]);
}
