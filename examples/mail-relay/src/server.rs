//! The relay as a whole: opens the spool and the destinations (the Maildir,
//! the SMTP upstreams), requeues what the last run left, starts the
//! committer, the journal and the queue runner, accepts sessions within the
//! limits, and stops gracefully on SIGTERM or SIGINT. SIGUSR1 is `flush`;
//! SIGHUP reloads the configuration (`reload`).
//!
//! # Green threads
//!
//! ```text
//! main ── waits for a signal, then runs the stop sequence
//! acceptor ── accept loop; one `session` green thread per connection
//! submission acceptors ── the same for the submission ports, when set
//! committer ── group commits into the spool (spool/mod.rs)
//! journal ── delivery events into the spool's journals (spool/journal.rs)
//! queue runner ── a PeriodicExecutor starting delivery agents (queue/)
//! smtp spawner, cleaner, shutdown ── the connection cache's (GroupPool)
//! backdoor ── when configured: mailq, flush, the runtime's console
//! ```
//!
//! # Graceful stop
//!
//! On the first SIGTERM or SIGINT: the listener closes (new clients are
//! refused) and no new delivery attempt starts; sessions waiting between
//! transactions get 421 at once, the others may finish their transaction
//! until `stop_deadline`, then get 421; deliveries in flight may finish
//! until the same deadline, then are cut short (their messages stay
//! queued as they were). The committer and the journal are flushed (every
//! message that got its 250 is durable), cached upstream connections get
//! QUIT, and the process exits 0. A second signal cuts the deadline short.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use coro::net::{is_fd_exhaustion, TcpListener, TcpStream};
use coro::signal::{Signals, SIGHUP, SIGINT, SIGTERM, SIGUSR1};
use coro::sync::WaitGroup;

use crate::config::{Config, ConfigError};
use crate::delivery::mx::MxDelivery;
use crate::delivery::route::{Dest, Router, Upstream};
use crate::delivery::smtp::client::Settings;
use crate::delivery::smtp::{Destination, Smtp};
use crate::delivery::{Maildir, Transport};
use crate::dkim::{Dkim, Signing};
use crate::privilege::RunAs;
use crate::queue::Queue;
use crate::session::{Phase, Port, Session};
use crate::spool::Spool;
use crate::wire::Wire;

/// What every session shares.
pub struct Relay {
    /// The configuration in force (replaced at SIGHUP).
    config: RefCell<Rc<Config>>,
    /// The spool sessions commit into.
    pub spool: Spool,
    /// STARTTLS, when configured.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// The submission service's users and login limits, when it runs.
    pub auth: Option<Rc<crate::auth::Auth>>,
    /// Set at the first stop signal.
    pub stopping: Cell<bool>,
    /// Live sessions, by thread id.
    sessions: RefCell<HashMap<u64, Live>>,
    /// Live sessions per client address.
    per_client: RefCell<HashMap<IpAddr, usize>>,
    /// Every session is a member.
    group: WaitGroup,
    /// Under stress (see [`Relay::timeout`]), as last logged.
    stressed: Cell<bool>,
}

/// A live session as the stop logic sees it.
struct Live {
    /// Its green thread, to interrupt.
    thread: coro::Coro,
    /// Whether it waits between transactions.
    phase: Rc<Cell<Phase>>,
}

/// A session's place in the relay's books; dropping it (however the
/// session ends, a panic included) gives the place back. Never blocks.
struct Member {
    relay: Rc<Relay>,
    ip: IpAddr,
}

impl Drop for Member {
    fn drop(&mut self) {
        if let Some(id) = coro::current_id() {
            self.relay.sessions.borrow_mut().remove(&id);
        }
        let mut per = self.relay.per_client.borrow_mut();
        if let Some(n) = per.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                per.remove(&self.ip);
            }
        }
    }
}

impl Relay {
    /// The configuration in force now (SIGHUP may replace it: take it
    /// again rather than keep it across a wait).
    pub fn config(&self) -> Rc<Config> {
        self.config.borrow().clone()
    }

    /// The timeout `t` as it applies now: cut to `timeouts.stress` while
    /// three quarters of `max_sessions` or more are in use (Postfix's
    /// stress mode), so that a crowd of slow clients frees its places
    /// sooner.
    pub fn timeout(&self, t: Duration) -> Duration {
        let c = self.config();
        let stressed = self.group.len() * 4 >= c.max_sessions * 3;
        if stressed != self.stressed.get() {
            self.stressed.set(stressed);
            if stressed {
                log::warn!(
                    "stress mode on: {} of {} sessions in use; timeouts cut to {:?}",
                    self.group.len(),
                    c.max_sessions,
                    c.timeouts.stress
                );
            } else {
                log::info!("stress mode off: {} sessions in use", self.group.len());
            }
        }
        if stressed {
            t.min(c.timeouts.stress)
        } else {
            t
        }
    }

    /// Whether `client` is in `mynetworks` (may relay anywhere, may use
    /// sender-specified routing).
    pub fn trusted(&self, client: IpAddr) -> bool {
        self.config().mynetworks.iter().any(|n| n.contains(client))
    }

    /// Whether a client at `client` may send to `rcpt`: it is in
    /// `mynetworks`, or the domain is one we deliver or relay for (and the
    /// bare `postmaster` always). Never an open relay.
    pub fn may_receive(&self, client: IpAddr, rcpt: &str) -> bool {
        let c = self.config();
        if self.trusted(client) {
            return true;
        }
        match crate::protocol::domain(rcpt) {
            None => true, // <postmaster>
            Some(d) => c
                .local_domains
                .iter()
                .chain(&c.relay_domains)
                .any(|x| x.eq_ignore_ascii_case(&d)),
        }
    }
}

/// Runs the relay until a stop signal; returns when stopped.
///
/// # Errors
///
/// If the spool, the Maildir, the TLS files or the listener cannot be set
/// up.
pub fn run(
    config: Config,
    who: RunAs,
    load: Box<dyn Fn() -> Result<Config, ConfigError>>,
) -> io::Result<()> {
    let signals = Signals::new([SIGINT, SIGTERM, SIGUSR1, SIGHUP])?;
    let nofile = crate::fds::raise_limit().unwrap_or_else(|e| {
        log::warn!("cannot read the open-file limit: {e}");
        usize::MAX
    });
    crate::fds::check(nofile, &config);
    let tls = match (&config.tls.cert, &config.tls.key) {
        (Some(c), Some(k)) => {
            crate::files::check_private_key("tls.key", k, config.require_safe_keys)
                .map_err(|e| io::Error::new(io::ErrorKind::PermissionDenied, e))?;
            Some(crate::tls::server_config(c, k)?)
        }
        _ => None,
    };
    // What can fail without touching the disk comes first: a relay that
    // cannot start leaves no spool or Maildir behind.
    let listener = Rc::new(
        TcpListener::bind(config.listen)
            .map_err(|e| io::Error::new(e.kind(), format!("listen {}: {e}", config.listen)))?,
    );
    let metrics = match config.metrics {
        Some(a) => Some(Rc::new(crate::metrics::bind(a)?)),
        None => None,
    };
    let submission = bind_submission(&config)?;
    let auth = crate::auth::Auth::load(&config.submission)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?
        .map(Rc::new);
    // As root if started so: check the directories, read the keys, make
    // what is missing (for `who`); then drop to `who` for good.
    let dkim = load_dkim(&config)?;
    let dirs = private_dirs(&config, &who)?;
    for (key, dir, exists) in &dirs {
        if !exists {
            crate::files::make_dir(key, dir, &who)?;
        }
    }
    who.drop_privileges()?;
    if who.drops {
        log::info!("running as {who} from now on");
    }
    let _lock = crate::control::lock_spool(&config.spool_dir)
        .map_err(|e| annotate(e, "spool_dir", &config.spool_dir))?;
    let router = Router::new(
        &config.routes,
        &config.local_domains,
        config.relayhost.as_ref(),
    );
    let router = if config.mx.enabled {
        router.by_mx()
    } else {
        router
    };
    let (transports, smtp, dkim) = transports(&config, &router, dkim)?;
    warn_unresolved(&router);
    let queue = Queue::new(router, transports, config.queue.clone(), &config.hostname);
    let (spool, recovered) = {
        let q = queue.clone();
        Spool::open(&config.spool_dir, config.testing.commit_delay, move |m| {
            q.enqueue(m)
        })
        .map_err(|e| annotate(e, "spool_dir", &config.spool_dir))?
    };
    queue.attach(spool.clone());
    if recovered.removed_tmp > 0 {
        log::info!(
            "removed {} from the spool",
            crate::logger::count(recovered.removed_tmp, "half-written file")
        );
    }
    for (name, why) in &recovered.corrupt {
        log::warn!("{name}: unreadable queue file moved to corrupt/: {why}");
    }
    if !recovered.messages.is_empty() {
        log::info!(
            "{} found in the spool; delivering",
            crate::logger::count(recovered.messages.len(), "queued message")
        );
    }
    for q in recovered.messages {
        queue.restore(q);
    }
    queue.retry_at_start();
    let addr = listener.local_addr()?;
    let mut submission_at = String::new();
    for (l, port) in &submission {
        let how = if *port == Port::SubmissionTls {
            "TLS"
        } else {
            "STARTTLS"
        };
        submission_at.push_str(&format!("; submission on {} ({how})", l.local_addr()?));
    }
    let door = match &config.backdoor {
        Some(path) => Some(crate::control::serve_backdoor(path, &queue, smtp.clone())?),
        None => None,
    };
    crate::control::write_pid(spool.dir())
        .map_err(|e| annotate(e, "spool_dir", &config.spool_dir))?;
    println!(
        "mail-relay: listening on {addr}{submission_at}; spool in {}; {}{}",
        spool.dir().display(),
        queue.describe(),
        if tls.is_some() { "; STARTTLS on" } else { "" }
    );
    log::info!("daemon started -- listening on {addr}");

    let relay = Rc::new(Relay {
        config: RefCell::new(Rc::new(config)),
        spool: spool.clone(),
        tls,
        auth,
        stopping: Cell::new(false),
        sessions: RefCell::new(HashMap::new()),
        per_client: RefCell::new(HashMap::new()),
        group: WaitGroup::new(),
        stressed: Cell::new(false),
    });
    // Set when the stop sequence ends the core threads on purpose.
    let ending = Rc::new(Cell::new(false));
    let committer = {
        let spool = spool.clone();
        let ending = ending.clone();
        supervised(
            "committer",
            move || ending.get(),
            move || spool.run_committer(),
        )?
    };
    let journal = {
        let spool = spool.clone();
        let ending = ending.clone();
        supervised("journal", move || ending.get(), move || spool.run_journal())?
    };
    queue.start()?;
    if let Some(l) = &metrics {
        let (l, q, r) = (l.clone(), queue.clone(), relay.clone());
        let sessions: Rc<dyn Fn() -> usize> = Rc::new(move || r.group.len());
        log::info!("metrics at http://{}/metrics", l.local_addr()?);
        coro::Builder::new()
            .name("metrics".into())
            .spawn(move || crate::metrics::serve(l, q, sessions))?;
    }
    let acceptor = {
        let (relay, listener) = (relay.clone(), listener.clone());
        let l = listener.clone();
        // Ended by the stop closing the listener.
        supervised(
            "acceptor",
            move || listener.is_closed(),
            move || accept_loop(&relay, &l, Port::Mta),
        )?
    };
    let mut submission_acceptors = Vec::new();
    for (listener, port) in &submission {
        let (relay, listener, port) = (relay.clone(), listener.clone(), *port);
        let l = listener.clone();
        submission_acceptors.push(supervised(
            "submission acceptor",
            move || listener.is_closed(),
            move || accept_loop(&relay, &l, port),
        )?);
    }

    let sig = loop {
        let sig = match signals.recv() {
            Ok(s) => s,
            Err(e) if coro::WaitError::from_io(&e) == Some(coro::WaitError::Interrupted) => {
                // The back door's `interrupt` on main: main only waits for
                // signals here; ending it would end the relay without a
                // graceful stop.
                log::warn!(
                    "main thread interrupted (by the back door?): ignored; SIGTERM stops the relay"
                );
                continue;
            }
            Err(e) => return Err(e),
        };
        match sig {
            SIGUSR1 => {
                queue.flush();
            }
            SIGHUP => {
                let old = relay.config();
                if let Some(new) = crate::reload::reload(&old, &*load, &dkim) {
                    *relay.config.borrow_mut() = Rc::new(new);
                }
                if let Some(auth) = &relay.auth {
                    auth.reload(&relay.config().submission);
                }
            }
            sig => break sig,
        }
    };
    let t0 = coro::clock::now();
    let deadline = relay.config().stop_deadline;
    log::info!(
        "signal {sig}: stopping -- no new sessions or deliveries; {} and {} in flight get {deadline:?}",
        crate::logger::count(relay.group.len(), "session"),
        crate::logger::count(queue.in_flight(), "delivery")
    );
    relay.stopping.set(true);
    queue.halt();
    listener.close();
    for (l, _) in &submission {
        l.close();
    }
    if let Some(l) = &metrics {
        l.close();
    }
    let _ = acceptor.join();
    for a in submission_acceptors {
        let _ = a.join();
    }
    // Sessions waiting for a command between transactions end now.
    for live in relay.sessions.borrow().values() {
        if live.phase.get() == Phase::Idle {
            let _ = live.thread.interrupt();
        }
    }
    let second = {
        let (relay, queue) = (relay.clone(), queue.clone());
        coro::spawn(move || {
            while let Ok(sig) = signals.recv() {
                if sig != SIGUSR1 && sig != SIGHUP {
                    log::info!("second signal: ending the sessions and deliveries in flight now");
                    interrupt_all(&relay);
                    queue.cut();
                    return;
                }
            }
        })
    };
    if coro::with_timeout(deadline, || relay.group.wait()).is_err() {
        interrupt_all(&relay);
    }
    let _ = relay.group.wait();
    queue.finish(deadline.saturating_sub(t0.elapsed()));
    let _ = second.thread().interrupt();
    // Every 250 sent is durable already; this also waits for commits of
    // sessions cut short at the deadline, and for bounces.
    if let Err(e) = spool.flush() {
        log::warn!("flushing the spool: {e}");
    }
    if let Err(e) = spool.sync_journal() {
        log::warn!("flushing the spool's journal: {e}");
    }
    ending.set(true);
    let _ = committer.thread().interrupt();
    let _ = journal.thread().interrupt();
    if let Some(smtp) = smtp {
        smtp.close_all();
    }
    if let Some(door) = door {
        door.close();
    }
    crate::control::remove_pid(spool.dir());
    // The disk says what the next start will find.
    let tracked = (queue.len(), spool.batches());
    let (messages, batches) = spool.on_disk().unwrap_or_else(|e| {
        log::warn!("reading the spool's queue/ at stop: {e}");
        tracked
    });
    if (messages, batches) != tracked {
        log::warn!(
            "the spool holds {} in {}, this run tracked {} in {}",
            crate::logger::count(messages, "message"),
            crate::logger::count(batches, "batch file"),
            tracked.0,
            tracked.1
        );
    }
    log::info!(
        "stopped; {} ({}) left in the spool for the next start",
        crate::logger::count(messages, "message"),
        crate::logger::count(batches, "batch file")
    );
    Ok(())
}

/// A transport for each destination the router can name: the Maildir, and
/// one per SMTP upstream sharing one client and connection cache, each
/// SMTP one DKIM-signing with the keys in force (none, until `[dkim]`
/// names some).
type Transports = (Vec<(Dest, Rc<dyn Transport>)>, Option<Rc<Smtp>>, Rc<Dkim>);

/// The DKIM keys, read (and a bad or unsafe one refused) at start,
/// whatever the routes.
fn load_dkim(config: &Config) -> io::Result<Rc<Dkim>> {
    let dkim = Dkim::load(&config.dkim, config.require_safe_keys)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    Ok(Rc::new(dkim))
}

/// The directories the relay writes into that the configuration names
/// (the spool, the Maildir, the back door's), checked for `who`: (setting,
/// path, whether it exists).
fn private_dirs(config: &Config, who: &RunAs) -> io::Result<Vec<(&'static str, PathBuf, bool)>> {
    let mut dirs = vec![
        ("spool_dir", config.spool_dir.clone()),
        ("maildir", config.maildir.clone()),
    ];
    if let Some(path) = &config.backdoor {
        let dir = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
            _ => PathBuf::from("."),
        };
        dirs.push(("backdoor", dir));
    }
    dirs.into_iter()
        .map(|(key, dir)| {
            let exists = crate::files::check_dir(key, &dir, who)?;
            Ok((key, dir, exists))
        })
        .collect()
}

/// Warns about SMTP upstreams (`relayhost`, routes) whose names do not
/// resolve now: the relay starts all the same, and their mail waits in
/// the queue until they do.
fn warn_unresolved(router: &Router) {
    let upstreams: Vec<Upstream> = router
        .destinations()
        .into_iter()
        .filter_map(|d| match d {
            Dest::Smtp(up) => Some(up),
            Dest::Local | Dest::Mx => None,
        })
        .collect();
    if upstreams.is_empty() {
        return;
    }
    let relayhost = router.relayhost().cloned();
    let spawned = coro::Builder::new()
        .name("resolve upstreams".into())
        .spawn(move || {
            for up in upstreams {
                let what = if Some(&up) == relayhost.as_ref() {
                    "relayhost"
                } else {
                    "route to"
                };
                match coro::net::lookup_host((up.host.as_str(), up.port)) {
                    Ok(_) => {}
                    Err(e) if coro::WaitError::from_io(&e).is_some() => return,
                    Err(e) => log::warn!(
                        "{what} {up}: {} does not resolve now ({e}); mail for it waits in the \
                         queue until it does",
                        up.host
                    ),
                }
            }
        });
    if let Err(e) = spawned {
        log::warn!("cannot check the upstreams' names: {e}");
    }
}

fn transports(config: &Config, router: &Router, dkim: Rc<Dkim>) -> io::Result<Transports> {
    let maildir = Maildir::open(&config.maildir, &config.hostname)
        .map_err(|e| annotate(e, "maildir", &config.maildir))?;
    let mut out: Vec<(Dest, Rc<dyn Transport>)> = vec![(Dest::Local, Rc::new(maildir))];
    let upstreams: Vec<_> = router
        .destinations()
        .into_iter()
        .filter_map(|d| match d {
            Dest::Smtp(up) => Some(up),
            Dest::Local | Dest::Mx => None,
        })
        .collect();
    let by_mx = router.destinations().contains(&Dest::Mx);
    if upstreams.is_empty() && !by_mx {
        return Ok((out, None, dkim));
    }
    let c = &config.smtp;
    let sts = if by_mx {
        crate::delivery::mx::sts::from_config(config)?
    } else {
        None
    };
    let settings = Settings {
        cfg: c.clone(),
        helo_name: c
            .helo_name
            .clone()
            .unwrap_or_else(|| config.hostname.clone()),
        tls: crate::tls::client_config(c.tls_security_level, c.tls_ca_file.as_deref())?,
        verified_tls: sts.as_ref().map(|(_, tls)| tls.clone()),
    };
    let smtp = Smtp::new(settings)?;
    for up in upstreams {
        let dest = Destination::new(smtp.clone(), up.clone());
        out.push((Dest::Smtp(up), Rc::new(dest)));
    }
    if by_mx {
        let mx = MxDelivery::new(
            smtp.clone(),
            &config.mx,
            config.listen.ip(),
            c.connection_limit,
            c.message_timeout,
        )
        .map_err(|e| io::Error::new(e.kind(), format!("[mx]: {e}")))?;
        let mx = match sts {
            Some((sts, _)) => mx.with_sts(sts),
            None => mx,
        };
        out.push((Dest::Mx, Rc::new(mx)));
    }
    for (dest, t) in &mut out {
        if *dest != Dest::Local {
            *t = Rc::new(Signing::new(t.clone(), dkim.clone()));
        }
    }
    Ok((out, Some(smtp), dkim))
}

/// Spawns a core thread running `body`, and runs `body` again (with a log
/// line) whenever it returns before `done` says so: its loops end when
/// their wait is interrupted, which the stop does on purpose and the back
/// door's `interrupt` by hand. Nothing is lost by a restart: what the
/// thread was waiting for stays queued.
fn supervised(
    name: &'static str,
    done: impl Fn() -> bool + 'static,
    body: impl Fn() + 'static,
) -> io::Result<coro::JoinHandle<()>> {
    coro::Builder::new().name(name.into()).spawn(move || loop {
        body();
        if done() {
            return;
        }
        log::warn!(
            "{name} thread #{} interrupted (by the back door?): restarted, the relay needs it",
            coro::current_id().unwrap_or(0)
        );
        // One pass of everyone else before the loop starts again.
        coro::yield_now();
    })
}

fn interrupt_all(relay: &Relay) {
    for live in relay.sessions.borrow().values() {
        let _ = live.thread.interrupt();
    }
}

fn annotate(e: io::Error, key: &str, path: &std::path::Path) -> io::Error {
    io::Error::new(e.kind(), format!("{key} {}: {e}", path.display()))
}

/// The submission service's listeners, bound (none when not configured).
fn bind_submission(config: &Config) -> io::Result<Vec<(Rc<TcpListener>, Port)>> {
    let s = &config.submission;
    let mut out = Vec::new();
    for (addr, port, key) in [
        (s.listen, Port::Submission, "submission.listen"),
        (s.listen_tls, Port::SubmissionTls, "submission.listen_tls"),
    ] {
        if let Some(addr) = addr {
            let l = TcpListener::bind(addr)
                .map_err(|e| io::Error::new(e.kind(), format!("{key} {addr}: {e}")))?;
            out.push((Rc::new(l), port));
        }
    }
    Ok(out)
}

/// Accepts sessions for `port` until the listener closes; backs off when
/// out of fds or memory (the warning logged at most once a minute).
fn accept_loop(relay: &Rc<Relay>, listener: &TcpListener, port: Port) {
    const MIN_BACKOFF: Duration = Duration::from_millis(5);
    let mut backoff = MIN_BACKOFF;
    let mut failing = crate::logger::Throttled::new(Duration::from_secs(60));
    loop {
        match listener.accept() {
            Ok((stream, peer)) => {
                backoff = MIN_BACKOFF;
                admit(relay, stream, peer, port);
            }
            Err(_) if listener.is_closed() => return,
            Err(e) if is_fd_exhaustion(&e) => {
                failing.warn(&format!("accept: {e}; backing off (up to 1s)"));
                if coro::sleep(backoff).is_err() {
                    return;
                }
                backoff = (backoff * 2).min(Duration::from_secs(1));
            }
            Err(e) if coro::WaitError::from_io(&e).is_some() => return,
            Err(e) => {
                failing.log(log::Level::Info, &format!("accept: {e}"));
            }
        }
    }
}

/// Starts a session for a new connection, or turns it away with 421 when
/// a limit is reached.
fn admit(relay: &Rc<Relay>, stream: TcpStream, peer: SocketAddr, port: Port) {
    let c = relay.config();
    let ip = peer.ip();
    let from_client = relay.per_client.borrow().get(&ip).copied().unwrap_or(0);
    let refusal = if relay.group.len() >= c.max_sessions {
        Some(("4.3.2", "Error: too many sessions, try again later"))
    } else if from_client >= c.max_sessions_per_client {
        Some(("4.7.0", "Error: too many connections from your address"))
    } else {
        None
    };
    if let Some((status, text)) = refusal {
        log::info!("refusing [{ip}]:{}: {text}", peer.port());
        if port == Port::SubmissionTls {
            // Its client speaks TLS first: a plain-text 421 would only
            // break its handshake. Closed.
            return;
        }
        let line = format!("421 {status} {} {text}\r\n", c.hostname);
        let idle = c.timeouts.idle;
        // Its own thread: a client that does not read must not stall accept.
        let _ = coro::Builder::new()
            .name("refuse".into())
            .stack_size(64 * 1024)
            .spawn(move || {
                let _ = crate::wire::timed(idle, || {
                    io::Write::write_all(&mut &stream, line.as_bytes())
                });
            });
        return;
    }
    *relay.per_client.borrow_mut().entry(ip).or_insert(0) += 1;
    crate::metrics::get().sessions_accepted.inc();
    let member = Member {
        relay: relay.clone(),
        ip,
    };
    let phase = Rc::new(Cell::new(Phase::Busy));
    let wire = Wire::new(stream, peer, c.timeouts.idle);
    let session = Session::new(relay.clone(), wire, phase.clone(), port);
    let spawned = relay.group.spawn_with(
        coro::Builder::new().name(format!("smtp [{ip}]:{}", peer.port())),
        move || {
            let _member = member;
            session.run();
        },
    );
    match spawned {
        Ok(h) => {
            let live = Live {
                thread: h.thread().clone(),
                phase,
            };
            relay.sessions.borrow_mut().insert(h.thread().id(), live);
        }
        Err(e) => {
            // Out of stacks (vm.max_map_count) or memory: the connection
            // (and the member, giving its place back) is dropped with the
            // closure; the acceptor keeps going.
            log::warn!("cannot start a session for [{ip}]: {e}");
        }
    }
}
