//! An echo server on green threads: one green thread per connection, a
//! per-connection idle timeout (`with_timeout`), the connection count on
//! every connect and disconnect, an accept loop that backs off when the
//! process runs out of file descriptors and sheds connections when it runs
//! out of memory for green threads, and a graceful stop on SIGINT or
//! SIGTERM (stop accepting, let open connections finish; a second signal
//! quits at once).
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
//! nc 127.0.0.1 7007
//! ```
//!
//! Every line you type comes back. Press Ctrl-C in the server's terminal to
//! stop it gracefully.
//!
//! Signals are received the portable way: SIGINT and SIGTERM are blocked in
//! every thread, one plain OS thread takes them with `sigwait` and writes a
//! byte into a Unix socket pair, and a green thread reads the other end
//! through `coro::net::UnixStream`.

use std::cell::Cell;
use std::io::{self, Read, Write};
use std::rc::Rc;
use std::time::Duration;

use coro::net::{TcpListener, TcpStream, UnixStream};

/// Connection counters shared by the green threads of the server.
#[derive(Default)]
struct Counts {
    /// Connections open now.
    open: Cell<usize>,
    /// Connections accepted since start.
    total: Cell<u64>,
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
    // Before any other thread starts, so that they all inherit the mask.
    let signals = signal_socket()?;
    coro::run(move || serve(&addr, idle, signals))
}

fn serve(addr: &str, idle: Duration, signals: std::os::unix::net::UnixStream) -> io::Result<()> {
    let listener = Rc::new(TcpListener::bind(addr)?);
    eprintln!(
        "echo: listening on {} (idle timeout {idle:?}); try `nc {}`",
        listener.local_addr()?,
        listener.local_addr()?.to_string().replace(':', " ")
    );
    let counts = Rc::new(Counts::default());
    let acceptor = {
        let (listener, counts) = (listener.clone(), counts.clone());
        coro::Builder::new()
            .name("acceptor".into())
            .spawn(move || accept_loop(&listener, &counts, idle))?
    };

    let signals = UnixStream::from_std(signals)?;
    let mut sig = [0u8; 1];
    (&signals).read_exact(&mut sig)?;
    eprintln!(
        "echo: stopping: no new connections; waiting for {} open (signal again to quit now)",
        counts.open.get()
    );
    listener.close(); // wakes the acceptor at once
    acceptor
        .join()
        .map_err(|e| io::Error::other(e.to_string()))??;

    let second = coro::spawn(move || (&signals).read_exact(&mut [0u8; 1]));
    while counts.open.get() > 0 && !second.is_finished() {
        coro::sleep(Duration::from_millis(50)).map_err(io::Error::from)?;
    }
    eprintln!(
        "echo: bye ({} connections served, {} cut short)",
        counts.total.get(),
        counts.open.get()
    );
    // Returning ends the runtime, which stops any connection still open.
    Ok(())
}

/// Accepts until the listener is closed, one green thread per connection,
/// with `coro_examples::accept_loop`: out of fds (`EMFILE`) it backs off
/// instead of retrying at once, and out of memory for a green thread
/// (`Builder::spawn`'s `OutOfMemory`) it closes the new connection, logs
/// once and keeps accepting.
fn accept_loop(listener: &TcpListener, counts: &Rc<Counts>, idle: Duration) -> io::Result<()> {
    let done = coro_examples::accept_loop(listener, "echo", |stream, peer| {
        counts.open.set(counts.open.get() + 1);
        counts.total.set(counts.total.get() + 1);
        eprintln!(
            "echo: {peer} connected; {} open, {} I/O sources registered",
            counts.open.get(),
            coro::stats().io_sources
        );
        // Counted closed when the handler ends, or when the closure is
        // dropped unrun (the spawn failed).
        let open = Open(counts.clone());
        move || {
            let why = match echo(stream, idle) {
                Ok(()) => "closed".to_owned(),
                Err(e) if e.kind() == io::ErrorKind::TimedOut => "idle".to_owned(),
                Err(e) => e.to_string(),
            };
            drop(open);
            eprintln!("echo: {peer} gone ({why})");
        }
    })?;
    eprintln!(
        "echo: accept loop done: {} served, {} shed",
        done.served, done.shed
    );
    Ok(())
}

/// One open connection in the counts, until dropped.
struct Open(Rc<Counts>);

impl Drop for Open {
    fn drop(&mut self) {
        self.0.open.set(self.0.open.get() - 1);
    }
}

/// Echoes until EOF; a read that waits longer than `idle` ends it.
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

/// Blocks SIGINT and SIGTERM in this thread (and so in every thread started
/// after), and starts an OS thread that takes them with `sigwait` and writes
/// one byte per signal into the returned socket's peer.
fn signal_socket() -> io::Result<std::os::unix::net::UnixStream> {
    let (ours, theirs) = std::os::unix::net::UnixStream::pair()?;
    // SAFETY: `set` is a local sigset_t initialised by sigemptyset before
    // use; pthread_sigmask only reads it.
    let set = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        let rc = libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        if rc != 0 {
            return Err(io::Error::from_raw_os_error(rc));
        }
        set
    };
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            let mut theirs = theirs;
            loop {
                let mut sig = 0;
                // SAFETY: `set` holds blocked signals; sigwait writes the
                // signal number into the live local `sig`.
                if unsafe { libc::sigwait(&set, &mut sig) } != 0 {
                    return;
                }
                if theirs.write_all(&[sig as u8]).is_err() {
                    return;
                }
            }
        })?;
    Ok(ours)
}
