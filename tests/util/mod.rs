//! Helpers shared by the cross-crate integration tests: a runtime whose main
//! thread is bounded in time, ways to let the other green threads run, a
//! connected loopback TCP pair, error assertions, (`child`) running a
//! chatty child process with its pipes drained and its time bounded, and
//! (`postgres`) a PostgreSQL server started by the test.

#![allow(dead_code)]

pub mod child;
pub mod postgres;

use std::io;
use std::time::Duration;

use coro::net::{TcpListener, TcpStream};

/// Upper bound on the run time of any one test body. Generous: it only
/// turns a hang into a failure, it never decides an outcome.
pub const LIMIT: Duration = Duration::from_secs(30);

/// A deadline far beyond any test (for per-connection timeouts that must
/// not fire).
pub const LONG: Duration = Duration::from_secs(3600);

/// Runs `f` as the main green thread of a fresh runtime, inside a
/// `with_timeout` of [`LIMIT`], so that a bug fails the test instead of
/// hanging it.
#[track_caller]
pub fn run<T: 'static>(f: impl FnOnce() -> T + 'static) -> T {
    coro::run(move || match coro::with_timeout(LIMIT, f) {
        Ok(r) => r,
        Err(_) => panic!("test ran past {LIMIT:?}"),
    })
}

/// Yields enough times for every chain of wake-ups started so far (without
/// I/O) to run to its end: each yield lets the threads made ready before it
/// run once.
pub fn settle() {
    for _ in 0..64 {
        coro::yield_now();
    }
}

/// Waits (sleeping a millisecond at a time, so the scheduler polls the OS)
/// until `cond` holds. It decides no outcome by time: it is bounded only by
/// the test's [`LIMIT`], and says what it waited for if that runs out.
#[track_caller]
pub fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    while !cond() {
        if let Err(e) = coro::sleep(Duration::from_millis(1)) {
            panic!("still waiting for {what}: {e}");
        }
    }
}

/// Yields (no sleeping, so no timer is involved) until `cond` holds, for
/// forcing an interleaving: the scheduler polls the OS every few hundred
/// resumes while threads are ready, so I/O readiness is seen too. Panics
/// after a million yields, saying what it waited for.
#[track_caller]
pub fn yield_until(what: &str, mut cond: impl FnMut() -> bool) {
    for _ in 0..1_000_000 {
        if cond() {
            return;
        }
        coro::yield_now();
    }
    panic!("still waiting for {what} after a million yields");
}

/// A connected pair of loopback TCP streams: (client side, server side).
pub fn pair() -> io::Result<(TcpStream, TcpStream)> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let client = TcpStream::connect(listener.local_addr()?)?;
    let (server, _) = listener.accept()?;
    Ok((client, server))
}

/// Asserts that `r` failed with `kind`; returns the error.
#[track_caller]
pub fn assert_kind<T: std::fmt::Debug>(r: io::Result<T>, kind: io::ErrorKind) -> io::Error {
    match r {
        Ok(v) => panic!("expected an error of kind {kind:?}, got Ok({v:?})"),
        Err(e) => {
            assert_eq!(e.kind(), kind, "unexpected error: {e}");
            e
        }
    }
}

/// The text of a panic payload (`panic!` with a literal or a format).
pub fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_else(|| "<non-string panic payload>".to_owned())
}
