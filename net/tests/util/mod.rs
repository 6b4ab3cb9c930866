//! Helpers of coro-net's integration tests: the workspace's shared ones
//! (`coro-test-support`: a bounded runtime, temporary directories, error
//! assertions), recognisable bytes, and a dnsmasq the tests start.

#![allow(dead_code, unused_imports)]

pub mod dnsmasq;

use std::io;
use std::process::Command;

pub use coro_test_support::{assert_kind, TempDir, LIMIT};

/// Names the program (and its arguments, split at spaces as cargo splits a
/// target's `runner`) that runs this test binary again: an emulator such as
/// `qemu-aarch64` when the binary is built for another architecture.
pub const RUNNER: &str = "CORO_TEST_RUNNER";

/// A command that runs this test binary: directly, or through [`RUNNER`].
pub fn this_binary() -> io::Result<Command> {
    let exe = std::env::current_exe()?;
    let runner = std::env::var(RUNNER).unwrap_or_default();
    let mut words = runner.split_whitespace();
    Ok(match words.next() {
        Some(program) => {
            let mut cmd = Command::new(program);
            cmd.args(words).arg(exe);
            cmd
        }
        None => Command::new(exe),
    })
}

/// [`coro_test_support::run`] for a body that returns `io::Result` (the
/// type its `?`s convert to).
#[track_caller]
pub fn run<T: 'static>(f: impl FnOnce() -> io::Result<T> + 'static) -> io::Result<T> {
    coro_test_support::run(f)
}

/// `n` bytes of a recognisable pattern.
pub fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}
