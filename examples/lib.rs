//! Shared helpers for the examples: an accept loop that survives running
//! out of file descriptors and out of memory for green threads, and a
//! logger to standard error.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use coro::net::{is_fd_exhaustion, TcpListener, TcpStream};

/// What [`accept_loop`] did, for the log at the end.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Accepted {
    /// Connections handed to a green thread.
    pub served: u64,
    /// Connections closed at once because no green thread could be started
    /// for them (out of memory, or the kernel's `vm.max_map_count`).
    pub shed: u64,
}

const MIN_BACKOFF: Duration = Duration::from_millis(5);
const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// Accepts connections until `listener` is closed, serving each on a green
/// thread of its own: `start(stream, peer)` starts that thread (with
/// [`coro::Builder::spawn`], or [`coro::Builder::spawn_scoped`] in a
/// `coro::scope`) and returns the spawn's result. Returns what it did once
/// the listener is closed.
///
/// It never dies of load (the accept loop of a server that went deaf when
/// `coro::spawn` panicked at ~32 700 live threads is why it exists):
///
/// * **Out of file descriptors** (`EMFILE`, `ENFILE`): the pending
///   connection stays in the kernel's queue; it backs off (5 ms, doubling
///   up to 1 s) instead of retrying at once, which would spin.
/// * **Out of memory for a green thread**: the spawn fails
///   with `OutOfMemory` (a stack cannot be mapped: RAM, `RLIMIT_AS`, or
///   `vm.max_map_count`, which the error names); the connection is closed
///   at once (shed), the first failure of an episode is logged to stderr,
///   and the loop backs off, then keeps accepting: connections that end
///   give their stacks back and the next spawn succeeds.
/// * **Other accept errors** (`ECONNABORTED`, ...) concern one connection:
///   logged, and the loop goes on (an error that comes at once spends
///   selfishness, so other green threads run meanwhile).
///
/// `tag` prefixes the log lines (`"echo"`).
///
/// # Errors
///
/// The error of a back-off sleep cut short (an interrupt, runtime
/// shutdown).
pub fn accept_loop(
    listener: &TcpListener,
    tag: &str,
    mut start: impl FnMut(TcpStream, SocketAddr) -> io::Result<()>,
) -> io::Result<Accepted> {
    let mut done = Accepted::default();
    let mut backoff = MIN_BACKOFF;
    let mut shedding = 0u64;
    while !listener.is_closed() {
        let (stream, peer) = match listener.accept() {
            Ok(conn) => conn,
            Err(_) if listener.is_closed() => break,
            Err(e) if is_fd_exhaustion(&e) => {
                eprintln!("{tag}: accept: {e}; backing off {backoff:?}");
                coro::sleep(backoff)?;
                backoff = (backoff * 2).min(MAX_BACKOFF);
                continue;
            }
            Err(e) if coro::WaitError::from_io(&e).is_some() => return Err(e),
            Err(e) => {
                eprintln!("{tag}: accept: {e}");
                continue;
            }
        };
        match start(stream, peer) {
            Ok(()) => {
                done.served += 1;
                backoff = MIN_BACKOFF;
                if shedding > 0 {
                    eprintln!("{tag}: serving again ({shedding} connections shed)");
                    shedding = 0;
                }
            }
            Err(e) => {
                // The thread's closure, and the connection in it, was
                // dropped: the peer sees the connection close.
                done.shed += 1;
                if shedding == 0 {
                    eprintln!(
                        "{tag}: cannot start a green thread for {peer} ({e}); \
                         shedding new connections until some finish"
                    );
                }
                shedding += 1;
                coro::sleep(backoff)?;
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
    }
    Ok(done)
}

/// Prints log records at INFO and above to standard error (the runtime
/// reports latency warnings through `log`).
#[derive(Debug)]
pub struct Stderr;

impl log::Log for Stderr {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        m.level() <= log::Level::Info
    }
    fn log(&self, r: &log::Record<'_>) {
        if self.enabled(r.metadata()) {
            eprintln!("[{} {}] {}", r.level(), r.target(), r.args());
        }
    }
    fn flush(&self) {}
}

/// Installs [`Stderr`] as the logger.
///
/// # Panics
///
/// If a logger is installed already.
pub fn log_to_stderr() {
    log::set_logger(&Stderr).expect("a logger was installed already");
    log::set_max_level(log::LevelFilter::Info);
}
