//! The back door: a console into the running process on a Unix socket,
//! served by green threads of the application's own runtime.
//!
//! Shrapnel's back door was a Python prompt on a socket, invaluable "in all
//! stages of development, QA, and even deployment". This one is a line
//! protocol: one command per line, its output, a `> ` prompt. Any line
//! client works:
//!
//! ```text
//! $ nc -U /run/myapp/backdoor            # or: socat - UNIX-CONNECT:/run/myapp/backdoor
//! coro back door: myapp pid 4242, 57 green threads; 'help' lists the commands
//! > threads run 5
//! ...
//! ```
//!
//! Built-in commands: `help`, `threads [id|run|age|name] [N]` (id, state,
//! wait reason, run time, age, name; under a parked thread, what it waits
//! on, who holds it, for how long, and where the call was made), `stats`,
//! `deadlocks`, `leaks` (see `coro_runtime::deadlocks` and
//! `coro_runtime::leaks`), `timers [N]` (the next
//! deadlines), `latency` (recent latency warnings), `interrupt ID`,
//! `profile start|stop|status|dump PATH` (the [profiler](coro_runtime::profile);
//! read the dump with `coro-profile report`), `trace [dump PATH|latency
//! PATH]` (the flight recorder as Chrome trace JSON), `quit`. The application adds
//! its own with [`Builder::command`] or [`BackDoor::add_command`]. There is
//! no `stack ID`: see the `commands` module for why it cannot be done safely.
//!
//! # Only the owner gets in
//!
//! Unlike Shrapnel's and gevent's back doors, which let anyone who reaches
//! the socket run code, this one checks who connects:
//!
//! * The socket's directory must belong to this process's user (or root)
//!   and must not be writable by group or others (else anyone could replace
//!   the socket); [`Builder::allow_shared_directory`] relaxes the second rule
//!   for directories such as `/tmp`.
//! * The socket is created with mode 0600 (set before it listens).
//! * Every connection's peer credentials (`SO_PEERCRED` on Linux,
//!   `getpeereid` on BSD and macOS) must name this process's effective uid
//!   or root; anyone else is disconnected and logged at WARN.
//!
//! # Hostile or careless clients
//!
//! A session is a green thread. Its reads have an idle timeout, its lines a
//! length limit, its output a write timeout, and at most
//! [`max_sessions`](Builder::max_sessions) run at once (more clients are told
//! so and disconnected), so a client that never reads, sends garbage or huge
//! lines, or opens a thousand connections costs bounded memory and cannot
//! stall the runtime.
//!
//! # Examples
//!
//! ```
//! use std::io::{BufRead, BufReader, Write};
//! use std::os::unix::fs::DirBuilderExt;
//! use coro::net::{backdoor, UnixStream};
//!
//! coro::run(|| -> std::io::Result<()> {
//!     let dir = std::env::temp_dir().join(format!("coro-bd-doc-{}", std::process::id()));
//!     std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
//!     let door = backdoor::Builder::new(dir.join("bd"))
//!         .command("hello", "hello: says hello", |s, _| writeln!(s, "hello there"))?
//!         .serve()?;
//!     let mut client = BufReader::new(UnixStream::connect(door.path())?);
//!     client.get_ref().write_all(b"hello\nquit\n")?;
//!     let mut out = String::new();
//!     while client.read_line(&mut out)? > 0 {}
//!     assert!(out.contains("> hello there\n"));
//!     door.close();
//!     std::fs::remove_dir_all(&dir)
//! })
//! .unwrap();
//! ```

mod commands;
mod secure;
mod server;
mod session;
mod trace;
mod waits;

pub use server::{
    serve, BackDoor, Builder, DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_LINE, DEFAULT_MAX_SESSIONS,
    DEFAULT_WRITE_TIMEOUT,
};
pub use session::Session;
