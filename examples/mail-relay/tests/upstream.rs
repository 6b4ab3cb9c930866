//! Delivery to an SMTP upstream, with Postfix's `smtp-sink` as the
//! upstream: content arrives byte-identical after dot-stuffing both ways,
//! connections are reused (counted by the sink's sessions), the client
//! falls back to HELO and to commands in turn, and will not send 8-bit
//! content to a server without 8BITMIME.

mod util;

use util::{sent_content, Relay, Sink, TempDir};

/// A body with every line dot-stuffing cares about, stuffed as a client
/// sends it, and what must arrive (unstuffed, LF line ends as the sink
/// writes them).
const STUFFED: &str = concat!(
    "Subject: dots\r\n",
    "\r\n",
    "..leading dot\r\n",
    "...two dots\r\n",
    "..\r\n",
    " . space dot\r\n",
    "trailing spaces   \r\n",
    "caf\u{e9} 8-bit \u{2713}\r\n",
    "\r\n",
    "last line\r\n",
);
const ARRIVES: &str = concat!(
    "Subject: dots\n",
    "\n",
    ".leading dot\n",
    "..two dots\n",
    ".\n",
    " . space dot\n",
    "trailing spaces   \n",
    "caf\u{e9} 8-bit \u{2713}\n",
    "\n",
    "last line\n",
);

#[test]
fn content_arrives_byte_identical() {
    let tmp = TempDir::new("up-content");
    let sink = Sink::start(&tmp.0, &[]);
    let relay = Relay::start_in(&tmp.0, &format!("relayhost = \"{}\"\n", sink.addr()));
    let mut c = relay.client();
    c.cmd("EHLO client.test", 250);
    c.cmd("MAIL FROM:<s@example.test> BODY=8BITMIME", 250);
    c.cmd("RCPT TO:<a@example.test>", 250);
    c.cmd("RCPT TO:<b@example.test>", 250);
    c.cmd("DATA", 354);
    c.send_raw(STUFFED.as_bytes());
    c.cmd(".", 250);
    let got = sink.wait_messages(1);
    let dump = &got[0];
    assert!(
        dump.contains("X-Mail-Args: <s@example.test> BODY=8BITMIME\n"),
        "{dump}"
    );
    assert!(dump.contains("X-Rcpt-Args: <a@example.test>\nX-Rcpt-Args: <b@example.test>\n"));
    let content = sent_content(dump);
    assert!(content.starts_with("Received: from client.test ([127.0.0.1])\n\tby relay.test"));
    // The sink ends each dump with an empty line of its own.
    let body = content.strip_suffix('\n').unwrap();
    assert!(body.ends_with(&format!("\n{ARRIVES}")), "{body:?}");
    relay.wait_spool_empty();
    let log = relay.log();
    assert_eq!(
        log.matches("status=sent (250 2.0.0 Ok)").count(),
        2,
        "{log}"
    );
    assert!(
        log.contains(&format!(
            "to=<a@example.test>, relay=127.0.0.1[127.0.0.1]:{}",
            sink.port
        )),
        "{log}"
    );
}
