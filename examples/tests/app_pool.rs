//! The `app_pool` example with real worker processes: drives the front
//! server with TCP clients and checks which worker pids answer: the same
//! worker until `--max-requests`, then a new one (the old process is gone);
//! a new worker after `restart.txt` is touched; an idle worker reaped; all
//! workers stopped on QUIT.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// No wait in this test may take longer.
const LIMIT: Duration = Duration::from_secs(20);

/// The example's binary, built by `cargo test` beside this test's.
fn example_binary() -> PathBuf {
    let me = std::env::current_exe().unwrap();
    let dir = me.parent().and_then(Path::parent).unwrap();
    let bin = dir.join("examples").join("app_pool");
    assert!(
        bin.exists(),
        "the app_pool example is not built at {} (cargo test builds it; run `cargo build --example app_pool`)",
        bin.display()
    );
    bin
}

/// The front server; killed if the test fails.
struct Front {
    child: Child,
    addr: String,
}

impl Drop for Front {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(root: &Path) -> Front {
    let mut child = Command::new(example_binary())
        .args(["--listen", "127.0.0.1:0", "--root"])
        .arg(root)
        .args(["--max", "3", "--max-requests", "3", "--max-idle-ms", "1500"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_string();
    Front { child, addr }
}

fn request(front: &Front, what: &str) -> String {
    let mut s = TcpStream::connect(&front.addr).unwrap();
    s.set_read_timeout(Some(LIMIT)).unwrap();
    s.write_all(format!("{what}\n").as_bytes()).unwrap();
    let mut reply = String::new();
    s.read_to_string(&mut reply).unwrap();
    reply
}

/// The pid that served `GET app`, and its served count.
fn get(front: &Front, app: &str) -> (u32, u32) {
    let r = request(front, &format!("GET {app}"));
    let field = |name: &str| -> u32 {
        r.split_whitespace()
            .find_map(|f| f.strip_prefix(name))
            .unwrap_or_else(|| panic!("no {name} in {r:?}"))
            .parse()
            .unwrap()
    };
    (field("pid="), field("served="))
}

fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

#[track_caller]
fn wait_until(what: &str, cond: impl Fn() -> bool) {
    let t = Instant::now();
    while !cond() {
        assert!(t.elapsed() < LIMIT, "still waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn workers_are_recycled_restarted_and_reaped() {
    let root = std::env::temp_dir().join(format!("coro-app-pool-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let front = start(&root);

    // One worker serves max_requests (3) requests, then is recycled.
    let (p1, n1) = get(&front, "blog");
    let (p2, n2) = get(&front, "blog");
    let (p3, n3) = get(&front, "blog");
    assert_eq!((p1, p2, p3), (p1, p1, p1), "the same worker");
    assert_eq!((n1, n2, n3), (1, 2, 3));
    wait_until("the recycled worker to exit", || !alive(p1));
    let (p4, n4) = get(&front, "blog");
    assert_ne!(p4, p1, "a new worker after max_requests");
    assert_eq!(n4, 1);
    assert!(alive(p4));

    // Touching restart.txt restarts the group at its next request. Its
    // directory is there already (so the documented `touch` works on a
    // fresh root), made when the app got its first worker.
    let tmp = root.join("apps/blog/tmp");
    assert!(tmp.is_dir(), "{} was not made", tmp.display());
    std::fs::File::create(tmp.join("restart.txt")).unwrap();
    let (p5, _) = get(&front, "blog");
    assert_ne!(p5, p4, "a new worker after restart.txt");
    wait_until("the restarted worker to exit", || !alive(p4));
    let (p6, _) = get(&front, "blog");
    assert_eq!(p6, p5, "restart.txt unchanged: no restart");

    // A second application gets its own worker; idle workers are reaped.
    let (s1, _) = get(&front, "shop");
    assert!(s1 != p5 && alive(s1));
    assert_eq!(request(&front, "STATUS"), "count=2 active=0 groups=2\n");
    wait_until("idle workers to be reaped", || !alive(s1) && !alive(p5));
    assert_eq!(request(&front, "STATUS"), "count=0 active=0 groups=0\n");

    // QUIT stops the server and its workers.
    let (q, _) = get(&front, "blog");
    assert_eq!(request(&front, "QUIT"), "bye\n");
    wait_until("the worker to stop", || !alive(q));
    let mut front = front;
    let t = Instant::now();
    loop {
        if let Some(status) = front.child.try_wait().unwrap() {
            assert!(status.success(), "{status}");
            break;
        }
        assert!(t.elapsed() < LIMIT, "the front server did not exit");
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn bad_flags_are_errors_naming_them() {
    let out = Command::new(example_binary())
        .args(["--max", "many"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--max needs a number"), "{err}");
}
