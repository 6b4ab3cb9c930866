//! Helpers of coro-net's integration tests: the workspace's shared ones
//! (`coro-test-support`: a bounded runtime, temporary directories, error
//! assertions, this test binary run again through the emulator the tests
//! run under), recognisable bytes, and a dnsmasq the tests start.

#![allow(dead_code, unused_imports)]

pub mod dnsmasq;

use std::io;

pub use coro_test_support::child::this_binary;
pub use coro_test_support::{assert_kind, TempDir, LIMIT};

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
