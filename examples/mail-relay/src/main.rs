//! `mail-relay`: an ESMTP relay written as coro green threads.
//!
//! ```text
//! cargo run --release -p mail-relay            # 127.0.0.1:2525, ./spool, ./maildir
//! swaks --server 127.0.0.1:2525 --to a@example.test
//! ls maildir/new
//! ```
//!
//! One green thread per SMTP session, in plain blocking style; a durable,
//! group-committed spool (a 250 after DATA means the message is fsynced);
//! delivery into a Maildir, or to an SMTP upstream (`--relayhost`) with
//! retries, bounces and connections kept in a `GroupPool`; graceful stop
//! on SIGTERM or SIGINT. `mail-relay --help` lists the settings;
//! `mail-relay mailq` lists the queue, `mail-relay flush` retries it now.
//!
//! # Modules
//!
//! * `config`, `cidr`: defaults, the TOML file, the flags.
//! * `server`, `fds`: start, accept loop and limits (the open-file limit's
//!   among them), graceful stop.
//! * `session`, `protocol`, `body`, `wire`, `stream`, `tls`: the SMTP server
//!   side.
//! * `auth`: the submission service's users (argon2id hashes, `mail-relay
//!   passwd`), AUTH PLAIN and LOGIN, failed-login lockouts.
//! * `spool`, `id`: the durable queue, its group commit and its journals.
//! * `queue`: the queue runner, retries, bounces (Postfix's qmgr).
//! * `delivery`: routes, the `Transport` seam, the Maildir, the SMTP
//!   client and its connection cache, MX delivery, delivery status
//!   reports.
//! * `dsn`: what a client asks of delivery status notifications (RFC
//!   3461's parameters, xtext).
//! * `dkim`: DKIM signing of outgoing mail.
//! * `control`: `mailq` and `flush` (back door, SIGUSR1, command line), the
//!   spool lock.
//! * `reload`: SIGHUP.
//! * `privilege`, `files`: whom the relay runs as (the drop from root),
//!   the modes of what it makes, and the checks of the paths and keys it
//!   trusts.
//! * `logger`, `time`, `escape`: maillog-style lines, dates, text from the
//!   network made safe to show.
//! * `metrics`: Prometheus counters and `--metrics`.

#![warn(missing_docs, missing_debug_implementations, rust_2018_idioms)]

mod auth;
mod body;
mod cidr;
mod config;
mod control;
mod delivery;
mod dkim;
mod dsn;
mod escape;
mod fds;
mod files;
mod id;
mod logger;
mod metrics;
mod privilege;
mod protocol;
mod queue;
mod reload;
mod server;
mod session;
mod spool;
mod stream;
mod time;
mod tls;
mod wire;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = config::Cli::parse();
    if let Some(config::Command::Passwd { user, addresses }) = &cli.command {
        // Needs no configuration: a users-file line from standard input.
        return match auth::password::passwd(user, addresses) {
            Ok(line) => {
                print!("{line}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("mail-relay passwd: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let config = match config::Config::load(&cli) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("mail-relay: {e}");
            return ExitCode::from(2);
        }
    };
    match cli.command {
        None => {}
        Some(cmd) => {
            let r = match cmd {
                config::Command::Mailq => control::mailq(&config),
                config::Command::Flush => control::flush(&config),
                config::Command::Config => Ok(config.to_toml()),
                config::Command::Passwd { user, addresses } => {
                    auth::password::passwd(&user, &addresses)
                }
            };
            return match r {
                Ok(out) => {
                    print!("{out}");
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("mail-relay: {e}");
                    ExitCode::FAILURE
                }
            };
        }
    }
    let who = match privilege::RunAs::resolve(config.user.as_deref()) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("mail-relay: {e}");
            return ExitCode::from(2);
        }
    };
    let log_file = config.log_file.as_deref();
    let opened = log_file
        .map_or(Ok(()), |p| {
            if !files::check_file("log_file", p, &who)? {
                files::make_file("log_file", p, &who)?;
            }
            Ok(())
        })
        .and_then(|()| logger::init(config.log_level, log_file));
    if let Err(e) = opened {
        eprintln!("mail-relay: {e}");
        return ExitCode::from(2);
    }
    if let Some(warning) = privilege::root_warning(config.user.as_deref(), config.run_as_root) {
        log::warn!("{warning}");
    }
    let to_file = log_file.is_some();
    let builder = coro::Runtime::builder().blocking_threads(config.blocking_threads);
    // SAFETY: the relay lends no green thread's stack outside its runtime
    // across a park, which is what `idle_stack_copy_out` asks: its OS
    // threads are the blocking pool's, which run `'static` closures that own
    // their data (`coro::blocking(move || ...)`, each job's buffers moved
    // in and out), and signal-hook's handler, which only writes a byte
    // into a pipe; it uses no `std::thread::scope`, `spawn_scoped`, rayon
    // or crossbeam scope, and hands no pointer into a stack to another
    // thread or to the kernel beyond a syscall that returns before the
    // thread parks (sockets are non-blocking; files go through the pool).
    // (A `coro::scope`, should it use one, pins its owner's stack: its
    // threads are green threads of this runtime.) `tests/stack_loans.rs`
    // fails if the source starts using one of those scopes. Idle sessions
    // then cost about 1 KiB of heap instead of their stack pages.
    let builder = unsafe { builder.idle_stack_copy_out(true) };
    let runtime = builder.build();
    let result = match runtime {
        Ok(mut rt) => {
            let load = Box::new(move || config::Config::load(&cli));
            rt.block_on(move || server::run(config, who, load))
        }
        Err(e) => Err(e),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // Once on stderr; once more only when the log is elsewhere.
            eprintln!("mail-relay: {e}");
            if to_file {
                log::error!("fatal: {e}");
            }
            ExitCode::FAILURE
        }
    }
}
