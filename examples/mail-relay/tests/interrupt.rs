//! The back door's `interrupt` on the relay's own threads: the core ones
//! (main, committer, journal, queue runner, acceptor) carry on (restarted,
//! or the interrupt ignored, each with a log line), and an interrupted
//! session is told why.

mod util;

use std::path::Path;

use util::{backdoor, Relay, TempDir};

/// The id of the green thread whose name starts with `name`.
fn thread_id(path: &Path, name: &str) -> u64 {
    let out = backdoor(path, "threads");
    out.lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let id = f.first()?.parse().ok()?;
            l.split("  ")
                .last()
                .is_some_and(|n| n.trim_start().starts_with(name))
                .then_some(id)
        })
        .unwrap_or_else(|| panic!("no thread {name:?}:\n{out}"))
}

#[test]
fn core_threads_carry_on_after_the_back_doors_interrupt() {
    let tmp = TempDir::new("interrupt-core");
    let path = tmp.0.join("bd");
    let mut relay = Relay::start_in(&tmp.0, &format!("backdoor = \"{}\"\n", path.display()));
    for name in ["main", "committer", "journal", "queue runner", "acceptor"] {
        let id = thread_id(&path, name);
        let out = backdoor(&path, &format!("interrupt {id}"));
        assert!(out.contains(&format!("interrupted #{id}")), "{out}");
    }
    // Everything still works: accept, commit, deliver, journal.
    for i in 0..3 {
        let mut c = relay.client();
        c.message(
            "s@example.test",
            &["a@example.test"],
            &format!("Subject: {i}\r\n\r\nx\r\n"),
        );
        c.cmd("QUIT", 221);
    }
    relay.wait_delivered(3);
    let log = relay.log();
    for line in [
        "main thread interrupted (by the back door?): ignored",
        "committer thread #",
        "journal thread #",
        "acceptor thread #",
        "queue runner ended",
    ] {
        assert!(log.contains(line), "{line:?} not in:\n{log}");
    }
    // And it still stops gracefully.
    relay.terminate();
    assert!(relay.wait_exit().success(), "{}", relay.log());
    assert!(relay.log().contains("stopped;"));
}

#[test]
fn an_interrupted_session_is_told_why() {
    let tmp = TempDir::new("interrupt-session");
    let path = tmp.0.join("bd");
    let relay = Relay::start_in(&tmp.0, &format!("backdoor = \"{}\"\n", path.display()));
    let mut c = relay.client();
    c.cmd("EHLO client.test", 250);
    let id = thread_id(&path, "smtp [127.0.0.1]");
    backdoor(&path, &format!("interrupt {id}"));
    let text = c.expect(421);
    assert!(
        text.contains("session ended by the administrator"),
        "{text}"
    );
    let log = relay.wait_log("interrupted by the administrator", 1);
    assert!(
        log.contains(&format!("green thread #{id} 'smtp [127.0.0.1]")),
        "{log}"
    );
    assert!(log.contains("interrupted by uid"), "{log}");
    assert!(!log.contains("(shutdown)"), "{log}");
    // The relay goes on.
    relay.client().cmd("NOOP", 250);
}
