//! The one-runtime-per-core example, run as a real
//! process: two runtimes share a port through `SO_REUSEPORT`, every
//! connection is answered, `stats` gathers the counts of both runtimes over
//! their `Send` channels, and closing standard input stops both through
//! their `Handle`s.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(60);
const CLIENTS: usize = 8;

/// The example's binary, built if `cargo test` did not build it already.
fn example() -> PathBuf {
    let dir = std::env::current_exe()
        .unwrap()
        .parent() // deps
        .and_then(|d| d.parent())
        .unwrap()
        .join("examples");
    let bin = dir.join("per_core");
    if !bin.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let ok = Command::new(cargo)
            .args(["build", "-p", "coro-examples", "--example", "per_core"])
            .status()
            .unwrap()
            .success();
        assert!(ok, "building the per_core example failed");
    }
    bin
}

/// Kills the child if the test fails half-way.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn ask(conn: &mut (TcpStream, BufReader<TcpStream>), line: &str) -> String {
    writeln!(conn.0, "{line}").unwrap();
    let mut answer = String::new();
    conn.1.read_line(&mut answer).unwrap();
    answer.trim_end().to_owned()
}

#[test]
fn runtimes_per_core_share_a_port_and_talk_over_send_channels() {
    let mut server = Server(
        Command::new(example())
            .arg("127.0.0.1:0")
            .env("CORO_PER_CORE_THREADS", "2")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut log = BufReader::new(server.0.stderr.take().unwrap());
    let mut first = String::new();
    log.read_line(&mut first).unwrap();
    let addr = first
        .split_whitespace()
        .find(|w| w.starts_with("127.0.0.1:"))
        .unwrap_or_else(|| panic!("no address in {first:?}"))
        .to_owned();
    // The rest of its log is read as it comes, so the server never blocks
    // on a full pipe, and checked once it has stopped.
    let rest = std::thread::spawn(move || {
        let mut rest = String::new();
        let _ = std::io::Read::read_to_string(&mut log, &mut rest);
        rest
    });

    let mut conns: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let s = TcpStream::connect(&addr).unwrap();
            s.set_read_timeout(Some(LIMIT)).unwrap();
            let r = BufReader::new(s.try_clone().unwrap());
            (s, r)
        })
        .collect();
    let mut cores = Vec::new();
    for c in &mut conns {
        let answer = ask(c, "hello");
        let core: usize = answer
            .strip_prefix("core ")
            .and_then(|r| r.strip_suffix(": hello"))
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("unexpected answer {answer:?}"));
        assert!(core < 2);
        cores.push(core);
    }
    // Every runtime reports, whichever one was asked.
    let stats = ask(&mut conns[0], "stats");
    assert!(
        stats.starts_with(&format!("stats: {CLIENTS} open in all; core 0: ")),
        "{stats}"
    );
    assert!(stats.contains("; core 1: "), "{stats}");
    for core in 0..2 {
        let n = cores.iter().filter(|&&c| c == core).count();
        assert!(stats.contains(&format!("core {core}: {n} open")), "{stats}");
    }

    // Closing stdin stops both runtimes through their handles.
    drop(server.0.stdin.take());
    let start = Instant::now();
    let status = loop {
        if let Some(s) = server.0.try_wait().unwrap() {
            break s;
        }
        assert!(start.elapsed() < LIMIT, "the server did not stop");
        std::thread::sleep(Duration::from_millis(20));
    };
    let rest = rest.join().unwrap();
    assert!(status.success(), "{rest}");
    assert!(
        rest.contains("per_core[0]: done") && rest.contains("per_core[1]: done"),
        "{rest}"
    );
    assert!(rest.contains("bye"), "{rest}");
}
