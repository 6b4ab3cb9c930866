//! Connect failures through the connection cache: with an
//! upstream that refuses connections (a port bound, then closed), each
//! failed attempt is logged by the cache and deferred with its error for
//! the delivery that made it; after three in a row the cache backs the
//! upstream off, and a delivery meanwhile is deferred at once with the
//! last error and the time until the next attempt, without connecting.

mod util;

use util::{backdoor, relay_to, Relay, TempDir};

/// Retries every 300 ms: the cache's first delay (1 s) spans several.
const FAST_RETRY: &str =
    "[queue]\nminimal_backoff_time = \"300ms\"\nmaximal_backoff_time = \"300ms\"\n";

#[test]
fn a_refusing_upstream_is_logged_deferred_and_backed_off() {
    let tmp = TempDir::new("cf-refused");
    // Bound, then closed: nothing listens, connections are refused.
    let port = util::free_port();
    let relay = Relay::start_in(&tmp.0, &relay_to(&format!("127.0.0.1:{port}"), FAST_RETRY));
    let id = relay
        .client()
        .message(
            "s@example.test",
            &["a@example.test"],
            "Subject: refused\r\n\r\nbody\r\n",
        )
        .rsplit(' ')
        .next()
        .unwrap()
        .to_owned();
    // What the OS says (with its error number), as the relay reports it.
    let why = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap_err();
    assert_eq!(why.kind(), std::io::ErrorKind::ConnectionRefused);
    let refused = format!("connect to 127.0.0.1:{port}: {why}");
    let backed_off = format!("status=deferred ({refused} (");
    let log = relay.wait_log(&backed_off, 1);
    // Everything up to the first deferral without a connection attempt.
    let upto = log.find(&backed_off).unwrap();
    let line_end = upto + log[upto..].find('\n').unwrap_or(log.len() - upto);
    let (before, backoff_line) = (&log[..upto], log[..line_end].lines().last().unwrap());
    let warned = before
        .matches(&format!(
            "warn: smtp: spawning a worker for 127.0.0.1:{port} failed: {refused}"
        ))
        .count();
    let own = before
        .lines()
        .filter(|l| {
            l.contains(&format!("{id}: to=<a@example.test>, relay=none"))
                && l.contains(&format!("dsn=4.4.1, status=deferred ({refused})"))
        })
        .count();
    // Each attempt was logged by the cache and reached its delivery.
    assert!(warned >= 3, "three failures before the backoff:\n{log}");
    assert_eq!(warned, own, "one deferral per failed attempt:\n{log}");
    assert!(
        before.contains(&format!(
            "failed: {refused} (3 failures in a row; no spawn for 127.0.0.1:{port} in the next "
        )),
        "the third failure starts the backoff:\n{log}"
    );
    // The backed-off delivery says why and when, and made no attempt.
    assert!(
        backoff_line.contains(&format!("{id}: to=<a@example.test>, relay=none"))
            && backoff_line.contains(&format!(
                "{warned} connection attempts in a row failed; the next in "
            )),
        "{backoff_line}"
    );
    let q = relay.mailq();
    assert!(q.contains(&id) && q.contains(&refused), "{q}");
}

/// The back door's `pools` shows an upstream in connect backoff (with its
/// error and when it is tried next), and `flush` lifts the backoff: the
/// flushed message tries the upstream again at once.
#[test]
fn the_back_door_shows_an_upstream_in_backoff_and_flush_lifts_it() {
    let tmp = TempDir::new("cf-pools");
    let path = tmp.0.join("bd");
    let port = util::free_port();
    let extra = format!(
        "backdoor = \"{}\"\n[queue]\nminimal_backoff_time = \"300ms\"\nmaximal_backoff_time = \"300ms\"\n",
        path.display()
    );
    let relay = Relay::start_in(&tmp.0, &relay_to(&format!("127.0.0.1:{port}"), &extra));
    relay.client().message(
        "s@example.test",
        &["a@example.test"],
        "Subject: pools\r\n\r\nbody\r\n",
    );
    // The cache backs the upstream off after three failures in a row
    // (1 s, then doubling): `pools` says so, with the port and the error.
    let t0 = std::time::Instant::now();
    let pools = loop {
        let pools = backdoor(&path, "pools");
        if pools.contains("next try in") {
            break pools;
        }
        assert!(t0.elapsed() < util::LIMIT, "never in backoff:\n{pools}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert!(
        pools.contains(&port.to_string()) && pools.contains("Connection refused"),
        "{pools}"
    );
    // flush lifts it: right after, the upstream is no longer in backoff
    // (its next failures count from one again).
    let out = backdoor(&path, "flush");
    assert!(out.contains("due now"), "{out}");
    let after = backdoor(&path, "pools");
    assert!(
        !after.contains("next try in"),
        "flush left the backoff:\n{after}"
    );
}
