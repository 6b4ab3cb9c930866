//! Shared helpers for the examples: an accept loop that survives running
//! out of file descriptors and out of memory for green threads.

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
/// thread of its own: `serve(stream, peer)` returns the closure that thread
/// runs. Returns what it did once the listener is closed.
///
/// It never dies of load (the accept loop of a server that went deaf when
/// `coro::spawn` panicked at ~32 700 live threads is why it exists):
///
/// * **Out of file descriptors** (`EMFILE`, `ENFILE`): the pending
///   connection stays in the kernel's queue; it backs off (5 ms, doubling
///   up to 1 s) instead of retrying at once, which would spin.
/// * **Out of memory for a green thread**: [`coro::Builder::spawn`] fails
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
pub fn accept_loop<F>(
    listener: &TcpListener,
    tag: &str,
    mut serve: impl FnMut(TcpStream, SocketAddr) -> F,
) -> io::Result<Accepted>
where
    F: FnOnce() + 'static,
{
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
            Err(e) => {
                eprintln!("{tag}: accept: {e}");
                continue;
            }
        };
        let name = format!("conn {peer}");
        match coro::Builder::new().name(name).spawn(serve(stream, peer)) {
            Ok(_) => {
                done.served += 1;
                backoff = MIN_BACKOFF;
                if shedding > 0 {
                    eprintln!("{tag}: serving again ({shedding} connections shed)");
                    shedding = 0;
                }
            }
            Err(e) => {
                // The closure, and the connection in it, is dropped: the
                // peer sees the connection close.
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
