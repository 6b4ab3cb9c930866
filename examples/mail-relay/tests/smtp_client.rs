//! The SMTP client's conversation, seen from a scripted upstream (a real
//! socket in a test thread that records every line): the envelope is
//! pipelined (the server answers nothing until it has read DATA, so a
//! client waiting for MAIL's reply would hang), a reused connection gets
//! RSET before the next message, SIZE is declared, a message over the
//! server's SIZE is returned without being offered, a cached connection
//! gets QUIT at the relay's stop, and opportunistic TLS whose handshake
//! fails is tried again in plain text.

mod util;

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use util::{relay_to, Relay, TempDir, LIMIT};

/// What the scripted server read, line by line (data lines as `data: ...`).
type Transcript = Arc<Mutex<Vec<String>>>;

/// A script for a connection.
type First = Box<dyn FnOnce(TcpStream, &Transcript) + Send>;

/// A scripted upstream: one transaction server, after an optional script
/// for the first connection.
struct Fake {
    addr: String,
    seen: Transcript,
    thread: Option<JoinHandle<()>>,
}

impl Fake {
    /// Serves one connection with `ehlo` as the EHLO reply's lines (after
    /// the first), then transactions until QUIT or EOF.
    fn start(ehlo: &'static [&'static str]) -> Fake {
        Fake::spawn(ehlo, None)
    }

    /// The same, after `first` has had the first connection.
    fn start_after(
        ehlo: &'static [&'static str],
        first: impl FnOnce(TcpStream, &Transcript) + Send + 'static,
    ) -> Fake {
        Fake::spawn(ehlo, Some(Box::new(first)))
    }

    fn spawn(ehlo: &'static [&'static str], first: Option<First>) -> Fake {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let seen: Transcript = Arc::default();
        let log = seen.clone();
        let thread = std::thread::spawn(move || {
            let mut first = first;
            loop {
                let (s, _) = l.accept().unwrap();
                s.set_read_timeout(Some(LIMIT)).unwrap();
                match first.take() {
                    Some(f) => f(s, &log),
                    None => return serve(s, ehlo, &log),
                }
            }
        });
        Fake {
            addr,
            seen,
            thread: Some(thread),
        }
    }

    fn transcript(&mut self) -> Vec<String> {
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
        // An empty line is the connection's end.
        let mut t = self.seen.lock().unwrap().clone();
        t.retain(|l| !l.is_empty());
        t
    }
}

fn serve(s: TcpStream, ehlo: &[&str], log: &Transcript) {
    let mut w = s.try_clone().unwrap();
    let mut r = BufReader::new(s);
    let mut line = || {
        let mut l = String::new();
        r.read_line(&mut l).unwrap();
        let l = l.trim_end_matches("\r\n").to_owned();
        log.lock().unwrap().push(l.clone());
        l
    };
    w.write_all(b"220 fake ESMTP\r\n").unwrap();
    assert!(line().starts_with("EHLO "));
    let mut reply = String::from("250-fake\r\n");
    for e in ehlo {
        reply.push_str(&format!("250-{e}\r\n"));
    }
    reply.push_str("250 \r\n"); // smtp-sink's empty last line
    w.write_all(reply.as_bytes()).unwrap();
    let mut queued = 0;
    loop {
        // A group: every command up to DATA before any reply.
        let mut replies = String::new();
        loop {
            let cmd = line();
            match cmd.split(' ').next().unwrap() {
                "QUIT" | "" => return,
                "RSET" | "MAIL" | "RCPT" => replies.push_str("250 2.0.0 Ok\r\n"),
                "DATA" => {
                    replies.push_str("354 go ahead\r\n");
                    break;
                }
                other => panic!("unexpected command {other:?}"),
            }
        }
        w.write_all(replies.as_bytes()).unwrap();
        loop {
            let d = line();
            if d == "." {
                break;
            }
            log.lock()
                .unwrap()
                .last_mut()
                .unwrap()
                .insert_str(0, "data: ");
        }
        queued += 1;
        w.write_all(format!("250 2.0.0 Ok: queued as Q{queued}\r\n").as_bytes())
            .unwrap();
    }
}

#[test]
fn pipelined_envelope_rset_on_reuse_quit_at_stop() {
    let tmp = TempDir::new("client-pipe");
    let mut fake = Fake::start(&["PIPELINING", "SIZE 100000", "8BITMIME"]);
    let mut relay = Relay::start_in(
        &tmp.0,
        &relay_to(&fake.addr, "[smtp]\nconnection_idle_time_limit = \"1h\"\n"),
    );
    let mut c = relay.client();
    // Stuffed by this client, unstuffed in the spool, stuffed again.
    c.message(
        "s@example.test",
        &["a@example.test"],
        "Subject: one\r\n\r\n..dot\r\n",
    );
    relay.wait_log("status=sent (250 2.0.0 Ok: queued as Q1)", 1);
    c.message(
        "s@example.test",
        &["b@example.test", "c@example.test"],
        "x\r\n",
    );
    relay.wait_log("status=sent (250 2.0.0 Ok: queued as Q2)", 2);
    relay.terminate();
    assert!(relay.wait_exit().success());
    let t = fake.transcript();
    let cmds: Vec<&str> = t
        .iter()
        .filter(|l| !l.starts_with("data: "))
        .map(String::as_str)
        .collect();
    let size = |i: usize| {
        let data: usize = t
            .split(|l| l.starts_with("MAIL"))
            .nth(i)
            .unwrap()
            .iter()
            .filter_map(|l| l.strip_prefix("data: "))
            .map(|l| l.len() + 2)
            .sum();
        data
    };
    assert_eq!(
        cmds,
        [
            "EHLO relay.test",
            &format!("MAIL FROM:<s@example.test> SIZE={}", size(1) - 1),
            "RCPT TO:<a@example.test>",
            "DATA",
            ".",
            "RSET",
            &format!("MAIL FROM:<s@example.test> SIZE={}", size(2)),
            "RCPT TO:<b@example.test>",
            "RCPT TO:<c@example.test>",
            "DATA",
            ".",
            "QUIT",
        ],
        "{t:#?}"
    );
    // The data went out dot-stuffed.
    assert!(t.contains(&"data: ..dot".to_owned()), "{t:#?}");
}

#[test]
fn over_the_servers_size_is_returned_unsent() {
    let tmp = TempDir::new("client-size");
    let mut fake = Fake::start(&["PIPELINING", "SIZE 100"]);
    let relay = Relay::start_in(
        &tmp.0,
        &format!(
            "local_domains = [\"local.test\"]\n{}",
            relay_to(&fake.addr, "")
        ),
    );
    let big = format!("Subject: big\r\n\r\n{}\r\n", "x".repeat(200));
    relay
        .client()
        .message("s@local.test", &["a@example.test"], &big);
    let log = relay.wait_log("status=bounced", 1);
    assert!(
        log.contains("dsn=5.3.4, status=bounced (message size ")
            && log.contains("exceeds size limit 100 of server 127.0.0.1[127.0.0.1]"),
        "{log}"
    );
    let t0 = std::time::Instant::now();
    while util::count(&relay.maildir_new()) == 0 {
        assert!(t0.elapsed() < LIMIT, "no bounce:\n{}", relay.log());
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(relay.delivered()[0].contains("Status: 5.3.4\n"));
    drop(relay);
    assert_eq!(fake.transcript(), ["EHLO relay.test"], "never offered");
}

#[test]
fn opportunistic_tls_that_fails_is_retried_in_plain_text() {
    let tmp = TempDir::new("client-tls-fallback");
    // The first connection offers STARTTLS, accepts it, then answers the
    // handshake with garbage.
    let mut fake = Fake::start_after(&["PIPELINING"], |s, log| {
        let mut w = s.try_clone().unwrap();
        let mut r = BufReader::new(s);
        let mut line = String::new();
        w.write_all(b"220 fake ESMTP\r\n").unwrap();
        r.read_line(&mut line).unwrap();
        w.write_all(b"250-fake\r\n250 STARTTLS\r\n").unwrap();
        line.clear();
        r.read_line(&mut line).unwrap();
        log.lock().unwrap().push(line.trim_end().to_owned());
        w.write_all(b"220 go ahead\r\nthis is not TLS\r\n").unwrap();
    });
    let relay = Relay::start_in(&tmp.0, &relay_to(&fake.addr, ""));
    relay.client().message(
        "s@example.test",
        &["a@example.test"],
        "Subject: x\r\n\r\ny\r\n",
    );
    let log = relay.wait_log("status=sent", 1);
    assert!(
        log.contains("TLS handshake with 127.0.0.1[127.0.0.1]"),
        "{log}"
    );
    assert!(log.contains("again without TLS"), "{log}");
    drop(relay);
    let t = fake.transcript();
    assert_eq!(
        t[..3],
        ["STARTTLS", "EHLO relay.test", "MAIL FROM:<s@example.test>"],
        "{t:#?}"
    );
}
