//! Helpers shared by the runtime's integration tests: running one test in a
//! child process (for behaviour that aborts, faults or must measure the whole
//! process's memory).

#![allow(dead_code)]

use std::process::{Command, Output};

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
