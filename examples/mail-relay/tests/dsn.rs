//! Delivery status notifications (RFC 3461, RFC 3464) with Python's
//! smtplib as the client (its `mail_options` and `rcpt_options`) and
//! Postfix's smtp-sink as the next hop, which writes down the parameters
//! it was given (`X-Mail-Args:`, `X-Rcpt-Args:`), with DSN announced or
//! not (`-N`), every RCPT refused for good (`-f RCPT`) or for now
//! (`-r RCPT`). Reports to the senders at `sender.test` go into the
//! relay's Maildir. swaks, the other client, has no DSN options in the
//! version Debian ships: it sends the parameters inside its address
//! fields (see `swaks_sends_the_parameters_in_its_address_fields`).

mod util;

use std::time::{Duration, Instant};

use util::{python, relay_to, require, swaks, Client, Relay, Sink, TempDir};

/// Sends one message with smtplib: `mail` is MAIL's options, each
/// recipient `ADDRESS[ OPTION...]`, the body text or `@FILE`; prints the
/// replies.
const SEND: &str = r#"
import smtplib, sys
port, sender, mail, body = int(sys.argv[1]), sys.argv[2], sys.argv[3].split(), sys.argv[4]
if body.startswith("@"):
    body = open(body[1:], newline="").read()
rcpts = [r.split() for r in sys.argv[5:]]
c = smtplib.SMTP("127.0.0.1", port)
c.ehlo()
print("dsn:", c.has_extn("dsn"))
print("mail:", *c.mail(sender, mail))
for r in rcpts:
    print("rcpt:", *c.rcpt(r[0], r[1:]))
print("data:", *c.data(body.encode()))
c.quit()
"#;

/// Sends `body` from `sender` with MAIL options `mail` to `rcpts`
/// (`ADDRESS[ OPTION...]`); returns smtplib's transcript.
fn send(relay: &Relay, sender: &str, mail: &str, rcpts: &[&str], body: &str) -> String {
    let port = relay.addr.port().to_string();
    let mut args = vec![port.as_str(), sender, mail, body];
    args.extend_from_slice(rcpts);
    let out = python(SEND, &args);
    assert!(out.contains("data: 250"), "{out}");
    out
}

/// The Maildir messages that are reports (from MAILER-DAEMON).
fn reports(relay: &Relay) -> Vec<String> {
    relay
        .delivered()
        .into_iter()
        .filter(|m| m.contains("From: MAILER-DAEMON@relay.test"))
        .collect()
}

/// Waits until `n` reports are in the Maildir; returns them.
#[track_caller]
fn wait_reports(relay: &Relay, n: usize) -> Vec<String> {
    let t0 = Instant::now();
    loop {
        let got = reports(relay);
        if got.len() >= n {
            return got;
        }
        assert!(
            t0.elapsed() < util::LIMIT,
            "{} of {n} reports after {:?}; log:\n{}",
            got.len(),
            util::LIMIT,
            relay.log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The queue id in a `250 2.0.0 Ok: queued as ID` transcript.
fn queue_id(transcript: &str) -> String {
    transcript
        .split("queued as ")
        .nth(1)
        .and_then(|s| s.split('\'').next())
        .expect("a queue id")
        .to_owned()
}

/// Senders at sender.test get their reports in the Maildir; the rest goes
/// to `sink`.
fn config(sink: &Sink, extra: &str) -> String {
    relay_to(
        &sink.addr(),
        &format!("local_domains = [\"sender.test\"]\n{extra}"),
    )
}

#[test]
fn ehlo_announces_dsn_and_bad_parameters_are_refused_with_the_reason() {
    let relay = Relay::start("dsn-syntax", "error_limit = 100\n");
    let mut c = relay.client();
    let ehlo = c.cmd("EHLO client.test", 250);
    assert!(ehlo.lines().any(|l| l == "DSN"), "{ehlo}");
    for (cmd, want) in [
        (
            "MAIL FROM:<s@x.test> FOO=1",
            "555 5.5.4 Unsupported option: FOO=1",
        ),
        (
            "MAIL FROM:<s@x.test> RET=SOME",
            "501 5.5.4 Bad RET parameter: FULL or HDRS",
        ),
        (
            "MAIL FROM:<s@x.test> ENVID=a+2",
            "501 5.5.4 Bad ENVID parameter: malformed xtext",
        ),
        (
            "MAIL FROM:<s@x.test> ENVID=a=b",
            "501 5.5.4 Bad ENVID parameter: malformed xtext",
        ),
        (
            &format!("MAIL FROM:<s@x.test> ENVID={}", "e".repeat(101)),
            "501 5.5.4 Bad ENVID parameter: longer than 100 characters",
        ),
        (
            "MAIL FROM:<s@x.test> RET=FULL RET=HDRS",
            "501 5.5.4 RET parameter given twice",
        ),
    ] {
        c.send(cmd);
        let (code, text) = c.reply().unwrap();
        assert_eq!(format!("{code} {text}"), want, "{cmd}");
    }
    c.cmd(
        &format!("MAIL FROM:<s@x.test> RET=HDRS ENVID={}", "e".repeat(100)),
        250,
    );
    for (cmd, want) in [
        (
            "RCPT TO:<a@x.test> XYZ=1",
            "555 5.5.4 Unsupported option: XYZ=1",
        ),
        (
            "RCPT TO:<a@x.test> NOTIFY=NEVER,SUCCESS",
            "501 5.5.4 Bad NOTIFY parameter: NEVER must stand alone",
        ),
        (
            "RCPT TO:<a@x.test> NOTIFY=SOMETIMES",
            "501 5.5.4 Bad NOTIFY parameter: \"SOMETIMES\" is not SUCCESS, FAILURE, DELAY or NEVER",
        ),
        (
            "RCPT TO:<a@x.test> ORCPT=a@x.test",
            "501 5.5.4 Bad ORCPT parameter: no addr-type; (as in rfc822;a@b)",
        ),
        (
            "RCPT TO:<a@x.test> ORCPT=rfc822;a+zz@x.test",
            "501 5.5.4 Bad ORCPT parameter: malformed xtext",
        ),
    ] {
        c.send(cmd);
        let (code, text) = c.reply().unwrap();
        assert_eq!(format!("{code} {text}"), want, "{cmd}");
    }
    c.cmd(
        "RCPT TO:<a@x.test> NOTIFY=SUCCESS,DELAY ORCPT=rfc822;a@x.test",
        250,
    );
    // After HELO, no parameters at all.
    let mut h = Client::connect(relay.addr);
    h.expect(220);
    h.cmd("HELO client.test", 250);
    h.cmd("MAIL FROM:<s@x.test>", 250);
    h.send("RCPT TO:<a@x.test> NOTIFY=NEVER");
    assert_eq!(
        h.expect(555),
        "5.5.4 Unsupported option: parameters need EHLO"
    );
}

#[test]
fn parameters_survive_the_spool_and_go_to_a_next_hop_that_announces_dsn() {
    let tmp = TempDir::new("dsn-pass");
    let port = util::free_port();
    // The next hop is down at first: the message waits in the spool.
    let mut relay = Relay::start_in(
        &tmp.0,
        &relay_to(
            &format!("127.0.0.1:{port}"),
            "[queue]\nminimal_backoff_time = \"1h\"\nmaximal_backoff_time = \"1h\"\n",
        ),
    );
    let out = send(
        &relay,
        "s@sender.test",
        "RET=HDRS ENVID=QQ+2B314",
        &[
            "a@dest.test NOTIFY=SUCCESS,FAILURE ORCPT=rfc822;Orig+2Ba@dest.test",
            "b@dest.test",
        ],
        "Subject: passed on\r\n\r\nbody\r\n",
    );
    assert!(out.contains("dsn: True"), "{out}");
    let id = queue_id(&out);
    relay.wait_log(&format!("{id}: to=<a@dest.test>"), 1);
    relay.terminate();
    relay.wait_exit();
    let mut sink = Sink::start_on(port, &tmp.0, &[]);
    let relay = Relay::start_in(&tmp.0, &relay_to(&sink.addr(), ""));
    let dump = &sink.wait_messages(1)[0];
    assert!(
        dump.contains("X-Mail-Args: <s@sender.test> RET=HDRS ENVID=QQ+2B314\n"),
        "{dump}"
    );
    assert!(
        dump.contains(
            "X-Rcpt-Args: <a@dest.test> NOTIFY=SUCCESS,FAILURE ORCPT=rfc822;Orig+2Ba@dest.test\n"
        ),
        "{dump}"
    );
    assert!(dump.contains("X-Rcpt-Args: <b@dest.test>\n"), "{dump}");
    // The next hop reports the delivery, not we.
    let log = relay.wait_log(&format!("{id}: removed"), 1);
    assert!(!log.contains("notification"), "{log}");
    sink.stop();
}

#[test]
fn a_next_hop_without_dsn_gets_none_and_the_sender_hears_relayed() {
    let tmp = TempDir::new("dsn-relayed");
    let sink = Sink::start(&tmp.0, &["-N"]);
    let relay = Relay::start_in(&tmp.0, &config(&sink, ""));
    let out = send(
        &relay,
        "s@sender.test",
        "RET=HDRS ENVID=env-1",
        &[
            "a@dest.test NOTIFY=SUCCESS ORCPT=rfc822;alias@dest.test",
            "b@dest.test NOTIFY=FAILURE",
        ],
        "Subject: relayed\r\n\r\nsecret body\r\n",
    );
    let id = queue_id(&out);
    let dump = &sink.wait_messages(1)[0];
    assert!(dump.contains("X-Mail-Args: <s@sender.test>\n"), "{dump}");
    assert!(dump.contains("X-Rcpt-Args: <a@dest.test>\n"), "{dump}");
    let report = &wait_reports(&relay, 1)[0];
    for want in [
        "Return-Path: <>\n",
        "Subject: Successful Mail Delivery Report\n",
        "Content-Type: multipart/report; report-type=delivery-status;",
        "Reporting-MTA: dns; relay.test\n",
        "Original-Envelope-Id: env-1\n",
        &format!("X-Mail-Relay-Queue-ID: {id}\n"),
        "Original-Recipient: rfc822;alias@dest.test\nFinal-Recipient: rfc822; a@dest.test\n\
         Action: relayed\nStatus: 2.0.0\nRemote-MTA: dns; 127.0.0.1\nDiagnostic-Code: smtp; 250",
        "Content-Type: text/rfc822-headers\n\nReceived: from ",
        "Subject: relayed\n",
    ] {
        assert!(report.contains(want), "{want:?} not in:\n{report}");
    }
    assert!(
        !report.contains("b@dest.test"),
        "b asked for failures only:\n{report}"
    );
    assert!(
        !report.contains("secret body"),
        "RET=HDRS: headers only:\n{report}"
    );
    let log = relay.log();
    assert!(
        log.contains(&format!("{id}: sender delivery status notification: ")),
        "{log}"
    );
}

#[test]
fn local_delivery_reports_delivered_with_the_whole_message() {
    let relay = Relay::start("dsn-delivered", "");
    send(
        &relay,
        "s@sender.test",
        "RET=FULL",
        &["a@home.test NOTIFY=SUCCESS"],
        "Subject: home\r\n\r\nthe whole body\r\n",
    );
    let report = &wait_reports(&relay, 1)[0];
    for want in [
        "Final-Recipient: rfc822; a@home.test\nAction: delivered\nStatus: 2.0.0\n\
         Diagnostic-Code: X-mail-relay; delivered to maildir as ",
        "Content-Type: message/rfc822\n\nReceived: from ",
        "Subject: home\n\nthe whole body\n\n--",
    ] {
        assert!(report.contains(want), "{want:?} not in:\n{report}");
    }
    assert!(!report.contains("Original-Envelope-Id"), "{report}");
}

#[test]
fn failures_are_reported_with_headers_or_the_whole_message_unless_never() {
    let tmp = TempDir::new("dsn-failed");
    // Every recipient refused for good.
    let sink = Sink::start(&tmp.0, &["-f", "RCPT"]);
    let relay = Relay::start_in(&tmp.0, &config(&sink, ""));
    // A message past the size that is streamed through a spill file, so
    // that its report is copied a chunk at a time.
    let line = "0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz\r\n";
    let big = format!("Subject: full\r\n\r\n{}the end\r\n", line.repeat(3000));
    let file = tmp.0.join("big.eml");
    std::fs::write(&file, &big).unwrap();
    let full = send(
        &relay,
        "s@sender.test",
        "RET=FULL ENVID=full-1",
        &["a@dest.test ORCPT=rfc822;a@dest.test"],
        &format!("@{}", file.display()),
    );
    let hdrs = send(
        &relay,
        "s@sender.test",
        "RET=HDRS ENVID=hdrs-1",
        &["a@dest.test NOTIFY=FAILURE,DELAY"],
        "Subject: headers\r\n\r\nnot returned\r\n",
    );
    let never = send(
        &relay,
        "s@sender.test",
        "ENVID=never-1",
        &["a@dest.test NOTIFY=NEVER"],
        "Subject: never\r\n\r\nx\r\n",
    );
    let never_id = queue_id(&never);
    relay.wait_log(&format!("{never_id}: removed"), 1);
    let got = wait_reports(&relay, 2);
    let full_report = got
        .iter()
        .find(|m| m.contains("Original-Envelope-Id: full-1"))
        .expect("the RET=FULL bounce");
    for want in [
        "Subject: Undelivered Mail Returned to Sender\n",
        &format!("X-Mail-Relay-Queue-ID: {}\n", queue_id(&full)),
        "Original-Recipient: rfc822;a@dest.test\nFinal-Recipient: rfc822; a@dest.test\n\
         Action: failed\nStatus: 5.3.0\nRemote-MTA: dns; 127.0.0.1\n\
         Diagnostic-Code: smtp; 500 5.3.0 Error: command failed\n",
        "Content-Type: message/rfc822\n\nReceived: from ",
    ] {
        assert!(full_report.contains(want), "{want:?} not in the report");
    }
    let body = big.replace("\r\n", "\n");
    assert!(
        full_report.contains(&format!("{body}\n--")),
        "the whole original is returned, byte for byte"
    );
    let hdrs_report = got
        .iter()
        .find(|m| m.contains("Original-Envelope-Id: hdrs-1"))
        .expect("the RET=HDRS bounce");
    assert!(
        hdrs_report.contains("Content-Type: text/rfc822-headers\n\nReceived: from "),
        "{hdrs_report}"
    );
    assert!(hdrs_report.contains("Subject: headers\n"), "{hdrs_report}");
    assert!(!hdrs_report.contains("not returned"), "{hdrs_report}");
    assert!(queue_id(&hdrs).len() > 4);
    assert!(
        got.iter().all(|m| !m.contains("never-1")),
        "NOTIFY=NEVER: no report"
    );
    let log = relay.log();
    assert!(
        log.contains(&format!("{never_id}: to=<a@dest.test>: undeliverable (")),
        "{log}"
    );
    assert!(log.contains("; no bounce: NOTIFY=NEVER"), "{log}");
    assert_eq!(reports(&relay).len(), 2);
}

#[test]
fn a_delay_is_reported_once_after_the_configured_time() {
    let tmp = TempDir::new("dsn-delay");
    // Every recipient refused for now: deferred, tried every 300 ms.
    let sink = Sink::start(&tmp.0, &["-r", "RCPT"]);
    let extra = "[queue]\nminimal_backoff_time = \"300ms\"\nmaximal_backoff_time = \"300ms\"\n\
                 delay_warning_time = \"2s\"\n";
    let mut relay = Relay::start_in(&tmp.0, &config(&sink, extra));
    let t0 = Instant::now();
    let out = send(
        &relay,
        "s@sender.test",
        "ENVID=slow-1",
        &[
            "a@dest.test NOTIFY=DELAY,FAILURE",
            "b@dest.test",
            "c@dest.test NOTIFY=FAILURE",
        ],
        "Subject: slow\r\n\r\nx\r\n",
    );
    let id = queue_id(&out);
    let report = wait_reports(&relay, 1).remove(0);
    assert!(
        t0.elapsed() >= Duration::from_secs(2),
        "a delay report before delay_warning_time"
    );
    for want in [
        "Subject: Delayed Mail (still being retried)\n",
        "Original-Envelope-Id: slow-1\n",
        "Final-Recipient: rfc822; a@dest.test\nAction: delayed\nStatus: 4.3.0\n\
         Remote-MTA: dns; 127.0.0.1\nDiagnostic-Code: smtp; 450 4.3.0 Error: command failed\n\
         Will-Retry-Until: ",
    ] {
        assert!(report.contains(want), "{want:?} not in:\n{report}");
    }
    // Only a asked for delays (b's default is FAILURE alone).
    assert!(
        !report.contains("b@dest.test") && !report.contains("c@dest.test"),
        "{report}"
    );
    // Once: more attempts, and a restart (the journal remembers), bring
    // no second one.
    let deferred = format!("{id}: to=<a@dest.test>");
    let n = relay.log().matches(&deferred).count();
    relay.wait_log(&deferred, n + 3);
    relay.terminate();
    relay.wait_exit();
    // The log file is the same: the new run's lines come after these.
    let n = relay.log().matches(&deferred).count();
    let relay = Relay::start_in(&tmp.0, &config(&sink, extra));
    let log = relay.wait_log(&deferred, n + 3);
    assert!(
        log.contains(&format!("{id}: sender delay notification: ")),
        "{log}"
    );
    assert_eq!(reports(&relay).len(), 1, "{log}");
}

/// swaks writes `MAIL FROM:<` + `--from` + `>` and `RCPT TO:<` + `--to` +
/// `>`, so `--from 's@x> RET=FULL ENVID=<id'` sends `MAIL FROM:<s@x>
/// RET=FULL ENVID=<id>` (`<` and `>` are plain xtext), and a `--to`
/// ending in `ORCPT=rfc822;<a@x` an ORCPT of `<a@x>`.
#[test]
fn swaks_sends_the_parameters_in_its_address_fields() {
    let relay = Relay::start("dsn-swaks", "error_limit = 100\n");
    let out = swaks(
        relay.addr,
        &[
            "--from",
            "s@sender.test> RET=FULL ENVID=<swaks-1",
            "--to",
            "a@home.test> NOTIFY=SUCCESS ORCPT=rfc822;<alias@home.test",
            "--header",
            "Subject: swaks asks",
            "--body",
            "the whole body, as RET=FULL asked",
        ],
    );
    for want in [
        "250-DSN",
        "MAIL FROM:<s@sender.test> RET=FULL ENVID=<swaks-1>",
        "RCPT TO:<a@home.test> NOTIFY=SUCCESS ORCPT=rfc822;<alias@home.test>",
        "250 2.0.0 Ok: queued as",
    ] {
        assert!(out.contains(want), "{want:?} not in:\n{out}");
    }
    let report = &wait_reports(&relay, 1)[0];
    for want in [
        "Subject: Successful Mail Delivery Report\n",
        "Original-Envelope-Id: <swaks-1>\n",
        "Original-Recipient: rfc822;<alias@home.test>\nFinal-Recipient: rfc822; a@home.test\n\
         Action: delivered\nStatus: 2.0.0\n",
        "Content-Type: message/rfc822\n",
        "Subject: swaks asks\n",
        "the whole body, as RET=FULL asked",
    ] {
        assert!(report.contains(want), "{want:?} not in:\n{report}");
    }
    // Refused, with the reason swaks shows.
    require("swaks", "swaks");
    let long_envid = format!("s@sender.test> ENVID=<{}", "e".repeat(99));
    for (from, to, want) in [
        (
            long_envid.as_str(),
            "a@home.test",
            "501 5.5.4 Bad ENVID parameter: longer than 100 characters",
        ),
        (
            "s@sender.test> ENVID=<a+zz",
            "a@home.test",
            "501 5.5.4 Bad ENVID parameter: malformed xtext",
        ),
        (
            "s@sender.test",
            "a@home.test> NOTIFY=SOMETIMES ORCPT=rfc822;<a@home.test",
            "501 5.5.4 Bad NOTIFY parameter: \"SOMETIMES\" is not SUCCESS, FAILURE, DELAY or NEVER",
        ),
        (
            "s@sender.test",
            "a@home.test> XYZ=<1",
            "555 5.5.4 Unsupported option: XYZ=<1>",
        ),
    ] {
        let out = std::process::Command::new("swaks")
            .args([
                "--server",
                &relay.addr.to_string(),
                "--from",
                from,
                "--to",
                to,
            ])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(!out.status.success(), "{text}");
        assert!(text.contains(want), "{want:?} not in:\n{text}");
    }
    assert_eq!(reports(&relay).len(), 1);
}

#[test]
fn config_and_help_show_the_dsn_defaults() {
    let bin = env!("CARGO_BIN_EXE_mail-relay");
    let out = std::process::Command::new(bin)
        .arg("config")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    for want in [
        "delay_warning_time = \"4h\"\n",
        "dsn_ret = \"hdrs\"\n",
        "dsn_notify = \"FAILURE\"\n",
    ] {
        assert!(text.contains(want), "{want:?} not in:\n{text}");
    }
    let out = std::process::Command::new(bin)
        .args(["--dsn-ret", "full", "--dsn-notify", "failure,delay"])
        .args(["--delay-warning-time", "30m", "config"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    for want in [
        "delay_warning_time = \"30m\"\n",
        "dsn_ret = \"full\"\n",
        "dsn_notify = \"FAILURE,DELAY\"\n",
    ] {
        assert!(text.contains(want), "{want:?} not in:\n{text}");
    }
    let out = std::process::Command::new(bin)
        .args(["--dsn-notify", "never,success", "config"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("NEVER must stand alone"));
    let help = std::process::Command::new(bin)
        .arg("--help")
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    for want in [
        "--delay-warning-time <DURATION>",
        "--dsn-ret <RET>",
        "--dsn-notify <NOTIFY>",
    ] {
        assert!(help.contains(want), "{want} not in --help:\n{help}");
    }
}
