//! `mailq` and `flush`: the running relay's side (two back-door commands,
//! SIGUSR1, a pid file in the spool) and the command line's
//! (`mail-relay mailq`, `mail-relay flush`).
//!
//! The command line asks the running relay through its back door when one
//! is configured, so `mailq` shows what is in flight. Without a back door
//! (or with the relay stopped), `mailq` reads the spool directory, which
//! holds the same facts (the journals say which messages wait and why),
//! and `flush` sends SIGUSR1 to the pid the relay wrote into the spool.

use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, SystemTime};

use coro::net::backdoor::{self, BackDoor};

use crate::config::Config;
use crate::delivery::smtp::Smtp;
use crate::queue::{format_mailq, MailqItem, Queue};
use crate::spool::read_queue;

/// The pid file's name in the spool directory.
const PID_FILE: &str = "mail-relay.pid";

/// How long the command line waits for the relay's answer.
const ASK_TIMEOUT: Duration = Duration::from_secs(30);

/// Serves the back door at `path` with `mailq`, `flush` and `pools` beside
/// the runtime's own commands.
///
/// # Errors
///
/// As [`backdoor::Builder::serve`] (a directory others may write, a live
/// socket already there, ...), with the setting named.
pub fn serve_backdoor(path: &Path, queue: &Queue, smtp: Option<Rc<Smtp>>) -> io::Result<BackDoor> {
    let (q1, q2) = (queue.clone(), queue.clone());
    backdoor::Builder::new(path)
        .command(
            "pools",
            "pools: the SMTP connection cache (upstreams in connect backoff, with why and until when)",
            move |s, _| match &smtp {
                Some(smtp) => writeln!(s, "{}", smtp.pool_status()),
                None => writeln!(s, "no SMTP upstream configured: every message goes into the Maildir"),
            },
        )?
        .command("mailq", "mailq: lists the mail queue", move |s, _| {
            s.write_all(format_mailq(&q1.items(), SystemTime::now()).as_bytes())
        })?
        .command(
            "flush",
            "flush: makes every deferred message due now",
            move |s, _| {
                let n = q2.flush();
                let verb = if n == 1 { "is" } else { "are" };
                let what = crate::logger::count(n, "deferred message");
                writeln!(s, "{what} {verb} due now")
            },
        )?
        .serve()
        .map_err(|e| io::Error::new(e.kind(), format!("backdoor {}: {e}", path.display())))
}

/// The spool lock's name in the spool directory.
const LOCK_FILE: &str = "mail-relay.lock";

/// Takes the lock of the spool directory `spool` (which exists): an
/// exclusive `flock` on `mail-relay.lock`, held until the returned file is
/// closed (the process exits, however it exits), with our pid written
/// into it.
///
/// The lock file is 0600 in a 0700 directory: `flock` needs only a
/// read-only descriptor, so a lock file others could open would let any
/// local user stop the relay from starting. A symbolic link in its place
/// is not followed.
///
/// # Errors
///
/// If another process holds the lock (naming it as the kernel does: see
/// [`lock_holder`]), or the file cannot be opened.
pub fn lock_spool(spool: &Path) -> io::Result<std::fs::File> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::PermissionsExt;
    let path = spool.join(LOCK_FILE);
    let mut f = crate::files::open_own()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|e| own_file_error(&path, e))?;
    if f.metadata()?.permissions().mode() & 0o077 != 0 {
        f.set_permissions(std::fs::Permissions::from_mode(crate::files::FILE_MODE))?;
    }
    // SAFETY: flock takes a file descriptor and flags, touches no memory of
    // ours; the descriptor is `f`'s, open for the whole call. A lock left
    // by a panic or any other exit is released by the kernel when the
    // descriptor closes, so no path leaves the spool locked.
    let r = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if r != 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
            let mut written = String::new();
            let _ = f.read_to_string(&mut written);
            return Err(io::Error::new(
                io::ErrorKind::AddrInUse,
                format!(
                    "{} is locked by {}",
                    path.display(),
                    lock_holder(&f, &path, written.trim())
                ),
            ));
        }
        return Err(e);
    }
    f.set_len(0)?;
    f.write_all(format!("{}\n", std::process::id()).as_bytes())?;
    Ok(f)
}

/// An error opening a file the relay names itself in its spool, said
/// plainly: a symbolic link there, or a file of another user's.
fn own_file_error(path: &Path, e: io::Error) -> io::Error {
    use std::os::unix::fs::MetadataExt;
    let why = match (e.raw_os_error(), std::fs::symlink_metadata(path)) {
        (Some(libc::ELOOP), Ok(md)) if md.file_type().is_symlink() => format!(
            "a symbolic link is there (made by {}); the relay never follows one to its own \
             files: remove it, and find out who made it",
            crate::privilege::describe_uid(md.uid())
        ),
        (_, Ok(md)) if e.kind() == io::ErrorKind::PermissionDenied => format!(
            "{e}: it belongs to {}; the spool and everything in it must belong to the user \
             the relay runs as (chown -R)",
            crate::privilege::describe_uid(md.uid())
        ),
        _ => e.to_string(),
    };
    io::Error::new(e.kind(), format!("{}: {why}", path.display()))
}

/// Who holds the lock on `f` (at `path`), as the kernel lists it in
/// `/proc/locks`, in words: "pid N, a mail-relay (EXE)", "pid N, which is
/// another program (COMM)", "pid N, which is not running ...". Where the
/// kernel names no holder, the pid the lock file holds (`written`) is
/// described instead, as what the file says.
pub fn lock_holder(f: &std::fs::File, path: &Path, written: &str) -> String {
    use std::os::unix::fs::MetadataExt;
    let fuser = format!(
        "`fuser -v {}` names the processes that have it open",
        path.display()
    );
    let listed = f.metadata().ok().and_then(|md| {
        let locks = std::fs::read_to_string("/proc/locks").ok()?;
        flock_holder(&locks, md.dev(), md.ino())
    });
    match listed {
        Some(pid) => match describe_pid(pid) {
            Process::MailRelay(exe) => {
                format!("pid {pid}, a mail-relay ({exe}); one spool, one relay")
            }
            Process::Other(name) => {
                format!("pid {pid}, which is another program ({name}), not a mail-relay; {fuser}")
            }
            Process::Gone => format!(
                "pid {pid}, which is not running: a process that inherited its descriptor holds \
                 the lock still; {fuser}"
            ),
        },
        None => {
            let said = match written.parse::<i32>() {
                Ok(pid) => match describe_pid(pid) {
                    Process::MailRelay(exe) => format!("pid {pid}, a mail-relay ({exe})"),
                    Process::Other(name) => format!("pid {pid}, which is another program ({name})"),
                    Process::Gone => format!("pid {pid}, which is not running"),
                },
                Err(_) => format!("{written:?}, not a pid"),
            };
            format!(
                "a process this system does not name (another pid namespace?); the lock file \
                 says {said}; {fuser}"
            )
        }
    }
}

/// The pid holding a `flock` on the file (`dev`, `ino`), from the text of
/// `/proc/locks` (`1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF`;
/// waiters, marked `->`, are not holders).
fn flock_holder(locks: &str, dev: u64, ino: u64) -> Option<i32> {
    // Linux's dev_t encoding.
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
    let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
    locks.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.get(1) != Some(&"FLOCK") {
            return None;
        }
        let mut id = fields.get(5)?.split(':');
        let (ma, mi, i) = (id.next()?, id.next()?, id.next()?);
        let same = u64::from_str_radix(ma, 16).ok()? == major
            && u64::from_str_radix(mi, 16).ok()? == minor
            && i.parse::<u64>().ok()? == ino;
        same.then(|| fields[4].parse().ok()).flatten()
    })
}

/// What a pid is now.
#[derive(Debug, PartialEq, Eq)]
enum Process {
    /// A mail-relay (its executable, or its name).
    MailRelay(String),
    /// Another program (its name).
    Other(String),
    /// No such process.
    Gone,
}

/// What `pid` is, from `/proc/PID/exe` (or its name, `comm`, where the
/// executable cannot be read).
fn describe_pid(pid: i32) -> Process {
    let proc = PathBuf::from(format!("/proc/{pid}"));
    if pid <= 0 || !proc.exists() {
        return Process::Gone;
    }
    let comm = std::fs::read_to_string(proc.join("comm"))
        .map(|c| c.trim().to_owned())
        .unwrap_or_default();
    match std::fs::read_link(proc.join("exe")) {
        Ok(exe) => {
            let name = exe.file_name().map(|n| n.to_string_lossy().into_owned());
            if name.is_some_and(|n| n.starts_with("mail-relay")) {
                Process::MailRelay(exe.display().to_string())
            } else {
                Process::Other(format!("{} ({comm})", exe.display()))
            }
        }
        Err(_) if comm == "mail-relay" => Process::MailRelay(comm),
        Err(_) => Process::Other(comm),
    }
}

/// Writes our pid into the spool directory (0600, not through a link).
///
/// # Errors
///
/// If the file cannot be written.
pub fn write_pid(spool: &Path) -> io::Result<()> {
    let path = spool.join(PID_FILE);
    let mut f = crate::files::open_own()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .map_err(|e| own_file_error(&path, e))?;
    f.write_all(format!("{}\n", std::process::id()).as_bytes())
}

/// Removes the pid file if it is still ours.
pub fn remove_pid(spool: &Path) {
    let path = spool.join(PID_FILE);
    let ours =
        std::fs::read_to_string(&path).is_ok_and(|s| s.trim() == std::process::id().to_string());
    if ours {
        let _ = std::fs::remove_file(path);
    }
}

/// `mail-relay mailq`: the listing.
///
/// # Errors
///
/// What went wrong, for the command line.
pub fn mailq(config: &Config) -> Result<String, String> {
    if let Some(path) = &config.backdoor {
        if let Some(out) = ask(path, "mailq")? {
            return Ok(out);
        }
    }
    let dir = &config.spool_dir;
    let scan = read_queue(dir).map_err(|e| format!("spool_dir {}: {e}", dir.display()))?;
    let mut items: Vec<MailqItem> = scan
        .batches
        .into_iter()
        .flat_map(|b| b.messages)
        .map(|q| {
            let (env, st) = (&q.msg.env, q.state);
            MailqItem {
                id: env.id.clone(),
                size: q.msg.content.len(),
                arrival: env.arrival,
                rcpts: env
                    .rcpts
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| !st.done_rcpts.contains(i))
                    .map(|(_, r)| r.clone())
                    .collect(),
                from: env.from.clone(),
                active: false,
                attempts: st.attempts,
                next_attempt: st.next_attempt,
                reason: st.reason,
            }
        })
        .collect();
    items.sort_by(|a, b| (a.arrival, &a.id).cmp(&(b.arrival, &b.id)));
    Ok(format_mailq(&items, SystemTime::now()))
}

/// `mail-relay flush`: asks the running relay to retry its deferred mail.
///
/// # Errors
///
/// No relay runs, or it could not be reached.
pub fn flush(config: &Config) -> Result<String, String> {
    if let Some(path) = &config.backdoor {
        if let Some(out) = ask(path, "flush")? {
            return Ok(out);
        }
    }
    let pid_file = config.spool_dir.join(PID_FILE);
    let text = std::fs::read_to_string(&pid_file).map_err(|e| {
        format!(
            "no mail-relay runs on this spool ({}: {e})",
            pid_file.display()
        )
    })?;
    let pid: i32 = text
        .trim()
        .parse()
        .map_err(|_| format!("{}: not a pid: {text:?}", pid_file.display()))?;
    if !is_mail_relay(pid) {
        return Err(format!(
            "no mail-relay runs on this spool (pid {pid} of {} is gone)",
            pid_file.display()
        ));
    }
    // SAFETY: kill(2) takes plain integers; a wrong pid is an error return.
    if unsafe { libc::kill(pid, libc::SIGUSR1) } != 0 {
        return Err(format!(
            "signalling mail-relay (pid {pid}): {}",
            io::Error::last_os_error()
        ));
    }
    Ok(format!(
        "asked mail-relay (pid {pid}) to retry its deferred mail now\n"
    ))
}

/// Whether `pid` is a mail-relay process (never signal a stranger that
/// took a stale pid). Where there is no `/proc`, trusts the pid file.
fn is_mail_relay(pid: i32) -> bool {
    let proc = PathBuf::from(format!("/proc/{pid}"));
    if !Path::new("/proc/self").exists() {
        return true;
    }
    std::fs::read(proc.join("cmdline"))
        .is_ok_and(|c| String::from_utf8_lossy(&c).contains("mail-relay"))
}

/// Runs `command` on the back door at `path`; `Ok(None)` when no relay
/// listens there.
fn ask(path: &Path, command: &str) -> Result<Option<String>, String> {
    let mut s = match std::os::unix::net::UnixStream::connect(path) {
        Ok(s) => s,
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused
            ) =>
        {
            return Ok(None)
        }
        Err(e) => return Err(format!("backdoor {}: {e}", path.display())),
    };
    let fail = |e: io::Error| format!("backdoor {}: {e}", path.display());
    s.set_read_timeout(Some(ASK_TIMEOUT)).map_err(fail)?;
    s.set_write_timeout(Some(ASK_TIMEOUT)).map_err(fail)?;
    s.write_all(format!("{command}\nquit\n").as_bytes())
        .map_err(fail)?;
    let mut raw = String::new();
    s.read_to_string(&mut raw).map_err(fail)?;
    // A greeting line, then "> " before each command's output, "bye" last.
    let body = raw.split_once('\n').map_or("", |(_, rest)| rest);
    let body = body.strip_prefix("> ").unwrap_or(body);
    let body = body.strip_suffix("> bye\n").unwrap_or(body);
    if let Some(e) = body.strip_prefix("error: ") {
        return Err(format!("mail-relay {command}: {}", e.trim_end()));
    }
    Ok(Some(body.to_owned()))
}
