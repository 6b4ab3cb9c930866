//! `mailq` and `flush` through the back door (the running relay's view),
//! and `mailq` from the spool when the relay is not running.

mod util;

use util::{relay_to, Relay, Sink, TempDir};

#[test]
fn mailq_and_flush_through_the_back_door() {
    let tmp = TempDir::new("ctl-bd");
    let port = util::free_port();
    let door = tmp.0.join("bd");
    let mut relay = Relay::start_in(
        &tmp.0,
        &format!(
            "backdoor = \"{}\"\n{}",
            door.display(),
            relay_to(
                &format!("127.0.0.1:{port}"),
                "[queue]\nminimal_backoff_time = \"1h\"\nmaximal_backoff_time = \"1h\"\n"
            )
        ),
    );
    let mut c = relay.client();
    c.message(
        "s@example.test",
        &["a@example.test"],
        "Subject: 1\r\n\r\n1\r\n",
    );
    c.message(
        "s@example.test",
        &["b@example.test"],
        "Subject: 2\r\n\r\n2\r\n",
    );
    relay.wait_log("status=deferred", 2);
    let q = relay.mailq();
    assert!(q.starts_with("-Queue ID-"), "{q}");
    assert_eq!(q.matches("(attempt 1, next in 59m").count(), 2, "{q}");
    assert!(
        q.contains("a@example.test") && q.contains("b@example.test"),
        "{q}"
    );
    assert!(q.ends_with("in 2 Requests.\n"), "{q}");
    // It was the running relay that answered.
    assert!(relay.log().contains("session #"), "{}", relay.log());

    let sink = Sink::start_on(port, &tmp.0, &[]);
    let (ok, out) = relay.command(&["flush"]);
    assert!(ok, "{out}");
    assert_eq!(out, "2 deferred messages are due now\n");
    sink.wait_messages(2);
    relay.wait_spool_empty();
    assert_eq!(relay.mailq(), "Mail queue is empty\n");

    // Stopped: mailq reads the spool; flush has no one to ask.
    relay.terminate();
    assert!(relay.wait_exit().success());
    assert_eq!(relay.mailq(), "Mail queue is empty\n");
    let (ok, out) = relay.command(&["flush"]);
    assert!(
        !ok && out.contains("no mail-relay runs on this spool"),
        "{out}"
    );
}
