//! Delivery by MX records (RFC 5321 §5.1, RFC 7505) with real components:
//! dnsmasq serves the zone (net/tests/util/dnsmasq.rs: `mail.test` with MX
//! 10 mx1 = 127.0.0.2 and MX 20 mx2 = 127.0.0.3, `plain.test` with only
//! an A record 127.0.0.4, `null.test` with a null MX, NXDOMAIN for the
//! rest), Postfix's smtp-sink plays the mail exchangers on 127.0.0.2, .3
//! and .4, all on one port (the relay's `[mx] port`). And the MX policy
//! against hostile zones: an MX that is the relay itself, exchangers on
//! private addresses, twenty MX records, a tarpit exchanger.

mod util;

#[path = "../../../net/tests/util/dnsmasq.rs"]
mod dnsmasq;

use std::io::Write;
use std::net::TcpListener;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use dnsmasq::{mail_zone, Dnsmasq};
use util::{Relay, Sink, TempDir, LIMIT};

const MX1: [u8; 4] = [127, 0, 0, 2];
const MX2: [u8; 4] = [127, 0, 0, 3];
const PLAIN: [u8; 4] = [127, 0, 0, 4];

/// The relay's settings for MX delivery: DNS at `dns`, exchangers on
/// `port` (on loopback, so allowed), short timeouts and retries; bounces
/// for the local domain `relay.test` go into the Maildir. Then `extra`
/// TOML.
fn mx_config(dns: u16, port: u16, extra: &str) -> String {
    format!(
        "local_domains = [\"relay.test\"]\n\
         [mx]\nenabled = true\ndns_servers = [\"127.0.0.1:{dns}\"]\ndns_timeout = \"300ms\"\n\
         dns_attempts = 1\nport = {port}\nallow_private_addresses = true\n{extra}\n\
         [queue]\nminimal_backoff_time = \"1h\"\nmaximal_backoff_time = \"1h\"\n\
         [smtp]\nconnect_timeout = \"2s\"\nhelo_timeout = \"5s\"\nconnection_idle_time_limit = \"300ms\"\n"
    )
}

/// Sends one message from `s@relay.test` to `to`.
fn send(relay: &Relay, to: &[&str]) {
    let mut c = relay.client();
    c.cmd("EHLO client.test", 250);
    c.message("s@relay.test", to, "Subject: mx\r\n\r\nhello\r\n");
    c.cmd("QUIT", 221);
}

/// A port free on 127.0.0.2-4 (binding the wildcard checks them all).
fn free_mx_port() -> u16 {
    std::net::TcpListener::bind("0.0.0.0:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn sink(ip: [u8; 4], port: u16, dir: &Path, flags: &[&str]) -> Sink {
    Sink::start_at(ip, port, dir, flags)
}

#[test]
fn primary_mx_down_or_refusing_goes_to_the_secondary() {
    let tmp = TempDir::new("mx-secondary");
    let dns = Dnsmasq::start(&mail_zone(), 60);
    let port = free_mx_port();
    // The primary (MX 10, 127.0.0.2) is down: nothing listens there.
    let secondary = sink(MX2, port, &tmp.0, &[]);
    let plain = sink(PLAIN, port, &tmp.0, &[]);
    let relay = Relay::start_in(&tmp.0, &mx_config(dns.port(), port, ""));
    send(&relay, &["a@mail.test"]);
    let got = secondary.wait_messages(1);
    assert!(got[0].contains("X-Rcpt-Args: <a@mail.test>") || got[0].contains("a@mail.test"));
    let log = relay.wait_log("status=sent", 1);
    assert!(
        log.contains(&format!("mx1.mail.test[127.0.0.2]:{port}: "))
            && log.contains("trying the next mail exchanger"),
        "the primary was tried first:\n{log}"
    );
    assert!(
        log.contains(&format!("relay=mx2.mail.test[127.0.0.3]:{port}")),
        "{log}"
    );

    // The primary answers 421 at greeting: the secondary again.
    let primary = sink(MX1, port, &tmp.0, &["-Q", "CONNECT"]);
    send(&relay, &["b@mail.test"]);
    secondary.wait_messages(2);
    relay.wait_log("status=sent", 2);
    assert!(primary.messages().is_empty());

    // No MX, an A record: the implicit MX.
    send(&relay, &["c@plain.test"]);
    let got = plain.wait_messages(1);
    assert!(got[0].contains("c@plain.test"));
    let log = relay.wait_log("status=sent", 3);
    assert!(
        log.contains(&format!("relay=plain.test[127.0.0.4]:{port}")),
        "{log}"
    );
    // Recipients of two domains in one message: each to its own.
    send(&relay, &["d@plain.test", "e@mail.test"]);
    plain.wait_messages(2);
    secondary.wait_messages(3);
}

#[test]
fn null_mx_and_nxdomain_bounce_at_once() {
    let tmp = TempDir::new("mx-bounce");
    let dns = Dnsmasq::start(&mail_zone(), 60);
    let port = free_mx_port();
    // null.test has an A record too: it must not be used.
    let null_host = sink([127, 0, 0, 5], port, &tmp.0, &[]);
    let relay = Relay::start_in(&tmp.0, &mx_config(dns.port(), port, ""));
    send(&relay, &["a@null.test", "b@gone.test"]);
    let log = relay.wait_log("status=bounced", 2);
    assert!(
        log.contains("to=<a@null.test>")
            && log.contains(
                "dsn=5.1.10, status=bounced (Domain null.test does not accept mail (nullMX))"
            ),
        "{log}"
    );
    assert!(
        log.contains("to=<b@gone.test>") && log.contains("dsn=5.1.2, status=bounced (Host or domain name not found. Name service error for name=gone.test type=MX: Host not found)"),
        "{log}"
    );
    assert!(!log.contains("status=deferred"), "{log}");
    // The sender gets one report naming both.
    let bounces = relay.wait_delivered(1);
    assert!(
        bounces[0].contains("5.1.10") && bounces[0].contains("5.1.2"),
        "{}",
        bounces[0]
    );
    assert!(null_host.messages().is_empty());
}

#[test]
fn dns_silent_defers_visibly_then_delivers_when_it_answers() {
    let tmp = TempDir::new("mx-dns-down");
    // A DNS "server" that takes queries and never answers, on a port the
    // kernel picks (a port found free first could be taken meanwhile by
    // another test's query socket); its TCP side is held too, for the
    // dnsmasq that takes over the port.
    let (silent, tcp) = loop {
        let u = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = u.local_addr().unwrap().port();
        if let Ok(t) = std::net::TcpListener::bind(("127.0.0.1", port)) {
            break (u, t);
        }
    };
    let dns_port = silent.local_addr().unwrap().port();
    let port = free_mx_port();
    let relay = Relay::start_in(&tmp.0, &mx_config(dns_port, port, ""));
    send(&relay, &["a@mail.test"]);
    let log = relay.wait_log("status=deferred", 1);
    assert!(
        log.contains("dsn=4.4.3, status=deferred (Host or domain name not found. Name service error for name=mail.test type=MX: Host not found, try again"),
        "{log}"
    );
    let q = relay.mailq();
    assert!(
        q.contains("a@mail.test") && q.contains("type=MX") && q.contains("try again"),
        "{q}"
    );
    assert!(
        q.contains("timed out"),
        "the reason says the DNS timed out: {q}"
    );

    // DNS answers now; the exchangers are up.
    drop((silent, tcp));
    let _dns = Dnsmasq::start_on(dns_port, &mail_zone(), 60);
    let primary = sink(MX1, port, &tmp.0, &[]);
    let (ok, out) = relay.command(&["flush"]);
    assert!(ok, "{out}");
    primary.wait_messages(1);
    relay.wait_log("status=sent", 1);
    relay.wait_spool_empty();
}

#[test]
fn unreachable_domain_is_suspended_until_flush() {
    let tmp = TempDir::new("mx-dead");
    let dns = Dnsmasq::start(&mail_zone(), 60);
    let port = free_mx_port();
    // Neither exchanger of mail.test listens.
    let relay = Relay::start_in(
        &tmp.0,
        &mx_config(dns.port(), port, "dead_destination_time = \"1h\""),
    );
    send(&relay, &["a@mail.test"]);
    let log = relay.wait_log("status=deferred", 1);
    assert!(
        log.contains("no mail exchanger for mail.test could be reached"),
        "{log}"
    );
    assert!(log.contains("mail.test: delivery suspended for"), "{log}");
    // The next message is deferred without a connection attempt.
    let tries = log.matches("trying the next mail exchanger").count();
    assert_eq!(tries, 2, "{log}");
    send(&relay, &["b@mail.test"]);
    let log = relay.wait_log("status=deferred", 2);
    assert!(
        log.contains(
            "dsn=4.4.1, status=deferred (delivery temporarily suspended: no mail exchanger"
        ),
        "{log}"
    );
    assert_eq!(
        log.matches("trying the next mail exchanger").count(),
        tries,
        "{log}"
    );
    // Other domains are not held up.
    let plain = sink(PLAIN, port, &tmp.0, &[]);
    send(&relay, &["c@plain.test"]);
    plain.wait_messages(1);
    // flush lifts the suspension; the exchangers are back.
    let secondary = sink(MX2, port, &tmp.0, &[]);
    let primary = sink(MX1, port, &tmp.0, &[]);
    let (ok, out) = relay.command(&["flush"]);
    assert!(ok, "{out}");
    primary.wait_messages(2);
    relay.wait_spool_empty();
    assert!(secondary.messages().is_empty());
}

#[test]
fn per_destination_concurrency_and_connection_cache() {
    let tmp = TempDir::new("mx-limit");
    let dns = Dnsmasq::start(&mail_zone(), 60);
    let port = free_mx_port();
    // Each message takes a while at the exchanger (-w: wait before DATA's reply).
    let plain = sink(PLAIN, port, &tmp.0, &["-w", "1"]);
    let relay = Relay::start_in(
        &tmp.0,
        &mx_config(dns.port(), port, "destination_concurrency_limit = 2"),
    );
    let mut c = relay.client();
    c.cmd("EHLO client.test", 250);
    for i in 0..6 {
        c.message(
            "s@relay.test",
            &[&format!("r{i}@plain.test")],
            "Subject: n\r\n\r\nx\r\n",
        );
    }
    c.cmd("QUIT", 221);
    plain.wait_messages(6);
    relay.wait_spool_empty();
    // Wait for the cached connections to close (idle limit 300 ms).
    let t0 = std::time::Instant::now();
    while plain.counters().0 < 2 && t0.elapsed() < util::LIMIT {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    let (sessions, _, messages) = plain.counters();
    assert_eq!(messages, 6);
    assert_eq!(
        sessions,
        2,
        "two connections at once, each reused:\n{}",
        relay.log()
    );
    assert!(relay.log().contains("conn_use=3"), "{}", relay.log());
}

/// Zone options for dnsmasq.
fn zone(options: &[String]) -> Vec<String> {
    options.to_vec()
}

#[test]
fn an_mx_that_is_the_relay_itself_is_a_loop() {
    let tmp = TempDir::new("mx-self");
    let port = free_mx_port();
    // The relay listens on 127.0.0.1.
    let dns = Dnsmasq::start(
        &zone(&[
            "--mx-host=self.test,mx.self.test,10".into(),
            "--host-record=mx.self.test,127.0.0.1".into(),
            // We are the backup: the better exchanger takes the mail.
            "--mx-host=backup.test,mx1.backup.test,10".into(),
            "--mx-host=backup.test,mx.self.test,20".into(),
            "--host-record=mx1.backup.test,127.0.0.2".into(),
            // We are the best: nobody better to hand it to.
            "--mx-host=first.test,mx.self.test,10".into(),
            "--mx-host=first.test,mx1.backup.test,20".into(),
        ]),
        60,
    );
    let better = sink(MX1, port, &tmp.0, &[]);
    let relay = Relay::start_in(&tmp.0, &mx_config(dns.port(), port, ""));
    send(&relay, &["a@self.test", "b@first.test"]);
    let log = relay.wait_log("status=bounced", 2);
    for d in ["self.test", "first.test"] {
        assert!(
            log.contains(&format!(
                "dsn=5.4.6, status=bounced (mail for {d} loops back to myself)"
            )),
            "{log}"
        );
    }
    send(&relay, &["c@backup.test"]);
    better.wait_messages(1);
    relay.wait_log("status=sent", 1);
    // The relay never talked to itself: its only sessions are the test's.
    assert_eq!(
        relay.log().matches("]: connect from").count(),
        2,
        "{}",
        relay.log()
    );
    assert!(better.messages()[0].contains("c@backup.test"));
}

#[test]
fn exchangers_on_private_addresses_are_refused_unless_allowed() {
    let tmp = TempDir::new("mx-private");
    let dns = Dnsmasq::start(&mail_zone(), 60);
    let port = free_mx_port();
    let primary = sink(MX1, port, &tmp.0, &[]);
    let secondary = sink(MX2, port, &tmp.0, &[]);
    // The defaults, but for the DNS server and the port.
    let config = format!(
        "local_domains = [\"relay.test\"]\n[mx]\nenabled = true\n\
         dns_servers = [\"127.0.0.1:{}\"]\nport = {port}\n",
        dns.port()
    );
    let relay = Relay::start_in(&tmp.0, &config);
    send(&relay, &["a@mail.test"]);
    let log = relay.wait_log("status=bounced", 1);
    assert!(
        log.contains("dsn=5.4.4, status=bounced (no usable address for the mail exchangers of mail.test: mx1.mail.test[127.0.0.2]: a loopback address; mx2.mail.test[127.0.0.3]: a loopback address (refused: [mx] allow_private_addresses is off))"),
        "{log}"
    );
    // The bounce comes home; nothing went to the exchangers.
    relay.wait_delivered(1);
    assert!(primary.messages().is_empty() && secondary.messages().is_empty());
    assert_eq!(primary.counters().0 + secondary.counters().0, 0);
}

#[test]
fn at_most_address_limit_addresses_per_attempt() {
    let tmp = TempDir::new("mx-many");
    let port = free_mx_port();
    // Twenty exchangers, none of which answers.
    let mut options = Vec::new();
    for i in 1..=20 {
        options.push(format!("--mx-host=many.test,mx{i}.many.test,{}", 10 * i));
        options.push(format!("--host-record=mx{i}.many.test,127.0.1.{i}"));
    }
    let dns = Dnsmasq::start(&zone(&options), 60);
    let relay = Relay::start_in(&tmp.0, &mx_config(dns.port(), port, ""));
    send(&relay, &["a@many.test"]);
    let log = relay.wait_log("status=deferred", 1);
    let tried: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("trying the next mail exchanger"))
        .collect();
    assert_eq!(tried.len(), 5, "{log}");
    // In preference order: the five best.
    for i in 1..=5 {
        assert!(
            log.contains(&format!("mx{i}.many.test[127.0.1.{i}]:{port}: ")),
            "{log}"
        );
    }
    assert!(!log.contains("mx6.many.test"), "{log}");
}

#[test]
fn a_tarpit_exchanger_is_left_at_the_deliverys_deadline() {
    let tmp = TempDir::new("mx-tarpit");
    let port = free_mx_port();
    let dns = Dnsmasq::start(
        &zone(&[
            "--mx-host=tar.test,mx.tar.test,10".into(),
            "--host-record=mx.tar.test,127.0.0.6".into(),
        ]),
        60,
    );
    // The tarpit: a greeting that comes one octet every 200 ms and never
    // ends, so no single read waits long; records when the relay hangs up.
    let l = TcpListener::bind(("127.0.0.6", port)).unwrap();
    let closed: Arc<Mutex<Option<Instant>>> = Arc::default();
    let c = closed.clone();
    std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let _ = s.write_all(b"220");
        loop {
            std::thread::sleep(Duration::from_millis(200));
            if s.write_all(b"-").is_err() {
                *c.lock().unwrap() = Some(Instant::now());
                return;
            }
        }
    });
    // One message may take 2 s in all (each read may wait 5 s).
    let config = format!(
        "{}message_timeout = \"2s\"\n",
        mx_config(dns.port(), port, "")
    );
    let relay = Relay::start_in(&tmp.0, &config);
    let t0 = Instant::now();
    send(&relay, &["a@tar.test"]);
    let log = relay.wait_log("status=deferred", 1);
    assert!(log.contains("smtp.message_timeout = 2s"), "{log}");
    while closed.lock().unwrap().is_none() {
        assert!(
            t0.elapsed() < LIMIT,
            "the tarpit still holds its connection:\n{}",
            relay.log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let held = closed.lock().unwrap().unwrap().duration_since(t0);
    assert!(held >= Duration::from_secs(2), "{held:?}");
}
