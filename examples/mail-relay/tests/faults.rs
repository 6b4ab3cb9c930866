//! An upstream that fails, with `smtp-sink`'s fault injection: 4xx on
//! RCPT, on DATA and after the data, a disconnect after the data, a
//! stalled upstream (a per-command timeout, and the per-message one), an
//! upstream that is down then up: each message is deferred with its
//! reason, retried, and delivered once the upstream behaves. 5xx bounces
//! to the sender through the relay itself (never to the null sender, and a
//! bounce that bounces is dropped); a message past its queue lifetime is
//! returned; with another mail-relay as the upstream, recipients get
//! their own status, and the finished ones are not sent again after a
//! restart.

mod util;

use std::time::{Duration, Instant};

use util::{relay_to, Relay, Sink, TempDir, LIMIT};

/// Retries every 300 ms, so that tests see several.
const FAST_RETRY: &str =
    "[queue]\nminimal_backoff_time = \"300ms\"\nmaximal_backoff_time = \"300ms\"\n";

/// The sink with `flags` makes the message wait with `reason`; then a
/// good sink on the same port takes it at the next retry. Returns the
/// relay's log.
fn deferred_then_delivered(tag: &str, flags: &[&str], reason: &str) -> String {
    deferred_then_delivered_with(tag, flags, reason, "")
}

/// The same, with `extra` configuration.
fn deferred_then_delivered_with(tag: &str, flags: &[&str], reason: &str, extra: &str) -> String {
    let tmp = TempDir::new(tag);
    let mut bad = Sink::start(&tmp.0, flags);
    let relay = Relay::start_in(
        &tmp.0,
        &relay_to(&bad.addr(), &format!("{FAST_RETRY}{extra}")),
    );
    let id = relay
        .client()
        .message(
            "s@example.test",
            &["a@example.test"],
            "Subject: retried\r\n\r\nbody\r\n",
        )
        .rsplit(' ')
        .next()
        .unwrap()
        .to_owned();
    // Deferred, and tried again (the attempt count goes up).
    let log = relay.wait_log("status=deferred", 2);
    assert!(
        log.contains(&format!(
            "{id}: to=<a@example.test>, relay=127.0.0.1[127.0.0.1]:"
        )) && log.contains(reason),
        "{reason:?} not in\n{log}"
    );
    let q = relay.mailq();
    assert!(q.contains(&id), "{q}");
    assert!(q.contains(reason) || q.contains(&format!("{id}*")), "{q}");
    bad.stop();
    let good = Sink::start_on(bad.port, &tmp.0, &[]);
    let got = good.wait_messages(1);
    assert!(got[0].ends_with("\nbody\n\n"), "{}", got[0]);
    relay.wait_spool_empty();
    assert_eq!(relay.mailq(), "Mail queue is empty\n");
    relay.log()
}

#[test]
fn rcpt_4xx() {
    let log = deferred_then_delivered(
        "f-rcpt",
        &["-r", "RCPT"],
        "said: 450 4.3.0 Error: command failed (in reply to RCPT TO command)",
    );
    // The connection the retries reused died with the first sink: found
    // dead at its RSET, replaced, and the message tried again at once.
    assert!(log.contains("while sending RSET"), "{log}");
    assert!(log.contains("; trying a new connection"), "{log}");
}

#[test]
fn data_4xx() {
    deferred_then_delivered(
        "f-data",
        &["-r", "DATA"],
        "said: 450 4.3.0 Error: command failed (in reply to DATA command)",
    );
}

#[test]
fn end_of_data_4xx() {
    deferred_then_delivered(
        "f-dot",
        &["-r", "."],
        "said: 450 4.3.0 Error: command failed (in reply to end of DATA command)",
    );
}

#[test]
fn disconnect_after_the_data() {
    deferred_then_delivered(
        "f-quit",
        &["-q", "."],
        "lost connection with 127.0.0.1[127.0.0.1]",
    );
}

#[test]
fn disconnect_at_data() {
    deferred_then_delivered("f-quit-data", &["-q", "DATA"], "while sending DATA command");
}

#[test]
fn stalled_upstream_per_command_timeout() {
    // The sink waits 30 s before it answers DATA (-p: no pipelining, so
    // the envelope's replies come first); DATA's timeout is 500 ms.
    deferred_then_delivered_with(
        "f-stall",
        &["-p", "-w", "30"],
        "timed out while sending DATA command",
        "[smtp]\ndata_init_timeout = \"500ms\"\n",
    );
}

#[test]
fn stalled_upstream_message_timeout() {
    let tmp = TempDir::new("f-umbrella");
    let sink = Sink::start(&tmp.0, &["-p", "-w", "30"]);
    let relay = Relay::start_in(
        &tmp.0,
        &relay_to(
            &sink.addr(),
            "[smtp]\nmessage_timeout = \"700ms\"\n[queue]\nminimal_backoff_time = \"1h\"\nmaximal_backoff_time = \"1h\"\n",
        ),
    );
    let t0 = Instant::now();
    relay.client().message(
        "s@example.test",
        &["a@example.test"],
        "Subject: x\r\n\r\ny\r\n",
    );
    let log = relay.wait_log("status=deferred", 1);
    assert!(t0.elapsed() >= Duration::from_millis(700));
    assert!(
        log.contains("timed out while sending DATA command (the time limit for one message, smtp.message_timeout = 700ms, ran out)"),
        "{log}"
    );
}

#[test]
fn upstream_down_then_up() {
    let tmp = TempDir::new("f-down");
    let port = util::free_port();
    // One message in an attempt at a time: the other waits with its
    // content in the spool only, and is read back for its turn.
    let relay = Relay::start_in(
        &tmp.0,
        &relay_to(
            &format!("127.0.0.1:{port}"),
            "[queue]\nminimal_backoff_time = \"1h\"\nmaximal_backoff_time = \"1h\"\nactive_limit = 1\n",
        ),
    );
    let mut c = relay.client();
    c.message(
        "s@example.test",
        &["a@example.test"],
        "Subject: 1\r\n\r\none\r\n",
    );
    let log = relay.wait_log("status=deferred", 1);
    assert!(
        log.contains("relay=none, delay=")
            && log.contains(&format!(
                "dsn=4.4.1, status=deferred (connect to 127.0.0.1:{port}: Connection refused"
            )),
        "{log}"
    );
    assert!(log.contains("delivery suspended for 3600s"), "{log}");
    // While suspended, new mail waits without a connection attempt.
    c.message(
        "s@example.test",
        &["b@example.test"],
        "Subject: 2\r\n\r\ntwo\r\n",
    );
    let log = relay.wait_log("delivery temporarily suspended: connect to", 1);
    assert_eq!(
        log.matches("failed: connect to").count(),
        1,
        "one attempt: {log}"
    );
    let q = relay.mailq();
    assert!(q.contains("(attempt 1, next in 59m"), "{q}");
    assert_eq!(q.matches("Connection refused").count(), 2, "{q}");
    // Up again: a flush sends both at once.
    let sink = Sink::start_on(port, &tmp.0, &[]);
    let (ok, out) = relay.command(&["flush"]);
    assert!(ok, "{out}");
    let got = sink.wait_messages(2);
    assert_eq!(got.len(), 2);
    assert!(
        got.iter().any(|m| m.ends_with("Subject: 1\n\none\n\n")),
        "{got:?}"
    );
    assert!(
        got.iter().any(|m| m.ends_with("Subject: 2\n\ntwo\n\n")),
        "{got:?}"
    );
    relay.wait_spool_empty();
}

/// The content of the one file in the Maildir, a bounce.
fn only_bounce(relay: &Relay) -> String {
    let t0 = Instant::now();
    while util::count(&relay.maildir_new()) == 0 {
        assert!(t0.elapsed() < LIMIT, "no bounce:\n{}", relay.log());
        std::thread::sleep(Duration::from_millis(10));
    }
    let got = relay.delivered();
    assert_eq!(got.len(), 1, "{got:?}");
    got.into_iter().next().unwrap()
}

#[test]
fn permanent_failures_bounce_to_the_sender() {
    let tmp = TempDir::new("f-bounce");
    let sink = Sink::start(&tmp.0, &["-f", "RCPT"]);
    let relay = Relay::start_in(
        &tmp.0,
        &format!(
            "local_domains = [\"local.test\"]\n{}",
            relay_to(&sink.addr(), "")
        ),
    );
    let mut c = relay.client();
    let id = c
        .message(
            "s@local.test",
            &["a@remote.test"],
            "Subject: doomed\r\nX-Mine: 1\r\n\r\nbody\r\n",
        )
        .rsplit(' ')
        .next()
        .unwrap()
        .to_owned();
    let dsn = only_bounce(&relay);
    for want in [
        "Return-Path: <>\n",
        "Delivered-To: s@local.test\n",
        "Subject: Undelivered Mail Returned to Sender\n",
        "Content-Type: multipart/report; report-type=delivery-status;\n",
        "Content-Type: message/delivery-status\n",
        &format!("X-Mail-Relay-Queue-ID: {id}\n"),
        "Final-Recipient: rfc822; a@remote.test\nAction: failed\nStatus: 5.3.0\n",
        "Remote-MTA: dns; 127.0.0.1\n",
        "Diagnostic-Code: smtp; 500 5.3.0 Error: command failed\n",
        "Content-Type: text/rfc822-headers\n",
        "Subject: doomed\nX-Mine: 1\n",
    ] {
        assert!(dsn.contains(want), "{want:?} not in\n{dsn}");
    }
    assert!(!dsn.contains("\nbody\n"), "the body is not returned");
    let log = relay.log();
    assert!(
        log.contains("dsn=5.3.0, status=bounced (host 127.0.0.1[127.0.0.1]"),
        "{log}"
    );
    assert!(
        log.contains(&format!("{id}: sender non-delivery notification: ")),
        "{log}"
    );
    relay.wait_spool_empty();
}

#[test]
fn no_bounce_to_the_null_sender_and_none_for_a_bounce() {
    let tmp = TempDir::new("f-nobounce");
    let sink = Sink::start(&tmp.0, &["-f", "RCPT"]);
    // Both the recipient's and the sender's domain go to the failing sink.
    let relay = Relay::start_in(&tmp.0, &relay_to(&sink.addr(), ""));
    let mut c = relay.client();
    c.message("", &["a@remote.test"], "Subject: from <>\r\n\r\nx\r\n");
    let log = relay.wait_log("and the sender is <>: no bounce, dropped", 1);
    assert!(log.contains("to=<a@remote.test>: undeliverable"), "{log}");
    // A message whose sender also fails: its bounce fails, and is dropped.
    c.message(
        "s@remote.test",
        &["b@remote.test"],
        "Subject: x\r\n\r\ny\r\n",
    );
    let log = relay.wait_log("and the sender is <>: no bounce, dropped", 2);
    assert!(log.contains("to=<s@remote.test>: undeliverable"), "{log}");
    assert!(log.contains("sender non-delivery notification"), "{log}");
    relay.wait_spool_empty();
    assert_eq!(util::count(&relay.maildir_new()), 0);
}

#[test]
fn expired_messages_are_returned() {
    let tmp = TempDir::new("f-expire");
    let port = util::free_port();
    let relay = Relay::start_in(
        &tmp.0,
        &format!(
            "local_domains = [\"local.test\"]\n{}",
            relay_to(
                &format!("127.0.0.1:{port}"),
                "[queue]\nminimal_backoff_time = \"200ms\"\nmaximal_backoff_time = \"200ms\"\nmaximal_queue_lifetime = \"1s\"\n"
            )
        ),
    );
    let t0 = Instant::now();
    relay.client().message(
        "s@local.test",
        &["a@remote.test"],
        "Subject: late\r\n\r\nx\r\n",
    );
    let dsn = only_bounce(&relay);
    assert!(t0.elapsed() >= Duration::from_secs(1));
    assert!(dsn.contains("before the queue lifetime ran out"), "{dsn}");
    assert!(dsn.contains("Status: 4.4.7\n"), "{dsn}");
    assert!(
        dsn.contains(&format!(
            "<a@remote.test>: connect to 127.0.0.1:{port}: Connection refused"
        )),
        "{dsn}"
    );
    assert!(relay.log().contains("status=expired, returned to sender"));
    relay.wait_spool_empty();
}

#[test]
fn each_recipient_has_its_status_across_a_restart() {
    let tmp = TempDir::new("f-rcpts");
    // The upstream: another relay, taking mail for good.test only (the
    // first relay is not in its mynetworks), two recipients per message.
    let up_dir = tmp.0.join("up");
    std::fs::create_dir_all(&up_dir).unwrap();
    let up = Relay::start_in(
        &up_dir,
        "mynetworks = [\"10.9.9.9/32\"]\nlocal_domains = [\"good.test\"]\nmax_recipients = 2\n",
    );
    let dir = tmp.0.join("relay");
    std::fs::create_dir_all(&dir).unwrap();
    let config = format!(
        "local_domains = [\"local.test\"]\n[routes]\n\"good.test\" = \"{0}\"\n\"bad.test\" = \"{0}\"\n\
         [queue]\nminimal_backoff_time = \"1h\"\nmaximal_backoff_time = \"1h\"\n",
        up.addr
    );
    let mut relay = Relay::start_in(&dir, &config);
    let id = relay
        .client()
        .message(
            "s@local.test",
            &["x@good.test", "y@bad.test", "z@good.test", "w@good.test"],
            "Subject: four\r\n\r\nbody\r\n",
        )
        .rsplit(' ')
        .next()
        .unwrap()
        .to_owned();
    // x and z are sent, y bounces (relay denied), w waits (two recipients
    // a message).
    let log = relay.wait_log("status=deferred", 1);
    let line = |rcpt: &str| {
        log.lines()
            .find(|l| l.contains(&format!("to=<{rcpt}>, relay=")))
            .unwrap_or_else(|| panic!("no line for {rcpt}:\n{log}"))
            .to_owned()
    };
    assert!(line("x@good.test").contains("status=sent"), "{log}");
    assert!(
        line("y@bad.test").contains("dsn=5.7.1, status=bounced"),
        "{log}"
    );
    assert!(line("z@good.test").contains("status=sent"), "{log}");
    assert!(
        line("w@good.test").contains("dsn=4.5.3, status=deferred"),
        "{log}"
    );
    let dsn = only_bounce(&relay);
    assert!(
        dsn.contains("Final-Recipient: rfc822; y@bad.test\n"),
        "{dsn}"
    );
    assert!(!dsn.contains("x@good.test") && !dsn.contains("w@good.test"));
    let q = relay.mailq();
    assert!(
        q.contains("w@good.test") && !q.contains("x@good.test"),
        "{q}"
    );
    assert_eq!(up.wait_delivered(1).len(), 1);

    // A crash, a restart, a flush: only w goes out, and no second bounce.
    relay.wait_deferral_journaled(&id);
    relay.kill();
    let relay = Relay::start_in(&dir, &config);
    let (ok, out) = relay.command(&["flush"]);
    assert!(ok, "{out}");
    relay.wait_spool_empty();
    let t0 = Instant::now();
    while util::count(&up.maildir_new()) < 2 {
        assert!(t0.elapsed() < LIMIT, "{}", up.log());
        std::thread::sleep(Duration::from_millis(10));
    }
    let got = up.delivered();
    assert_eq!(got.len(), 2, "{got:?}");
    let first = got
        .iter()
        .find(|m| m.contains("Delivered-To: x@good.test\n"));
    assert!(first.is_some_and(|m| m.contains("Delivered-To: z@good.test\n")));
    assert!(got
        .iter()
        .any(|m| m.contains("Delivered-To: w@good.test\n")));
    assert_eq!(util::count(&relay.maildir_new()), 1, "one bounce in all");
    assert!(relay.log().contains(&format!("{id}: to=<w@good.test>")));
}
