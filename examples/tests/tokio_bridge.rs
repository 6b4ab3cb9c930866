//! The tokio bridge example, run as a real process against a
//! `redis-server` the test starts (Debian's package, which
//! scripts/test.sh installs) on a free loopback port in a temporary
//! directory: every part of it runs and says what it did.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(60);

/// The example's binary, built by `cargo test` beside this test's (both
/// need the `tokio-bridge` feature).
fn example() -> PathBuf {
    let bin = std::env::current_exe()
        .unwrap()
        .parent() // deps
        .and_then(|d| d.parent())
        .unwrap()
        .join("examples")
        .join("tokio_bridge");
    assert!(
        bin.exists(),
        "the tokio_bridge example is not built at {} (run `cargo build -p coro-examples \
         --features tokio-bridge --example tokio_bridge`)",
        bin.display()
    );
    bin
}

/// A redis-server of the test, killed and its directory removed on drop.
struct Redis {
    child: Child,
    dir: PathBuf,
    port: u16,
}

impl Redis {
    fn start() -> Redis {
        let dir = std::env::temp_dir().join(format!("coro-example-redis-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .unwrap()
            .port();
        let child = Command::new("redis-server")
            .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot start redis-server ({e}): this test needs Debian's redis-server \
                     package (scripts/test.sh installs it)"
                )
            });
        let redis = Redis { child, dir, port };
        let deadline = Instant::now() + LIMIT;
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "redis-server did not listen on {port}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        redis
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[test]
fn the_example_calls_reqwest_and_redis_from_green_threads() {
    let redis = Redis::start();
    let mut child = Command::new(example())
        .arg(format!("redis://127.0.0.1:{}/", redis.port))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + LIMIT;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the example ran past {LIMIT:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 4, "{stdout}");
    assert!(
        lines[0].starts_with("100 GETs of a 100 ms page: "),
        "{stdout}"
    );
    assert!(
        lines[1].starts_with("a GET that never gets an answer: Err(Timeout)"),
        "{stdout}"
    );
    assert!(
        lines[2].starts_with("100 SET+GET+DEL over one connection: "),
        "{stdout}"
    );
    assert!(
        lines[3].starts_with("a BLPOP on an empty list: Err(Timeout)"),
        "{stdout}"
    );
}
