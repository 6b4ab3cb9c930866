//! Helpers of the cross-crate integration tests: the workspace's shared
//! ones (`coro-test-support`: a bounded runtime, forced interleavings,
//! child processes, error assertions), a deadline no test reaches, a
//! connected loopback TCP pair, and (`postgres`) a PostgreSQL server
//! started by the test.

#![allow(dead_code, unused_imports)]

pub mod postgres;

use std::io;
use std::time::Duration;

use coro::net::{TcpListener, TcpStream};

pub use coro_test_support::{
    assert_kind, child, panic_text, run, settle, wait_until, yield_until, LIMIT,
};

/// A deadline far beyond any test (for per-connection timeouts that must
/// not fire).
pub const LONG: Duration = Duration::from_secs(3600);

/// A connected pair of loopback TCP streams: (client side, server side).
pub fn pair() -> io::Result<(TcpStream, TcpStream)> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let client = TcpStream::connect(listener.local_addr()?)?;
    let (server, _) = listener.accept()?;
    Ok((client, server))
}
