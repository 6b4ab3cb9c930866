//! Bounded memory in DATA: a message is streamed into the spool through a
//! bounded per-session buffer, so hundreds of sessions each deep into a
//! large DATA keep the relay's RSS small; an abandoned message, or one cut
//! by a crash, leaves nothing behind that is ever delivered. And in the
//! queue: messages waiting for (or being sent to) a slow upstream stay on
//! disk, read a chunk at a time as they go out.

mod util;

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use util::{count, relay_to, Client, Relay, TempDir, LIMIT};

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

/// An upstream that takes the envelope, says 354, and then reads nothing:
/// each delivery to it stalls once the socket's buffers are full. Counts
/// the connections that got their 354.
fn stalling_upstream() -> (String, Arc<AtomicUsize>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let in_data = Arc::new(AtomicUsize::new(0));
    let n = in_data.clone();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(s) = s else { return };
            let n = n.clone();
            std::thread::spawn(move || {
                s.set_read_timeout(Some(LIMIT)).unwrap();
                let mut w = s.try_clone().unwrap();
                let mut r = BufReader::new(s);
                let _ = w.write_all(b"220 slow.test ESMTP\r\n");
                let mut line = String::new();
                while r.read_line(&mut line).unwrap_or(0) > 0 {
                    let reply: &[u8] = if line.starts_with("EHLO") {
                        b"250-slow.test\r\n250 8BITMIME\r\n"
                    } else if line.starts_with("DATA") {
                        b"354 go ahead\r\n"
                    } else {
                        b"250 2.0.0 Ok\r\n"
                    };
                    let _ = w.write_all(reply);
                    if line.starts_with("DATA") {
                        n.fetch_add(1, Ordering::SeqCst);
                        // Reads nothing more; holds the connection.
                        std::thread::sleep(LIMIT);
                        return;
                    }
                    line.clear();
                }
            });
        }
    });
    (addr, in_data)
}

#[test]
fn messages_waiting_on_a_slow_upstream_stay_on_disk() {
    const MESSAGES: usize = 40;
    const EACH: usize = 5 << 20;
    let (up, in_data) = stalling_upstream();
    let relay = Relay::start(
        "queue-rss",
        &relay_to(&up, "[smtp]\ndata_xfer_timeout = \"10m\"\n"),
    );
    // Idle: started, nothing sent yet.
    std::thread::sleep(Duration::from_millis(300));
    let idle = rss(relay.child.id());
    let body = text(EACH);
    let mut c = relay.client();
    c.cmd("EHLO client.test", 250);
    for i in 0..MESSAGES {
        c.cmd("MAIL FROM:<s@example.test>", 250);
        c.cmd(&format!("RCPT TO:<r{i}@example.test>"), 250);
        c.cmd("DATA", 354);
        c.send_raw(format!("Subject: {i}\r\n\r\n").as_bytes());
        c.send_raw(&body);
        c.cmd(".", 250);
    }
    // Every message is queued; as many deliveries as the destination
    // allows (20) are stuck in DATA, the others wait their turn.
    relay.wait_log("(queue active)", MESSAGES);
    wait_for("20 deliveries stuck in DATA", || {
        in_data.load(Ordering::SeqCst) >= 20
    });
    // Let the stuck deliveries fill their sockets' buffers.
    std::thread::sleep(Duration::from_millis(500));
    let busy = rss(relay.child.id());
    let grown = busy.saturating_sub(idle);
    eprintln!(
        "{MESSAGES} messages of {} MB queued, 20 of them being sent to an upstream that \
         reads nothing: RSS {} MB, {:.1} MB over idle ({} MB)",
        EACH >> 20,
        busy >> 20,
        grown as f64 / f64::from(1 << 20),
        idle >> 20
    );
    assert!(
        grown < 20 << 20,
        "RSS grew by {} MB with {MESSAGES} messages of {} MB waiting",
        grown >> 20,
        EACH >> 20
    );
    assert_eq!(count(&relay.spool_queue()), MESSAGES);
}
