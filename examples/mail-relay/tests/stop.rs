//! Graceful stop and restart: SIGTERM with sessions in flight (the idle one
//! gets 421 at once, new clients are refused, the one mid-transaction
//! finishes and its message is spooled, not delivered (no delivery starts
//! after the signal), one that dawdles past the deadline gets 421, exit
//! status 0); at start the spool is rescanned (acknowledged messages
//! delivered, deferred ones keep their state, half-written files removed,
//! unreadable ones set aside); bad configuration is a clear error.

mod util;

use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

use util::{read_rest, relay_to, Relay, Sink, TempDir};

#[test]
fn sigterm_lets_sessions_in_flight_finish() {
    let mut relay = Relay::start("sigterm", "stop_deadline = \"3s\"\n");
    // Mid-transaction, in the data.
    let mut busy = relay.client();
    busy.open_data("s@example.test", &["a@example.test"]);
    busy.send_raw(b"Subject: in flight\r\n\r\nfirst half\r\n");
    // Mid-transaction, and it will not finish.
    let mut slow = relay.client();
    slow.cmd("EHLO client.test", 250);
    slow.cmd("MAIL FROM:<s@example.test>", 250);
    // Between transactions.
    let mut idle = relay.client();
    idle.cmd("EHLO client.test", 250);

    let t0 = Instant::now();
    relay.terminate();
    let text = idle.expect(421);
    assert!(
        text.starts_with("4.3.2 ") && text.contains("shutting down"),
        "{text}"
    );
    assert_eq!(read_rest(&mut idle), "");
    // The listener is closed: no new sessions.
    assert!(
        TcpStream::connect(relay.addr).is_err(),
        "a new client was accepted after SIGTERM"
    );

    busy.send_raw(b"second half\r\n");
    busy.cmd(".", 250);
    // After its transaction the session is not offered another.
    busy.send("MAIL FROM:<s@example.test>");
    assert!(busy.expect(421).starts_with("4.3.2 "));

    // The dawdler is cut at the deadline.
    let text = slow.expect(421);
    assert!(text.starts_with("4.3.2 "), "{text}");
    assert!(
        t0.elapsed() >= Duration::from_secs(3),
        "cut before the deadline"
    );

    let status = relay.wait_exit();
    assert!(status.success(), "exit status {status:?}\n{}", relay.log());
    assert!(relay.log().contains("signal 15: stopping"));
    // Acknowledged after the signal: spooled, left for the next start.
    assert_eq!(util::count(&relay.maildir_new()), 0, "{}", relay.log());
    assert_eq!(util::count(&relay.spool_queue()), 1);
    let again = Relay::start_in(&relay.dir, "");
    let got = again.wait_delivered(1);
    assert!(
        got[0].ends_with("\nfirst half\nsecond half\n"),
        "{}",
        got[0]
    );
}

#[test]
fn a_second_signal_cuts_the_deadline_short() {
    let mut relay = Relay::start("sigterm-twice", "stop_deadline = \"60s\"\n");
    let mut busy = relay.client();
    busy.open_data("s@example.test", &["a@example.test"]);
    let mut idle = relay.client();
    idle.cmd("EHLO client.test", 250);
    relay.terminate();
    // The idle session's 421 shows the first signal was taken (two
    // signals sent at once could merge into one).
    idle.expect(421);
    relay.terminate();
    let text = busy.expect(421);
    assert!(text.starts_with("4.3.2 "), "{text}");
    assert!(relay.wait_exit().success());
    assert!(relay.log().contains("second signal"));
}

#[test]
fn sigterm_lets_a_delivery_in_flight_finish() {
    let tmp = TempDir::new("stop-deliver");
    // The upstream answers DATA after a second.
    let sink = Sink::start(&tmp.0, &["-p", "-w", "1"]);
    let mut relay = Relay::start_in(&tmp.0, &relay_to(&sink.addr(), "stop_deadline = \"20s\"\n"));
    relay.client().message(
        "s@example.test",
        &["a@example.test"],
        "Subject: x\r\n\r\ny\r\n",
    );
    relay.wait_log("debug: connected to 127.0.0.1", 1);
    relay.terminate();
    assert!(relay.wait_exit().success(), "{}", relay.log());
    let log = relay.log();
    assert!(log.contains("status=sent"), "{log}");
    assert_eq!(util::count(&relay.spool_queue()), 0, "{log}");
    assert_eq!(sink.counters(), (1, 1, 1), "delivered, then QUIT");
}

#[test]
fn sigterm_cuts_a_delivery_past_the_deadline() {
    let tmp = TempDir::new("stop-cut");
    // The upstream answers DATA after 30 s.
    let mut stalled = Sink::start(&tmp.0, &["-p", "-w", "30"]);
    let mut relay = Relay::start_in(
        &tmp.0,
        &relay_to(&stalled.addr(), "stop_deadline = \"1s\"\n"),
    );
    relay.client().message(
        "s@example.test",
        &["a@example.test"],
        "Subject: x\r\n\r\ny\r\n",
    );
    relay.wait_log("debug: connected to 127.0.0.1", 1);
    let t0 = Instant::now();
    relay.terminate();
    assert!(relay.wait_exit().success(), "{}", relay.log());
    assert!(
        t0.elapsed() >= Duration::from_secs(1),
        "cut before the deadline"
    );
    assert!(
        relay.log().contains("cutting 1 delivery short"),
        "{}",
        relay.log()
    );
    // Still queued, and not as a deferral: the next start sends it at once.
    assert_eq!(util::count(&relay.spool_queue()), 1);
    let q = relay.mailq();
    assert!(
        q.contains("a@example.test") && !q.contains("(attempt"),
        "{q}"
    );
    stalled.stop();
    let sink = Sink::start_on(stalled.port, &tmp.0, &[]);
    let again = Relay::start_in(&tmp.0, &relay_to(&sink.addr(), ""));
    sink.wait_messages(1);
    again.wait_spool_empty();
}

#[test]
fn sigterm_when_idle_exits_at_once() {
    let mut relay = Relay::start("sigterm-idle", "");
    let t0 = Instant::now();
    relay.terminate();
    assert!(relay.wait_exit().success());
    assert!(t0.elapsed() < util::LIMIT);
}

#[test]
fn restart_rescans_the_spool() {
    let tmp = TempDir::new("rescan");
    let dir = &tmp.0;
    let mut relay = Relay::start_in(
        dir,
        "[queue]\nminimal_backoff_time = \"1h\"\nmaximal_backoff_time = \"1h\"\n",
    );
    // Delivery will fail: a file stands where the Maildir's new/ was.
    let new = relay.maildir_new();
    std::fs::rename(&new, dir.join("new.away")).unwrap();
    std::fs::write(&new, "not a directory").unwrap();
    let mut c = relay.client();
    let queued = c.message(
        "s@example.test",
        &["a@example.test"],
        "Subject: kept\r\n\r\nkept\r\n",
    );
    let id = queued.rsplit(' ').next().unwrap().to_owned();
    let t0 = Instant::now();
    while !relay.log().contains("status=deferred") {
        assert!(t0.elapsed() < util::LIMIT, "{}", relay.log());
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(relay.spool_queue().join(&id).exists());
    relay.wait_deferral_journaled(&id);
    relay.kill();

    // What a crash mid-write leaves, and a file that is not a message.
    std::fs::write(
        dir.join("spool/tmp/HALFWRITTEN"),
        "mail-relay spool 1\nid HALF",
    )
    .unwrap();
    std::fs::write(dir.join("spool/queue/00BAD"), "garbage").unwrap();
    std::fs::remove_file(&new).unwrap();
    std::fs::rename(dir.join("new.away"), &new).unwrap();

    let relay = Relay::start_in(dir, "");
    // A restart retries what waited at once (its backoff had 59 minutes
    // to go), keeping its attempt count.
    let got = relay.wait_delivered(1);
    let log = relay.log();
    assert!(
        log.contains("1 deferred message due now: a restart retries what waited"),
        "{log}"
    );
    assert_eq!(got.len(), 1);
    assert!(got[0].ends_with("\nkept\n"), "{}", got[0]);
    assert!(got[0].contains(&format!("id {id}")));
    assert_eq!(
        util::count(&dir.join("spool/tmp")),
        0,
        "half-written file removed"
    );
    assert!(
        dir.join("spool/corrupt/00BAD").exists(),
        "unreadable file set aside"
    );
    let log = relay.log();
    assert!(log.contains("removed 1 half-written file from"), "{log}");
    assert!(
        log.contains("00BAD: unreadable queue file moved to corrupt/"),
        "{log}"
    );
}

#[test]
fn bad_configuration_is_a_clear_error() {
    let tmp = TempDir::new("badconf");
    let run = |toml: &str, args: &[&str]| {
        let path = tmp.0.join("bad.toml");
        std::fs::write(&path, toml).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_mail-relay"))
            .arg("--config")
            .arg(&path)
            .args(args)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, err) = run("listen = \"127.0.0.1:0\"\nmax_sesions = 3\n", &[]);
    assert_eq!(code, Some(2));
    assert!(
        err.contains("max_sesions") && err.contains("unknown field"),
        "{err}"
    );
    let (code, err) = run("[timeouts]\ndata_block = \"soon\"\n", &[]);
    assert_eq!(code, Some(2));
    assert!(err.contains("data_block"), "{err}");
    let (code, err) = run("max_recipients = 0\n", &[]);
    assert_eq!(code, Some(2));
    assert!(err.contains("max_recipients: must be at least 1"), "{err}");
    let (code, err) = run("", &["--timeout", "dat_init=1s"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("unknown timeout class"), "{err}");
    let (code, err) = run("", &["--mynetworks", "127.0.0.1/40"]);
    assert_eq!(code, Some(2));
    assert!(
        err.contains("--mynetworks") && err.contains("0..=32"),
        "{err}"
    );

    let help = Command::new(env!("CARGO_BIN_EXE_mail-relay"))
        .arg("--help")
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    for flag in [
        "--config",
        "--listen",
        "--spool-dir",
        "--maildir",
        "--mynetworks",
        "--timeout",
        "--tls-cert",
    ] {
        assert!(help.contains(flag), "--help lacks {flag}:\n{help}");
    }
}
