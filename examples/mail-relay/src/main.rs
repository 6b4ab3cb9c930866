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
//! delivery into a Maildir when no upstream is configured; graceful stop on
//! SIGTERM or SIGINT. `mail-relay --help` lists the settings.
//!
//! # Modules
//!
//! * `config`, `cidr`: defaults, the TOML file, the flags.
//! * `server`: start, accept loop and limits, graceful stop.
//! * `session`, `protocol`, `wire`, `tls`: the SMTP server side.
//! * `spool`, `id`: the durable queue and its group commit.
//! * `queue`, `delivery`: delivery attempts behind the `Transport` seam.
//! * `logger`, `time`: maillog-style lines, dates.

#![warn(missing_docs, missing_debug_implementations, rust_2018_idioms)]

mod cidr;
mod config;
mod delivery;
mod id;
mod logger;
mod protocol;
mod queue;
mod server;
mod session;
mod spool;
mod time;
mod tls;
mod wire;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = config::Cli::parse();
    let config = match config::Config::load(&cli) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("mail-relay: {e}");
            return ExitCode::from(2);
        }
    };
    logger::init(config.log_level);
    let runtime = coro::Runtime::builder()
        .blocking_threads(config.blocking_threads)
        .build();
    let result = match runtime {
        Ok(mut rt) => rt.block_on(move || server::run(config)),
        Err(e) => Err(e),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mail-relay: {e}");
            log::error!("fatal: {e}");
            ExitCode::FAILURE
        }
    }
}
