//! MTA-STS (RFC 8461) on MX delivery, with real components: dnsmasq
//! serves the `_mta-sts` TXT, MX and A records (every `mta-sts.DOMAIN` at
//! 127.0.0.1), an HTTPS server written here with rustls serves the
//! policies (on a port of its own: the relay's `[mta_sts] policy_port`),
//! and the mail exchangers are SMTP sinks on 127.0.0.2 and up, offering
//! STARTTLS with certificates from a test CA (valid for the MX name, or
//! for another name) or no STARTTLS at all. The relay trusts the CA
//! through `[mta_sts] ca_file`.

mod util;

#[path = "../../../net/tests/util/dnsmasq.rs"]
mod dnsmasq;
#[path = "util/sts.rs"]
mod sts;

use std::path::Path;

use dnsmasq::Dnsmasq;
use sts::{Answer, Ca, PolicyServer, TlsSink};
use util::{Relay, TempDir};

/// One test domain of the zone: its exchanger `mx.NAME` at `ip`, and its
/// `_mta-sts` TXT record, if any. `mta-sts.NAME` is 127.0.0.1.
struct Domain<'a> {
    name: &'a str,
    ip: [u8; 4],
    txt: Option<&'a str>,
}

/// dnsmasq's options for `domains`.
fn zone(domains: &[Domain<'_>]) -> Vec<String> {
    let mut z = Vec::new();
    for d in domains {
        let [a, b, c, e] = d.ip;
        z.push(format!("--mx-host={},mx.{},10", d.name, d.name));
        z.push(format!("--host-record=mx.{},{a}.{b}.{c}.{e}", d.name));
        z.push(format!("--host-record=mta-sts.{},127.0.0.1", d.name));
        if let Some(t) = d.txt {
            z.push(format!("--txt-record=_mta-sts.{},{t}", d.name));
        }
    }
    z
}

/// A policy of `mode` listing `mx`.
fn policy(mode: &str, mx: &[&str]) -> String {
    let mut p = format!("version: STSv1\r\nmode: {mode}\r\nmax_age: 86400\r\n");
    for m in mx {
        p.push_str(&format!("mx: {m}\r\n"));
    }
    p
}

/// The relay's settings: MX delivery with DNS at `dns`, exchangers on
/// `port`, policies on `https`, the test CA trusted; retries far apart
/// (each test sees one attempt unless it flushes). `extra` goes into
/// `[mta_sts]`.
fn config(dns: u16, port: u16, https: u16, ca: &Path, extra: &str) -> String {
    let timeout = if extra.contains("fetch_timeout") {
        ""
    } else {
        "fetch_timeout = \"10s\"\n"
    };
    format!(
        "local_domains = [\"relay.test\"]\n\
         [mx]\nenabled = true\ndns_servers = [\"127.0.0.1:{dns}\"]\ndns_timeout = \"1s\"\n\
         dns_attempts = 1\nport = {port}\nallow_private_addresses = true\n\
         [mta_sts]\nca_file = \"{}\"\npolicy_port = {https}\n{timeout}{extra}\n\
         [queue]\nminimal_backoff_time = \"1h\"\nmaximal_backoff_time = \"1h\"\n\
         [smtp]\nconnect_timeout = \"2s\"\nhelo_timeout = \"5s\"\nconnection_idle_time_limit = \"300ms\"\n",
        ca.display()
    )
}

/// Sends one message from `s@relay.test` to `to`.
fn send(relay: &Relay, to: &str, subject: &str) {
    let mut c = relay.client();
    c.message(
        "s@relay.test",
        &[to],
        &format!("Subject: {subject}\r\n\r\nhello\r\n"),
    );
    c.cmd("QUIT", 221);
}

/// The log line of the delivery attempt to `rcpt` (the `n`th).
#[track_caller]
fn outcome(relay: &Relay, rcpt: &str, n: usize) -> String {
    let needle = format!("to=<{rcpt}>, relay=");
    let log = relay.wait_log(&needle, n);
    log.lines()
        .filter(|l| l.contains(&needle))
        .nth(n - 1)
        .unwrap()
        .to_owned()
}

/// A port free on 127.0.0.2 and up (binding the wildcard checks them all).
fn free_mx_port() -> u16 {
    std::net::TcpListener::bind("0.0.0.0:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn enforce_sends_only_over_verified_tls_to_the_listed_exchangers() {
    let tmp = TempDir::new("sts-enforce");
    let ca = Ca::new(&tmp.0);
    let domains = ["good.test", "wrong.test", "plain.test", "unlisted.test"];
    let names: Vec<String> = domains.iter().map(|d| format!("mta-sts.{d}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let https = PolicyServer::start(ca.server(&names));
    for d in &domains[..3] {
        https.set(
            &format!("mta-sts.{d}"),
            Answer::policy(&policy("enforce", &[&format!("mx.{d}")])),
        );
    }
    https.set(
        "mta-sts.unlisted.test",
        Answer::policy(&policy("enforce", &["*.elsewhere.test"])),
    );
    let ips = [
        [127, 0, 0, 2],
        [127, 0, 0, 3],
        [127, 0, 0, 4],
        [127, 0, 0, 5],
    ];
    let txt = Some("v=STSv1; id=1");
    let z: Vec<Domain<'_>> = domains
        .iter()
        .zip(ips)
        .map(|(name, ip)| Domain { name, ip, txt })
        .collect();
    let dns = Dnsmasq::start(&zone(&z), 60);
    let port = free_mx_port();
    let good = TlsSink::start(ips[0], port, Some(ca.server(&["mx.good.test"])));
    let wrong = TlsSink::start(ips[1], port, Some(ca.server(&["mx.elsewhere.test"])));
    let plain = TlsSink::start(ips[2], port, None);
    let unlisted = TlsSink::start(ips[3], port, Some(ca.server(&["mx.unlisted.test"])));
    let relay = Relay::start_in(&tmp.0, &config(dns.port(), port, https.port, &ca.file, ""));
    for d in domains {
        send(&relay, &format!("a@{d}"), d);
    }

    let line = outcome(&relay, "a@good.test", 1);
    assert!(line.contains("status=sent"), "{line}");
    let got = good.received();
    assert_eq!(got.len(), 1);
    assert!(got[0].0, "not sent over TLS");
    let log = relay.log();
    assert!(
        log.contains(
            "MTA-STS: policy of good.test (id 1): mode enforce, max_age 86400, mx mx.good.test"
        ),
        "{log}"
    );

    for (d, why) in [
        (
            "wrong.test",
            "certificate valid for mx.wrong.test: TLS handshake with",
        ),
        ("plain.test", "TLS is required, but was not offered"),
        (
            "unlisted.test",
            "mx.unlisted.test is not one of its mx patterns",
        ),
    ] {
        let line = outcome(&relay, &format!("a@{d}"), 1);
        assert!(
            line.contains("dsn=4.7.5, status=deferred (MTA-STS policy of ") && line.contains(why),
            "{d}: {line}"
        );
    }
    let q = relay.mailq();
    for d in &domains[1..] {
        assert!(
            q.contains(&format!("MTA-STS policy of {d} (mode enforce")),
            "{q}"
        );
    }
    // Nothing went anywhere else, in clear or not; the exchanger the
    // policy does not list was not even connected to.
    assert!(wrong.received().is_empty());
    assert!(plain.received().is_empty());
    assert!(unlisted.received().is_empty());
    assert_eq!(*unlisted.connections.lock().unwrap(), 0);
    // The domains answered: none is suspended as unreachable.
    assert!(!relay.log().contains("delivery temporarily suspended"));

    // The policies are kept in the spool.
    let cache = std::fs::read_to_string(tmp.0.join("spool/mta-sts.cache")).unwrap();
    assert!(
        cache
            .lines()
            .any(|l| l.starts_with("good.test 1 ") && l.ends_with(" enforce 86400 mx.good.test")),
        "{cache}"
    );
    assert_eq!(https.requests_for("mta-sts.good.test"), 1);
}

#[test]
fn testing_delivers_and_logs_none_ignores_no_policy_stays_opportunistic() {
    let tmp = TempDir::new("sts-testing");
    let ca = Ca::new(&tmp.0);
    let https = PolicyServer::start(ca.server(&[
        "mta-sts.testing.test",
        "mta-sts.testplain.test",
        "mta-sts.none.test",
    ]));
    https.set(
        "mta-sts.testing.test",
        Answer::policy(&policy("testing", &["mx.testing.test"])),
    );
    https.set(
        "mta-sts.testplain.test",
        Answer::policy(&policy("testing", &["mx.testplain.test"])),
    );
    https.set(
        "mta-sts.none.test",
        Answer::policy("version: STSv1\nmode: none\nmax_age: 86400\n"),
    );
    let (wrong_ip, plain_ip) = ([127, 0, 0, 2], [127, 0, 0, 3]);
    let txt = Some("v=STSv1; id=7;");
    let dns = Dnsmasq::start(
        &zone(&[
            Domain {
                name: "testing.test",
                ip: wrong_ip,
                txt,
            },
            Domain {
                name: "testplain.test",
                ip: plain_ip,
                txt,
            },
            Domain {
                name: "none.test",
                ip: plain_ip,
                txt,
            },
            Domain {
                name: "nopolicy.test",
                ip: wrong_ip,
                txt: None,
            },
        ]),
        60,
    );
    let port = free_mx_port();
    // A certificate for another name: fine for opportunistic TLS.
    let wrong = TlsSink::start(wrong_ip, port, Some(ca.server(&["mx.elsewhere.test"])));
    let plain = TlsSink::start(plain_ip, port, None);
    let relay = Relay::start_in(&tmp.0, &config(dns.port(), port, https.port, &ca.file, ""));

    send(&relay, "a@testing.test", "testing");
    let line = outcome(&relay, "a@testing.test", 1);
    assert!(line.contains("status=sent"), "{line}");
    let log = relay.log();
    assert!(
        log.contains(
            "MTA-STS policy of testing.test (mode testing, id 7): mx.testing.test[127.0.0.2]:"
        ) && log.contains("delivering as without a policy"),
        "{log}"
    );

    send(&relay, "a@testplain.test", "testplain");
    let line = outcome(&relay, "a@testplain.test", 1);
    assert!(line.contains("status=sent"), "{line}");
    assert!(
        relay
            .log()
            .contains("MTA-STS policy of testplain.test (mode testing, id 7)")
            && relay.log().contains("TLS is required, but was not offered"),
        "{}",
        relay.log()
    );

    send(&relay, "a@none.test", "none");
    let line = outcome(&relay, "a@none.test", 1);
    assert!(line.contains("status=sent"), "{line}");
    assert!(relay
        .log()
        .contains("MTA-STS: policy of none.test (id 7): mode none"));
    assert!(!relay.log().contains("MTA-STS policy of none.test"));

    // No record: no fetch, and TLS as [smtp] says (opportunistic, the
    // certificate not checked).
    send(&relay, "a@nopolicy.test", "nopolicy");
    let line = outcome(&relay, "a@nopolicy.test", 1);
    assert!(line.contains("status=sent"), "{line}");
    assert_eq!(https.requests_for("mta-sts.nopolicy.test"), 0);

    let subjects = |s: &TlsSink| -> Vec<(bool, String)> {
        s.received()
            .into_iter()
            .map(|(tls, m)| {
                let subject = m
                    .lines()
                    .find_map(|l| l.strip_prefix("Subject: "))
                    .unwrap_or("");
                (tls, subject.to_owned())
            })
            .collect()
    };
    let mut w = subjects(&wrong);
    w.sort();
    assert_eq!(
        w,
        [(true, "nopolicy".to_owned()), (true, "testing".to_owned())]
    );
    let mut p = subjects(&plain);
    p.sort();
    assert_eq!(
        p,
        [(false, "none".to_owned()), (false, "testplain".to_owned())]
    );
}

#[test]
fn a_cached_policy_outlives_a_failed_fetch_and_a_restart_and_a_new_id_replaces_it() {
    let tmp = TempDir::new("sts-cache");
    let ca = Ca::new(&tmp.0);
    let tls = ca.server(&["mta-sts.sts.test"]);
    let mut https = PolicyServer::start(tls.clone());
    https.set(
        "mta-sts.sts.test",
        Answer::policy(&policy("enforce", &["mx.sts.test"])),
    );
    let (good_ip, rogue_ip) = ([127, 0, 0, 2], [127, 0, 0, 3]);
    let dns_port = dnsmasq::free_port();
    let zone_with = |ip: [u8; 4], id: &str| {
        let txt = format!("v=STSv1; id={id}");
        zone(&[Domain {
            name: "sts.test",
            ip,
            txt: Some(&txt),
        }])
    };
    // TTL 0: the relay asks again each time.
    let dns = Dnsmasq::start_on(dns_port, &zone_with(good_ip, "1"), 0);
    let port = free_mx_port();
    let good = TlsSink::start(good_ip, port, Some(ca.server(&["mx.sts.test"])));
    let rogue = TlsSink::start(rogue_ip, port, None);
    let cfg = config(dns_port, port, https.port, &ca.file, "");
    let mut relay = Relay::start_in(&tmp.0, &cfg);
    send(&relay, "a@sts.test", "first");
    assert!(outcome(&relay, "a@sts.test", 1).contains("status=sent"));
    assert_eq!(good.received().len(), 1);

    // DNS now points the exchanger's name at a host without TLS and
    // announces a new policy, and the policy host is down: the cached
    // policy applies.
    drop(dns);
    let dns = Dnsmasq::start_on(dns_port, &zone_with(rogue_ip, "2"), 0);
    https.stop();
    send(&relay, "a@sts.test", "second");
    let line = outcome(&relay, "a@sts.test", 2);
    assert!(
        line.contains("status=deferred (MTA-STS policy of sts.test (mode enforce)")
            && line.contains(
                "(mode enforce, id 1) requires TLS with a certificate valid for mx.sts.test: \
                 TLS is required, but was not offered"
            ),
        "{line}"
    );
    assert!(
        relay.log().contains(
            "MTA-STS: the policy of sts.test (id 2) cannot be fetched: connect to mta-sts.sts.test[127.0.0.1]:"
        ) && relay
            .log()
            .contains("; the cached one (id 1, mode enforce) applies"),
        "{}",
        relay.log()
    );

    // A restart keeps it: the waiting message is tried at start, and
    // waits again.
    relay.terminate();
    assert!(relay.wait_exit().success());
    let relay = Relay::start_in(&tmp.0, &cfg);
    let line = outcome(&relay, "a@sts.test", 3);
    assert!(
        line.contains("status=deferred (MTA-STS policy of sts.test (mode enforce)"),
        "{line}"
    );
    assert!(rogue.received().is_empty());

    // The domain publishes a new policy (id 3, testing): fetched, it
    // replaces the cached one, and the mail goes.
    let https = PolicyServer::start_on(https.port, tls);
    https.set(
        "mta-sts.sts.test",
        Answer::policy(&policy("testing", &["mx.sts.test"])),
    );
    drop(dns);
    let _dns = Dnsmasq::start_on(dns_port, &zone_with(rogue_ip, "3"), 0);
    let (ok, out) = relay.command(&["flush"]);
    assert!(ok, "{out}");
    let line = outcome(&relay, "a@sts.test", 4);
    assert!(line.contains("status=sent"), "{line}");
    assert!(relay
        .log()
        .contains("MTA-STS: policy of sts.test (id 3): mode testing"));
    let got = rogue.received();
    assert_eq!(got.len(), 1);
    assert!(got[0].1.contains("Subject: second"));
    let cache = std::fs::read_to_string(tmp.0.join("spool/mta-sts.cache")).unwrap();
    assert!(cache.contains("\nsts.test 3 "), "{cache}");
}

#[test]
fn only_a_200_text_plain_policy_within_limits_from_a_valid_host_counts() {
    let tmp = TempDir::new("sts-fetch");
    let ca = Ca::new(&tmp.0);
    let cases = [
        ("redirect.test", "redirects are not followed"),
        ("html.test", "not text/plain"),
        ("big.test", "larger than 65536 octets"),
        ("broken.test", "the policy does not parse: line 1"),
        ("missing.test", "HTTP status 404 Not Found"),
        ("badcert.test", "TLS: invalid peer certificate"),
        ("stall.test", "the fetch ran out of time"),
    ];
    let names: Vec<String> = cases
        .iter()
        .filter(|(d, _)| *d != "badcert.test")
        .map(|(d, _)| format!("mta-sts.{d}"))
        .collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let https = PolicyServer::start(ca.server(&names));
    let enforce = policy("enforce", &["nowhere.test"]);
    https.set(
        "mta-sts.redirect.test",
        Answer::Http(
            302,
            vec![(
                "Location".into(),
                "https://mta-sts.html.test/.well-known/mta-sts.txt".into(),
            )],
            Vec::new(),
        ),
    );
    https.set(
        "mta-sts.html.test",
        Answer::typed("text/html", enforce.as_bytes()),
    );
    let mut big = enforce.clone();
    while big.len() <= 64 * 1024 {
        big.push_str("ext: padding padding padding padding padding padding padding\r\n");
    }
    https.set("mta-sts.big.test", Answer::policy(&big));
    https.set(
        "mta-sts.broken.test",
        Answer::policy("<html>enforce</html>\n"),
    );
    https.set("mta-sts.badcert.test", Answer::policy(&enforce));
    https.set("mta-sts.stall.test", Answer::Stall);

    let ip = [127, 0, 0, 2];
    let txt = Some("v=STSv1; id=1");
    let z: Vec<Domain<'_>> = cases
        .iter()
        .map(|(name, _)| Domain { name, ip, txt })
        .collect();
    let dns = Dnsmasq::start(&zone(&z), 60);
    let port = free_mx_port();
    // No STARTTLS: each domain's mail goes only if its policy did not
    // count.
    let sink = TlsSink::start(ip, port, None);
    let relay = Relay::start_in(
        &tmp.0,
        &config(
            dns.port(),
            port,
            https.port,
            &ca.file,
            "fetch_timeout = \"1s\"\n",
        ),
    );
    for (d, _) in &cases {
        send(&relay, &format!("a@{d}"), d);
    }
    for (d, why) in &cases {
        let line = outcome(&relay, &format!("a@{d}"), 1);
        assert!(line.contains("status=sent"), "{d}: {line}");
        let log = relay.log();
        let warning = log
            .lines()
            .find(|l| {
                l.contains(&format!(
                    "MTA-STS: the policy of {d} (id 1) cannot be fetched"
                ))
            })
            .unwrap_or_else(|| panic!("{d}: no warning in\n{log}"));
        assert!(
            warning.contains(why) && warning.ends_with("delivering as without a policy"),
            "{d}: {warning}"
        );
    }
    assert_eq!(sink.received().len(), cases.len());
    // The redirect was not followed.
    assert_eq!(https.requests_for("mta-sts.html.test"), 1);
    assert!(!std::fs::read_to_string(tmp.0.join("spool/mta-sts.cache"))
        .unwrap_or_default()
        .contains(".test "));
}
