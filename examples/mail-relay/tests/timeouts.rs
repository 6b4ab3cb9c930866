//! Every timeout class of RFC 5321 §4.5.3.2 as the server applies it, with
//! short configured values: the session answers 421 4.4.2 and closes, and
//! only after the configured time.

mod util;

use std::io::Write;
use std::time::{Duration, Instant};

use util::{read_rest, Client, Relay};

const SHORT: &str = "[timeouts]\ngreeting = \"300ms\"\nmail = \"300ms\"\nrcpt = \"300ms\"\n\
                     data_init = \"300ms\"\ndata_block = \"300ms\"\nidle = \"300ms\"\n";

/// Waits for the 421 of a timeout and the close; checks it came no sooner
/// than the configured 300 ms after `since`.
#[track_caller]
fn times_out(c: &mut Client, since: Instant) {
    let text = c.expect(421);
    assert!(
        text.starts_with("4.4.2 ") && text.contains("timeout exceeded"),
        "{text}"
    );
    assert!(since.elapsed() >= Duration::from_millis(300), "too early");
    assert_eq!(read_rest(c), "", "closed after the 421");
}

#[test]
fn each_wait_for_the_client_times_out() {
    let relay = Relay::start("timeouts", SHORT);

    // Each wait starts once the relay's reply is out, so the time is taken
    // before the command that it answers: a lower bound, however late
    // this thread reads the reply.

    // greeting: no EHLO after our 220.
    let t0 = Instant::now();
    let mut c = relay.client();
    times_out(&mut c, t0);

    // mail: no MAIL after EHLO.
    let mut c = relay.client();
    let t0 = Instant::now();
    c.cmd("EHLO client.test", 250);
    times_out(&mut c, t0);

    // rcpt: no RCPT after MAIL.
    let mut c = relay.client();
    c.cmd("EHLO client.test", 250);
    let t0 = Instant::now();
    c.cmd("MAIL FROM:<s@example.test>", 250);
    times_out(&mut c, t0);

    // data_init: nothing after our 354.
    let mut c = relay.client();
    c.cmd("EHLO client.test", 250);
    c.cmd("MAIL FROM:<s@example.test>", 250);
    c.cmd("RCPT TO:<a@example.test>", 250);
    let t0 = Instant::now();
    c.cmd("DATA", 354);
    times_out(&mut c, t0);

    // data_block: a line, then silence.
    let mut c = relay.client();
    c.open_data("s@example.test", &["a@example.test"]);
    let t0 = Instant::now();
    c.send_raw(b"Subject: half\r\n");
    times_out(&mut c, t0);

    let log = relay.log();
    for after in ["CONNECT", "EHLO", "MAIL", "DATA"] {
        assert!(
            log.contains(&format!("timeout after {after} from")),
            "{after}:\n{log}"
        );
    }
    // A client that talks in time is not cut off by the short values.
    let mut c = relay.client();
    c.message("s@example.test", &["a@example.test"], "x\r\n");
    relay.wait_delivered(1);
}

#[test]
fn idle_bounds_a_client_that_does_not_read() {
    let relay = Relay::start("idle", SHORT);
    let mut c = relay.client();
    c.cmd("EHLO client.test", 250);
    // Pipeline far more EHLO commands than the socket buffers hold replies
    // for (EHLO: not a junk command, which the junk limit would end), and
    // read none of them: the session blocks writing, then ends.
    let mut w = c.w.try_clone().unwrap();
    let writer = std::thread::spawn(move || {
        let burst = "EHLO client.test\r\n".repeat(1000);
        for _ in 0..400 {
            if w.write_all(burst.as_bytes()).is_err() {
                return;
            }
        }
    });
    let t0 = Instant::now();
    loop {
        if relay.log().contains("timeout after EHLO from") {
            break;
        }
        assert!(
            t0.elapsed() < util::LIMIT,
            "no idle timeout:\n{}",
            relay.log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let rest = read_rest(&mut c);
    assert!(
        rest.matches("250 SMTPUTF8").count() < 400_000,
        "the session stopped writing"
    );
    writer.join().unwrap();
}

#[test]
fn final_dot_bounds_the_commit() {
    let relay = Relay::start(
        "finaldot",
        "[timeouts]\nfinal_dot = \"300ms\"\n[testing]\ncommit_delay = \"2s\"\n",
    );
    let mut c = relay.client();
    c.open_data("s@example.test", &["a@example.test"]);
    c.send_raw(b"Subject: slow disk\r\n\r\nx\r\n");
    let t0 = Instant::now();
    let text = c.cmd(".", 451);
    assert_eq!(text, "4.3.0 Error: queue file write error");
    assert!(t0.elapsed() >= Duration::from_millis(300));
    // The session goes on.
    c.cmd("NOOP", 250);
    assert!(relay
        .log()
        .contains("commit to the spool failed or took too long"));
}
