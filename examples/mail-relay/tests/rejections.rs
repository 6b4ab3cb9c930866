//! Every rejection with its exact reply: bare LF and bare CR (SMTP
//! smuggling), long command and text lines, 101 recipients, SIZE declared
//! and exceeded, commands out of order (also pipelined after a failed
//! MAIL), syntax errors, the error limit, relaying from outside
//! `mynetworks`; and RSET in the middle of a transaction.

mod util;

use util::{read_rest, Relay};

#[test]
fn bare_lf_in_data_ends_the_session_with_521() {
    let relay = Relay::start("barelf", "");
    let mut c = relay.client();
    c.open_data("s@example.test", &["a@example.test"]);
    // The smuggling shape: <LF>.<CR><LF> followed by a second transaction.
    c.send_raw(b"Subject: x\r\n\r\nbody\n.\r\nMAIL FROM:<evil@example.test>\r\n");
    let text = c.expect(521);
    assert!(
        text.starts_with("5.5.2 ") && text.contains("bare <LF>"),
        "{text}"
    );
    assert_eq!(read_rest(&mut c), "", "the session is closed");
    // Nothing was queued from it.
    assert_eq!(util::count(&relay.spool_queue()), 0);
    let mut c = relay.client();
    c.cmd("EHLO client.test", 250);
    c.send_raw(b"NOOP\rQUIT\r\n");
    let text = c.expect(521);
    assert!(text.contains("bare <CR>"), "{text}");
    assert!(relay.log().contains("bare <CR> received"));
}

#[test]
fn bare_lf_after_a_command_is_rejected() {
    let relay = Relay::start("barelf-cmd", "");
    let mut c = relay.client();
    c.send_raw(b"EHLO client.test\n");
    c.expect(521);
}

#[test]
fn long_lines() {
    let relay = Relay::start("long", "");
    let mut c = relay.client();
    c.cmd("EHLO client.test", 250);
    // 512 octets with CRLF is the limit for a command line.
    let ok = format!("NOOP {}", "x".repeat(512 - 7));
    c.cmd(&ok, 250);
    let long = format!("NOOP {}", "x".repeat(512 - 6));
    let text = c.cmd(&long, 500);
    assert_eq!(text, "5.5.2 Error: line too long");
    // A very long one (several reads) is consumed without running it.
    let huge = format!("MAIL FROM:<{}@x.test>", "a".repeat(100_000));
    c.cmd(&huge, 500);
    // The session goes on; a text line over 1000 octets fails the message.
    c.cmd("MAIL FROM:<s@example.test>", 250);
    c.cmd("RCPT TO:<a@example.test>", 250);
    c.cmd("DATA", 354);
    c.send_raw(format!("Subject: x\r\n\r\n{}\r\nfine\r\n", "y".repeat(999)).as_bytes());
    let text = c.cmd(".", 554);
    assert!(text.starts_with("5.6.0 "), "{text}");
    // Exactly 1000 with CRLF is fine.
    c.cmd("MAIL FROM:<s@example.test>", 250);
    c.cmd("RCPT TO:<a@example.test>", 250);
    c.cmd("DATA", 354);
    c.send_raw(format!("{}\r\n", "z".repeat(998)).as_bytes());
    c.cmd(".", 250);
    let m = &relay.wait_delivered(1)[0];
    assert!(m.ends_with(&format!("\n{}\n", "z".repeat(998))));
}

#[test]
fn too_many_recipients_get_452() {
    let relay = Relay::start("rcpts", "");
    let mut c = relay.client();
    c.cmd("EHLO client.test", 250);
    c.cmd("MAIL FROM:<s@example.test>", 250);
    for i in 0..100 {
        c.cmd(&format!("RCPT TO:<r{i}@example.test>"), 250);
    }
    let text = c.cmd("RCPT TO:<r100@example.test>", 452);
    assert_eq!(text, "4.5.3 Error: too many recipients");
    c.cmd("DATA", 354);
    c.send_raw(b"Subject: many\r\n\r\nx\r\n");
    c.cmd(".", 250);
    let m = &relay.wait_delivered(1)[0];
    assert_eq!(m.matches("Delivered-To: ").count(), 100);
}

#[test]
fn size_declared_and_exceeded_get_552() {
    let relay = Relay::start("size", "max_message_size = 1000\n");
    let mut c = relay.client();
    let ehlo = c.cmd("EHLO client.test", 250);
    assert!(ehlo.contains("\nSIZE 1000\n"), "{ehlo}");
    let text = c.cmd("MAIL FROM:<s@example.test> SIZE=1001", 552);
    assert!(text.starts_with("5.3.4 "), "{text}");
    c.cmd("MAIL FROM:<s@example.test> SIZE=900", 250);
    c.cmd("RCPT TO:<a@example.test>", 250);
    c.cmd("DATA", 354);
    // Declared 900, sends 2000: the data is read to its end and refused.
    for _ in 0..20 {
        c.send_raw(format!("{}\r\n", "q".repeat(98)).as_bytes());
    }
    let text = c.cmd(".", 552);
    assert!(text.starts_with("5.3.4 "), "{text}");
    // The session is in step: a message within the limit passes.
    c.cmd("MAIL FROM:<s@example.test>", 250);
    c.cmd("RCPT TO:<a@example.test>", 250);
    c.cmd("DATA", 354);
    c.send_raw(b"small\r\n");
    c.cmd(".", 250);
    relay.wait_delivered(1);
}

#[test]
fn commands_out_of_order_get_503() {
    let relay = Relay::start("order", "error_limit = 20\n");
    let mut c = relay.client();
    assert!(c
        .cmd("MAIL FROM:<s@example.test>", 503)
        .contains("send HELO/EHLO first"));
    c.cmd("EHLO client.test", 250);
    assert!(c.cmd("RCPT TO:<a@example.test>", 503).contains("need MAIL"));
    assert!(c.cmd("DATA", 503).contains("need MAIL"));
    c.cmd("MAIL FROM:<s@example.test>", 250);
    assert!(c
        .cmd("MAIL FROM:<s@example.test>", 503)
        .contains("nested MAIL"));
    assert_eq!(c.cmd("DATA", 554), "5.5.1 Error: no valid recipients");

    // Pipelined after a failed MAIL: the RCPT and the DATA get 503 and no
    // data is taken, so the text lines that follow are commands (500).
    c.cmd("RSET", 250);
    c.send_raw(
        b"MAIL FROM:<bad address>\r\nRCPT TO:<a@example.test>\r\nDATA\r\nhello\r\n.\r\nNOOP\r\n",
    );
    assert_eq!(
        c.expect(501),
        "5.1.7 Bad sender address syntax: bad character"
    );
    assert_eq!(c.expect(503), "5.5.1 Error: need MAIL command");
    assert_eq!(c.expect(503), "5.5.1 Error: need MAIL command");
    assert_eq!(c.expect(500), "5.5.2 Error: command not recognized");
    assert_eq!(c.expect(500), "5.5.2 Error: command not recognized");
    c.expect(250);
    assert_eq!(util::count(&relay.spool_queue()), 0);
}

#[test]
fn syntax_errors_and_the_error_limit() {
    let relay = Relay::start("syntax", "error_limit = 4\n");
    let mut c = relay.client();
    assert_eq!(c.cmd("EHLO", 501), "5.5.4 Syntax: EHLO hostname");
    c.cmd("HELO client.test", 250);
    assert!(c
        .cmd("MAIL FROM:<s@example.test> SIZE=10", 555)
        .starts_with("5.5.4 "));
    assert_eq!(c.cmd("XYZZY", 500), "5.5.2 Error: command not recognized");
    // The fourth error ends the session.
    c.send("RCPT TO:<a@example.test>");
    c.expect(503);
    let text = c.expect(421);
    assert!(
        text.starts_with("4.7.0 ") && text.contains("too many errors"),
        "{text}"
    );
    assert_eq!(read_rest(&mut c), "");
}

#[test]
fn vrfy_help_noop_quit() {
    let relay = Relay::start("misc", "");
    let mut c = relay.client();
    c.cmd("EHLO client.test", 250);
    assert!(c.cmd("VRFY someone", 252).starts_with("2.0.0 "));
    assert!(c.cmd("HELP", 214).contains("EHLO"));
    c.cmd("NOOP", 250);
    assert_eq!(c.cmd("STARTTLS", 454), "4.7.0 TLS not available");
    c.cmd("QUIT", 221);
    assert_eq!(read_rest(&mut c), "");
}

#[test]
fn rset_mid_transaction_forgets_it() {
    let relay = Relay::start("rset", "");
    let mut c = relay.client();
    c.cmd("EHLO client.test", 250);
    c.cmd("MAIL FROM:<first@example.test>", 250);
    c.cmd("RCPT TO:<dropped@example.test>", 250);
    c.cmd("RSET", 250);
    assert!(c.cmd("DATA", 503).contains("need MAIL"));
    c.message(
        "second@example.test",
        &["kept@example.test"],
        "Subject: after rset\r\n\r\nx\r\n",
    );
    let m = &relay.wait_delivered(1)[0];
    assert!(m.contains("Return-Path: <second@example.test>"), "{m}");
    assert!(!m.contains("dropped@example.test"), "{m}");
}

#[test]
fn relay_denied_outside_mynetworks() {
    util::require("python3", "python3");
    let relay = Relay::start(
        "relaydeny",
        "mynetworks = [\"127.0.0.1/32\"]\nlocal_domains = [\"local.test\"]\n",
    );
    let script = r#"
import smtplib, sys
port = int(sys.argv[1])
with smtplib.SMTP("127.0.0.1", port, source_address=("127.0.0.2", 0)) as s:
    s.ehlo("outside.test")
    s.mail("s@example.test")
    print(s.rcpt("victim@elsewhere.test"))
    print(s.rcpt("someone@local.test"))
    print(s.rcpt("postmaster"))
    s.rset()
"#;
    let out = util::python(script, &[&relay.addr.port().to_string()]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0],
        "(554, b'5.7.1 <victim@elsewhere.test>: Relay access denied')"
    );
    assert_eq!(lines[1], "(250, b'2.1.5 Ok')");
    assert_eq!(lines[2], "(250, b'2.1.5 Ok')");
    assert!(relay
        .log()
        .contains("NOQUEUE: reject: RCPT from [127.0.0.2]: 554 5.7.1 <victim@elsewhere.test>: Relay access denied"));
    // From 127.0.0.1 (inside mynetworks) the same recipient is fine.
    let mut c = relay.client();
    c.cmd("EHLO client.test", 250);
    c.cmd("MAIL FROM:<s@example.test>", 250);
    c.cmd("RCPT TO:<victim@elsewhere.test>", 250);
}
