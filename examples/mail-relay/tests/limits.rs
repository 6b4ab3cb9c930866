//! Session limits: past `max_sessions` a client gets 421 4.3.2 at the
//! greeting, past `max_sessions_per_client` 421 4.7.0, and a freed slot is
//! used again; out of file descriptors, the accept loop backs off and
//! serves again once some are free.

mod util;

use std::time::Instant;

use util::{read_rest, Client, Relay};

/// Connects and returns the greeting's code and text.
fn greet(relay: &Relay) -> (Client, u16, String) {
    let mut c = Client::connect(relay.addr);
    let (code, text) = c.reply().unwrap();
    (c, code, text)
}

#[test]
fn max_sessions_then_421_at_greeting() {
    let relay = Relay::start("maxsess", "max_sessions = 2\n");
    let mut a = relay.client();
    let _b = relay.client();
    let (mut c, code, text) = greet(&relay);
    assert_eq!(code, 421, "{text}");
    assert!(
        text.starts_with("4.3.2 ") && text.contains("too many sessions"),
        "{text}"
    );
    assert_eq!(read_rest(&mut c), "");
    // A session that ends frees its slot (the server notices in its own
    // time, so retry within the test's bound).
    a.cmd("QUIT", 221);
    let t0 = Instant::now();
    loop {
        let (_c, code, _) = greet(&relay);
        if code == 220 {
            break;
        }
        assert!(t0.elapsed() < util::LIMIT, "the slot was never freed");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

#[test]
fn max_sessions_per_client_address() {
    let relay = Relay::start(
        "perclient",
        "max_sessions = 10\nmax_sessions_per_client = 1\n",
    );
    let _a = relay.client();
    let (_c, code, text) = greet(&relay);
    assert_eq!(code, 421, "{text}");
    assert!(
        text.starts_with("4.7.0 ") && text.contains("too many connections"),
        "{text}"
    );
    // Another address is still welcome.
    let script = r#"
import smtplib, sys
s = smtplib.SMTP()
s.source_address = ("127.0.0.2", 0)
print(s.connect("127.0.0.1", int(sys.argv[1]))[0])
s.quit()
"#;
    let out = util::python(script, &[&relay.addr.port().to_string()]);
    assert_eq!(out, "220\n");
}

#[test]
fn accept_backs_off_when_out_of_fds() {
    let relay = Relay::start_with_fd_limit("emfile", "", 40);
    // More connections than the relay has descriptors for: the first ones
    // get sessions, the rest wait in the listen backlog while accept fails
    // with EMFILE.
    let clients: Vec<Client> = (0..60).map(|_| Client::connect(relay.addr)).collect();
    let t0 = Instant::now();
    while !relay.log().contains("backing off") {
        assert!(
            t0.elapsed() < util::LIMIT,
            "no EMFILE back-off:\n{}",
            relay.log()
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    drop(clients);
    // Once the descriptors are free again, a new client is served.
    let t0 = Instant::now();
    loop {
        let (mut c, code, _) = greet(&relay);
        if code == 220 {
            c.message("s@example.test", &["a@example.test"], "after EMFILE\r\n");
            break;
        }
        assert!(
            t0.elapsed() < util::LIMIT,
            "never served again:\n{}",
            relay.log()
        );
    }
    assert!(relay.wait_delivered(1)[0].ends_with("after EMFILE\n"));
}
