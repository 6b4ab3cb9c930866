//! RFC and safety slips: dot-stuffing and the line limit, the EHLO
//! argument, client bytes in the log, the verb of a rejected MAIL,
//! sender-specified routing, duplicate recipients, the junk-command limit
//! and 452s counted as errors.

mod util;

use util::{read_rest, Relay};

#[test]
fn a_stuffed_dot_does_not_count_toward_the_line_limit() {
    let relay = Relay::start("stuffing", "");
    let mut c = relay.client();
    c.open_data("s@example.test", &["a@example.test"]);
    // A 998-octet text line starting with a dot: 1001 octets on the wire.
    let line = format!(".{}", "y".repeat(997));
    c.send_raw(format!("Subject: x\r\n\r\n.{line}\r\n").as_bytes());
    c.cmd(".", 250);
    let m = &relay.wait_delivered(1)[0];
    assert!(m.ends_with(&format!("\n{line}\n")), "{m}");
    // One more octet of text is too long.
    c.cmd("MAIL FROM:<s@example.test>", 250);
    c.cmd("RCPT TO:<a@example.test>", 250);
    c.cmd("DATA", 354);
    c.send_raw(format!("..{}\r\n", "y".repeat(998)).as_bytes());
    c.cmd(".", 554);
}

#[test]
fn bad_ehlo_arguments_get_501() {
    let relay = Relay::start("helo", "");
    let mut c = relay.client();
    for bad in [
        &b"EHLO a\x00b\r\n"[..],
        b"EHLO a\x1bb\r\n",
        b"HELO caf\xc3\xa9.test\r\n",
        b"EHLO caf\xe9.test\r\n",
        format!("EHLO {}\r\n", "a".repeat(256)).as_bytes(),
    ] {
        c.send_raw(bad);
        let text = c.expect(501);
        assert!(text.contains("argument rejected"), "{text}");
    }
    c.cmd(&format!("EHLO {}", "a".repeat(255)), 250);
    c.cmd("HELO [127.0.0.1]", 250);
}

#[test]
fn client_bytes_are_escaped_in_the_log_and_rejects_name_their_verb() {
    let relay = Relay::start("escape", "");
    let mut c = relay.client();
    c.cmd("EHLO client.test", 250);
    c.send_raw(b"MAIL FROM:<s@example.test> X=\x1b[31mred\r\n");
    c.expect(555);
    c.cmd("RCPT TO:<bad", 501);
    c.cmd("QUIT", 221);
    let log = relay.wait_log("disconnect from", 1);
    assert!(!log.contains('\x1b'), "a raw ESC in the log:\n{log}");
    assert!(log.contains("X=\\x1b[31mred"), "{log}");
    assert!(log.contains("reject: MAIL from [127.0.0.1]"), "{log}");
    assert!(log.contains("reject: RCPT from [127.0.0.1]"), "{log}");
    assert!(!log.contains("UNKNOWN"), "{log}");
}

#[test]
fn untrusted_clients_cannot_route_through_the_local_part() {
    // Loopback is not in mynetworks here: the test is an outside client.
    let relay = Relay::start(
        "routing",
        "mynetworks = [\"10.0.0.0/8\"]\nrelay_domains = [\"relay.test\"]\n",
    );
    let mut c = relay.client();
    c.cmd("EHLO client.test", 250);
    c.cmd("MAIL FROM:<s@example.test>", 250);
    for bad in [
        "a%victim.test@relay.test",
        "victim.test!a@relay.test",
        "a@victim.test@relay.test",
        "\"a@victim.test\"@relay.test",
    ] {
        let text = c.cmd(&format!("RCPT TO:<{bad}>"), 554);
        assert!(text.contains("Relay access denied"), "{text}");
    }
    c.cmd("RCPT TO:<a@relay.test>", 250);
}

#[test]
fn duplicate_recipients_are_collapsed() {
    let relay = Relay::start("dups", "");
    let mut c = relay.client();
    c.cmd("EHLO client.test", 250);
    c.cmd("MAIL FROM:<s@example.test>", 250);
    for to in [
        "a@example.test",
        "b@example.test",
        "a@example.test",
        "A@Example.TEST",
    ] {
        c.cmd(&format!("RCPT TO:<{to}>"), 250);
    }
    c.cmd("DATA", 354);
    c.send_raw(b"Subject: twice\r\n\r\nx\r\n");
    c.cmd(".", 250);
    relay.wait_delivered(1);
    let log = relay.wait_log("to=<b@example.test>", 1);
    assert!(log.contains("nrcpt=2"), "{log}");
    assert_eq!(
        log.to_lowercase().matches("to=<a@example.test>,").count(),
        1,
        "{log}"
    );
}

#[test]
fn junk_commands_past_the_limit_count_as_errors() {
    // The defaults: junk_command_limit = 100, error_limit = 10.
    let relay = Relay::start("junk", "");
    let mut c = relay.client();
    c.cmd("EHLO client.test", 250);
    // Pipelined: 100 free, the next 10 are errors; the 10th ends it.
    c.send_raw("NOOP\r\nRSET\r\nVRFY x\r\nHELP\r\n".repeat(30).as_bytes());
    let mut ok = 0;
    loop {
        let (code, text) = c.reply().expect("a reply");
        if code == 421 {
            assert!(text.contains("too many errors"), "{text}");
            break;
        }
        ok += 1;
    }
    assert_eq!(ok, 110);
    let _ = read_rest(&mut c);
    assert!(relay.log().contains("too many junk commands"));
}

#[test]
fn too_many_recipients_count_as_errors() {
    let relay = Relay::start("452", "max_recipients = 1\nerror_limit = 3\n");
    let mut c = relay.client();
    c.cmd("EHLO client.test", 250);
    c.cmd("MAIL FROM:<s@example.test>", 250);
    c.cmd("RCPT TO:<a@example.test>", 250);
    c.cmd("RCPT TO:<b@example.test>", 452);
    c.cmd("RCPT TO:<c@example.test>", 452);
    c.cmd("RCPT TO:<d@example.test>", 452);
    c.expect(421);
}
