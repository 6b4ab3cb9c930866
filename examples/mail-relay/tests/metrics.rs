//! `--metrics ADDR`: Prometheus metrics served by the relay, scraped here
//! with a real HTTP client (Python's urllib).

mod util;

use util::{free_port, python, Relay, TempDir};

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
