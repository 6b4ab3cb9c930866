//! The back door's commands: the built-in ones (`help`, `threads`, `stats`,
//! `deadlocks`, `leaks`, `timers`, `latency`, `interrupt`, `profile`,
//! `trace`, `quit`) and those the
//! application registers.
//!
//! There is no `stack ID`: a parked green thread's frames can only be walked
//! by running code on its stack, i.e. by resuming it outside the wake rules
//! (every park would need a hook to take a backtrace and suspend again, on
//! the hottest path of the runtime), or by an unwinder seeded from the
//! registers corosensei saves privately. Neither can be done safely from
//! here, so the command is left out.

use std::collections::BTreeMap;
use std::fmt;
use std::io::{self, Write};
use std::path::PathBuf;
use std::rc::Rc;
use std::time::{Duration, SystemTime};

use coro_runtime::profile::{self, Profile};
use coro_runtime::{self as rt, ThreadInfo};

use super::session::Session;

/// A command handler: writes to the session; gets the rest of the line.
pub(crate) type Handler = dyn Fn(&mut Session<'_>, &str) -> io::Result<()>;

/// A registered command.
#[derive(Clone)]
pub(crate) struct Command {
    pub(crate) help: String,
    pub(crate) handler: Rc<Handler>,
}

/// After a command: read the next line, or end the session.
pub(crate) enum Next {
    Continue,
    Quit,
}

/// The built-in commands and their help lines.
const BUILTIN: &[(&str, &str)] = &[
    ("help", "help: lists the commands"),
    (
        "threads",
        "threads [id|run|age|name] [N]: green threads (id, state, wait reason, run time, age, name), sorted (run, age: largest first), at most N",
    ),
    ("stats", "stats: the runtime's counters"),
    (
        "deadlocks",
        "deadlocks: cycles of green threads waiting on locks and joins held by each other",
    ),
    (
        "leaks",
        "leaks: green threads parked on something nothing can hand them any more",
    ),
    ("timers", "timers [N]: the next N timers to fire (default 20)"),
    (
        "latency",
        "latency: recent latency warnings (threads that ran too long without yielding)",
    ),
    (
        "interrupt",
        "interrupt ID: interrupts green thread ID (its blocking call fails)",
    ),
    (
        "profile",
        "profile start|stop|status|dump PATH: records a profile; dump writes the running or last one to PATH (read it with coro-profile)",
    ),
    (
        "trace",
        "trace [dump PATH|latency PATH]: the flight recorder; dump writes its events now, latency the snapshot of the last latency warning, as Chrome trace JSON (Perfetto)",
    ),
    ("quit", "quit: ends this session"),
];

/// Whether `name` is a built-in command.
pub(crate) fn is_builtin(name: &str) -> bool {
    BUILTIN.iter().any(|(n, _)| *n == name)
}

/// Adds an application command to `map`, after checking its name.
pub(crate) fn register(
    map: &mut BTreeMap<String, Command>,
    name: &str,
    help: &str,
    handler: Rc<Handler>,
) -> io::Result<()> {
    check_name(name, map)?;
    map.insert(
        name.to_owned(),
        Command {
            help: help.to_owned(),
            handler,
        },
    );
    Ok(())
}

/// Checks a name for a registered command.
fn check_name(name: &str, taken: &BTreeMap<String, Command>) -> io::Result<()> {
    let bad = |why: String| Err(io::Error::new(io::ErrorKind::InvalidInput, why));
    if name.is_empty() || name.len() > 64 || !name.chars().all(|c| c.is_ascii_graphic()) {
        return bad(format!(
            "back door: command name {name:?} must be 1 to 64 printable characters without spaces"
        ));
    }
    if is_builtin(name) || taken.contains_key(name) {
        return bad(format!(
            "back door: a command named '{name}' exists already"
        ));
    }
    Ok(())
}

pub(crate) fn greet(s: &mut Session<'_>) -> io::Result<()> {
    let st = rt::stats();
    writeln!(
        s,
        "coro back door: {} pid {}, {} green threads; 'help' lists the commands",
        program(),
        std::process::id(),
        st.live
    )
}

fn program() -> String {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "?".into())
}

fn usage(msg: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, format!("usage: {msg}"))
}

pub(crate) fn dispatch(s: &mut Session<'_>, name: &str, args: &str) -> io::Result<Next> {
    match name {
        "help" => help(s)?,
        "threads" => threads(s, args)?,
        "stats" => stats(s)?,
        "deadlocks" => super::waits::deadlocks(s)?,
        "leaks" => super::waits::leaks(s)?,
        "timers" => timers(s, args)?,
        "latency" => latency(s)?,
        "interrupt" => interrupt(s, args)?,
        "profile" => profile(s, args)?,
        "trace" => super::trace::trace(s, args)?,
        "quit" | "exit" => {
            writeln!(s, "bye")?;
            return Ok(Next::Quit);
        }
        _ => {
            let cmd = s.shared().commands.borrow().get(name).cloned();
            match cmd {
                Some(c) => (c.handler)(s, args)?,
                None => {
                    return Err(io::Error::new(
                        io::ErrorKind::NotFound,
                        format!("unknown command '{name}'; 'help' lists them"),
                    ))
                }
            }
        }
    }
    Ok(Next::Continue)
}

fn help(s: &mut Session<'_>) -> io::Result<()> {
    for (_, h) in BUILTIN {
        writeln!(s, "  {h}")?;
    }
    let app: Vec<String> = s
        .shared()
        .commands
        .borrow()
        .values()
        .map(|c| c.help.clone())
        .collect();
    if !app.is_empty() {
        writeln!(s, "application commands:")?;
        for h in app {
            writeln!(s, "  {h}")?;
        }
    }
    Ok(())
}

/// Seconds with milliseconds, right-aligned.
struct Secs(Duration);

impl fmt::Display for Secs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = format!("{:.3}", self.0.as_secs_f64());
        f.pad(&s)
    }
}

fn threads(s: &mut Session<'_>, args: &str) -> io::Result<()> {
    let mut key = "id";
    let mut limit = usize::MAX;
    for a in args.split_whitespace() {
        match a {
            "id" | "run" | "age" | "name" => key = a,
            n => {
                limit = n
                    .parse()
                    .map_err(|_| usage("threads [id|run|age|name] [N]"))?
            }
        }
    }
    let mut list = rt::threads();
    let run = |t: &ThreadInfo| t.run_time.unwrap_or_default();
    match key {
        "run" => list.sort_by(|a, b| run(b).cmp(&run(a)).then(a.id.cmp(&b.id))),
        "age" => list.sort_by(|a, b| b.age.cmp(&a.age).then(a.id.cmp(&b.id))),
        "name" => list.sort_by(|a, b| a.name.cmp(&b.name).then(a.id.cmp(&b.id))),
        _ => {}
    }
    writeln!(
        s,
        "{} green threads{}",
        list.len(),
        if list.first().is_some_and(|t| t.run_time.is_none()) {
            " (run time needs latency warnings on)"
        } else {
            ""
        }
    )?;
    writeln!(
        s,
        "{:>7}  {:<8} {:<12} {:>10} {:>10}  NAME",
        "ID", "STATE", "WAITING ON", "RUN (s)", "AGE (s)"
    )?;
    for t in list.iter().take(limit) {
        let state = format!("{:?}", t.state).to_lowercase();
        let run = match t.run_time {
            Some(d) => Secs(d).to_string(),
            None => "-".into(),
        };
        writeln!(
            s,
            "{:>7}  {:<8} {:<12} {:>10} {:>10}  {}{}",
            t.id,
            state,
            if t.waiting_on.is_empty() {
                "-"
            } else {
                t.waiting_on
            },
            run,
            Secs(t.age),
            t.name.as_deref().unwrap_or("<unnamed>"),
            if t.id == s.thread_id() {
                " (this session)"
            } else {
                ""
            }
        )?;
        if let Some(line) = t.wait.as_ref().and_then(super::waits::wait_detail) {
            writeln!(s, "{line}")?;
        }
    }
    Ok(())
}

fn stats(s: &mut Session<'_>) -> io::Result<()> {
    let st = rt::stats();
    let rows: [(&str, u64); 19] = [
        ("live", st.live as u64),
        ("ready", st.ready as u64),
        ("pending_timers", st.pending_timers as u64),
        ("timer_heap_len", st.timer_heap_len as u64),
        ("switches", st.switches),
        ("polls", st.polls),
        ("forced_yields", st.forced_yields),
        ("latency_warnings", st.latency_warnings),
        ("spin_warnings", st.spin_warnings),
        ("spawned", st.spawned),
        ("panicked", st.panicked),
        ("timers_fired", st.timers_fired),
        ("io_sources", st.io_sources as u64),
        ("blocking_in_flight", st.blocking_in_flight as u64),
        ("blocking_threads", st.blocking_threads as u64),
        ("blocking_queued", st.blocking_queued as u64),
        ("pooled_stacks", st.pooled_stacks as u64),
        ("leaked", st.leaked),
        ("backdoor_sessions", s.shared().sessions.get() as u64),
    ];
    for (k, v) in rows {
        writeln!(s, "{k:<20} {v}")?;
    }
    writeln!(s, "{:<20} {}", "backdoor_refused", s.shared().refused.get())?;
    writeln!(s, "{:<20} {}", "backdoor_evicted", s.shared().evicted.get())?;
    writeln!(s, "{:<20} {}", "profiling", profile::is_running())
}

fn timers(s: &mut Session<'_>, args: &str) -> io::Result<()> {
    let n = match args {
        "" => 20,
        a => a.parse().map_err(|_| usage("timers [N]"))?,
    };
    let list = rt::timers(n);
    writeln!(
        s,
        "{} pending timers; the next {}:",
        rt::stats().pending_timers,
        list.len()
    )?;
    writeln!(s, "{:>12}  {:<8} {:>7}  NAME", "IN (s)", "KIND", "THREAD")?;
    for t in list {
        writeln!(
            s,
            "{:>12}  {:<8} {:>7}  {}",
            Secs(t.remaining),
            t.kind,
            t.thread,
            t.name.as_deref().unwrap_or("<unnamed>")
        )?;
    }
    Ok(())
}

fn latency(s: &mut Session<'_>) -> io::Result<()> {
    let Some(threshold) = rt::latency_threshold() else {
        return writeln!(s, "latency warnings are off in this runtime");
    };
    let list = rt::latency_warnings();
    writeln!(
        s,
        "threshold {:.3} s; {} warnings since start, the last {} (newest last):",
        threshold.as_secs_f64(),
        rt::stats().latency_warnings,
        list.len()
    )?;
    writeln!(
        s,
        "{:>10}  {:>10} {:>7}  NAME",
        "AGO (s)", "RAN (s)", "THREAD"
    )?;
    let now = SystemTime::now();
    for w in list {
        writeln!(
            s,
            "{:>10}  {:>10} {:>7}  {}{}",
            Secs(now.duration_since(w.started_wall).unwrap_or_default()),
            Secs(w.ran),
            w.thread,
            w.name.as_deref().unwrap_or("<unnamed>"),
            if w.running { " (still running)" } else { "" }
        )?;
    }
    Ok(())
}

fn interrupt(s: &mut Session<'_>, args: &str) -> io::Result<()> {
    let id: u64 = args
        .trim_start_matches('#')
        .parse()
        .map_err(|_| usage("interrupt ID (a thread id from 'threads')"))?;
    if id == s.thread_id() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("#{id} is this session; use quit"),
        ));
    }
    let t = rt::thread_by_id(id)
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("no green thread #{id}")))?;
    let state = format!("{:?}", t.state()).to_lowercase();
    t.interrupt().map_err(io::Error::other)?;
    log::info!(
        target: "coro::backdoor",
        "back door: green thread #{id} '{}' interrupted by uid {}",
        t.name().unwrap_or("<unnamed>"),
        s.peer_uid()
    );
    writeln!(
        s,
        "interrupted #{id} '{}' (was {state})",
        t.name().unwrap_or("<unnamed>")
    )
}

fn profile(s: &mut Session<'_>, args: &str) -> io::Result<()> {
    let (verb, rest) = args.split_once(' ').unwrap_or((args, ""));
    match verb {
        "start" => {
            profile::start()?;
            writeln!(
                s,
                "profiling; 'profile stop' ends it, 'profile dump PATH' writes it"
            )
        }
        "stop" => {
            let p = profile::stop().ok_or_else(not_running)?;
            summary(s, &p)?;
            *s.shared().last_profile.borrow_mut() = Some(p);
            writeln!(s, "'profile dump PATH' writes it")
        }
        "status" => match profile::snapshot() {
            Some(p) => {
                writeln!(s, "profiling for {:.3} s", p.wall.as_secs_f64())
            }
            None => writeln!(
                s,
                "not profiling{}",
                if s.shared().last_profile.borrow().is_some() {
                    "; a stopped profile is kept for dump"
                } else {
                    ""
                }
            ),
        },
        "dump" => {
            let path = rest.trim();
            if path.is_empty() {
                return Err(usage("profile dump PATH"));
            }
            let p = profile::snapshot()
                .or_else(|| s.shared().last_profile.borrow().clone())
                .ok_or_else(|| {
                    io::Error::new(
                        io::ErrorKind::NotFound,
                        "no profile to dump: 'profile start' first",
                    )
                })?;
            let path = std::path::absolute(PathBuf::from(path))?;
            let to = path.clone();
            rt::blocking(move || p.save(&to))??;
            writeln!(s, "wrote {}", path.display())
        }
        _ => Err(usage("profile start|stop|status|dump PATH")),
    }
}

fn not_running() -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        "not profiling ('profile start' first)",
    )
}

/// The top entries of a profile.
fn summary(s: &mut Session<'_>, p: &Profile) -> io::Result<()> {
    writeln!(
        s,
        "profiled {:.3} s: {} entries, {} latency warnings",
        p.wall.as_secs_f64(),
        p.entries.len(),
        p.latency_warnings.len()
    )?;
    writeln!(
        s,
        "{:>8} {:>10} {:>10} {:>10}  {:<9} NAME",
        "% WALL", "WALL (s)", "CPU (s)", "CALLS", "KIND"
    )?;
    let total = p.wall.as_secs_f64().max(1e-9);
    for e in p.entries.iter().take(15) {
        writeln!(
            s,
            "{:>8.1} {:>10} {:>10} {:>10}  {:<9} {}",
            e.wall.as_secs_f64() * 100.0 / total,
            Secs(e.wall),
            Secs(e.usage.cpu()),
            e.calls,
            e.kind.as_str(),
            e.name
        )?;
    }
    Ok(())
}
