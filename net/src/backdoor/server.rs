//! The back door server: [`Builder`] (options and commands), [`BackDoor`]
//! (the running server), and the acceptor green thread that checks each
//! client's credentials and starts its session.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::fmt;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, Instant};

use coro_runtime::profile::Profile;
use coro_runtime::{Coro, WaitError};

use super::commands::{self, Command};
use super::secure;
use super::session::{self, Session};
use crate::{is_fd_exhaustion, UnixListener, UnixStream};

/// Default most sessions open at once.
pub const DEFAULT_MAX_SESSIONS: usize = 8;
/// Default longest command line, in bytes.
pub const DEFAULT_MAX_LINE: usize = 4096;
/// Default time a session may wait for its next line.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(600);
/// Default time one write to a client may take.
pub const DEFAULT_WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// Pause of the acceptor after `accept` failed for want of file descriptors.
const FD_BACKOFF: Duration = Duration::from_millis(100);

/// The per-session bounds.
#[derive(Debug, Clone)]
pub(crate) struct Limits {
    pub(crate) max_sessions: usize,
    pub(crate) max_line: usize,
    pub(crate) idle_timeout: Duration,
    pub(crate) write_timeout: Duration,
}

/// State shared by the acceptor, the sessions and the [`BackDoor`] handle.
pub(crate) struct Shared {
    pub(crate) path: PathBuf,
    pub(crate) limits: Limits,
    /// Commands the application registered, by name.
    pub(crate) commands: RefCell<BTreeMap<String, Command>>,
    /// Sessions open now, by thread id.
    pub(crate) open: RefCell<BTreeMap<u64, Rc<OpenSession>>>,
    pub(crate) sessions: Cell<usize>,
    /// Connections refused for their credentials.
    pub(crate) refused: Cell<u64>,
    /// Connections turned away because `max_sessions` were open.
    pub(crate) busy: Cell<u64>,
    /// Idle sessions closed to make room for a newcomer.
    pub(crate) evicted: Cell<u64>,
    /// The last profile stopped with `profile stop`, for `profile dump`.
    pub(crate) last_profile: RefCell<Option<Profile>>,
    listener: UnixListener,
    /// The socket file this back door created (removed when it stops).
    file: Option<secure::FileId>,
}

/// Options of a back door, then [`serve`](Builder::serve).
///
/// # Examples
///
/// ```no_run
/// use std::io::Write;
/// use std::time::Duration;
/// use coro::net::backdoor;
///
/// coro::run(|| -> std::io::Result<()> {
///     let door = backdoor::Builder::new("/run/relay/backdoor")
///         .max_sessions(4)
///         .idle_timeout(Duration::from_secs(300))
///         .command("mailq", "mailq: lists the queue", |s, _args| writeln!(s, "queue empty"))?
///         .serve()?;
///     // ... the application runs; `nc -U /run/relay/backdoor` gets in ...
///     door.close();
///     Ok(())
/// })
/// .unwrap();
/// ```
pub struct Builder {
    path: PathBuf,
    limits: Limits,
    allow_shared: bool,
    commands: BTreeMap<String, Command>,
}

impl fmt::Debug for Builder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Builder")
            .field("path", &self.path)
            .field("limits", &self.limits)
            .field("allow_shared_directory", &self.allow_shared)
            .field("commands", &self.commands.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Builder {
    /// A back door at `path`, with the default limits.
    pub fn new<P: AsRef<Path>>(path: P) -> Builder {
        Builder {
            path: path.as_ref().to_owned(),
            limits: Limits {
                max_sessions: DEFAULT_MAX_SESSIONS,
                max_line: DEFAULT_MAX_LINE,
                idle_timeout: DEFAULT_IDLE_TIMEOUT,
                write_timeout: DEFAULT_WRITE_TIMEOUT,
            },
            allow_shared: false,
            commands: BTreeMap::new(),
        }
    }

    /// Most sessions open at once (default 8).
    ///
    /// When a client connects while this many are open, the session that
    /// has waited longest for its next command line gives way: it is told
    /// why and closed, and the newcomer is served (so forgotten `socat`
    /// windows never lock the owner out). A session running a command is
    /// never cut; if every session is running one, the newcomer is told
    /// the back door is busy and disconnected.
    pub fn max_sessions(mut self, n: usize) -> Builder {
        self.limits.max_sessions = n;
        self
    }

    /// Longest command line in bytes (default 4096); a client that sends a
    /// longer one is disconnected.
    pub fn max_line(mut self, bytes: usize) -> Builder {
        self.limits.max_line = bytes;
        self
    }

    /// How long a session may wait for its next line (default 10 minutes).
    pub fn idle_timeout(mut self, d: Duration) -> Builder {
        self.limits.idle_timeout = d;
        self
    }

    /// How long one write of output to a client may take (default 10 s); a
    /// client that does not read its output is disconnected.
    pub fn write_timeout(mut self, d: Duration) -> Builder {
        self.limits.write_timeout = d;
        self
    }

    /// Accepts a socket directory that group or others may write (such as
    /// `/tmp`). By default such a directory is refused: whoever can write
    /// there can replace the socket. The socket's own mode (0600) and the
    /// peer check still apply.
    pub fn allow_shared_directory(mut self, allow: bool) -> Builder {
        self.allow_shared = allow;
        self
    }

    /// Registers an application command: `name` (one word), a `help` line
    /// for `help`, and a handler that gets the session (an
    /// [`io::Write`]) and the rest of the line. An error the handler returns
    /// is shown to the client as `error: ...`.
    ///
    /// # Errors
    ///
    /// `InvalidInput` for an empty name, one with spaces or control
    /// characters, or one that is taken (built-in commands included).
    pub fn command<F>(mut self, name: &str, help: &str, handler: F) -> io::Result<Builder>
    where
        F: Fn(&mut Session<'_>, &str) -> io::Result<()> + 'static,
    {
        commands::register(&mut self.commands, name, help, Rc::new(handler))?;
        Ok(self)
    }

    /// Creates the socket and starts serving it on a green thread named
    /// `backdoor`.
    ///
    /// The socket gets mode 0600. A stale socket left at `path` by an
    /// earlier run is replaced; anything else there is an error.
    ///
    /// # Errors
    ///
    /// * `PermissionDenied` naming the directory if it belongs to another
    ///   user, or if group or others may write it (unless
    ///   [`allow_shared_directory`](Self::allow_shared_directory)).
    /// * `InvalidInput` for a zero limit or timeout, or a path with no file name.
    /// * `AddrInUse` if a live socket is at `path`; `AlreadyExists` if
    ///   something that is not a socket is.
    /// * The errors of creating the socket.
    ///
    /// # Panics
    ///
    /// Outside a green thread.
    pub fn serve(self) -> io::Result<BackDoor> {
        let l = &self.limits;
        if l.max_sessions == 0
            || l.max_line == 0
            || l.idle_timeout.is_zero()
            || l.write_timeout.is_zero()
        {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("back door: limits and timeouts must be above zero ({l:?})"),
            ));
        }
        let dir = secure::parent_dir(&self.path)?;
        secure::check_dir(&dir, self.allow_shared)?;
        let (listener, file) = secure::bind(&self.path)?;
        let shared = Rc::new(Shared {
            path: self.path,
            limits: self.limits,
            commands: RefCell::new(self.commands),
            open: RefCell::new(BTreeMap::new()),
            sessions: Cell::new(0),
            refused: Cell::new(0),
            evicted: Cell::new(0),
            busy: Cell::new(0),
            last_profile: RefCell::new(None),
            listener,
            file,
        });
        let s = shared.clone();
        let acceptor = coro_runtime::Builder::new()
            .name("backdoor".into())
            .spawn(move || accept_loop(s));
        match acceptor {
            Ok(h) => {
                log::info!(
                    target: "coro::backdoor",
                    "back door listening at {}",
                    shared.path.display()
                );
                Ok(BackDoor {
                    shared,
                    acceptor: h.thread().clone(),
                })
            }
            Err(e) => {
                let _ = std::fs::remove_file(&shared.path);
                Err(e)
            }
        }
    }
}

/// Serves a back door at `path` with the default options; see [`Builder`].
///
/// # Errors
///
/// As [`Builder::serve`].
///
/// # Panics
///
/// Outside a green thread.
pub fn serve<P: AsRef<Path>>(path: P) -> io::Result<BackDoor> {
    Builder::new(path).serve()
}

/// A running back door.
///
/// It serves until [`close`](BackDoor::close) or the end of the runtime;
/// dropping the handle leaves it running. When it stops it removes its
/// socket file.
pub struct BackDoor {
    shared: Rc<Shared>,
    acceptor: Coro,
}

impl fmt::Debug for BackDoor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BackDoor")
            .field("path", &self.shared.path)
            .field("sessions", &self.shared.sessions.get())
            .finish_non_exhaustive()
    }
}

impl BackDoor {
    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.shared.path
    }

    /// Sessions open now.
    pub fn sessions(&self) -> usize {
        self.shared.sessions.get()
    }

    /// Connections refused because the client was another user.
    pub fn refused(&self) -> u64 {
        self.shared.refused.get()
    }

    /// Idle sessions closed to make room for a newcomer (see
    /// [`Builder::max_sessions`]).
    pub fn evicted(&self) -> u64 {
        self.shared.evicted.get()
    }

    /// Connections turned away because every open session was running a
    /// command when the session limit was reached.
    pub fn turned_away(&self) -> u64 {
        self.shared.busy.get()
    }

    /// The acceptor's green thread.
    pub fn thread(&self) -> &Coro {
        &self.acceptor
    }

    /// Registers an application command on the running back door (see
    /// [`Builder::command`]).
    ///
    /// # Errors
    ///
    /// As [`Builder::command`].
    pub fn add_command<F>(&self, name: &str, help: &str, handler: F) -> io::Result<()>
    where
        F: Fn(&mut Session<'_>, &str) -> io::Result<()> + 'static,
    {
        let mut cmds = self.shared.commands.borrow_mut();
        commands::register(&mut cmds, name, help, Rc::new(handler))
    }

    /// Stops accepting, interrupts the open sessions and removes the socket
    /// file. Idempotent.
    pub fn close(&self) {
        self.shared.listener.close();
        let open: Vec<Coro> = self
            .shared
            .open
            .borrow()
            .values()
            .map(|s| s.thread.clone())
            .collect();
        for s in open {
            let _ = s.interrupt();
        }
    }
}

/// Removes the socket file when the acceptor ends, on every path (a close,
/// an interrupt, the runtime's shutdown unwinding it), if it is still the
/// one this back door created.
struct Unlink<'a>(&'a Shared);

impl Drop for Unlink<'_> {
    fn drop(&mut self) {
        if self.0.file.is_some() && secure::file_id(&self.0.path) == self.0.file {
            let _ = std::fs::remove_file(&self.0.path);
        }
    }
}

fn accept_loop(shared: Rc<Shared>) {
    let _unlink = Unlink(&shared);
    loop {
        match shared.listener.accept() {
            Ok((stream, _)) => admit(&shared, stream),
            Err(e) if is_fd_exhaustion(&e) => {
                log::warn!(
                    target: "coro::backdoor",
                    "back door {}: out of file descriptors ({e}); pausing accepts",
                    shared.path.display()
                );
                if coro_runtime::sleep(FD_BACKOFF).is_err() {
                    break;
                }
            }
            Err(e) => {
                if e.kind() != io::ErrorKind::NotConnected && WaitError::from_io(&e).is_none() {
                    log::error!(
                        target: "coro::backdoor",
                        "back door {}: accept failed: {e}; closing",
                        shared.path.display()
                    );
                }
                break;
            }
        }
    }
    shared.listener.close();
    log::info!(target: "coro::backdoor", "back door {} closed", shared.path.display());
}

/// Checks a new client and starts its session, or turns it away.
fn admit(shared: &Rc<Shared>, stream: UnixStream) {
    let peer = match secure::peer(&stream) {
        Ok(p) => p,
        Err(e) => {
            log::warn!(
                target: "coro::backdoor",
                "back door {}: cannot read a client's credentials ({e}); closed",
                shared.path.display()
            );
            return;
        }
    };
    if !secure::allowed(&peer) {
        shared.refused.set(shared.refused.get() + 1);
        log::warn!(
            target: "coro::backdoor",
            "back door {}: refused a connection from uid {}{}: only uid {} and root may connect",
            shared.path.display(),
            peer.uid,
            peer.pid.map(|p| format!(" (pid {p})")).unwrap_or_default(),
            secure::our_uid()
        );
        return;
    }
    if shared.sessions.get() >= shared.limits.max_sessions && !evict_idlest(shared) {
        let n = shared.busy.get();
        shared.busy.set(n + 1);
        if n.is_power_of_two() || n == 0 {
            log::warn!(
                target: "coro::backdoor",
                "back door {}: {} sessions open (the limit); turned a client away ({} so far)",
                shared.path.display(),
                shared.limits.max_sessions,
                n + 1
            );
        }
        // A fresh socket's buffer is empty: this write does not wait.
        let _ = stream.set_write_timeout(Some(Duration::from_millis(10)));
        let _ = writeln!(
            &stream,
            "back door busy: {} sessions open; try again later",
            shared.limits.max_sessions
        );
        return;
    }
    shared.sessions.set(shared.sessions.get() + 1);
    let s = shared.clone();
    let spawned = coro_runtime::Builder::new()
        .name("backdoor-session".into())
        .spawn(move || {
            let id = coro_runtime::current().id();
            let _count = SessionCount(&s, id);
            let me = s.open.borrow().get(&id).cloned();
            if let Some(me) = me {
                session::run(s.clone(), stream, peer, &me);
            }
        });
    match spawned {
        Ok(h) => {
            let t = h.thread().clone();
            shared.open.borrow_mut().insert(
                t.id(),
                Rc::new(OpenSession {
                    thread: t,
                    idle_since: Cell::new(None),
                    evicted: Cell::new(false),
                }),
            );
        }
        Err(e) => {
            shared.sessions.set(shared.sessions.get() - 1);
            log::warn!(
                target: "coro::backdoor",
                "back door {}: cannot start a session: {e}",
                shared.path.display()
            );
        }
    }
}

/// An open session, as the acceptor sees it.
pub(crate) struct OpenSession {
    pub(crate) thread: Coro,
    /// When it started waiting for its next command line (`None` while it
    /// runs a command or writes a reply).
    pub(crate) idle_since: Cell<Option<Instant>>,
    /// It was closed to make room for a newcomer (its read is interrupted).
    pub(crate) evicted: Cell<bool>,
}

/// Closes the session that has waited longest for a command line, to make
/// room for a newcomer; `false` if every session is busy running a command.
/// The evicted session is counted out at once (it only says goodbye).
fn evict_idlest(shared: &Shared) -> bool {
    let victim = shared
        .open
        .borrow()
        .values()
        .filter(|s| !s.evicted.get())
        .filter_map(|s| s.idle_since.get().map(|t| (t, s.clone())))
        .min_by_key(|(t, _)| *t)
        .map(|(_, s)| s);
    let Some(victim) = victim else {
        return false;
    };
    if victim.thread.interrupt().is_err() {
        return false;
    }
    victim.evicted.set(true);
    shared.open.borrow_mut().remove(&victim.thread.id());
    shared.sessions.set(shared.sessions.get() - 1);
    shared.evicted.set(shared.evicted.get() + 1);
    log::info!(
        target: "coro::backdoor",
        "back door {}: {} sessions open (the limit); closed session #{}, idle for {:?}, for a newcomer",
        shared.path.display(),
        shared.limits.max_sessions,
        victim.thread.id(),
        victim.idle_since.get().map(|t| t.elapsed()).unwrap_or_default(),
    );
    true
}

/// Counts a session out on every path (unless eviction already did).
struct SessionCount<'a>(&'a Shared, u64);

impl Drop for SessionCount<'_> {
    fn drop(&mut self) {
        if self.0.open.borrow_mut().remove(&self.1).is_some() {
            self.0.sessions.set(self.0.sessions.get() - 1);
        }
    }
}
