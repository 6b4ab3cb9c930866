//! DKIM signing, checked by an independent verifier: every message the
//! relay signs (rsa-sha256 with a PKCS#8 and a PKCS#1 key, ed25519-sha256)
//! is verified by Python's dkimpy, given the public key records directly
//! (its `dnsfunc`). Keys are made with openssl. A key that is missing or
//! unreadable stops the relay at start; only mail from trusted sources is
//! signed; a key rotated in place signs from the next message after
//! SIGHUP.

mod util;

use std::path::Path;
use std::process::{Command, Stdio};

use util::{relay_to, require, sent_content, Relay, Sink, TempDir};

/// Runs `sh -c script`, which must succeed; returns its stdout.
#[track_caller]
fn sh(script: &str) -> String {
    let out = Command::new("sh").args(["-c", script]).output().unwrap();
    assert!(
        out.status.success(),
        "{script}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// Makes a private key in `path` (`kind`: `rsa`, `rsa-pkcs1`, `ed25519`)
/// and returns the `p=` value of its DNS record.
fn make_key(kind: &str, path: &Path) -> String {
    let p = path.display();
    match kind {
        "rsa" => sh(&format!(
            "openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out {p} 2>/dev/null"
        )),
        "rsa-pkcs1" => sh(&format!(
            "openssl genrsa -traditional -out {p} 2048 2>/dev/null"
        )),
        _ => sh(&format!("openssl genpkey -algorithm ed25519 -out {p}")),
    };
    if kind == "ed25519" {
        // RFC 8463: the raw 32-byte key, the end of the SubjectPublicKeyInfo.
        sh(&format!(
            "openssl pkey -in {p} -pubout -outform DER | tail -c 32 | openssl base64 -A"
        ))
    } else {
        sh(&format!(
            "openssl pkey -in {p} -pubout -outform DER | openssl base64 -A"
        ))
    }
}

/// A Python 3 that has dkimpy: `python3`, else Debian's `/usr/bin/python3`
/// (python3-dkim); fails naming the package when there is none.
fn python_with_dkim() -> String {
    require("python3", "python3");
    for py in ["python3", "/usr/bin/python3"] {
        let ok = Command::new(py)
            .args(["-c", "import dkim"])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if ok {
            return py.to_owned();
        }
    }
    panic!(
        "this test needs Python's dkimpy (Debian package python3-dkim, or pip install dkimpy); \
         `bash scripts/test.sh` installs it"
    );
}

/// dkimpy's verdict on `message`, with `records` (name, TXT) as its DNS.
const VERIFY: &str = r#"
import sys, dkim
path, records = sys.argv[1], dict(a.split("=", 1) for a in sys.argv[2:])
def dnsfunc(name, timeout=5):
    if isinstance(name, bytes):
        name = name.decode()
    return records.get(name.rstrip(".")).encode()
msg = open(path, "rb").read()
d = dkim.DKIM(msg)
try:
    ok = d.verify(dnsfunc=dnsfunc)
except Exception as e:
    print("fail", repr(e))
    sys.exit(0)
print("pass" if ok else "fail", d.domain.decode() if d.domain else "-")
"#;

#[test]
fn signed_mail_verifies_with_dkimpy() {
    require("openssl", "openssl");
    let py = python_with_dkim();
    let tmp = TempDir::new("dkim");
    let mut records = Vec::new();
    let mut config = String::new();
    for (domain, kind) in [
        ("rsa.test", "rsa"),
        ("pkcs1.test", "rsa-pkcs1"),
        ("ed.test", "ed25519"),
    ] {
        let key = tmp.0.join(format!("{domain}.pem"));
        let p = make_key(kind, &key);
        let k = if kind == "ed25519" { "ed25519" } else { "rsa" };
        records.push(format!("sel1._domainkey.{domain}=v=DKIM1; k={k}; p={p}"));
        config.push_str(&format!(
            "[dkim.\"{domain}\"]\nselector = \"sel1\"\nkey_file = \"{}\"\n",
            key.display()
        ));
    }
    let sink = Sink::start(&tmp.0, &[]);
    let relay = Relay::start_in(&tmp.0, &relay_to(&sink.addr(), &config));
    let bodies = [
        // Folded headers, odd spacing, trailing blanks and empty lines:
        // what relaxed canonicalisation is for.
        (
            "a@rsa.test",
            "From: A <a@rsa.test>\r\nTo: x@dest.test\r\nSubject:  folded\r\n\tsubject  line \r\nDate: Wed, 25 Nov 2026 12:00:00 +0000\r\nMessage-ID: <1@rsa.test>\r\n\r\nhello   \r\n.dot line\r\n\r\n\r\n",
        ),
        (
            "b@pkcs1.test",
            "From: b@PKCS1.test\r\nSubject: pkcs1\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\ncaf\u{e9}\r\n",
        ),
        (
            "c@ed.test",
            "From: \"C, Ed\" <c@ed.test>\r\nSubject: ed25519\r\nReply-To: r@ed.test\r\n\r\nline one\r\n  line two\r\n",
        ),
        ("d@unsigned.test", "From: d@unsigned.test\r\nSubject: none\r\n\r\nx\r\n"),
    ];
    let mut c = relay.client();
    c.cmd("EHLO client.test", 250);
    for (from, body) in bodies {
        c.message(from, &["x@dest.test"], body);
    }
    c.cmd("QUIT", 221);
    let dumps = sink.wait_messages(bodies.len());
    let mut verdicts = Vec::new();
    for (i, dump) in dumps.iter().enumerate() {
        let sent = sent_content(dump).replace('\n', "\r\n");
        if sent.contains("From: d@unsigned.test") {
            assert!(!sent.contains("DKIM-Signature:"), "{sent}");
            continue;
        }
        assert!(sent.starts_with("DKIM-Signature: "), "{sent}");
        assert!(sent.contains("c=relaxed/relaxed"), "{sent}");
        let file = tmp.0.join(format!("signed-{i}.eml"));
        std::fs::write(&file, &sent).unwrap();
        let mut args = vec![file.display().to_string()];
        args.extend(records.iter().cloned());
        let out = Command::new(&py)
            .arg("-c")
            .arg(VERIFY)
            .args(&args)
            .output()
            .unwrap();
        let verdict = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        assert!(
            verdict.starts_with("pass"),
            "dkimpy: {verdict}\n{}\n{sent}",
            String::from_utf8_lossy(&out.stderr)
        );
        let algo = if sent.contains("a=ed25519-sha256") {
            "ed25519"
        } else {
            "rsa"
        };
        verdicts.push(format!("{verdict} {algo}"));
    }
    verdicts.sort();
    assert_eq!(
        verdicts,
        [
            "pass ed.test ed25519",
            "pass pkcs1.test rsa",
            "pass rsa.test rsa"
        ]
    );
}

#[test]
fn missing_or_bad_key_stops_the_relay_at_start() {
    let tmp = TempDir::new("dkim-bad");
    let junk = tmp.0.join("junk.pem");
    util::write_private(
        &junk,
        b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
    );
    for (key, want) in [
        (tmp.0.join("missing.pem"), "No such file"),
        (junk, "junk.pem"),
    ] {
        let config = tmp.0.join("relay.toml");
        std::fs::write(
            &config,
            format!(
                "listen = \"127.0.0.1:0\"\nspool_dir = \"{}\"\nmaildir = \"{}\"\n{}\
                 [dkim.\"example.test\"]\nselector = \"s\"\nkey_file = \"{}\"\n",
                tmp.0.join("spool").display(),
                tmp.0.join("maildir").display(),
                util::root_setting(""),
                key.display()
            ),
        )
        .unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_mail-relay"))
            .arg("--config")
            .arg(&config)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "started with a bad key: {err}");
        assert!(
            err.contains("dkim.\"example.test\".key_file") && err.contains(want),
            "{err}"
        );
    }
}

/// dkimpy's verdict on `sent` (CRLF text) with `records` as its DNS.
fn verify(py: &str, dir: &Path, name: &str, sent: &str, records: &[String]) -> String {
    let file = dir.join(name);
    std::fs::write(&file, sent).unwrap();
    let mut args = vec![file.display().to_string()];
    args.extend(records.iter().cloned());
    let out = Command::new(py)
        .arg("-c")
        .arg(VERIFY)
        .args(&args)
        .output()
        .unwrap();
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout).trim(),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Sends a message from `127.0.0.2` (Python's smtplib, which can choose
/// its source address) to `relay`.
fn send_from_127_0_0_2(relay: &Relay, from: &str, to: &str, body: &str) {
    let script = r#"
import smtplib, sys
s = smtplib.SMTP(source_address=("127.0.0.2", 0))
s.connect("127.0.0.1", int(sys.argv[1]))
s.sendmail(sys.argv[2], [sys.argv[3]], sys.argv[4].encode())
s.quit()
"#;
    util::python(script, &[&relay.addr.port().to_string(), from, to, body]);
}

#[test]
fn only_mail_from_trusted_sources_is_signed() {
    require("openssl", "openssl");
    let py = python_with_dkim();
    let tmp = TempDir::new("dkim-trust");
    let key = tmp.0.join("sign.pem");
    let p = make_key("ed25519", &key);
    let records = [format!(
        "sel1._domainkey.sign.test=v=DKIM1; k=ed25519; p={p}"
    )];
    let sink = Sink::start(&tmp.0, &[]);
    // Only 127.0.0.1 is trusted; dest.test is a relay domain, so the
    // outsider at 127.0.0.2 may send there.
    let config = format!(
        "mynetworks = [\"127.0.0.1/32\"]\nrelay_domains = [\"dest.test\"]\n\
         [dkim.\"sign.test\"]\nselector = \"sel1\"\nkey_file = \"{}\"\n",
        key.display()
    );
    let relay = Relay::start_in(&tmp.0, &relay_to(&sink.addr(), &config));
    // A stranger claims our signing domain.
    send_from_127_0_0_2(
        &relay,
        "x@outside.test",
        "r@dest.test",
        "From: CEO <ceo@sign.test>\r\nSubject: outsider\r\n\r\nwire the money\r\n",
    );
    // A trusted client, the same From:.
    relay.client().message(
        "ceo@sign.test",
        &["r@dest.test"],
        "From: CEO <ceo@sign.test>\r\nSubject: insider\r\n\r\nhello\r\n",
    );
    let dumps = sink.wait_messages(2);
    let (mut outsider, mut insider) = (None, None);
    for d in &dumps {
        let sent = sent_content(d).replace('\n', "\r\n");
        if sent.contains("Subject: outsider") {
            outsider = Some(sent);
        } else {
            insider = Some(sent);
        }
    }
    let outsider = outsider.expect("the outsider's message");
    assert!(
        !outsider.contains("DKIM-Signature:"),
        "an outsider's mail was signed:\n{outsider}"
    );
    let insider = insider.expect("the trusted client's message");
    let verdict = verify(&py, &tmp.0, "insider.eml", &insider, &records);
    assert!(
        verdict.starts_with("pass sign.test"),
        "{verdict}\n{insider}"
    );
}

#[test]
fn a_rotated_key_signs_the_next_message_after_sighup() {
    require("openssl", "openssl");
    let py = python_with_dkim();
    let tmp = TempDir::new("dkim-rotate");
    let key = tmp.0.join("key.pem");
    let old = make_key("rsa", &key);
    let sink = Sink::start(&tmp.0, &[]);
    let config = format!(
        "[dkim.\"rot.test\"]\nselector = \"sel1\"\nkey_file = \"{}\"\n",
        key.display()
    );
    let relay = Relay::start_in(&tmp.0, &relay_to(&sink.addr(), &config));
    let send = |subject: &str| {
        relay.client().message(
            "a@rot.test",
            &["x@dest.test"],
            &format!("From: a@rot.test\r\nSubject: {subject}\r\n\r\nbody\r\n"),
        );
    };
    let record = |p: &str| vec![format!("sel1._domainkey.rot.test=v=DKIM1; k=rsa; p={p}")];
    send("before");
    let first = sent_content(&sink.wait_messages(1)[0]).replace('\n', "\r\n");
    let verdict = verify(&py, &tmp.0, "before.eml", &first, &record(&old));
    assert!(verdict.starts_with("pass"), "{verdict}");
    // The key file is replaced (as a rotation does, by rename) and the
    // relay told: the configuration itself is unchanged.
    let new_key = tmp.0.join("key.pem.new");
    let new = make_key("rsa", &new_key);
    std::fs::rename(&new_key, &key).unwrap();
    relay.hangup();
    relay.wait_log(
        "DKIM keys read again; signing for rot.test (selector sel1)",
        1,
    );
    send("after");
    let dumps = sink.wait_messages(2);
    let after = dumps
        .iter()
        .map(|d| sent_content(d).replace('\n', "\r\n"))
        .find(|s| s.contains("Subject: after"))
        .unwrap();
    let verdict = verify(&py, &tmp.0, "after.eml", &after, &record(&new));
    assert!(
        verdict.starts_with("pass"),
        "not signed with the new key: {verdict}\n{after}"
    );
    let verdict = verify(&py, &tmp.0, "after-old.eml", &after, &record(&old));
    assert!(verdict.starts_with("fail"), "{verdict}");
}

#[test]
fn submitted_mail_is_signed_though_no_network_is_trusted() {
    require("openssl", "openssl");
    let py = python_with_dkim();
    let tmp = TempDir::new("dkim-submission");
    let key = tmp.0.join("sign.pem");
    let p = make_key("ed25519", &key);
    let records = [format!(
        "sel1._domainkey.sign.test=v=DKIM1; k=ed25519; p={p}"
    )];
    let ca = util::tls::TestCa::new(&tmp.0, &["127.0.0.1"]);
    let users = tmp.0.join("users");
    util::users::write_users(
        &users,
        &[util::users::user_line("ceo", &["ceo@sign.test"], "pw 1")],
    );
    let sink = Sink::start(&tmp.0, &[]);
    // No client is trusted by its address: only a login makes mail ours.
    let config = format!(
        "mynetworks = []\n{}[submission]\nlisten_tls = \"127.0.0.1:0\"\nusers_file = \"{}\"\n\
         [dkim.\"sign.test\"]\nselector = \"sel1\"\nkey_file = \"{}\"\n",
        ca.tls_table(),
        users.display(),
        key.display()
    );
    let relay = Relay::start_in(&tmp.0, &relay_to(&sink.addr(), &config));
    let port = relay
        .banner
        .split("; submission on ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|a| a.parse::<std::net::SocketAddr>().ok())
        .expect("the submission port in the banner")
        .port();
    let script = r#"
import smtplib, ssl, sys
port, mta, ca = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
msg = b"From: CEO <ceo@sign.test>\r\nSubject: submitted\r\n\r\nhello\r\n"
# The MTA listener: not trusted, and dest.test is no domain of ours.
try:
    smtplib.SMTP("127.0.0.1", mta).sendmail("ceo@sign.test", ["r@dest.test"], msg)
    print("relayed for a stranger")
except smtplib.SMTPRecipientsRefused as e:
    print("mta:", e.recipients["r@dest.test"][0])
c = smtplib.SMTP_SSL("127.0.0.1", port, context=ssl.create_default_context(cafile=ca))
c.login("ceo", "pw 1")
c.sendmail("ceo@sign.test", ["r@dest.test"], msg)
c.quit()
print("sent")
"#;
    let out = util::python(
        script,
        &[
            &port.to_string(),
            &relay.addr.port().to_string(),
            &ca.ca.display().to_string(),
        ],
    );
    assert!(out.contains("mta: 554") && out.ends_with("sent\n"), "{out}");
    let dump = &sink.wait_messages(1)[0];
    let sent = sent_content(dump).replace('\n', "\r\n");
    assert!(sent.starts_with("DKIM-Signature: "), "{sent}");
    assert!(sent.contains("with ESMTPSA id"), "{sent}");
    let verdict = verify(&py, &tmp.0, "submitted.eml", &sent, &records);
    assert!(verdict.starts_with("pass sign.test"), "{verdict}\n{sent}");
}
