//! Mail loops (RFC 5321 §6.3): a relay whose upstream is itself passes a
//! message round until it carries `hopcount_limit` `Received:` headers;
//! then it is refused as a mail forwarding loop and returned to its
//! sender, and a bounce that loops the same way is dropped, not bounced.

mod util;

use util::{free_port, Relay, TempDir};

/// A relay on a known port whose relayhost is itself, with `extra`.
fn looping_relay(tmp: &TempDir, extra: &str) -> Relay {
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let config = format!("relayhost = \"{listen}\"\n{extra}");
    Relay::start_with_args(&tmp.0, &config, &["--listen", &listen])
}

#[test]
fn a_looping_message_is_returned_to_its_sender() {
    let tmp = TempDir::new("loop");
    let relay = looping_relay(
        &tmp,
        "local_domains = [\"home.test\"]\nhopcount_limit = 20\n",
    );
    let mut c = relay.client();
    c.message(
        "s@home.test",
        &["r@loop.test"],
        "Subject: round and round\r\n\r\nhello\r\n",
    );
    // The bounce comes home, into the Maildir.
    let got = relay.wait_delivered(1);
    assert_eq!(got.len(), 1, "only the bounce: {got:?}");
    let bounce = &got[0];
    assert!(
        bounce.contains("Undelivered Mail Returned to Sender"),
        "{bounce}"
    );
    assert!(bounce.contains("mail forwarding loop"), "{bounce}");
    let log = relay.log();
    let refused =
        "reject: DATA from [127.0.0.1]: 554 5.4.6 Error: too many hops (20 Received: headers)";
    assert_eq!(log.matches(refused).count(), 1, "{log}");
    // The message went round exactly hopcount_limit times: 19 accepted
    // (1 to 19 Received: headers), the 20th refused.
    let sent = format!("to=<r@loop.test>, relay={}", relay.addr.ip());
    assert_eq!(log.matches(&sent).count(), 20, "{log}");
    assert_eq!(log.matches("status=bounced").count(), 1, "{log}");
}

#[test]
fn a_looping_bounce_is_dropped() {
    let tmp = TempDir::new("loop-bounce");
    let relay = looping_relay(&tmp, "hopcount_limit = 10\n");
    let mut c = relay.client();
    // The sender's domain loops too: so does the bounce, from <>.
    c.message(
        "s@loop.test",
        &["r@loop.test"],
        "Subject: round and round\r\n\r\nhello\r\n",
    );
    let log = relay.wait_log("and the sender is <>: no bounce, dropped", 1);
    assert!(log.contains("sender non-delivery notification"), "{log}");
    relay.wait_spool_empty();
    let log = relay.log();
    assert!(log.matches("mail forwarding loop").count() >= 2, "{log}");
    assert_eq!(util::count(&relay.maildir_new()), 0);
    // Nothing is still going round.
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(
        relay.log().matches("queued as").count(),
        log.matches("queued as").count()
    );
}
