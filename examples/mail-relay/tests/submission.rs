//! The submission service against real clients over real TLS (a test CA
//! made with rcgen): Python's smtplib (STARTTLS on the submission port,
//! SMTP_SSL on the TLS port, PLAIN and LOGIN) and swaks (`--tls`,
//! `-tlsc`, `--auth`). Users come from a file made by `mail-relay passwd`.
//! No AUTH before TLS, no mail before AUTH (whatever `mynetworks` says), a
//! user's own sender addresses only, failed logins slowed and locked out
//! by address, the users file read again at SIGHUP, and never a password
//! in the log.

mod util;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use util::tls::TestCa;
use util::users::{passwd, user_line, write_users};
use util::{assert_contains_all, python, require, swaks, swaks_output, Relay, TempDir};

const BIN: &str = env!("CARGO_BIN_EXE_mail-relay");

/// alice's password (a space in it, as people's have).
const ALICE_PW: &str = "correct horse 7";

/// A relay with both submission listeners, its TLS from a test CA, alice
/// (alice@example.test and all of @alice.example) as its user.
struct Service {
    relay: Relay,
    ca: TestCa,
    users: PathBuf,
    /// The STARTTLS submission port.
    submission: SocketAddr,
    /// The implicit-TLS port.
    tls_port: SocketAddr,
    _tmp: TempDir,
}

impl Service {
    /// `submission` goes into the `[submission]` table.
    fn start(tag: &str, submission: &str) -> Service {
        let tmp = TempDir::new(tag);
        let ca = TestCa::new(&tmp.0, &["relay.test", "127.0.0.1"]);
        let users = tmp.0.join("users");
        write_users(
            &users,
            &[user_line(
                "alice",
                &["alice@example.test", "@alice.example"],
                ALICE_PW,
            )],
        );
        // Failed logins wait 50 ms unless the test says otherwise.
        let delay = if submission.contains("auth_failure_delay") {
            ""
        } else {
            "auth_failure_delay = \"50ms\"\n"
        };
        let extra = format!(
            "{}[submission]\nlisten = \"127.0.0.1:0\"\nlisten_tls = \"127.0.0.1:0\"\n\
             users_file = \"{}\"\n{delay}{submission}\n",
            ca.tls_table(),
            users.display()
        );
        let relay = Relay::start_in(&tmp.0, &extra);
        let port = |how: &str| -> SocketAddr {
            relay
                .banner
                .split("; submission on ")
                .find_map(|s| {
                    s.strip_suffix(&format!(" ({how})"))
                        .or_else(|| s.split_once(&format!(" ({how});")).map(|(a, _)| a))
                })
                .and_then(|a| a.parse().ok())
                .unwrap_or_else(|| panic!("no {how} submission port in {:?}", relay.banner))
        };
        let (submission, tls_port) = (port("STARTTLS"), port("TLS"));
        Service {
            relay,
            ca,
            users,
            submission,
            tls_port,
            _tmp: tmp,
        }
    }

    /// Runs a Python script with the submission port, the TLS port and the
    /// CA file as its first arguments, then `args`.
    fn python(&self, script: &str, args: &[&str]) -> String {
        let mut all = vec![
            self.submission.port().to_string(),
            self.tls_port.port().to_string(),
            self.ca.ca.display().to_string(),
        ];
        all.extend(args.iter().map(|a| a.to_string()));
        let all: Vec<&str> = all.iter().map(String::as_str).collect();
        python(&format!("{PRELUDE}{script}"), &all)
    }
}

/// What every script starts with: its ports, a TLS context that trusts
/// only the test CA (and checks the name: the certificate is for
/// 127.0.0.1), and `b64`.
const PRELUDE: &str = r#"
import base64, smtplib, ssl, sys, time
sub, tls_port, ca = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
args = sys.argv[4:]
ctx = ssl.create_default_context(cafile=ca)
def b64(s):
    return base64.b64encode(s.encode()).decode()
"#;

/// The log never holds the password, as sent or as its base64.
#[track_caller]
fn assert_no_password(log: &str, user: &str, password: &str) {
    use base64ct::{Base64, Encoding};
    let plain = Base64::encode_string(format!("\0{user}\0{password}").as_bytes());
    let login = Base64::encode_string(password.as_bytes());
    for secret in [password, plain.as_str(), login.as_str()] {
        assert!(!log.contains(secret), "{secret:?} in the log:\n{log}");
    }
}

#[test]
fn starttls_then_auth_then_only_the_users_addresses() {
    let s = Service::start("sub-587", "");
    let out = s.python(
        r#"
pw = args[0]
c = smtplib.SMTP("127.0.0.1", sub, local_hostname="laptop.home.test")
c.ehlo()
print("auth before tls:", c.has_extn("auth"))
print("mail before tls:", *c.mail("alice@example.test"))
print("auth before tls:", *c.docmd("AUTH", "PLAIN " + b64("\0alice\0" + pw)))
c.starttls(context=ctx)
c.ehlo()
print("auth:", c.esmtp_features.get("auth"))
print("mail before auth:", *c.mail("alice@example.test"))
try:
    c.login("alice", "wrong password")
except smtplib.SMTPAuthenticationError as e:
    print("wrong:", e.smtp_code, e.smtp_error.decode())
print("login:", *c.login("alice", pw))
print("not hers:", *c.mail("mallory@example.test"))
c.rset()
c.sendmail("alice@example.test", ["bob@elsewhere.test"], b"Subject: one\r\n\r\nfrom alice\r\n")
c.sendmail("Sales@Alice.Example", ["bob@elsewhere.test"], b"Subject: two\r\n\r\nher domain\r\n")
c.quit()
print("sent")
"#,
        &[ALICE_PW],
    );
    assert_contains_all(
        &out,
        &[
            "auth before tls: False",
            "mail before tls: 530 b'5.7.0 Must issue a STARTTLS command first'",
            "auth before tls: 538 b'5.7.11 Encryption required",
            "auth:  PLAIN LOGIN",
            "mail before auth: 530 b'5.7.0 Authentication required'",
            "wrong: 535 5.7.8 Error: authentication failed",
            "login: 235 b'2.7.0 Authentication successful'",
            "not hers: 553 b'5.7.1 <mallory@example.test>: Sender address rejected: not owned by user alice'",
            "sent",
        ],
    );
    let got = s.relay.wait_delivered(2);
    for m in &got {
        assert!(
            m.contains("Received: by relay.test (mail-relay) with ESMTPSA id "),
            "{m}"
        );
        assert!(
            !m.contains("127.0.0.1") && !m.contains("laptop.home.test"),
            "the client's address and name stay out of the header:\n{m}"
        );
    }
    let log = s.relay.log();
    assert_contains_all(
        &log,
        &[
            "sasl_method=PLAIN, sasl_username=alice, from=<alice@example.test>",
            "login failed: sasl_method=PLAIN, sasl_username=alice",
        ],
    );
    assert_no_password(&log, "alice", ALICE_PW);
    assert_no_password(&log, "alice", "wrong password");
}

#[test]
fn implicit_tls_and_login() {
    let s = Service::start("sub-465", "received_client_address = true\n");
    let out = s.python(
        r#"
c = smtplib.SMTP_SSL("127.0.0.1", tls_port, context=ctx, local_hostname="laptop.home.test")
c.ehlo()
print(c.sock.version(), "starttls:", c.has_extn("starttls"), "auth:", c.esmtp_features.get("auth"))
c.user, c.password = "alice", args[0]
print("login:", *c.auth("LOGIN", c.auth_login, initial_response_ok=False))
c.sendmail("alice@example.test", ["bob@elsewhere.test"], b"Subject: tls\r\n\r\nover 465\r\n")
c.quit()
print("sent")
"#,
        &[ALICE_PW],
    );
    assert!(out.contains("starttls: False auth:  PLAIN LOGIN"), "{out}");
    assert!(out.contains("TLSv1.3") || out.contains("TLSv1.2"), "{out}");
    assert!(out.contains("login: 235"), "{out}");
    let m = &s.relay.wait_delivered(1)[0];
    // Asked for: the client's name and address, and ESMTPSA.
    assert!(
        m.contains("Received: from laptop.home.test ([127.0.0.1])\n\tby relay.test (mail-relay) with ESMTPSA id "),
        "{m}"
    );
    let log = s.relay.log();
    assert!(
        log.contains("login: sasl_method=LOGIN, sasl_username=alice"),
        "{log}"
    );
    assert_no_password(&log, "alice", ALICE_PW);
}

#[test]
fn swaks_with_starttls_and_with_implicit_tls() {
    require("swaks", "swaks");
    require_perl_module("Net::SSLeay", "libnet-ssleay-perl");
    let s = Service::start("sub-swaks", "");
    // alice's message, from her laptop.
    let alices = [
        "--auth-user",
        "alice",
        "--auth-password",
        ALICE_PW,
        "--from",
        "alice@example.test",
        "--to",
        "bob@elsewhere.test",
        "--ehlo",
        "laptop.home.test",
    ];
    let sent = [
        "235 2.7.0 Authentication successful",
        "250 2.0.0 Ok: queued as",
    ];
    let a = swaks(
        s.submission,
        &[&["--tls", "--auth", "LOGIN"], &alices[..]].concat(),
    );
    assert_contains_all(&a, &sent);
    let b = swaks(
        s.tls_port,
        &[&["-tlsc", "--auth", "PLAIN"], &alices[..]].concat(),
    );
    assert_contains_all(&b, &sent);
    // Without TLS, swaks finds no AUTH to use: no mail.
    let (ok, text) = swaks_output(s.submission, &[&["--auth", "PLAIN"], &alices[..]].concat());
    assert!(!ok, "{text}");
    assert!(
        text.contains("Host did not advertise authentication"),
        "{text}"
    );
    let got = s.relay.wait_delivered(2);
    assert!(got.iter().all(|m| m.contains("with ESMTPSA id")), "{got:?}");
    assert_no_password(&s.relay.log(), "alice", ALICE_PW);
}

/// Fails the test, naming the package, if Perl lacks `module`.
#[track_caller]
fn require_perl_module(module: &str, package: &str) {
    let ok = Command::new("perl")
        .args([&format!("-M{module}"), "-e1"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "this test needs Perl's {module} (Debian package {package}) for swaks's TLS; \
         `bash scripts/test.sh` installs it"
    );
}

#[test]
fn failed_logins_are_slowed_then_locked_out_by_address() {
    let s = Service::start(
        "sub-anvil",
        "auth_failure_limit = 3\nauth_failure_delay = \"300ms\"\nauth_lockout = \"3s\"\n",
    );
    let out = s.python(
        r#"
pw = args[0]
c = smtplib.SMTP_SSL("127.0.0.1", tls_port, context=ctx)
c.ehlo()
for i in range(3):
    t = time.monotonic()
    code, msg = c.docmd("AUTH", "PLAIN " + b64("\0alice\0guess %d" % i))
    print("try", i, code, msg.decode(), "slow" if time.monotonic() - t >= 0.3 else "fast")
try:
    c.noop()
    print("still open")
except smtplib.SMTPServerDisconnected:
    print("disconnected")
t0 = time.monotonic()
for port, how in ((tls_port, "tls"), (sub, "starttls")):
    try:
        if how == "tls":
            smtplib.SMTP_SSL("127.0.0.1", port, context=ctx)
        else:
            smtplib.SMTP("127.0.0.1", port)
        print("again", how, "welcome")
    except smtplib.SMTPConnectError as e:
        print("again", how, e.smtp_code, e.smtp_error.decode())
# Another address is not locked out.
o = smtplib.SMTP_SSL("127.0.0.1", tls_port, context=ctx, source_address=("127.0.0.2", 0))
print("other address:", *o.login("alice", pw))
o.quit()
# Once the lockout has passed, the address may log in again.
time.sleep(max(0, 3.2 - (time.monotonic() - t0)))
c = smtplib.SMTP_SSL("127.0.0.1", tls_port, context=ctx)
print("after the lockout:", *c.login("alice", pw))
c.quit()
"#,
        &[ALICE_PW],
    );
    assert_contains_all(
        &out,
        &[
            "try 0 535 5.7.8 Error: authentication failed slow",
            "try 1 535 5.7.8 Error: authentication failed slow",
            "try 2 421 4.7.0 relay.test Error: too many failed logins; try again later slow",
            "disconnected",
            "again tls 421 4.7.0 relay.test Error: too many failed logins from your address",
            "again starttls 421 4.7.0 relay.test Error: too many failed logins from your address",
            "other address: 235",
            "after the lockout: 235",
        ],
    );
    let log = s.relay.log();
    assert_contains_all(
        &log,
        &[
            "login failed: sasl_method=PLAIN, sasl_username=alice (2 in a row; 3 lock the address out)",
            "3 failures in a row; disconnected, and the address is refused for 3s",
            "refusing [127.0.0.1]:",
        ],
    );
    for i in 0..3 {
        assert_no_password(&log, "alice", &format!("guess {i}"));
    }
}

#[test]
fn a_lockout_ends_the_guessing_on_sessions_already_open() {
    let s = Service::start(
        "sub-anvil-open",
        "auth_failure_limit = 2\nauth_lockout = \"1m\"\n",
    );
    let out = s.python(
        r#"
pw = args[0]
# Opened before the lockout, each on its own connection.
waiting = [smtplib.SMTP_SSL("127.0.0.1", tls_port, context=ctx) for _ in range(2)]
for w in waiting:
    w.ehlo()
c = smtplib.SMTP_SSL("127.0.0.1", tls_port, context=ctx)
c.ehlo()
for i in range(2):
    print("guess", i, c.docmd("AUTH", "PLAIN " + b64("\0alice\0guess %d" % i))[0])
print("open, right password:", *waiting[0].docmd("AUTH", "PLAIN " + b64("\0alice\0" + pw)))
print("open, a guess:", *waiting[1].docmd("AUTH", "PLAIN " + b64("\0alice\0guess 2")))
"#,
        &[ALICE_PW],
    );
    assert_contains_all(
        &out,
        &[
            "guess 0 535",
            "guess 1 421",
            "open, right password: 421 b'4.7.0 relay.test Error: too many failed logins from your address",
            "open, a guess: 421 b'4.7.0 relay.test Error: too many failed logins from your address",
        ],
    );
    let log = s.relay.log();
    assert!(!log.contains("login: sasl_method"), "{log}");
    assert_no_password(&log, "alice", ALICE_PW);
}

#[test]
fn unknown_users_fail_alike_and_are_not_named() {
    let s = Service::start("sub-unknown", "");
    let out = s.python(
        r#"
c = smtplib.SMTP_SSL("127.0.0.1", tls_port, context=ctx)
c.ehlo()
print("unknown:", *c.docmd("AUTH", "PLAIN " + b64("\0my secret\0x")))
print("cancel:", *c.docmd("AUTH", "LOGIN"))
print(*c.docmd("*"))
print("garbage:", *c.docmd("AUTH", "PLAIN not-base64!"))
print("cram:", *c.docmd("AUTH", "CRAM-MD5"))
"#,
        &[],
    );
    assert_contains_all(
        &out,
        &[
            "unknown: 535 b'5.7.8 Error: authentication failed'",
            "cancel: 334 b'VXNlcm5hbWU6'",
            "501 b'5.0.0 Authentication cancelled'",
            "garbage: 501 b'5.5.2 Error: not base64'",
            "cram: 504 b'5.5.4 Unrecognized authentication type'",
        ],
    );
    let log = s.relay.log();
    assert!(
        log.contains("login failed: sasl_method=PLAIN, an unknown user"),
        "{log}"
    );
    assert!(
        !log.contains("my secret"),
        "a name that is no user's is not logged:\n{log}"
    );
}

#[test]
fn the_mta_port_offers_no_auth() {
    let s = Service::start("sub-mta", "");
    let out = s.python(
        r#"
c = smtplib.SMTP("127.0.0.1", int(args[0]))
c.starttls(context=ctx)
c.ehlo()
print("auth:", c.has_extn("auth"))
print(*c.docmd("AUTH", "PLAIN " + b64("\0alice\0x")))
"#,
        &[&s.relay.addr.port().to_string()],
    );
    assert!(out.contains("auth: False"), "{out}");
    assert!(
        out.contains("503 b'5.5.1 Error: authentication not enabled'"),
        "{out}"
    );
}

#[test]
fn the_users_file_is_read_again_at_sighup() {
    let s = Service::start("sub-reload", "");
    let bob = user_line("bob@example.test", &[], "bobs password");
    let login = |user: &str, pw: &str| {
        s.python(
            r#"
c = smtplib.SMTP_SSL("127.0.0.1", tls_port, context=ctx)
try:
    print(c.login(args[0], args[1])[0])
except smtplib.SMTPAuthenticationError as e:
    print(e.smtp_code)
"#,
            &[user, pw],
        )
    };
    assert_eq!(login("bob@example.test", "bobs password"), "535\n");
    let alice = std::fs::read_to_string(&s.users).unwrap();
    write_users(&s.users, &[alice.clone(), bob.clone()]);
    s.relay.hangup();
    let log = s.relay.wait_log("submission users read again: 2 users", 1);
    assert!(log.contains("reload at SIGHUP"), "{log}");
    assert_eq!(login("bob@example.test", "bobs password"), "235\n");
    // A file that does not load keeps the users in force.
    write_users(&s.users, &["bob:not-a-hash:bob@example.test\n".to_owned()]);
    s.relay.hangup();
    let log = s.relay.wait_log("the users in force stay", 1);
    assert!(log.contains("line 1: not a password hash"), "{log}");
    assert_eq!(login("bob@example.test", "bobs password"), "235\n");
    assert_eq!(login("alice", ALICE_PW), "235\n");
}

#[test]
fn passwd_makes_lines_and_the_relay_checks_the_file() {
    let (ok, out) = passwd("alice", &[], "pw");
    assert!(ok && out.ends_with(":alice@*\n"), "{out}");
    let (ok, out) = passwd("alice@example.test", &[], "");
    assert!(!ok && out.contains("an empty password"), "{out}");
    let line = user_line("alice@example.test", &[], "pw");
    assert!(
        line.starts_with("alice@example.test:$argon2id$v=19$m=19456,t=2,p=1$")
            && line.ends_with(":alice@example.test\n"),
        "{line}"
    );
    // A users file others may read stops the start, naming it.
    let tmp = TempDir::new("sub-mode");
    let ca = TestCa::new(&tmp.0, &["127.0.0.1"]);
    let users = tmp.0.join("users");
    write_users(&users, &[line]);
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&users, std::fs::Permissions::from_mode(0o644)).unwrap();
    let config = tmp.0.join("relay.toml");
    std::fs::write(
        &config,
        format!(
            "listen = \"127.0.0.1:0\"\nrun_as_root = true\nspool_dir = \"{}\"\nmaildir = \"{}\"\n{}\
             [submission]\nlisten = \"127.0.0.1:0\"\nusers_file = \"{}\"\n",
            tmp.0.join("spool").display(),
            tmp.0.join("maildir").display(),
            ca.tls_table(),
            users.display()
        ),
    )
    .unwrap();
    let run =
        |what: &str| util::fails_to_start(Command::new(BIN).arg("--config").arg(&config), what);
    let err = run("a users file others may read");
    assert!(
        err.contains(&format!("users file {}", users.display())) && err.contains("chmod 600"),
        "{err}"
    );
    // A submission listener without [tls] is refused by the configuration.
    std::fs::write(
        &config,
        format!(
            "[submission]\nlisten = \"127.0.0.1:0\"\nusers_file = \"{}\"\n",
            users.display()
        ),
    )
    .unwrap();
    let err = run("a submission listener and no [tls]");
    assert!(
        err.contains("submission: needs [tls] cert and key"),
        "{err}"
    );
}

#[test]
fn config_and_help_show_the_submission_settings() {
    let out = Command::new(BIN)
        .args(["--submission-listen", "127.0.0.1:587", "--users-file", "/u"])
        .args(["--tls-cert", "/c", "--tls-key", "/k", "config"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert_contains_all(
        &text,
        &[
            "[submission]\nlisten = \"127.0.0.1:587\"\nusers_file = \"/u\"\nauth_failure_limit = 5\n",
            "auth_lockout = \"10m\"\n",
            "auth_failure_delay = \"1s\"\n",
            "received_client_address = false\n",
        ],
    );
    let help = Command::new(BIN).arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    for want in [
        "--submission-listen <ADDR>",
        "--submission-listen-tls <ADDR>",
        "--users-file <PATH>",
        "passwd",
    ] {
        assert!(help.contains(want), "{want} not in --help:\n{help}");
    }
}

#[test]
fn a_password_check_does_not_hold_the_other_sessions() {
    let s = Service::start("sub-offload", "auth_failure_delay = \"0ms\"\n");
    // A user whose hash asks for 256 MiB and 8 passes: seconds of CPU to
    // check (the output is made up: no password matches it).
    let slow = "slow:$argon2id$v=19$m=262144,t=8,p=1$c2xvd3NhbHRzbG93c2FsdA$\
                AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA:slow@example.test\n";
    let alice = std::fs::read_to_string(&s.users).unwrap();
    write_users(&s.users, &[alice, slow.to_owned()]);
    s.relay.hangup();
    s.relay.wait_log("submission users read again: 2 users", 1);
    let out = s.python(
        r#"
a = smtplib.SMTP_SSL("127.0.0.1", tls_port, context=ctx)
a.ehlo()
b = smtplib.SMTP("127.0.0.1", int(args[0]))
b.ehlo()
a.send("AUTH PLAIN " + b64("\0slow\0guess") + "\r\n")
time.sleep(0.2)
t = time.monotonic()
print("noop:", b.noop()[0])
tb = time.monotonic() - t
print("auth:", a.getreply()[0])
ta = time.monotonic() - t
print("auth after noop by %.3f s" % (ta - tb))
print("gap" if ta - tb >= 0.3 else "no gap")
"#,
        &[&s.relay.addr.port().to_string()],
    );
    // The NOOP was answered while the check ran on the blocking pool: the
    // login's verdict came well after it.
    assert!(
        out.contains("noop: 250") && out.contains("auth: 535"),
        "{out}"
    );
    assert!(out.contains("\ngap\n"), "{out}");
}
