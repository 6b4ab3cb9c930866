//! Helpers shared by the runtime's integration tests: running one test in a
//! child process (for behaviour that aborts, faults or must measure the whole
//! process's memory), a runtime bounded by a watchdog, forced interleavings.

#![allow(dead_code)]

use std::panic::{self, AssertUnwindSafe};
use std::process::{Command, Output};
use std::sync::{mpsc, Mutex, Once};
use std::time::Duration;

const CHILD: &str = "CORO_TEST_CHILD";

/// Runs the test named `test` of this binary in a child process.
pub fn child(test: &str) -> Output {
    child_with_env(test, &[])
}

/// [`child`] with extra environment variables.
pub fn child_with_env(test: &str, env: &[(&str, &str)]) -> Output {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(CHILD, test)
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

/// Runs `test` in a child process that must exit successfully; returns its
/// standard output.
#[track_caller]
pub fn child_ok(test: &str) -> String {
    let out = child(test);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// Whether this process is the child running `test`.
pub fn is_child(test: &str) -> bool {
    std::env::var(CHILD).as_deref() == Ok(test)
}

/// Upper bound on one test body: only turns a hang into a failure.
pub const LIMIT: std::time::Duration = std::time::Duration::from_secs(30);

/// Runs `f` as the main green thread of a fresh runtime, with an OS-thread
/// watchdog that aborts the process (naming the test) if it runs past
/// [`LIMIT`]. Unlike a `with_timeout` around `f`, the watchdog adds no scope
/// to what `f` sees (its effective deadline, its cancellations).
#[track_caller]
pub fn run<T: 'static>(f: impl FnOnce() -> T + 'static) -> T {
    let name = std::thread::current().name().unwrap_or("test").to_owned();
    let (done, wait) = std::sync::mpsc::channel::<()>();
    let dog = std::thread::spawn(move || {
        if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = wait.recv_timeout(LIMIT) {
            eprintln!("{name}: ran past {LIMIT:?}; aborting");
            std::process::abort();
        }
    });
    let r = coro_runtime::run(f);
    drop(done);
    dog.join().unwrap();
    r
}

/// Yields (no timer involved) until `cond` holds, for forcing an
/// interleaving; panics after a million yields, saying what it waited for.
#[track_caller]
pub fn yield_until(what: &str, mut cond: impl FnMut() -> bool) {
    for _ in 0..1_000_000 {
        if cond() {
            return;
        }
        coro_runtime::yield_now();
    }
    panic!("gave up waiting for {what}");
}

/// Runs `f` on its own OS thread; `Err` if it does not finish within `secs`
/// (a hang is a failure, not a stuck CI run; a thread that hangs is left
/// behind, and the test process exits anyway). A panic in `f` is resumed.
pub fn within<T: Send + 'static>(
    secs: u64,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let r = panic::catch_unwind(AssertUnwindSafe(f));
        let _ = tx.send(r);
    });
    match rx.recv_timeout(Duration::from_secs(secs)) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(p)) => panic::resume_unwind(p),
        Err(_) => Err(format!("did not finish within {secs} s")),
    }
}

/// [`within`], failing the test on a timeout.
#[track_caller]
pub fn bounded<T: Send + 'static>(secs: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
    within(secs, f).unwrap_or_else(|e| panic!("{e}"))
}

/// Every record logged in this process since [`capture_logs`], with its level.
pub static LOGS: Mutex<Vec<(log::Level, String)>> = Mutex::new(Vec::new());

struct Capture;
impl log::Log for Capture {
    fn enabled(&self, _: &log::Metadata<'_>) -> bool {
        true
    }
    fn log(&self, r: &log::Record<'_>) {
        LOGS.lock().unwrap().push((r.level(), r.args().to_string()));
    }
    fn flush(&self) {}
}

/// Installs the logger that records into [`LOGS`] (once per process).
pub fn capture_logs() {
    static INIT: Once = Once::new();
    INIT.call_once(|| {
        log::set_logger(&Capture).unwrap();
        log::set_max_level(log::LevelFilter::Trace);
    });
}
