//! Bounded memory in DATA: a message is streamed into the spool through a
//! bounded per-session buffer, so hundreds of sessions each deep into a
//! large DATA keep the relay's RSS small; an abandoned message, or one cut
//! by a crash, leaves nothing behind that is ever delivered.

mod util;

use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use util::{count, Client, Relay, TempDir, LIMIT};

/// About `n` octets of message text: whole 1000-octet lines (CRLF each).
fn text(n: usize) -> Vec<u8> {
    format!("{}\r\n", "m".repeat(998))
        .repeat(n / 1000)
        .into_bytes()
}

#[track_caller]
fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !cond() {
        assert!(t0.elapsed() < LIMIT, "never: {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The relay's resident set, in octets.
fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS");
    kb * 1024
}

#[test]
fn a_large_message_streams_through_the_spool() {
    let relay = Relay::start("stream", "");
    let tmp = relay.dir.join("spool/tmp");
    let mut c = relay.client();
    c.open_data("s@example.test", &["a@example.test"]);
    c.send_raw(b"Subject: big\r\n\r\n");
    let body = text(3 << 20);
    c.send_raw(&body[..1_000_000]);
    // Mid-DATA, the content is already in a file of its own.
    wait_for("a spill file in tmp/", || count(&tmp) == 1);
    c.send_raw(&body[1_000_000..]);
    c.cmd(".", 250);
    assert_eq!(count(&tmp), 0);
    let got = relay.wait_delivered(1);
    let m = got[0].replace('\n', "\r\n");
    assert!(
        m.ends_with(std::str::from_utf8(&body).unwrap()),
        "content differs"
    );
    assert!(m.contains("Subject: big\r\n"));
}

#[test]
fn an_abandoned_message_leaves_nothing_behind() {
    let relay = Relay::start("abandon", "");
    let tmp = relay.dir.join("spool/tmp");
    let mut c = relay.client();
    c.open_data("s@example.test", &["a@example.test"]);
    c.send_raw(&text(1 << 20));
    wait_for("a spill file in tmp/", || count(&tmp) == 1);
    drop(c);
    wait_for("the spill file removed", || count(&tmp) == 0);
    relay.wait_log("lost connection after DATA", 1);
    assert_eq!(count(&relay.spool_queue()), 0);
    // Refused (too big) is abandoned too.
    let relay = Relay::start("abandon-big", "max_message_size = 500000\n");
    let tmp = relay.dir.join("spool/tmp");
    let mut c = relay.client();
    c.open_data("s@example.test", &["a@example.test"]);
    c.send_raw(&text(1 << 20));
    c.cmd(".", 552);
    assert_eq!(count(&tmp), 0);
    assert_eq!(count(&relay.spool_queue()), 0);
}

#[test]
fn a_crash_mid_data_delivers_nothing() {
    let dir = TempDir::new("crash-data");
    let mut relay = Relay::start_in(&dir.0, "");
    let tmp = dir.0.join("spool/tmp");
    let mut c = relay.client();
    c.open_data("s@example.test", &["a@example.test"]);
    c.send_raw(&text(1 << 20));
    wait_for("a spill file in tmp/", || count(&tmp) == 1);
    relay.kill();
    drop(c);
    let relay = Relay::start_in(&dir.0, "");
    relay.wait_log("removed 1 half-written file from the spool", 1);
    assert_eq!(count(&tmp), 0);
    assert_eq!(count(&relay.spool_queue()), 0);
    // The relay works on; only this message is ever delivered.
    let mut c = relay.client();
    c.message(
        "s@example.test",
        &["a@example.test"],
        "Subject: after\r\n\r\nx\r\n",
    );
    let got = relay.wait_delivered(1);
    assert_eq!(got.len(), 1);
    assert!(got[0].contains("Subject: after"));
}

#[test]
fn hundreds_of_sessions_deep_in_data_stay_small() {
    const SESSIONS: usize = 400;
    const EACH: usize = 1 << 20;
    let relay = Relay::start(
        "rss",
        "max_sessions = 1000\nmax_sessions_per_client = 1000\n",
    );
    let tmp = relay.dir.join("spool/tmp");
    let chunk = text(EACH);
    let mut open = Vec::with_capacity(SESSIONS);
    for _ in 0..SESSIONS {
        let mut c = Client::connect(relay.addr);
        c.expect(220);
        c.open_data("s@example.test", &["a@example.test"]);
        c.w.write_all(&chunk).unwrap();
        open.push(c);
    }
    wait_for("every session's data in the spool", || {
        count(&tmp) == SESSIONS
    });
    // Every byte sent is in: the sessions have read it all.
    let mut last = 0;
    wait_for("the data written", || {
        let total: u64 = std::fs::read_dir(&tmp)
            .unwrap()
            .map(|e| e.unwrap().metadata().unwrap().len())
            .sum();
        let settled = total == last;
        last = total;
        settled && total >= (SESSIONS * (EACH - (64 << 10))) as u64
    });
    let rss = rss(relay.child.id());
    eprintln!(
        "{SESSIONS} sessions with {EACH} octets each in DATA: RSS {} MB",
        rss >> 20
    );
    assert!(
        rss < 200 << 20,
        "RSS {} MB with {SESSIONS} sessions of {} MB each in DATA",
        rss >> 20,
        EACH >> 20
    );
    // All abandoned: nothing left.
    drop(open);
    wait_for("every spill file removed", || count(&tmp) == 0);
    assert_eq!(count(&relay.spool_queue()), 0);
    let _ = TcpStream::connect(relay.addr);
}

#[test]
fn a_streamed_message_acknowledged_survives_a_crash() {
    let dir = TempDir::new("crash-streamed");
    // Delivery into the Maildir fails until the restart (a file stands
    // where its new/ would be), so the message is only in the spool.
    let mut relay = Relay::start_in(&dir.0, "");
    let new = relay.maildir_new();
    std::fs::rename(&new, dir.0.join("new.away")).unwrap();
    std::fs::write(&new, "not a directory").unwrap();
    let mut c = relay.client();
    c.open_data("s@example.test", &["a@example.test"]);
    let body = text(2_000_000);
    c.send_raw(b"Subject: streamed\r\n\r\n");
    c.send_raw(&body);
    c.cmd(".", 250);
    relay.wait_log("status=deferred", 1);
    relay.kill();
    drop(c);
    std::fs::remove_file(&new).unwrap();
    std::fs::rename(dir.0.join("new.away"), &new).unwrap();
    let relay = Relay::start_in(&dir.0, "");
    let got = relay.wait_delivered(1);
    assert_eq!(got.len(), 1);
    let m = got[0].replace('\n', "\r\n");
    assert!(
        m.ends_with(std::str::from_utf8(&body).unwrap()),
        "content differs"
    );
    assert_eq!(count(&dir.0.join("spool/corrupt")), 0);
}
