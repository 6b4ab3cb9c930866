//! The crash tests: the real binary under load from concurrent clients is
//! killed with SIGKILL at random moments and restarted on the same spool.
//!
//! * Into the Maildir, 20 kills: every message that got its 250 is in the
//!   Maildir exactly once and intact; a message whose 250 was in flight at
//!   the kill is there at most once; nothing else is.
//! * To an SMTP upstream (`smtp-sink`), during heavy outbound delivery:
//!   every message that got its 250 arrives at least once (an upstream's
//!   250 lost in a crash means once more, as with every MTA), intact.

mod util;

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use util::{relay_to, sent_content, Client, Relay, Sink, TempDir};

const KILLS: usize = 20;
const CLIENTS: usize = 8;

/// What a client knows about a message it sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    /// Got its 250: must be delivered exactly once.
    Acked,
    /// The final dot was sent, no reply came: at most once.
    InFlight,
}

/// The body of message `token`: ~1 KiB, recognisable, with a dot-stuffed
/// line.
fn body(token: &str) -> String {
    let mut b = format!("X-Token: {token}\r\nSubject: crash test\r\n\r\n");
    for i in 0..14 {
        b.push_str(&format!(
            "{token} line {i:02} {}\r\n",
            "abcdefghij".repeat(5)
        ));
    }
    b.push_str("..a line that began with a dot\r\n");
    b
}

/// What the Maildir copy of `token`'s message must end with.
fn delivered_tail(token: &str) -> String {
    body(token)
        .replace("\r\n", "\n")
        .replace("\n..a line", "\n.a line")
}

fn random() -> u64 {
    std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish()
}

/// Sends messages until the connection breaks; records each one's fate.
fn load(addr: std::net::SocketAddr, name: String, fates: Arc<Mutex<HashMap<String, Fate>>>) {
    let mut seq = 0;
    'connections: loop {
        let Ok(s) = std::net::TcpStream::connect(addr) else {
            return;
        };
        let _ = s.set_read_timeout(Some(util::LIMIT));
        let mut c = Client::from_stream(s);
        let step = |c: &mut Client, line: &str, code: u16| -> bool {
            if c.w.write_all(format!("{line}\r\n").as_bytes()).is_err() {
                return false;
            }
            matches!(c.reply(), Ok((got, _)) if got == code)
        };
        if !matches!(c.reply(), Ok((220, _))) || !step(&mut c, "EHLO load.test", 250) {
            return;
        }
        for _ in 0..5 {
            let token = format!("{name}-{seq}");
            seq += 1;
            if !step(&mut c, "MAIL FROM:<load@example.test>", 250)
                || !step(&mut c, "RCPT TO:<a@example.test>", 250)
                || !step(&mut c, "DATA", 354)
                || c.w.write_all(body(&token).as_bytes()).is_err()
            {
                return;
            }
            fates.lock().unwrap().insert(token.clone(), Fate::InFlight);
            if !step(&mut c, ".", 250) {
                return;
            }
            fates.lock().unwrap().insert(token, Fate::Acked);
        }
        if !step(&mut c, "QUIT", 221) {
            return;
        }
        continue 'connections;
    }
}

#[test]
fn sigkill_under_load_loses_nothing_acknowledged() {
    let tmp = TempDir::new("crash");
    let dir = &tmp.0;
    let fates = Arc::new(Mutex::new(HashMap::new()));
    let seed = random();
    eprintln!("crash test seed {seed:#x}");
    let mut rng = seed;
    let t0 = Instant::now();
    for round in 0..KILLS {
        let mut relay = Relay::start_with_args(dir, "", &["--log-level", "warn"]);
        let clients: Vec<_> = (0..CLIENTS)
            .map(|i| {
                let (addr, fates) = (relay.addr, fates.clone());
                std::thread::spawn(move || load(addr, format!("r{round}c{i}"), fates))
            })
            .collect();
        // xorshift: a kill 20..300 ms into the round.
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        std::thread::sleep(Duration::from_millis(20 + rng % 280));
        relay.kill();
        for c in clients {
            c.join().unwrap();
        }
    }
    // The last start delivers whatever is left, then stops cleanly.
    let mut relay = Relay::start_in(dir, "");
    let t = Instant::now();
    while util::count(&relay.spool_queue()) > 0 {
        assert!(
            t.elapsed() < util::LIMIT,
            "spool not drained:\n{}",
            relay.log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    relay.terminate();
    assert!(relay.wait_exit().success());
    assert_eq!(util::count(&dir.join("spool/tmp")), 0);
    assert_eq!(
        util::count(&dir.join("spool/corrupt")),
        0,
        "a queue file was corrupt"
    );

    let fates = fates.lock().unwrap();
    let mut seen: HashMap<String, usize> = HashMap::new();
    for m in util::delivered_in(&relay.maildir_new()) {
        let token = m
            .lines()
            .find_map(|l| l.strip_prefix("X-Token: "))
            .unwrap_or_else(|| panic!("a delivered message without a token:\n{m}"))
            .to_owned();
        assert!(
            m.ends_with(&delivered_tail(&token)),
            "message {token} is corrupt:\n{m}"
        );
        assert!(
            fates.contains_key(&token),
            "{token} was delivered but never sent"
        );
        *seen.entry(token).or_default() += 1;
    }
    let acked = fates.values().filter(|f| **f == Fate::Acked).count();
    for (token, fate) in fates.iter() {
        let n = seen.get(token).copied().unwrap_or(0);
        match fate {
            Fate::Acked => assert_eq!(n, 1, "acknowledged message {token} delivered {n} times"),
            Fate::InFlight => assert!(n <= 1, "in-flight message {token} delivered {n} times"),
        }
    }
    eprintln!(
        "{KILLS} kills in {:?}: {acked} acknowledged, {} in flight at a kill, all delivered once",
        t0.elapsed(),
        fates.len() - acked
    );
    assert!(
        acked > KILLS * 5,
        "too little load to mean anything: {acked} messages"
    );
}

/// Kills during outbound delivery.
const OUTBOUND_KILLS: usize = 6;
/// Clients sending while the relay delivers.
const OUTBOUND_CLIENTS: usize = 16;

#[test]
fn sigkill_during_outbound_delivery_loses_nothing() {
    let tmp = TempDir::new("crash-out");
    let dir = &tmp.0;
    let sink = Sink::start(dir, &[]);
    let config = relay_to(&sink.addr(), "");
    let fates = Arc::new(Mutex::new(HashMap::new()));
    let seed = random();
    eprintln!("outbound crash test seed {seed:#x}");
    let mut rng = seed;
    for round in 0..OUTBOUND_KILLS {
        let mut relay = Relay::start_with_args(dir, &config, &["--log-level", "warn"]);
        let clients: Vec<_> = (0..OUTBOUND_CLIENTS)
            .map(|i| {
                let (addr, fates) = (relay.addr, fates.clone());
                std::thread::spawn(move || load(addr, format!("o{round}c{i}"), fates))
            })
            .collect();
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        std::thread::sleep(Duration::from_millis(150 + rng % 250));
        relay.kill();
        for c in clients {
            c.join().unwrap();
        }
    }
    let mut relay = Relay::start_in(dir, &config);
    relay.wait_spool_empty();
    relay.terminate();
    assert!(relay.wait_exit().success());
    assert_eq!(util::count(&dir.join("spool/corrupt")), 0);

    let fates = fates.lock().unwrap();
    let mut seen: HashMap<String, usize> = HashMap::new();
    for dump in sink.messages() {
        let m = sent_content(&dump);
        let token = m
            .lines()
            .find_map(|l| l.strip_prefix("X-Token: "))
            .unwrap_or_else(|| panic!("a message without a token:\n{dump}"))
            .to_owned();
        assert!(
            m.ends_with(&format!("{}\n", delivered_tail(&token))),
            "message {token} is corrupt:\n{dump}"
        );
        assert!(
            fates.contains_key(&token),
            "{token} arrived but was never sent"
        );
        *seen.entry(token).or_default() += 1;
    }
    let acked: Vec<&String> = fates
        .iter()
        .filter(|(_, f)| **f == Fate::Acked)
        .map(|(t, _)| t)
        .collect();
    for token in &acked {
        assert!(
            seen.contains_key(*token),
            "acknowledged message {token} never arrived"
        );
    }
    let twice = seen.values().filter(|&&n| n > 1).count();
    eprintln!(
        "{OUTBOUND_KILLS} kills: {} acknowledged, all arrived; {twice} arrived more than once",
        acked.len()
    );
    assert!(
        acked.len() > OUTBOUND_KILLS * 5,
        "too little load: {}",
        acked.len()
    );
}
