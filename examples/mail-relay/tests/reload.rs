//! SIGHUP reloads the configuration: live keys take effect, the others
//! are logged as needing a restart, a bad file keeps the running
//! configuration, and the log file is reopened (for `logrotate`).

mod util;

use util::{Relay, TempDir};

/// Replaces the line starting with `key =` in the relay's file (or adds it).
fn set(relay: &Relay, key: &str, line: &str) {
    let path = relay.config_path();
    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines: Vec<String> = text
        .lines()
        .filter(|l| !l.starts_with(&format!("{key} =")))
        .map(str::to_owned)
        .collect();
    lines.insert(0, line.to_owned());
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
}

#[test]
fn sighup_reloads_what_can_change_live() {
    let tmp = TempDir::new("reload");
    let log_file = tmp.0.join("mail.log");
    let relay = Relay::start_with_args(
        &tmp.0,
        "max_recipients = 1\n",
        &["--log-file", log_file.to_str().unwrap()],
    );
    let log = || std::fs::read_to_string(&log_file).unwrap_or_default();
    let wait = |needle: &str| {
        let t0 = std::time::Instant::now();
        while !log().contains(needle) {
            assert!(
                t0.elapsed() < util::LIMIT,
                "{needle:?} not logged:\n{}",
                log()
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    };
    let mut c = relay.client();
    c.cmd("EHLO client.test", 250);
    c.cmd("MAIL FROM:<s@example.test>", 250);
    c.cmd("RCPT TO:<a@example.test>", 250);
    c.cmd("RCPT TO:<b@example.test>", 452);
    c.cmd("RSET", 250);

    // A live key and one that needs a restart; logrotate moved the log.
    set(&relay, "max_recipients", "max_recipients = 2");
    set(&relay, "maildir", "maildir = \"/elsewhere\"");
    std::fs::rename(&log_file, tmp.0.join("mail.log.1")).unwrap();
    relay.hangup();
    wait("now in force: max_recipients");
    assert!(
        log().contains("maildir changed: needs a restart"),
        "{}",
        log()
    );
    // The same session sees the new limit at its next command.
    c.cmd("MAIL FROM:<s@example.test>", 250);
    c.cmd("RCPT TO:<a@example.test>", 250);
    c.cmd("RCPT TO:<b@example.test>", 250);
    c.cmd("DATA", 354);
    c.send_raw(b"Subject: x\r\n\r\nx\r\n");
    c.cmd(".", 250);
    // Still the old Maildir.
    relay.wait_delivered(1);

    // A broken file keeps what runs.
    set(&relay, "max_recipients", "max_recipients = \"many\"");
    relay.hangup();
    wait("error: reload at SIGHUP");
    assert!(
        log().contains("keeping the running configuration"),
        "{}",
        log()
    );
    c.cmd("MAIL FROM:<s@example.test>", 250);
    c.cmd("RCPT TO:<a@example.test>", 250);
    c.cmd("RCPT TO:<b@example.test>", 250);
    c.cmd("QUIT", 221);
    assert!(relay.child.id() > 0);
    assert_eq!(relay.client().cmd("NOOP", 250), "2.0.0 Ok");
}
