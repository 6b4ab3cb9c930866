//! The SMTP client against upstreams that lie, written here as scripted
//! servers on real sockets: a 2xx to DATA is no delivery (only 354 lets
//! the content go), an upstream that talks before it is asked gets no
//! transaction, a reply nobody asked for retires the connection before
//! the next message can take it as its own, and what an upstream says
//! reaches `mailq` escaped.

mod util;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use util::{relay_to, Relay, TempDir, LIMIT};

/// What a scripted upstream read, per connection, line by line; `EOF`
/// when the relay closed the connection.
type Transcript = Arc<Mutex<Vec<Vec<String>>>>;

/// One connection to a scripted upstream.
struct Conn {
    r: BufReader<TcpStream>,
    w: TcpStream,
    n: usize,
    seen: Transcript,
}

impl Conn {
    /// Sends raw text.
    fn say(&mut self, text: &str) {
        let _ = self.w.write_all(text.as_bytes());
    }

    /// The next line (without CRLF), recorded; `None` at EOF.
    fn line(&mut self) -> Option<String> {
        let mut l = String::new();
        let got = self.r.read_line(&mut l).unwrap_or(0);
        let l = if got == 0 {
            "EOF".to_owned()
        } else {
            l.trim_end_matches("\r\n").to_owned()
        };
        self.seen.lock().unwrap()[self.n].push(l.clone());
        (got > 0).then_some(l)
    }

    /// Reads the content up to the final dot (not recorded line by line:
    /// `data (N lines)` is).
    fn data(&mut self) {
        let mut n = 0;
        loop {
            let mut l = String::new();
            if self.r.read_line(&mut l).unwrap_or(0) == 0 || l == ".\r\n" {
                break;
            }
            n += 1;
        }
        self.seen.lock().unwrap()[self.n].push(format!("data ({n} lines)"));
    }

    /// Reads and records lines until the relay closes the connection.
    fn drain(&mut self) {
        while self.line().is_some() {}
    }

    /// 220, then the EHLO reply with `keywords`.
    fn hello(&mut self, keywords: &[&str]) {
        self.say("220 hostile.test ESMTP\r\n");
        self.line();
        let mut reply = String::from("250-hostile.test\r\n");
        for k in keywords {
            reply.push_str(&format!("250-{k}\r\n"));
        }
        reply.push_str("250 8BITMIME\r\n");
        self.say(&reply);
    }

    /// One transaction with the replies an honest server gives (RSET,
    /// MAIL and RCPT 250, DATA 354, the dot 250), answering a pipelined
    /// group at once when `pipelining`; `false` at QUIT or EOF.
    fn honest(&mut self, pipelining: bool) -> bool {
        let mut replies = String::new();
        loop {
            let Some(cmd) = self.line() else { return false };
            let reply = match cmd.split(' ').next().unwrap_or("") {
                "QUIT" => return false,
                "DATA" => "354 go ahead\r\n",
                _ => "250 2.0.0 Ok\r\n",
            };
            replies.push_str(reply);
            if !pipelining || cmd == "DATA" {
                self.say(&std::mem::take(&mut replies));
            }
            if cmd == "DATA" {
                break;
            }
        }
        self.data();
        self.say("250 2.0.0 Ok: queued\r\n");
        true
    }
}

/// A scripted upstream: every connection is given to the script with its
/// number (0, 1, ...), each on a thread of its own.
struct Upstream {
    addr: String,
    seen: Transcript,
}

impl Upstream {
    fn start(script: impl Fn(&mut Conn) + Send + Sync + 'static) -> Upstream {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let seen: Transcript = Arc::default();
        let log = seen.clone();
        let script = Arc::new(script);
        std::thread::spawn(move || {
            for (n, s) in l.incoming().enumerate() {
                let Ok(s) = s else { return };
                s.set_read_timeout(Some(LIMIT)).unwrap();
                log.lock().unwrap().push(Vec::new());
                let mut c = Conn {
                    w: s.try_clone().unwrap(),
                    r: BufReader::new(s),
                    n,
                    seen: log.clone(),
                };
                let script = script.clone();
                std::thread::spawn(move || script(&mut c));
            }
        });
        Upstream { addr, seen }
    }

    /// What connection `n` read so far.
    fn conn(&self, n: usize) -> Vec<String> {
        self.seen
            .lock()
            .unwrap()
            .get(n)
            .cloned()
            .unwrap_or_default()
    }

    /// Connections made so far.
    fn conns(&self) -> usize {
        self.seen.lock().unwrap().len()
    }

    /// Waits until connection `n` has read `line`.
    #[track_caller]
    fn wait_for(&self, n: usize, line: &str) -> Vec<String> {
        let t0 = Instant::now();
        loop {
            let seen = self.conn(n);
            if seen.iter().any(|l| l == line) {
                return seen;
            }
            assert!(
                t0.elapsed() < LIMIT,
                "connection {n} never read {line:?}: {seen:#?}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// Retries only when the test says so (`flush`).
const NO_RETRY: &str = "[queue]\nminimal_backoff_time = \"1h\"\nmaximal_backoff_time = \"1h\"\n";

fn send(relay: &Relay, to: &str) {
    relay
        .client()
        .message("s@example.test", &[to], "Subject: x\r\n\r\nbody\r\n");
}

#[test]
fn a_2xx_reply_to_data_is_no_delivery_and_breaks_the_connection() {
    for pipelining in [true, false] {
        let tmp = TempDir::new("hostile-data");
        // The first connection answers DATA with 250 (it never gets the
        // content); the next ones are honest.
        let up = Upstream::start(move |c| {
            let kw: &[&str] = if pipelining { &["PIPELINING"] } else { &[] };
            c.hello(kw);
            if c.n > 0 {
                while c.honest(pipelining) {}
                return;
            }
            let mut replies = String::new();
            while let Some(cmd) = c.line() {
                let data = cmd == "DATA";
                replies.push_str(if data {
                    "250 2.0.0 Ok: queued as LIE\r\n"
                } else {
                    "250 2.0.0 Ok\r\n"
                });
                if !pipelining || data {
                    c.say(&std::mem::take(&mut replies));
                }
                if data {
                    break;
                }
            }
            c.drain();
        });
        let relay = Relay::start_in(&tmp.0, &relay_to(&up.addr, NO_RETRY));
        send(&relay, "a@example.test");
        let log = relay.wait_log("status=deferred", 1);
        assert!(!log.contains("status=sent"), "{log}");
        assert!(
            log.contains("dsn=4.5.0")
                && log.contains("unexpected reply 250 2.0.0 Ok: queued as LIE to DATA"),
            "{log}"
        );
        // The relay closed that connection at once: nothing more was said
        // on it (no content, no RSET for a next message, not even QUIT).
        let first = up.wait_for(0, "EOF");
        let after_data = first.iter().skip_while(|l| *l != "DATA").skip(1);
        assert_eq!(after_data.collect::<Vec<_>>(), ["EOF"], "{first:#?}");
        // The retry goes over a new connection, which delivers it.
        let (ok, out) = relay.command(&["flush"]);
        assert!(ok, "{out}");
        relay.wait_log("status=sent (250 2.0.0 Ok: queued)", 1);
        assert_eq!(up.conns(), 2, "pipelining: {pipelining}");
        assert!(
            up.conn(1).iter().any(|l| l.starts_with("data (")),
            "{:#?}",
            up.conn(1)
        );
    }
}

#[test]
fn an_early_talker_gets_no_transaction() {
    let tmp = TempDir::new("hostile-early");
    // The greeting and five canned 250s in one write, before reading
    // anything: they would line up as the replies to EHLO, MAIL, RCPT,
    // DATA and the dot.
    let up = Upstream::start(|c| {
        c.say("220 early.test ESMTP\r\n250 ok\r\n250 ok\r\n250 ok\r\n250 ok\r\n250 ok\r\n");
        c.drain();
    });
    let relay = Relay::start_in(&tmp.0, &relay_to(&up.addr, NO_RETRY));
    send(&relay, "a@example.test");
    let log = relay.wait_log("status=deferred", 1);
    assert!(!log.contains("status=sent"), "{log}");
    assert!(log.contains("speaks out of turn"), "{log}");
    // Refused before a word about the message: no EHLO even.
    let seen = up.wait_for(0, "EOF");
    assert_eq!(seen, ["EOF"], "{seen:#?}");
}

#[test]
fn a_reply_nobody_asked_for_retires_the_connection() {
    let tmp = TempDir::new("hostile-extra");
    // The first connection answers the first message's dot with two
    // replies; left in the buffer, the second would answer the next
    // message's RSET, and every reply after it would be one off.
    let up = Upstream::start(|c| {
        c.hello(&["PIPELINING"]);
        if c.n == 0 {
            let mut replies = String::new();
            while let Some(cmd) = c.line() {
                replies.push_str(if cmd == "DATA" {
                    "354 go ahead\r\n"
                } else {
                    "250 2.0.0 Ok\r\n"
                });
                if cmd == "DATA" {
                    c.say(&std::mem::take(&mut replies));
                    break;
                }
            }
            c.data();
            c.say("250 2.0.0 Ok: queued as ONE\r\n250 2.0.0 Ok: queued as EXTRA\r\n");
            c.drain();
            return;
        }
        while c.honest(true) {}
    });
    let relay = Relay::start_in(
        &tmp.0,
        &relay_to(
            &up.addr,
            &format!("{NO_RETRY}[smtp]\nconnection_idle_time_limit = \"1h\"\n"),
        ),
    );
    send(&relay, "a@example.test");
    relay.wait_log("status=sent (250 2.0.0 Ok: queued as ONE)", 1);
    let first = up.wait_for(0, "EOF");
    send(&relay, "b@example.test");
    let log = relay.wait_log("status=sent", 2);
    assert!(
        log.contains("to=<b@example.test>") && log.contains("status=sent (250 2.0.0 Ok: queued)"),
        "{log}"
    );
    assert!(!log.contains("EXTRA"), "{log}");
    assert!(!log.contains("status=deferred"), "{log}");
    assert!(!first.contains(&"RSET".to_owned()), "{first:#?}");
    assert_eq!(up.conns(), 2);
}

#[test]
fn an_upstreams_words_reach_mailq_escaped() {
    let tmp = TempDir::new("hostile-mailq");
    // A deferral whose text would clear the operator's screen, ring the
    // bell and overwrite the line.
    let up = Upstream::start(|c| {
        c.hello(&[]);
        while let Some(cmd) = c.line() {
            if cmd.starts_with("RCPT") {
                c.say("450 4.2.0 \x1b[2J\x1b]0;owned\x07busy\rFAKE LINE\r\n");
            } else if cmd == "QUIT" {
                return;
            } else {
                c.say("250 2.0.0 Ok\r\n");
            }
        }
    });
    let door = tmp.0.join("bd");
    let relay = Relay::start_in(
        &tmp.0,
        &format!(
            "backdoor = \"{}\"\n{}",
            door.display(),
            relay_to(&up.addr, NO_RETRY)
        ),
    );
    send(&relay, "a@example.test");
    relay.wait_log("status=deferred", 1);
    // Through the back door: the running relay's view, from memory.
    let q = relay.mailq();
    assert!(relay.log().contains("session #"), "the relay answered");
    assert!(
        !q.contains(['\x1b', '\x07', '\r']),
        "raw control characters in mailq: {q:?}"
    );
    assert!(
        q.contains("450 4.2.0 \\x1b[2J\\x1b]0;owned\\x07busy\\x0dFAKE LINE"),
        "{q}"
    );
    let mut raw = Vec::new();
    let _ = std::fs::File::open(relay.dir.join("relay.log"))
        .unwrap()
        .read_to_end(&mut raw);
    assert!(!raw.contains(&0x1b), "the log is escaped too");
}
