//! The tokio bridge (`coro::tokio`, feature `tokio-bridge`): futures that
//! need a tokio runtime, called from green threads.
//!
//! * `calls`: outputs, thousands of calls in flight without an OS thread
//!   each, panics, calls from plain OS threads and from the tokio side,
//!   the bridge's `Handle`.
//! * `cancel`: a timeout, an interrupt, a cancelled scope or an abort ends
//!   the wait at once and drops the tokio task.
//! * `lifecycle`: lazy start, settings, shutdown and process exit, each in
//!   a child process of its own (the bridge is one per process).
//! * `with_reqwest`, `with_redis`, `with_sqlx`: the real clients against
//!   servers the tests start (`servers`, `util::postgres`).
//!
//! One test binary for all of them: the clients are linked once.

#[path = "../util/mod.rs"]
mod util;

mod calls;
mod cancel;
mod lifecycle;
mod servers;
mod with_redis;
mod with_reqwest;
mod with_sqlx;

use std::process::Command;
use std::time::Duration;

/// The bound on a wait that ends "at once" (a call cut short by a
/// deadline, a cancel): loose, since the machine may be loaded; what
/// matters is that it ends long before the call would (never, or at the
/// test's limit). The bridge's figures are in its benchmark.
pub const AT_ONCE: Duration = Duration::from_secs(10);

/// How many threads of this process have `name` (their `comm`, which
/// Linux cuts to 15 bytes).
pub fn threads_named(name: &str) -> usize {
    let tasks = std::fs::read_dir("/proc/self/task").unwrap();
    tasks
        .flatten()
        .filter(|t| {
            std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.trim_end() == name)
        })
        .count()
}

/// How many threads this process has.
pub fn threads() -> usize {
    std::fs::read_dir("/proc/self/task").unwrap().count()
}

const CHILD: &str = "CORO_TOKIO_BRIDGE_CHILD";

/// Whether this process is the child that runs the test `name`.
pub fn is_child(name: &str) -> bool {
    std::env::var(CHILD).as_deref() == Ok(name)
}

/// Runs the test `name` (its full path, `lifecycle::...`) of this binary
/// in a child process with `env`, bounded by [`util::LIMIT`].
pub fn child(name: &str, env: &[(&str, &str)]) -> util::child::Finished {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env(CHILD, name)
        .env_remove(coro::tokio::WORKERS_ENV)
        .envs(env.iter().copied());
    util::child::run(&mut cmd, util::LIMIT)
}

/// [`child`], which must succeed; returns its standard output.
#[track_caller]
pub fn child_ok(name: &str, env: &[(&str, &str)]) -> String {
    let out = child(name, env);
    assert!(
        out.status.success(),
        "child {name} failed: {}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        out.stdout,
        out.stderr
    );
    out.stdout
}
