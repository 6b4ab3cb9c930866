//! One runtime per core: each OS thread runs its own coro runtime with its
//! own `SO_REUSEPORT` listener on the same port, and the kernel spreads the
//! connections over them. Green threads never leave their runtime; the
//! runtimes talk through `Send` channels (`coro::sync::remote`), and the
//! main OS thread reaches into them with `coro::Handle`.
//!
//! The protocol is a line echo that says which runtime answered; the line
//! `stats` answers with the connections of *every* runtime, gathered by
//! asking each one over its channel.
//!
//! Run it with
//!
//! ```text
//! cargo run --example per_core -- 127.0.0.1:7008
//! ```
//!
//! (`CORO_PER_CORE_THREADS` sets the number of runtimes, one per core by
//! default) and talk to it from other terminals with `socat - TCP:127.0.0.1:7008`:
//! type a line, or `stats`. Close its standard input (Ctrl-D) to stop it:
//! the main thread asks every runtime, through its `Handle`, to close its
//! listener; open connections are cut when each runtime ends.

use std::cell::{Cell, RefCell};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::{mpsc, Arc};

use coro::net::{TcpListener, TcpStream};
use coro::sync::remote;

/// A question one runtime asks another.
enum Request {
    /// Reply with (runtime, open connections, connections served).
    Stats(remote::Sender<(usize, usize, u64)>),
}

/// The channels into every runtime, shared by all of them.
type Hubs = Arc<Vec<remote::Sender<Request>>>;

thread_local! {
    /// This OS thread's listener, for the stop request the main thread sends
    /// through the runtime's `Handle` (one runtime per OS thread, so an OS
    /// thread-local is this runtime's).
    static LISTENER: RefCell<Option<Rc<TcpListener>>> = const { RefCell::new(None) };
}

/// Connection counts of one runtime.
#[derive(Default)]
struct Counts {
    open: Cell<usize>,
    total: Cell<u64>,
}

fn main() -> io::Result<()> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:7008".to_owned());
    let threads = match std::env::var("CORO_PER_CORE_THREADS") {
        Ok(s) => s.parse().map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("CORO_PER_CORE_THREADS must be a number, not {s:?}"),
            )
        })?,
        Err(_) => std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    if threads == 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "CORO_PER_CORE_THREADS must be at least 1",
        ));
    }
    let (senders, mut inboxes): (Vec<_>, Vec<_>) = (0..threads).map(|_| remote::channel()).unzip();
    let hubs: Hubs = Arc::new(senders);

    // Runtime 0 binds first (the address may ask for any free port); the
    // others bind the port it got.
    let (ready, started) = mpsc::channel();
    let mut os_threads = Vec::new();
    let mut handles = Vec::new();
    let mut bound: Option<SocketAddr> = None;
    for (core, inbox) in inboxes.drain(..).enumerate() {
        let at = bound.map_or_else(|| addr.clone(), |a| a.to_string());
        let (hubs, ready) = (hubs.clone(), ready.clone());
        os_threads.push(
            std::thread::Builder::new()
                .name(format!("core-{core}"))
                .spawn(move || serve_core(core, &at, &hubs, inbox, &ready))?,
        );
        match started.recv() {
            Ok(Ok((local, handle))) => {
                bound = Some(local);
                handles.push(handle);
            }
            Ok(Err(e)) => return Err(e),
            Err(_) => return Err(io::Error::other("a runtime thread died while starting")),
        }
    }
    let local = bound.expect("at least one runtime");
    eprintln!(
        "per_core: listening on {local} with {threads} runtimes; try `socat - TCP:{}` and type `stats`; \
         close stdin (Ctrl-D) to stop",
        local.to_string().replace(':', " ")
    );

    // Wait for the end of standard input, then stop every runtime from
    // here, a plain OS thread, through its Send handle.
    io::stdin().read_to_end(&mut Vec::new())?;
    eprintln!("per_core: stopping");
    for h in &handles {
        h.spawn(|| {
            if let Some(l) = LISTENER.with_borrow_mut(Option::take) {
                l.close();
            }
        })?;
    }
    for t in os_threads {
        t.join()
            .map_err(|_| io::Error::other("a runtime thread panicked"))??;
    }
    eprintln!("per_core: bye");
    Ok(())
}

/// One core: a runtime with its own listener, its accept loop, and a green
/// thread that answers the other runtimes' requests.
fn serve_core(
    core: usize,
    addr: &str,
    hubs: &Hubs,
    inbox: remote::Receiver<Request>,
    ready: &mpsc::Sender<io::Result<(SocketAddr, coro::Handle)>>,
) -> io::Result<()> {
    // The main closure borrows `addr`, `hubs` and `ready` from this frame.
    coro::run(|| {
        let listener = match TcpListener::builder().reuse_port(true).bind(addr) {
            Ok(l) => Rc::new(l),
            Err(e) => {
                let _ = ready.send(Err(io::Error::new(e.kind(), format!("{addr}: {e}"))));
                return Ok(());
            }
        };
        LISTENER.with_borrow_mut(|l| *l = Some(listener.clone()));
        let _ = ready.send(Ok((listener.local_addr()?, coro::handle())));

        let counts = Rc::new(Counts::default());
        {
            let counts = counts.clone();
            coro::Builder::new()
                .name(format!("core-{core} requests"))
                .spawn(move || {
                    for Request::Stats(reply) in inbox.iter() {
                        let _ = reply.send((core, counts.open.get(), counts.total.get()));
                    }
                })?;
        }
        let tag = format!("per_core[{core}]");
        let done = coro_examples::accept_loop(&listener, &tag, |stream, peer| {
            let (c, hubs) = (counts.clone(), hubs.clone());
            let spawned = coro::Builder::new()
                .name(format!("conn {peer}"))
                .spawn(move || {
                    if let Err(e) = talk(core, stream, &hubs) {
                        eprintln!("per_core[{core}]: connection ended: {e}");
                    }
                    c.open.set(c.open.get() - 1);
                });
            if spawned.is_ok() {
                counts.open.set(counts.open.get() + 1);
                counts.total.set(counts.total.get() + 1);
            }
            spawned.map(drop)
        })?;
        eprintln!(
            "per_core[{core}]: done ({} served, {} shed)",
            done.served, done.shed
        );
        Ok(())
    })
}

/// Answers each line of one connection.
fn talk(core: usize, stream: TcpStream, hubs: &Hubs) -> io::Result<()> {
    let mut out = stream.try_clone()?;
    for line in BufReader::new(stream).lines() {
        let line = line?;
        if line.trim() == "stats" {
            writeln!(out, "stats: {}", gather(hubs)?)?;
        } else {
            writeln!(out, "core {core}: {line}")?;
        }
    }
    Ok(())
}

/// Asks every runtime for its counts over its channel, and waits (this
/// green thread only) for all the replies.
fn gather(hubs: &Hubs) -> io::Result<String> {
    let (reply, replies) = remote::channel();
    for hub in hubs.iter() {
        hub.send(Request::Stats(reply.clone()))
            .map_err(|_| io::Error::other("a runtime is gone"))?;
    }
    drop(reply);
    let mut all: Vec<(usize, usize, u64)> = replies.iter().collect();
    all.sort_unstable();
    let open: usize = all.iter().map(|r| r.1).sum();
    let parts: Vec<String> = all
        .iter()
        .map(|(core, open, total)| format!("core {core}: {open} open, {total} served"))
        .collect();
    Ok(format!("{open} open in all; {}", parts.join("; ")))
}
