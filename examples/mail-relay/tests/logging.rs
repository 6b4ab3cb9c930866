//! The log lines a Postfix admin greps for (`message-id=<…>`,
//! `delays=a/b/c/d`, `removed`), `--log-file`, and the `Date:` and
//! `Message-ID:` headers added to a trusted client's submission that
//! lacks them.

mod util;

use util::{Relay, TempDir};

#[test]
fn a_message_leaves_the_lines_admins_grep_for() {
    // A slow disk: each commit takes 200 ms more, which delays= shows.
    let relay = Relay::start("greplines", "[testing]\ncommit_delay = \"200ms\"\n");
    let mut c = relay.client();
    let reply = c.message(
        "s@example.test",
        &["a@example.test"],
        "Message-ID: <abc.123@client.test>\r\nSubject: x\r\n\r\nx\r\n",
    );
    let id = reply.rsplit(' ').next().unwrap().to_owned();
    relay.wait_delivered(1);
    let log = relay.wait_log(&format!("{id}: removed"), 1);
    assert!(
        log.contains(&format!("{id}: message-id=<abc.123@client.test>")),
        "{log}"
    );
    let to = log
        .lines()
        .find(|l| l.contains(&format!("{id}: to=<a@example.test>")))
        .unwrap();
    let delays = to
        .split("delays=")
        .nth(1)
        .unwrap()
        .split(',')
        .next()
        .unwrap();
    let parts: Vec<f64> = delays.split('/').map(|p| p.parse().unwrap()).collect();
    assert_eq!(parts.len(), 4, "{to}");
    assert!(parts[0] >= 0.2, "a: receiving includes the commit: {to}");
}

#[test]
fn trusted_submissions_get_the_missing_date_and_message_id() {
    let relay = Relay::start("missing", "add_missing_headers = true\n");
    let mut c = relay.client();
    let reply = c.message(
        "s@example.test",
        &["a@example.test"],
        "Subject: bare\r\n\r\nx\r\n",
    );
    let id = reply.rsplit(' ').next().unwrap().to_owned();
    // One with both keeps its own; one with no header section at all gets
    // them ahead of its body.
    c.message(
        "s@example.test",
        &["a@example.test"],
        "Date: Mon, 1 Jan 2024 00:00:00 +0000\r\nMessage-ID: <own@client.test>\r\n\r\ny\r\n",
    );
    c.message("s@example.test", &["a@example.test"], "just a body\r\n");
    let got = relay.wait_delivered(3);
    let bare = got.iter().find(|m| m.contains("Subject: bare")).unwrap();
    assert!(bare.contains("\nDate: "), "{bare}");
    assert!(
        bare.contains(&format!("\nMessage-ID: <{id}@relay.test>\n\nx\n")),
        "{bare}"
    );
    let own = got.iter().find(|m| m.contains("own@client.test")).unwrap();
    assert_eq!(own.matches("Date:").count(), 1, "{own}");
    assert_eq!(own.matches("Message-ID:").count(), 1, "{own}");
    let body = got.iter().find(|m| m.contains("just a body")).unwrap();
    assert!(body.contains("Message-ID: <"), "{body}");
    assert!(body.ends_with(">\n\njust a body\n"), "{body}");
    assert!(relay
        .log()
        .contains(&format!("{id}: message-id=<{id}@relay.test>")));
}

#[test]
fn untrusted_submissions_are_left_as_they_are() {
    let relay = Relay::start(
        "untrusted-headers",
        "add_missing_headers = true\nmynetworks = [\"10.0.0.0/8\"]\nlocal_domains = [\"example.test\"]\n",
    );
    let mut c = relay.client();
    c.message(
        "s@example.test",
        &["a@example.test"],
        "Subject: bare\r\n\r\nx\r\n",
    );
    let m = &relay.wait_delivered(1)[0];
    assert!(!m.contains("Message-ID:"), "{m}");
    assert!(!m.contains("\nDate:"), "{m}");
}

#[test]
fn log_file_takes_the_log() {
    let tmp = TempDir::new("logfile");
    let file = tmp.0.join("mail.log");
    let relay = Relay::start_with_args(&tmp.0, "", &["--log-file", file.to_str().unwrap()]);
    relay.client().cmd("QUIT", 221);
    let t0 = std::time::Instant::now();
    loop {
        let log = std::fs::read_to_string(&file).unwrap_or_default();
        if log.contains("disconnect from [127.0.0.1]") {
            assert!(log.contains("daemon started"), "{log}");
            break;
        }
        assert!(t0.elapsed() < util::LIMIT, "nothing in {}", file.display());
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(
        !relay.log().contains("disconnect from"),
        "the log went to stderr too"
    );
}
