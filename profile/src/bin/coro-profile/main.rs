//! `coro-profile`: reads profiles written by `coro::profile` (or the back
//! door's `profile dump PATH`) and turns them into something to read.
//!
//! ```text
//! coro-profile report PROFILE [-o REPORT.html]   one self-contained HTML page
//! coro-profile diff A B                          what changed between two runs
//! coro-profile show PROFILE                      the entries as a text table
//! ```
//!
//! The profile is read by this package's library (`coro_profile`); the page
//! is written by hand, with no assets beside it.

mod civil;
mod diff;
mod fmt;
mod html;
mod timeline;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use coro_profile::Profile;

const USAGE: &str = "\
usage:
  coro-profile report PROFILE [-o REPORT.html]   write an HTML report (default: PROFILE.html)
  coro-profile diff A B                          compare two profiles
  coro-profile show PROFILE                      print the entries as a table

PROFILE is a file written by coro::profile (Profile::save) or by the back
door's `profile dump PATH`.";

/// A command-line mistake: the message, then the usage, exit status 2.
struct Usage(String);

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Usage(Usage(msg))) => {
            eprintln!("coro-profile: {msg}\n\n{USAGE}");
            ExitCode::from(2)
        }
        Err(Failure::Io(msg)) => {
            eprintln!("coro-profile: {msg}");
            ExitCode::FAILURE
        }
    }
}

enum Failure {
    Usage(Usage),
    Io(String),
}

fn usage(msg: impl Into<String>) -> Failure {
    Failure::Usage(Usage(msg.into()))
}

fn load(path: &str) -> Result<Profile, Failure> {
    coro_profile::load(path).map_err(|e| Failure::Io(format!("{path}: {e}")))
}

fn run(args: &[String]) -> Result<(), Failure> {
    let Some(cmd) = args.first() else {
        return Err(usage("a command is needed"));
    };
    let rest = &args[1..];
    match cmd.as_str() {
        "report" => {
            let mut input = None;
            let mut output = None;
            let mut it = rest.iter();
            while let Some(a) = it.next() {
                match a.as_str() {
                    "-o" | "--output" => {
                        output = Some(it.next().ok_or_else(|| usage("-o needs a file name"))?)
                    }
                    s if s.starts_with('-') => return Err(usage(format!("unknown option {s}"))),
                    s if input.is_none() => input = Some(s),
                    s => return Err(usage(format!("one profile at a time (extra: {s})"))),
                }
            }
            let input = input.ok_or_else(|| usage("report needs a PROFILE"))?;
            let profile = load(input)?;
            let out = output
                .map(PathBuf::from)
                .unwrap_or_else(|| Path::new(input).with_extension("html"));
            let page = html::report(&profile, input);
            std::fs::write(&out, page)
                .map_err(|e| Failure::Io(format!("{}: {e}", out.display())))?;
            println!(
                "wrote {} ({} entries, {} latency warnings)",
                out.display(),
                profile.entries.len(),
                profile.latency_warnings.len()
            );
            Ok(())
        }
        "diff" => {
            let [a, b] = rest else {
                return Err(usage("diff needs two profiles: diff A B"));
            };
            let text = diff::diff(&load(a)?, a, &load(b)?, b);
            print(&text)
        }
        "show" => {
            let [p] = rest else {
                return Err(usage("show needs one PROFILE"));
            };
            let profile = load(p)?;
            print(&show(&profile))
        }
        "-h" | "--help" | "help" => print(&format!("{USAGE}\n")),
        other => Err(usage(format!("unknown command {other:?}"))),
    }
}

fn print(text: &str) -> Result<(), Failure> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        // A closed pipe (`| head`) is not an error worth a message.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(Failure::Io(format!("writing the output: {e}"))),
    }
}

/// The entries as text.
fn show(p: &Profile) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{} pid {}, started {}, interval {}, CPU {}",
        p.program,
        p.pid,
        fmt::utc(p.start),
        fmt::human(p.wall),
        fmt::human(p.usage.cpu())
    );
    let _ = writeln!(
        o,
        "{:>7} {:>12} {:>12} {:>12} {:>10}  {:<9} NAME",
        "%", "WALL (ms)", "USER (ms)", "SYS (ms)", "CALLS", "KIND"
    );
    for e in &p.entries {
        let _ = writeln!(
            o,
            "{:>7.1} {:>12} {:>12} {:>12} {:>10}  {:<9} {}",
            fmt::percent(e.wall, p.wall),
            fmt::ms(e.wall),
            fmt::ms(e.usage.utime),
            fmt::ms(e.usage.stime),
            e.calls,
            e.kind.as_str(),
            e.name
        );
    }
    for w in &p.latency_warnings {
        let _ = writeln!(
            o,
            "latency warning: #{} '{}' ran {}{}",
            w.thread,
            w.name.as_deref().unwrap_or("<unnamed>"),
            fmt::human(w.ran),
            if w.running { " (still running)" } else { "" }
        );
    }
    o
}
