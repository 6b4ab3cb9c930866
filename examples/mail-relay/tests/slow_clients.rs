//! Slow clients: a command line or a DATA block gets one deadline however
//! its bytes trickle in, and near `max_sessions` the timeouts shorten
//! (stress mode), so that a crowd of byte-a-second clients cannot lock
//! everyone else out.

mod util;

use std::io::{ErrorKind, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use util::{read_rest, Client, Relay, LIMIT};

/// Writes `bytes` one at a time, `gap` apart, until done or the peer
/// closes; on its own thread.
fn drip(mut w: TcpStream, bytes: Vec<u8>, gap: Duration) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        for b in bytes {
            if w.write_all(&[b]).is_err() {
                return;
            }
            std::thread::sleep(gap);
        }
    })
}

#[test]
fn a_dripped_command_line_gets_one_deadline() {
    let relay = Relay::start("drip-cmd", "[timeouts]\ngreeting = \"1s\"\n");
    let mut c = relay.client();
    // 70 octets at 50 ms: 3.5 s for the line, each gap far below the 1 s.
    let line = format!("EHLO {}\r\n", "x".repeat(63)).into_bytes();
    let t = drip(c.w.try_clone().unwrap(), line, Duration::from_millis(50));
    let text = c.expect(421);
    assert!(text.contains("timeout exceeded"), "{text}");
    assert_eq!(read_rest(&mut c), "");
    t.join().unwrap();
    assert!(relay.log().contains("timeout after CONNECT from"));
}

#[test]
fn a_dripped_data_block_is_cut_off() {
    let relay = Relay::start("drip-data", "[timeouts]\ndata_block = \"1s\"\n");
    let mut c = relay.client();
    c.open_data("s@example.test", &["a@example.test"]);
    // 10 octets a second, far below min_data_rate (500), for 10 s, then
    // the final dot: each gap is far below data_block.
    let body = format!("{}.\r\n", "abcd\r\n".repeat(17)).into_bytes();
    let t = drip(c.w.try_clone().unwrap(), body, Duration::from_millis(100));
    let text = c.expect(421);
    assert!(text.contains("timeout exceeded"), "{text}");
    t.join().unwrap();
    assert!(relay.log().contains("timeout after DATA from"));
    assert_eq!(util::count(&relay.spool_queue()), 0);
}

/// Raises this process's open-file limit to `want` (within the hard
/// limit), failing the test if the hard limit is lower.
fn raise_nofile(want: libc::rlim_t) {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct we pass, which lives on our
    // stack for the whole call.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) }, 0);
    assert!(
        lim.rlim_max >= want,
        "this test needs {want} open files; the hard limit (ulimit -Hn) is {}",
        lim.rlim_max
    );
    if lim.rlim_cur < want {
        lim.rlim_cur = want;
        // SAFETY: setrlimit reads the struct we pass, alive for the call.
        assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) }, 0);
    }
}

#[test]
fn a_client_is_served_while_a_thousand_drip() {
    const SLOW: usize = 1000;
    raise_nofile(4096);
    let relay = Relay::start_with_fd_limit(
        "drip-crowd",
        &format!(
            "max_sessions = {SLOW}\nmax_sessions_per_client = {SLOW}\n\
             [timeouts]\ngreeting = \"60s\"\nstress = \"1s\"\n"
        ),
        4096,
    );
    // The crowd: every slot taken, each sending a byte every 200 ms (a
    // per-read timeout of 60 s never fires for them).
    let mut crowd: Vec<TcpStream> = (0..SLOW)
        .map(|_| TcpStream::connect(relay.addr).unwrap())
        .collect();
    for s in &crowd {
        s.set_nonblocking(true).unwrap();
    }
    let t0 = Instant::now();
    let mut next_drip = Instant::now();
    let mut served = false;
    while t0.elapsed() < LIMIT {
        if Instant::now() >= next_drip {
            crowd.retain_mut(|s| match s.write(b"E") {
                Ok(_) => true,
                Err(e) => e.kind() == ErrorKind::WouldBlock,
            });
            next_drip += Duration::from_millis(200);
        }
        let mut c = Client::connect(relay.addr);
        let (code, _) = c.reply().expect("a greeting");
        if code == 220 {
            c.message(
                "s@example.test",
                &["a@example.test"],
                "Subject: hi\r\n\r\nx\r\n",
            );
            c.cmd("QUIT", 221);
            served = true;
            break;
        }
        assert_eq!(code, 421);
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        served,
        "never served while {SLOW} clients dripped:\n{}",
        relay.log()
    );
    relay.wait_delivered(1);
    assert!(relay.log().contains("stress mode on"), "{}", relay.log());
}
