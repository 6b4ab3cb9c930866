//! The newcomer's test commands stay fast and work in other setups.
//!
//! * `cargo test --workspace` does not build the benches' peers (may,
//!   criterion), while CI still lints the benches.
//! * With `CARGO_TARGET_DIR` pointing elsewhere (IDEs and CI caches set it),
//!   the inner cargo keeps the user's settings (and so finds this very test
//!   binary, fresh) instead of rebuilding the whole workspace into
//!   `./target`; its output is drained as it comes (it would fill a pipe
//!   nobody reads), and its run time is bounded.

mod util;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The bench-only peers. tokio is not one of them: the async interop
/// tests (tests/hyper.rs, tests/postgres.rs) build hyper and
/// tokio-postgres, which depend on tokio's io traits (no tokio runtime runs
/// in them).
const PEERS: [&str; 2] = ["may", "criterion"];

/// The paths of the test binaries in cargo's `Executable` lines: ``Executable
/// `PATH` `` with `-v`, `Executable NAME (PATH)` without.
fn executables<'a>(log: &'a str, root: &'a Path) -> impl Iterator<Item = PathBuf> + 'a {
    log.lines().filter_map(move |l| {
        let rest = l.trim_start().strip_prefix("Executable ")?.trim_end();
        let path = match rest.strip_prefix('`') {
            Some(quoted) => quoted.strip_suffix('`')?,
            None => rest.rsplit_once('(')?.1.strip_suffix(')')?,
        };
        Some(root.join(path))
    })
}

#[test]
fn cargo_test_workspace_does_not_build_the_bench_peers() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    util::child::as_user(&mut cmd);
    cmd.args(["test", "--workspace", "--no-run", "--offline", "-v"])
        .current_dir(root);
    // Everything is built already (cargo builds every test before running
    // any): the command only checks freshness, in seconds. The bound turns
    // a rebuild of the workspace, or a hang, into a failure.
    let out = util::child::run(&mut cmd, Duration::from_secs(300));
    let log = out.stderr;
    assert!(out.status.success(), "{log}");
    for peer in PEERS {
        let unit = log.lines().any(|l| {
            let l = l.trim_start();
            (l.starts_with("Fresh ") || l.starts_with("Compiling "))
                && l.split_whitespace().nth(1) == Some(peer)
        });
        assert!(!unit, "cargo test --workspace builds {peer}:\n{log}");
    }
    // The same build, not a second one elsewhere: the test binaries it
    // lists are in the directory this test runs from (wherever
    // CARGO_TARGET_DIR put it). (Not this very binary: `cargo test -p coro`
    // unifies features differently from `--workspace`, so its hash differs.)
    let deps = std::env::current_exe()
        .unwrap()
        .parent()
        .unwrap()
        .canonicalize()
        .unwrap();
    let listed: Vec<PathBuf> = executables(&log, root).collect();
    assert!(!listed.is_empty(), "no test binaries listed:\n{log}");
    for exe in &listed {
        let dir = exe.parent().and_then(|d| d.canonicalize().ok());
        assert_eq!(
            dir.as_deref(),
            Some(deps.as_path()),
            "the inner cargo built {} outside this test's target directory",
            exe.display()
        );
    }
    let ci = std::fs::read_to_string(root.join(".ci/run")).unwrap();
    assert!(
        ci.contains("cargo clippy --workspace --all-targets"),
        "CI no longer lints the benches"
    );
}
