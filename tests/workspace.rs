//! The newcomer's test commands stay fast (issue #14, item 12): `cargo test
//! --workspace` used to build the benches' peers (tokio, may, criterion),
//! 80 s cold. It must not pull them into the build, while CI still lints
//! the benches.

use std::process::Command;
use std::time::Duration;

/// The bench-only peers. tokio is no longer one of them: the async interop
/// tests (tests/hyper.rs, tests/postgres.rs, issue #24) build hyper and
/// tokio-postgres, which depend on tokio's io traits (no tokio runtime runs
/// in them).
const PEERS: [&str; 2] = ["may", "criterion"];

#[test]
fn issue_14_12_cargo_test_workspace_does_not_build_the_bench_peers() {
    let root = env!("CARGO_MANIFEST_DIR");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    // The variables cargo sets for this test would change build scripts'
    // fingerprints (and rebuild them here, then again outside): run the
    // command as a user would.
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy().into_owned();
        if (k.starts_with("CARGO_") && k != "CARGO_HOME")
            || k == "LD_LIBRARY_PATH"
            || k == "RUST_RECURSION_COUNT"
        {
            cmd.env_remove(k);
        }
    }
    let mut child = cmd
        .args(["test", "--workspace", "--no-run", "--offline", "-v"])
        .current_dir(root)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Everything is built already (this test runs after the build): the
    // command only checks freshness. A hang is a failure, not a stuck CI.
    let deadline = std::time::Instant::now() + Duration::from_secs(600);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("cargo test --workspace --no-run did not finish");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = child.wait_with_output().unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{log}");
    for peer in PEERS {
        let unit = log.lines().any(|l| {
            let l = l.trim_start();
            (l.starts_with("Fresh ") || l.starts_with("Compiling "))
                && l.split_whitespace().nth(1) == Some(peer)
        });
        assert!(!unit, "cargo test --workspace builds {peer}:\n{log}");
    }
    let ci = std::fs::read_to_string(format!("{root}/.ci/run")).unwrap();
    assert!(
        ci.contains("cargo clippy --workspace --all-targets"),
        "CI no longer lints the benches"
    );
}
