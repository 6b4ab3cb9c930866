//! The files and directories the relay writes, and the ones it trusts.
//!
//! * **Private whatever the umask.** Files the relay makes (queue files,
//!   journals, delivered mail, the lock, the pid file, the log) are 0600,
//!   its directories 0700, as Postfix's queue and Dovecot's Maildir are;
//!   a subdirectory of its own found looser is tightened.
//! * **Our own names are never followed.** A file the relay names itself
//!   inside its directories is opened with `O_NOFOLLOW` (and made with
//!   `O_EXCL`), so a symbolic link planted there is an error, not a way to
//!   make the relay write elsewhere.
//! * **The paths the operator names are checked before use** (`spool_dir`,
//!   `maildir`, the back door's directory, `log_file`): the directory (or
//!   file) must belong to the user the relay runs as and be writable by
//!   no one else; every directory above it must belong to root or that
//!   user and be writable by no one else, unless it is sticky (`/tmp`),
//!   and a symbolic link on the way must belong to root or that user. So
//!   no other local user can put their own directory, or a link to a file
//!   of root's, where the relay writes. The back door's own check
//!   (`coro::net::backdoor`) is the same rule for its socket.
//! * **Private keys must be private**: a key file that its group or
//!   others may read or write is refused (OpenSSH's rule, OpenDKIM's
//!   `RequireSafeKeys`), or only warned about with
//!   `require_safe_keys = false`.

use std::fs::{self, DirBuilder, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

use crate::privilege::{describe_uid, RunAs};

/// The mode of every file the relay makes.
pub const FILE_MODE: u32 = 0o600;

/// The mode of every directory the relay makes.
pub const DIR_MODE: u32 = 0o700;

/// Options for a new file of ours (it must not exist): write, mode 0600,
/// no symbolic link followed.
pub fn create_new() -> OpenOptions {
    let mut o = OpenOptions::new();
    o.write(true)
        .create_new(true)
        .mode(FILE_MODE)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC);
    o
}

/// Options for a file of ours that may exist (a journal appended to, the
/// lock, the pid file): mode 0600 when made, no symbolic link followed.
pub fn open_own() -> OpenOptions {
    let mut o = OpenOptions::new();
    o.mode(FILE_MODE)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC);
    o
}

/// Options for reading a file of ours (a queue file): no symbolic link
/// followed.
pub fn open_read() -> OpenOptions {
    let mut o = OpenOptions::new();
    o.read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC);
    o
}

/// Makes `dir`, a subdirectory the relay names itself (`queue/`, `new/`),
/// mode 0700; one that exists must be a directory, not a symbolic link,
/// and is tightened to 0700 if looser.
///
/// # Errors
///
/// It cannot be made, it is not a directory, or its mode cannot be set.
pub fn private_subdir(dir: &Path) -> io::Result<()> {
    match DirBuilder::new().mode(DIR_MODE).create(dir) {
        Ok(()) => return Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(io::Error::new(e.kind(), format!("{}: {e}", dir.display()))),
    }
    let md = fs::symlink_metadata(dir)?;
    if !md.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!(
                "{} is {}, not a directory; the relay uses it for its own files: remove it",
                dir.display(),
                kind(&md)
            ),
        ));
    }
    if md.mode() & 0o077 != 0 {
        fs::set_permissions(dir, fs::Permissions::from_mode(DIR_MODE))?;
        log::info!(
            "{}: mode {:04o} tightened to {DIR_MODE:04o}",
            dir.display(),
            md.mode() & 0o7777
        );
    }
    Ok(())
}

/// What is at a path, for messages.
fn kind(md: &fs::Metadata) -> &'static str {
    let t = md.file_type();
    if t.is_symlink() {
        "a symbolic link"
    } else if t.is_dir() {
        "a directory"
    } else if t.is_file() {
        "a regular file"
    } else {
        "a special file"
    }
}

/// What is at `path` (links followed), or `None` if nothing is; an error
/// names the setting `key` and the path.
fn metadata(key: &str, path: &Path) -> io::Result<Option<fs::Metadata>> {
    match fs::metadata(path) {
        Ok(md) => Ok(Some(md)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io::Error::new(
            e.kind(),
            format!("{key} {}: {e}", path.display()),
        )),
    }
}

fn refuse(key: &str, path: &Path, why: String) -> io::Error {
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        format!("{key} {}: refusing it: {why}", path.display()),
    )
}

/// Who may write a directory with `mode`, or `None`.
fn writers(mode: u32) -> Option<&'static str> {
    if mode & 0o002 != 0 {
        Some("everyone")
    } else if mode & 0o020 != 0 {
        Some("its group")
    } else {
        None
    }
}

/// Checks the directory the setting `key` names, which the relay (running
/// as `who`) writes into; returns whether it exists (see the module docs
/// for the rule).
///
/// # Errors
///
/// It is not a directory; it, or a directory above it, fails the rule
/// (the message names the path, its owner or mode, and the fix).
pub fn check_dir(key: &str, path: &Path, who: &RunAs) -> io::Result<bool> {
    let abs = std::path::absolute(path)?;
    let Some(md) = metadata(key, &abs)? else {
        check_above(key, &abs, who)?;
        return Ok(false);
    };
    if !md.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{key} {}: not a directory ({} is there); name a directory (the relay makes it \
                 when it is missing)",
                abs.display(),
                kind(&md)
            ),
        ));
    }
    check_above(key, &abs, who)?;
    if md.uid() != who.uid {
        return Err(refuse(
            key,
            &abs,
            format!(
                "it belongs to {}, not to {who}, the user the relay runs as, so its owner \
                 could replace the relay's files in it (with a link to a file of yours, say). \
                 Fix: chown -R {} {} if the directory is the relay's alone, or name one of \
                 {}'s",
                describe_uid(md.uid()),
                who.name,
                abs.display(),
                who.name
            ),
        ));
    }
    let mode = md.mode() & 0o7777;
    if let Some(w) = writers(mode) {
        return Err(refuse(
            key,
            &abs,
            format!(
                "mode {mode:04o} lets {w} write there, and so replace the relay's files. \
                 Fix: chmod 700 {}",
                abs.display()
            ),
        ));
    }
    Ok(true)
}

/// Checks the file the setting `key` names (the log file), which the
/// relay running as `who` appends to: it must be a regular file of that
/// user's or root's that no one else may write, in directories that pass
/// the rule. Returns whether it exists.
///
/// # Errors
///
/// As [`check_dir`].
pub fn check_file(key: &str, path: &Path, who: &RunAs) -> io::Result<bool> {
    let abs = std::path::absolute(path)?;
    check_above(key, &abs, who)?;
    let Some(md) = metadata(key, &abs)? else {
        return Ok(false);
    };
    if !md.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{key} {}: not a regular file ({} is there)",
                abs.display(),
                kind(&md)
            ),
        ));
    }
    if md.uid() != who.uid && md.uid() != 0 {
        return Err(refuse(
            key,
            &abs,
            format!(
                "it belongs to {}, not to {who}, the user the relay runs as, or root. \
                 Fix: chown {} {}",
                describe_uid(md.uid()),
                who.name,
                abs.display()
            ),
        ));
    }
    let mode = md.mode() & 0o7777;
    if let Some(w) = writers(mode) {
        return Err(refuse(
            key,
            &abs,
            format!(
                "mode {mode:04o} lets {w} write it. Fix: chmod go-w {}",
                abs.display()
            ),
        ));
    }
    Ok(true)
}

/// Checks every directory above `abs` (absolute), as written and as
/// resolved: each must belong to root or `who` and be writable by no one
/// else unless sticky; a symbolic link on the way, `abs` itself included,
/// must belong to root or `who`.
fn check_above(key: &str, abs: &Path, who: &RunAs) -> io::Result<()> {
    let mut seen = PathBuf::new();
    let mut written = Vec::new();
    for c in abs.components() {
        match c {
            Component::ParentDir => {
                seen.pop();
            }
            Component::CurDir => {}
            c => seen.push(c),
        }
        written.push(seen.clone());
    }
    // Where links lead: the real directories above the deepest path that
    // exists (the path itself left to the caller).
    let deepest = written.iter().rev().find(|p| p.exists()).cloned();
    let last = written.pop();
    let mut real: Vec<PathBuf> = deepest
        .as_ref()
        .and_then(|p| fs::canonicalize(p).ok())
        .map(|r| r.ancestors().map(Path::to_path_buf).collect())
        .unwrap_or_default();
    if deepest.is_some() && deepest == last && !real.is_empty() {
        real.remove(0);
    }
    if let Some(last) = &last {
        check_link(key, abs, last, who)?;
    }
    for p in written.iter().chain(&real) {
        if !check_link(key, abs, p, who)? {
            continue;
        }
        let Some(md) = metadata(key, p)? else {
            continue;
        };
        if !md.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{key} {}: {} is not a directory ({} is there)",
                    abs.display(),
                    p.display(),
                    kind(&md)
                ),
            ));
        }
        if md.uid() != 0 && md.uid() != who.uid {
            return Err(refuse(
                key,
                abs,
                format!(
                    "the directory {} above it belongs to {}, who could put a directory of \
                     their own in its place. Fix: a path whose directories belong to root or \
                     {}",
                    p.display(),
                    describe_uid(md.uid()),
                    who.name
                ),
            ));
        }
        let mode = md.mode() & 0o7777;
        if mode & 0o1000 == 0 && mode & 0o002 != 0 {
            return Err(refuse(
                key,
                abs,
                format!(
                    "the directory {} above it has mode {mode:04o}: everyone may write there \
                     and put a directory of their own in its place. Fix: chmod o-w {} (or \
                     chmod +t, as /tmp is)",
                    p.display(),
                    p.display()
                ),
            ));
        }
    }
    Ok(())
}

/// Refuses `p` (on the way to `abs`) if it is a symbolic link of a user
/// other than root and `who`; returns whether anything is at `p`.
fn check_link(key: &str, abs: &Path, p: &Path, who: &RunAs) -> io::Result<bool> {
    let lmd = match fs::symlink_metadata(p) {
        Ok(md) => md,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => {
            return Err(io::Error::new(
                e.kind(),
                format!("{key} {}: {e}", p.display()),
            ))
        }
    };
    if lmd.file_type().is_symlink() && lmd.uid() != 0 && lmd.uid() != who.uid {
        return Err(refuse(
            key,
            abs,
            format!(
                "the symbolic link {} belongs to {}, who could point it anywhere. Fix: name \
                 the real path, or chown -h root {}",
                p.display(),
                describe_uid(lmd.uid()),
                p.display()
            ),
        ));
    }
    Ok(true)
}

/// Makes the directory `path` and any missing directory above it (each
/// 0700 and owned by `who`), after [`check_dir`] found it missing.
///
/// # Errors
///
/// A directory could not be made or given to `who`.
pub fn make_dir(key: &str, path: &Path, who: &RunAs) -> io::Result<()> {
    let abs = std::path::absolute(path)?;
    let mut missing: Vec<&Path> = abs.ancestors().take_while(|p| !p.exists()).collect();
    missing.reverse();
    for dir in missing {
        let made = DirBuilder::new()
            .mode(DIR_MODE)
            .create(dir)
            .and_then(|()| give(dir, who));
        made.map_err(|e| io::Error::new(e.kind(), format!("{key} {}: {e}", dir.display())))?;
    }
    Ok(())
}

/// Gives the directory or file the relay just made at `path` to `who`
/// (when the relay runs as root and drops to `who`).
fn give(path: &Path, who: &RunAs) -> io::Result<()> {
    if !who.drops {
        return Ok(());
    }
    let f = open_read().open(path)?;
    std::os::unix::fs::fchown(&f, Some(who.uid), Some(who.gid))
}

/// Makes the log file at `path` when it is missing (0600, owned by `who`),
/// after [`check_file`].
///
/// # Errors
///
/// It could not be made or given to `who`.
pub fn make_file(key: &str, path: &Path, who: &RunAs) -> io::Result<()> {
    let made = create_new().open(path).and_then(|f| {
        if who.drops {
            std::os::unix::fs::fchown(&f, Some(who.uid), Some(who.gid))?;
        }
        Ok(())
    });
    match made {
        Err(e) if e.kind() != io::ErrorKind::AlreadyExists => Err(io::Error::new(
            e.kind(),
            format!("{key} {}: {e}", path.display()),
        )),
        _ => Ok(()),
    }
}

/// Checks the private key file the setting `key` names: one its group or
/// others may read or write is refused, or with `require_safe` false only
/// warned about.
///
/// # Errors
///
/// The refusal, naming the file, its mode and the fix.
pub fn check_private_key(key: &str, path: &Path, require_safe: bool) -> Result<(), String> {
    let md = fs::metadata(path).map_err(|e| format!("{key} {}: {e}", path.display()))?;
    let mode = md.mode() & 0o7777;
    if mode & 0o077 == 0 {
        return Ok(());
    }
    let who = if mode & 0o007 != 0 {
        "others"
    } else {
        "its group"
    };
    let text = format!(
        "{key} {}: mode {mode:04o} lets {who} read or change this private key. Fix: chmod 600 {}",
        path.display(),
        path.display()
    );
    if require_safe {
        Err(format!(
            "{text} (or set require_safe_keys = false to use it with a warning)"
        ))
    } else {
        log::warn!("{text}; using it as require_safe_keys = false");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn me() -> RunAs {
        RunAs::resolve(None).unwrap()
    }

    fn tmp(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("mail-relay-files-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        DirBuilder::new().mode(0o755).create(&d).unwrap();
        d
    }

    #[test]
    fn made_files_and_directories_are_private_whatever_the_umask() {
        let d = tmp("modes");
        // SAFETY: umask takes a plain integer; the old mask is restored.
        let old = unsafe { libc::umask(0) };
        let who = me();
        make_dir("spool_dir", &d.join("a/b"), &who).unwrap();
        private_subdir(&d.join("a/b/queue")).unwrap();
        create_new().open(d.join("a/b/queue/f")).unwrap();
        // SAFETY: as above.
        unsafe { libc::umask(old) };
        for (p, want) in [
            ("a", 0o700),
            ("a/b", 0o700),
            ("a/b/queue", 0o700),
            ("a/b/queue/f", 0o600),
        ] {
            let mode = fs::metadata(d.join(p)).unwrap().mode() & 0o777;
            assert_eq!(mode, want, "{p}: {mode:o}");
        }
        fs::set_permissions(d.join("a/b/queue"), fs::Permissions::from_mode(0o755)).unwrap();
        private_subdir(&d.join("a/b/queue")).unwrap();
        assert_eq!(
            fs::metadata(d.join("a/b/queue")).unwrap().mode() & 0o777,
            0o700
        );
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn our_own_names_are_not_followed() {
        let d = tmp("nofollow");
        fs::write(d.join("target"), "x").unwrap();
        std::os::unix::fs::symlink(d.join("target"), d.join("link")).unwrap();
        let e = open_own()
            .append(true)
            .create(true)
            .open(d.join("link"))
            .unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ELOOP), "{e}");
        assert!(create_new().open(d.join("link")).is_err());
        std::os::unix::fs::symlink(d.join("target"), d.join("sub")).unwrap();
        assert!(private_subdir(&d.join("sub")).is_err());
        assert_eq!(fs::read_to_string(d.join("target")).unwrap(), "x");
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn shared_directories_and_files_are_refused() {
        let d = tmp("shared");
        let who = me();
        fs::create_dir(d.join("open")).unwrap();
        fs::set_permissions(d.join("open"), fs::Permissions::from_mode(0o777)).unwrap();
        let e = check_dir("spool_dir", &d.join("open"), &who)
            .unwrap_err()
            .to_string();
        assert!(e.contains("mode 0777") && e.contains("chmod 700"), "{e}");
        let e = check_dir("spool_dir", &d.join("open/spool"), &who)
            .unwrap_err()
            .to_string();
        assert!(e.contains("above it") && e.contains("chmod o-w"), "{e}");
        fs::set_permissions(d.join("open"), fs::Permissions::from_mode(0o1777)).unwrap();
        assert!(!check_dir("spool_dir", &d.join("open/spool"), &who).unwrap());
        fs::write(d.join("file"), "").unwrap();
        let e = check_dir("spool_dir", &d.join("file"), &who)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("not a directory") && e.contains("a regular file"),
            "{e}"
        );
        fs::set_permissions(d.join("file"), fs::Permissions::from_mode(0o666)).unwrap();
        let e = check_file("log_file", &d.join("file"), &who)
            .unwrap_err()
            .to_string();
        assert!(e.contains("chmod go-w"), "{e}");
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn private_keys_others_may_read_are_refused_or_warned_about() {
        let d = tmp("keys");
        let k = d.join("k.pem");
        fs::write(&k, "key").unwrap();
        for (mode, who) in [(0o644, "others"), (0o640, "its group")] {
            fs::set_permissions(&k, fs::Permissions::from_mode(mode)).unwrap();
            let e = check_private_key("dkim.\"a.test\".key_file", &k, true).unwrap_err();
            assert!(
                e.contains(&format!("mode {mode:04o}"))
                    && e.contains(who)
                    && e.contains("chmod 600"),
                "{e}"
            );
            assert!(check_private_key("k", &k, false).is_ok());
        }
        fs::set_permissions(&k, fs::Permissions::from_mode(0o600)).unwrap();
        assert!(check_private_key("k", &k, true).is_ok());
        fs::remove_dir_all(&d).unwrap();
    }
}
