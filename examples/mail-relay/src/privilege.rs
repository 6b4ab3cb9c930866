//! Who the relay runs as: the `user` setting, the warning when it runs as
//! root without one, and the drop of root's privileges once what needs
//! root is done.
//!
//! # The start as root
//!
//! Started as root (to bind port 25) with `user = "mailrelay"`, the relay
//! binds its listeners, reads the TLS and DKIM keys, opens the log file
//! and makes the spool, Maildir and back-door directories (owned by that
//! user, mode 0700) as root; then it drops to the user for good:
//! `setgroups` to the user's group alone, `setgid`, `setuid`, in that
//! order, each checked, and checked again afterwards (every id is the
//! user's, and `setuid(0)` fails). Everything else (the SMTP sessions, the
//! spool's files, delivery, the back door's socket, every SIGHUP) runs as
//! the user; the C library applies the change to every thread of the
//! process.
//!
//! Started as root without `user`, the relay runs as root and says so
//! once at start, with a warning that names the fixes ([`root_warning`]),
//! unless `run_as_root = true` says running as root is meant. The other
//! way to listen on port 25 without root's rights is to start it as
//! its user with the capability to bind low ports (`setcap
//! cap_net_bind_service=+ep`, or systemd's
//! `AmbientCapabilities=CAP_NET_BIND_SERVICE`).

use std::ffi::{CStr, CString};
use std::fmt;
use std::io;
use std::sync::OnceLock;

/// The identity the relay runs as once started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunAs {
    /// Its user id.
    pub uid: u32,
    /// Its group id (the user's primary group).
    pub gid: u32,
    /// Its user name (or the number, for a uid with no name).
    pub name: String,
    /// Whether the process starts as root and drops to this user.
    pub drops: bool,
}

impl fmt::Display for RunAs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (uid {})", self.name, self.uid)
    }
}

/// Set once the privileges are dropped: the user, for messages about what
/// the relay can no longer open.
static DROPPED: OnceLock<RunAs> = OnceLock::new();

/// The effective uid of this process.
pub fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

impl RunAs {
    /// Whom the relay will run as, from `user`: that user, or whoever
    /// started the process when `user` is unset (root included: see
    /// [`root_warning`]).
    ///
    /// # Errors
    ///
    /// A `user` that does not exist, or that the process (not root, and
    /// not that user) cannot become.
    pub fn resolve(user: Option<&str>) -> Result<RunAs, String> {
        let me = euid();
        let Some(user) = user else {
            let (name, gid) = match lookup_uid(me) {
                Some(p) => (p.name, p.gid),
                // SAFETY: getegid has no preconditions and cannot fail.
                None => (me.to_string(), unsafe { libc::getegid() }),
            };
            return Ok(RunAs {
                uid: me,
                gid,
                name,
                drops: false,
            });
        };
        let p = lookup_name(user).ok_or_else(|| {
            format!(
                "user: no user {user:?} on this system (make one: `useradd --system \
                 --no-create-home --shell /usr/sbin/nologin {user}`)"
            )
        })?;
        if me != 0 && me != p.uid {
            return Err(format!(
                "user: the relay runs as uid {me}, not root, and cannot become {user} (uid {}): \
                 start it as root (it drops to {user} once its ports are bound), or as {user} \
                 itself",
                p.uid
            ));
        }
        Ok(RunAs {
            uid: p.uid,
            gid: p.gid,
            name: p.name,
            drops: me == 0 && p.uid != 0,
        })
    }

    /// Drops root's privileges to this user for good (a no-op when the
    /// relay runs as the user already).
    ///
    /// # Errors
    ///
    /// A call that failed, or ids that are not what they should be after
    /// it (the relay must then not go on).
    pub fn drop_privileges(&self) -> io::Result<()> {
        if !self.drops {
            return Ok(());
        }
        let fail = |what: &str| {
            let e = io::Error::last_os_error();
            io::Error::new(
                e.kind(),
                format!("dropping root's privileges to {self}: {what}: {e}"),
            )
        };
        let groups = [self.gid as libc::gid_t];
        // SAFETY: `groups` is a live array of one gid and the length given
        // is 1; setgroups only reads it.
        if unsafe { libc::setgroups(1, groups.as_ptr()) } != 0 {
            return Err(fail("setgroups"));
        }
        // SAFETY: setgid takes a plain integer.
        if unsafe { libc::setgid(self.gid) } != 0 {
            return Err(fail("setgid"));
        }
        // SAFETY: setuid takes a plain integer.
        if unsafe { libc::setuid(self.uid) } != 0 {
            return Err(fail("setuid"));
        }
        self.check_dropped()?;
        let _ = DROPPED.set(self.clone());
        Ok(())
    }

    /// Checks that every id is this user's and root's cannot come back
    /// (a saved uid of 0 would let `setuid(0)` succeed).
    fn check_dropped(&self) -> io::Result<()> {
        // SAFETY: these four calls have no preconditions and cannot fail.
        let ids = unsafe {
            [
                libc::getuid(),
                libc::geteuid(),
                libc::getgid(),
                libc::getegid(),
            ]
        };
        let mut groups = [0 as libc::gid_t; 2];
        // SAFETY: `groups` is a live, writable array of 2 gids and the
        // length given is 2; getgroups writes at most that many.
        let n = unsafe { libc::getgroups(2, groups.as_mut_ptr()) };
        let groups_ok = n == 0 || (n == 1 && groups[0] == self.gid);
        // SAFETY: setuid takes a plain integer; it must fail now.
        let regained = unsafe { libc::setuid(0) } == 0;
        if ids != [self.uid, self.uid, self.gid, self.gid] || !groups_ok || regained {
            return Err(io::Error::other(format!(
                "dropping root's privileges to {self}: the process still has other ids \
                 (uid {}, euid {}, gid {}, egid {}, {n} supplementary groups, root \
                 regained: {regained}); not going on",
                ids[0], ids[1], ids[2], ids[3]
            )));
        }
        Ok(())
    }
}

/// The warning to log at start when the process runs as root with no
/// `user` to drop to and `run_as_root` does not say that is meant; `None`
/// otherwise.
pub fn root_warning(user: Option<&str>, run_as_root: bool) -> Option<&'static str> {
    (euid() == 0 && user.is_none() && !run_as_root).then_some(
        "running as root: every SMTP session and the whole spool run with root's rights. \
         Set `user = \"NAME\"` (--user NAME): the relay binds its ports and reads its keys as \
         root, then runs as NAME; or start it as that user with `setcap \
         cap_net_bind_service=+ep` on the binary to bind port 25. Set `run_as_root = true` \
         (--run-as-root) if running as root is meant: that silences this warning",
    )
}

/// After the drop, a note for errors about files the relay could open as
/// root at start and cannot open now: "(the relay runs as NAME (uid N)
/// since it started: ...)"; empty when it never dropped.
pub fn dropped_note() -> String {
    match DROPPED.get() {
        Some(who) => format!(
            " (the relay runs as {who} since it started, and opens files again as that \
             user: make the file readable or writable by {}, or restart the relay to open \
             it as root)",
            who.name
        ),
        None => String::new(),
    }
}

/// A user's entry in the password database.
#[derive(Debug)]
pub struct Passwd {
    /// Login name.
    pub name: String,
    /// User id.
    pub uid: u32,
    /// Primary group id.
    pub gid: u32,
}

/// The user named `name` (or with the uid `name` spells in digits).
pub fn lookup_name(name: &str) -> Option<Passwd> {
    let c = CString::new(name).ok()?;
    // SAFETY: `c` is a NUL-terminated string alive for the call; the
    // closure passes getpwnam_r the buffers `getpw` provides, as its
    // contract requires.
    getpw(|pw, buf, len, out| unsafe { libc::getpwnam_r(c.as_ptr(), pw, buf, len, out) })
        .or_else(|| lookup_uid(name.parse().ok()?))
}

/// The user whose uid is `uid`.
pub fn lookup_uid(uid: u32) -> Option<Passwd> {
    // SAFETY: the closure passes getpwuid_r the buffers `getpw` provides,
    // as its contract requires.
    getpw(|pw, buf, len, out| unsafe { libc::getpwuid_r(uid, pw, buf, len, out) })
}

/// `uid`'s name and number, for messages: "nobody (uid 65534)".
pub fn describe_uid(uid: u32) -> String {
    match lookup_uid(uid) {
        Some(p) => format!("{} (uid {uid})", p.name),
        None => format!("uid {uid}"),
    }
}

/// The reentrant `getpw*_r` pattern: `call(pw, buf, len, result)` with a
/// buffer that grows on ERANGE.
fn getpw(
    call: impl Fn(*mut libc::passwd, *mut libc::c_char, usize, *mut *mut libc::passwd) -> libc::c_int,
) -> Option<Passwd> {
    let mut len = 1024;
    loop {
        let mut buf = vec![0 as libc::c_char; len];
        // SAFETY: an all-zero passwd is a valid value of the C struct (null
        // pointers and zero ids); getpw*_r overwrites it.
        let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
        let mut out: *mut libc::passwd = std::ptr::null_mut();
        let r = call(&mut pw, buf.as_mut_ptr(), buf.len(), &mut out);
        if r == libc::ERANGE && len < 1 << 20 {
            len *= 4;
            continue;
        }
        if r != 0 || out.is_null() {
            return None;
        }
        // SAFETY: on success `pw.pw_name` points to a NUL-terminated string
        // inside `buf`, which is alive here.
        let name = unsafe { CStr::from_ptr(pw.pw_name) }
            .to_string_lossy()
            .into_owned();
        return Some(Passwd {
            name,
            uid: pw.pw_uid,
            gid: pw.pw_gid,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn users_are_found_by_name_and_number() {
        let root = lookup_name("root").expect("root is in the password database");
        assert_eq!((root.uid, root.gid), (0, 0));
        assert_eq!(lookup_name("0").map(|p| p.name).as_deref(), Some("root"));
        assert!(lookup_name("no such user here").is_none());
        assert_eq!(describe_uid(0), "root (uid 0)");
    }

    #[test]
    fn root_without_a_user_runs_as_root_with_a_warning() {
        let me = RunAs::resolve(None).unwrap();
        assert_eq!(me.uid, euid());
        assert!(!me.drops);
        if euid() == 0 {
            let w = root_warning(None, false).expect("root without `user` is warned about");
            for needle in [
                "root's rights",
                "user = \"NAME\"",
                "setcap cap_net_bind_service=+ep",
                "run_as_root = true",
            ] {
                assert!(w.contains(needle), "{needle:?} not in {w}");
            }
        } else {
            assert_eq!(root_warning(None, false), None);
        }
        assert_eq!(root_warning(None, true), None);
        assert_eq!(root_warning(Some("nobody"), false), None);
        let e = RunAs::resolve(Some("no-such-user-here")).unwrap_err();
        assert!(e.contains("useradd"), "{e}");
    }
}
