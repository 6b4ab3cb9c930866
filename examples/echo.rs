//! An echo server on green threads: one green thread per connection, all
//! in one `coro::scope` with the accept loop (the connections borrow the
//! listener and the counters; no `Rc`), a per-connection idle timeout
//! (`with_timeout`), the connection count on every connect and disconnect,
//! an accept loop that backs off when the process runs out of file
//! descriptors and sheds connections when it runs out of memory for green
//! threads, and a graceful stop on SIGINT or SIGTERM (stop accepting,
//! let open connections finish: the scope waits for them; a second signal
//! cancels the scope, which ends them all at once).
//!
//! Run it with
//!
//! ```text
//! cargo run --example echo -- 127.0.0.1:7007
//! ```
//!
//! (the address is optional; `CORO_ECHO_IDLE_SECS` sets the idle timeout,
//! 60 s by default) and talk to it from another terminal with
//!
//! ```text
//! socat - TCP:127.0.0.1:7007
//! ```
//!
//! Every line you type comes back. Press Ctrl-C in the server's terminal to
//! stop it gracefully.
//!
//! Signals arrive through `coro::signal::Signals`: the green thread that
//! waits for them is the only one that waits.

use std::cell::Cell;
use std::io::{self, Read, Write};
use std::time::Duration;

use coro::net::{TcpListener, TcpStream};
use coro::signal::{Signals, SIGINT, SIGTERM};
use coro::{CancelScope, Scope, WaitError};

/// Connection counters shared by the green threads of the server.
#[derive(Default)]
struct Counts {
    /// Connections open now.
    open: Cell<usize>,
    /// Connections accepted since start.
    total: Cell<u64>,
    /// Connections cut short by a second signal.
    cut: Cell<u64>,
}

fn main() -> io::Result<()> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:7007".to_owned());
    let idle = match std::env::var("CORO_ECHO_IDLE_SECS") {
        Ok(s) => Duration::from_secs(s.parse().map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("CORO_ECHO_IDLE_SECS must be a number of seconds, not {s:?}"),
            )
        })?),
        Err(_) => Duration::from_secs(60),
    };
    coro::run(move || serve(&addr, idle))
}

/// The server: the accept loop and one thread per connection in a
/// `coro::scope` (they borrow the listener and the counters), a signal
/// watcher beside it. The first signal closes the listener, so the accept
/// loop ends and the scope waits for the open connections; a second one
/// cancels the scope around them, which ends every connection at once.
fn serve(addr: &str, idle: Duration) -> io::Result<()> {
    let signals = Signals::new([SIGINT, SIGTERM])?;
    let listener = TcpListener::bind(addr)?;
    eprintln!(
        "echo: listening on {} (idle timeout {idle:?}); try `socat - TCP:{}`",
        listener.local_addr()?,
        listener.local_addr()?.to_string().replace(':', " ")
    );
    let counts = Counts::default();
    let quit_now = CancelScope::new();
    coro::scope(|s| {
        s.spawn(|| -> io::Result<()> {
            signals.recv()?;
            eprintln!(
                "echo: stopping: no new connections; waiting for {} open (signal again to quit now)",
                counts.open.get()
            );
            listener.close(); // ends the accept loop at once
            signals.recv()?;
            quit_now.cancel();
            Ok(())
        });
        // Returns when every connection has ended.
        let served =
            quit_now.run(|| coro::scope(|conns| accept_loop(&listener, conns, &counts, idle)));
        s.cancel(); // stop watching for signals
        eprintln!(
            "echo: bye ({} connections served, {} cut short)",
            counts.total.get(),
            counts.cut.get()
        );
        match served {
            Ok(accepted) => accepted?,
            Err(_cancelled) => Ok(()), // the second signal: the connections were cut short
        }
    })?
}

/// Accepts until the listener is closed, each connection on its own thread
/// in `conns`, with `coro_examples::accept_loop`: out of fds (`EMFILE`) it
/// backs off instead of retrying at once, and out of memory for a green
/// thread (`Builder::spawn_scoped`'s `OutOfMemory`) it closes the new
/// connection, logs once and keeps accepting.
fn accept_loop<'scope>(
    listener: &'scope TcpListener,
    conns: &'scope Scope<'scope, '_>,
    counts: &'scope Counts,
    idle: Duration,
) -> io::Result<()> {
    let done = coro_examples::accept_loop(listener, "echo", |stream, peer| {
        let spawned = coro::Builder::new()
            .name(format!("conn {peer}"))
            .spawn_scoped(conns, move || {
                let why = match echo(stream, idle) {
                    Ok(()) => "closed".to_owned(),
                    Err(e) if e.kind() == io::ErrorKind::TimedOut => "idle".to_owned(),
                    Err(e) if WaitError::from_io(&e) == Some(WaitError::Cancelled) => {
                        counts.cut.set(counts.cut.get() + 1);
                        "cut short".to_owned()
                    }
                    Err(e) => e.to_string(),
                };
                counts.open.set(counts.open.get() - 1);
                eprintln!("echo: {peer} gone ({why}); {} open", counts.open.get());
            });
        if spawned.is_ok() {
            counts.open.set(counts.open.get() + 1);
            counts.total.set(counts.total.get() + 1);
            eprintln!(
                "echo: {peer} connected; {} open, {} I/O sources registered",
                counts.open.get(),
                coro::stats().io_sources
            );
        }
        spawned.map(drop)
    })?;
    eprintln!(
        "echo: accept loop done: {} served, {} shed",
        done.served, done.shed
    );
    Ok(())
}

fn echo(mut stream: TcpStream, idle: Duration) -> io::Result<()> {
    let mut buf = [0u8; 4096];
    loop {
        let n = coro::with_timeout(idle, || stream.read(&mut buf))??;
        if n == 0 {
            return Ok(());
        }
        stream.write_all(&buf[..n])?;
    }
}
