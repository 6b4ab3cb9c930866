//! Group commit: sessions that finish DATA while a commit is under way
//! share the next batch (one batch file, one round of fsyncs), and each of
//! them gets its 250 only after that batch is durable.

mod util;

use std::time::{Duration, Instant};

use util::Relay;

#[test]
fn sessions_finishing_together_share_one_batch() {
    // Every batch takes at least a second, as on a very slow disk, so the
    // messages that arrive during the first batch wait for the second.
    let relay = Relay::start("group", "[testing]\ncommit_delay = \"1s\"\n");
    let mut first = relay.client();
    first.open_data("s@example.test", &["a@example.test"]);
    first.send_raw(b"first\r\n.\r\n");
    // The first batch is (most likely) under way when the others finish
    // their DATA; either way some batch holds more than one message.
    let others: Vec<_> = (0..4)
        .map(|i| {
            let addr = relay.addr;
            std::thread::spawn(move || {
                let mut c = util::Client::connect(addr);
                c.expect(220);
                let t = Instant::now();
                c.message(
                    "s@example.test",
                    &["a@example.test"],
                    &format!("other {i}\r\n"),
                );
                t.elapsed()
            })
        })
        .collect();
    first.expect(250);
    for o in others {
        // Each waited for a durable batch, not for nothing.
        assert!(o.join().unwrap() >= Duration::from_millis(900));
    }
    relay.wait_delivered(5);
    let log = relay.log();
    let batches: Vec<usize> = log
        .lines()
        .filter_map(|l| {
            l.split(" committed")
                .next()?
                .trim_end_matches(" messages")
                .trim_end_matches(" message")
                .rsplit(' ')
                .next()?
                .parse()
                .ok()
        })
        .collect();
    assert_eq!(batches.iter().sum::<usize>(), 5, "{log}");
    assert!(
        batches.iter().any(|&n| n >= 2),
        "no two sessions shared a batch: {batches:?}\n{log}"
    );
}
