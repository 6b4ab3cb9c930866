//! Real clients against the real binary: swaks and Python's smtplib send a
//! plain message, dot-stuffed lines, 8-bit and SMTPUTF8 content, a
//! pipelined transaction, and a message over STARTTLS; each arrives in the
//! Maildir byte for byte (with our trace header and LF line ends).

mod util;

use util::{python, swaks, Relay};

#[test]
fn swaks_plain_message() {
    let relay = Relay::start("swaks", "");
    let out = swaks(
        relay.addr,
        &[
            "--to",
            "a@example.test",
            "--from",
            "s@example.test",
            "--body",
            "hello from swaks",
        ],
    );
    assert!(out.contains("250 2.0.0 Ok: queued as"), "{out}");
    let got = relay.wait_delivered(1);
    let m = &got[0];
    assert!(
        m.starts_with(
            "Return-Path: <s@example.test>\nDelivered-To: a@example.test\nReceived: from "
        ),
        "{m}"
    );
    assert!(
        m.contains("by relay.test (mail-relay) with ESMTP id "),
        "{m}"
    );
    assert!(m.contains("\nhello from swaks\n"), "{m}");
    assert!(!m.contains('\r'), "Maildir content uses LF line ends");
    let log = relay.log();
    assert!(
        log.contains("from=<s@example.test>, size="),
        "one line per accepted message:\n{log}"
    );
    assert!(
        log.contains("to=<a@example.test>, relay=maildir"),
        "one line per delivery:\n{log}"
    );
}

#[test]
fn swaks_pipelined_transaction() {
    let relay = Relay::start("pipeline", "");
    let out = swaks(
        relay.addr,
        &[
            "--pipeline",
            "--to",
            "a@example.test,b@example.test",
            "--body",
            "pipelined",
        ],
    );
    // swaks sends MAIL, both RCPTs and DATA in one write and reads the
    // four replies after.
    assert!(out.contains("PIPELINING"), "{out}");
    assert!(out.contains("354 End data"), "{out}");
    assert!(out.contains("250 2.0.0 Ok: queued as"), "{out}");
    let m = &relay.wait_delivered(1)[0];
    assert!(
        m.contains("Delivered-To: a@example.test\nDelivered-To: b@example.test\n"),
        "{m}"
    );
}

const SMTPLIB_SEND: &str = r#"
import smtplib, sys
port = int(sys.argv[1])
body = sys.argv[2].encode("utf-8").decode("unicode_escape").encode("latin-1")
with smtplib.SMTP("127.0.0.1", port) as s:
    s.sendmail("s@example.test", ["a@example.test"], body)
print("sent")
"#;

#[test]
fn smtplib_plain_message_and_dot_stuffing() {
    let relay = Relay::start("smtplib", "");
    // smtplib dot-stuffs lines that start with a dot; the relay unstuffs.
    let body = "Subject: dots\r\n\r\n.leading dot\r\n..two dots\r\n.\r\nnot the end\r\nlast\r\n";
    let escaped = body.replace('\r', "\\r").replace('\n', "\\n");
    assert_eq!(
        python(SMTPLIB_SEND, &[&relay.addr.port().to_string(), &escaped]),
        "sent\n"
    );
    let m = &relay.wait_delivered(1)[0];
    assert!(
        m.ends_with("Subject: dots\n\n.leading dot\n..two dots\n.\nnot the end\nlast\n"),
        "{m:?}"
    );
}

#[test]
fn smtplib_eight_bit_and_smtputf8() {
    let relay = Relay::start("utf8", "");
    let script = r#"
import smtplib, sys
port = int(sys.argv[1])
msg = "Subject: =?utf-8?q?gr=C3=BC=C3=9Fe?=\r\n\r\nGrüße, 你好, ☃\r\n".encode("utf-8")
with smtplib.SMTP("127.0.0.1", port) as s:
    s.ehlo()
    assert s.has_extn("smtputf8") and s.has_extn("8bitmime")
    s.sendmail("jörg@exämple.test", ["用户@例子.test"], msg,
               mail_options=["SMTPUTF8", "BODY=8BITMIME"])
    # 8-bit content without SMTPUTF8, ASCII addresses
    s.sendmail("s@example.test", ["a@example.test"], msg, mail_options=["BODY=8BITMIME"])
    # a non-ASCII address without SMTPUTF8 is refused
    try:
        s.sendmail("jörg@exämple.test".encode("utf-8").decode("latin-1"), ["a@example.test"], msg)
        print("accepted")
    except smtplib.SMTPException as e:
        print("refused", e)
"#;
    let out = python(script, &[&relay.addr.port().to_string()]);
    assert!(out.contains("refused") && out.contains("553"), "{out}");
    let got = relay.wait_delivered(2);
    let utf8 = got
        .iter()
        .find(|m| m.contains("用户@例子.test"))
        .expect("the SMTPUTF8 message");
    assert!(utf8.contains("Return-Path: <jörg@exämple.test>"), "{utf8}");
    assert!(utf8.contains("with UTF8SMTP id"), "{utf8}");
    assert!(utf8.ends_with("\nGrüße, 你好, ☃\n"), "{utf8}");
    let eight = got
        .iter()
        .find(|m| m.contains("a@example.test"))
        .expect("the 8-bit message");
    assert!(eight.ends_with("\nGrüße, 你好, ☃\n"), "{eight}");
}

#[test]
fn starttls_then_a_message() {
    let dir = util::TempDir::new("tls");
    let cert = rcgen::generate_simple_self_signed(vec!["relay.test".into()]).unwrap();
    let (cert_path, key_path) = (dir.0.join("cert.pem"), dir.0.join("key.pem"));
    std::fs::write(&cert_path, cert.cert.pem()).unwrap();
    util::write_private(&key_path, cert.signing_key.serialize_pem().as_bytes());
    let relay = Relay::start(
        "tls",
        &format!(
            "[tls]\ncert = \"{}\"\nkey = \"{}\"\n",
            cert_path.display(),
            key_path.display()
        ),
    );
    // The certificate is verified against itself as the CA; the host name
    // is not checked (the script connects to an address, not relay.test).
    let script = r#"
import smtplib, ssl, sys
port, ca = int(sys.argv[1]), sys.argv[2]
ctx = ssl.create_default_context(cafile=ca)
ctx.check_hostname = False
with smtplib.SMTP("127.0.0.1", port, local_hostname="client.test") as s:
    s.ehlo()
    assert s.has_extn("starttls"), s.esmtp_features
    s.starttls(context=ctx)
    s.ehlo()
    assert not s.has_extn("starttls"), "STARTTLS offered again under TLS"
    print(s.sock.version())
    s.sendmail("s@example.test", ["a@example.test"], b"Subject: tls\r\n\r\nsecret\r\n")
print("sent")
"#;
    let out = python(
        script,
        &[
            &relay.addr.port().to_string(),
            &cert_path.display().to_string(),
        ],
    );
    assert!(out.contains("TLSv1.3") || out.contains("TLSv1.2"), "{out}");
    assert!(out.ends_with("sent\n"), "{out}");
    let m = &relay.wait_delivered(1)[0];
    assert!(m.contains("with ESMTPS id"), "{m}");
    assert!(m.ends_with("\nsecret\n"), "{m}");
    // The log says the session used TLS, and which.
    let log = relay.wait_log("tls=yes", 1);
    assert!(
        log.contains("TLS connection established from [127.0.0.1]") && log.contains("with cipher"),
        "{log}"
    );
}
