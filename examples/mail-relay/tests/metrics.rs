//! `--metrics ADDR`: Prometheus metrics served by the relay, scraped here
//! with a real HTTP client (Python's urllib); and the endpoint's limits: a
//! flood of idle connections under a low open-file limit (`prlimit`)
//! neither keeps SMTP from greeting nor keeps the endpoint from serving.

mod util;

use std::io::Read;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use util::{free_port, python, Relay, TempDir, LIMIT};

const SCRAPE: &str = r#"
import sys, urllib.request, urllib.error
r = urllib.request.urlopen("http://127.0.0.1:%s/metrics" % sys.argv[1], timeout=20)
print(r.headers["Content-Type"])
print(r.read().decode())
try:
    urllib.request.urlopen("http://127.0.0.1:%s/other" % sys.argv[1], timeout=20)
except urllib.error.HTTPError as e:
    print("other:", e.code)
"#;

/// The value of the sample `name` (a line `name value`).
fn value(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .unwrap_or_else(|| panic!("no {name} in:\n{text}"))
        .parse()
        .unwrap()
}

#[test]
fn metrics_are_scraped_over_http() {
    let tmp = TempDir::new("metrics");
    let port = free_port().to_string();
    let relay = Relay::start_with_args(&tmp.0, "", &["--metrics", &format!("127.0.0.1:{port}")]);
    let mut c = relay.client();
    c.message(
        "s@example.test",
        &["a@example.test", "b@example.test"],
        "Subject: m\r\n\r\nx\r\n",
    );
    relay.wait_delivered(1);
    relay.wait_log("removed", 1);
    let out = python(SCRAPE, &[&port]);
    assert!(out.starts_with("application/openmetrics-text"), "{out}");
    assert!(out.contains("other: 404"), "{out}");
    assert_eq!(value(&out, "mail_relay_messages_accepted_total"), 1.0);
    assert_eq!(value(&out, "mail_relay_recipients_delivered_total"), 2.0);
    assert_eq!(value(&out, "mail_relay_recipients_deferred_total"), 0.0);
    assert_eq!(value(&out, "mail_relay_recipients_bounced_total"), 0.0);
    assert_eq!(value(&out, "mail_relay_sessions_accepted_total"), 1.0);
    // The client is still connected.
    assert_eq!(value(&out, "mail_relay_sessions"), 1.0);
    assert_eq!(value(&out, "mail_relay_queue_messages"), 0.0);
    assert_eq!(value(&out, "mail_relay_queue_oldest_age_seconds"), 0.0);
    assert_eq!(value(&out, "mail_relay_delivery_delay_seconds_count"), 2.0);
    assert!(
        out.contains("mail_relay_delivery_delay_seconds_bucket{le=\"+Inf\"} 2"),
        "{out}"
    );
    assert!(value(&out, "coro_switches_total") > 0.0);
    assert!(value(&out, "coro_threads") >= 1.0);
    assert!(out.contains("coro_latency_warnings_total"), "{out}");
    assert!(out.contains("\n# EOF\n"), "{out}");
}

#[test]
fn idle_connections_cannot_take_the_descriptors_smtp_needs() {
    const FLOOD: usize = 400;
    let port = free_port();
    // 128 descriptors: a few hundred idle connections held by the metrics
    // endpoint would take them all.
    let relay = Relay::start_with_fd_limit(
        "metrics-flood",
        &format!("metrics = \"127.0.0.1:{port}\"\n"),
        128,
    );
    let flood: Vec<TcpStream> = (0..FLOOD)
        .map(|_| {
            let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
            s.set_read_timeout(Some(Duration::from_millis(5))).unwrap();
            s
        })
        .collect();
    // All but the few one client may have are closed at once.
    let mut open = flood;
    wait_closed(&relay, &mut open, 4);
    // SMTP greets meanwhile.
    let mut c = relay.client();
    c.cmd("EHLO client.test", 250);
    c.cmd("QUIT", 221);
    // The few kept send no request, and go soon; then a scrape is served.
    wait_closed(&relay, &mut open, 0);
    let out = python(SCRAPE, &[&port.to_string()]);
    assert!(out.starts_with("application/openmetrics-text"), "{out}");
    let log = relay.log();
    assert!(!log.contains("Too many open files"), "{log}");
}

/// Waits until at most `left` of `open` are still open (the relay closed
/// the others); keeps those.
#[track_caller]
fn wait_closed(relay: &Relay, open: &mut Vec<TcpStream>, left: usize) {
    let t0 = Instant::now();
    loop {
        open.retain(|s| match (&*s).read(&mut [0; 16]) {
            Ok(0) => false,
            Ok(_) => true,
            Err(e) => matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ),
        });
        if open.len() <= left {
            return;
        }
        assert!(
            t0.elapsed() < LIMIT,
            "{} idle connections still open, want {left}:\n{}",
            open.len(),
            relay.log()
        );
    }
}
