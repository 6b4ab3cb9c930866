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
use std::ffi::c_int;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use coro::net::backdoor::BackDoor;
use coro::net::{is_fd_exhaustion, TcpListener, TcpStream};
use coro::signal::{Signals, SIGHUP, SIGINT, SIGTERM, SIGUSR1};
use coro::sync::WaitGroup;

mod start;

use crate::config::{Config, ConfigError};
use crate::delivery::smtp::Smtp;
use crate::dkim::Dkim;
use crate::privilege::RunAs;
use crate::queue::Queue;
use crate::session::{Phase, Port, Session};
use crate::spool::Spool;
use crate::wire::Wire;
use start::{annotate, announce, open_spool, prepare_as, Endpoints};

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
    // What can fail without touching the disk comes first: a relay that
    // cannot start leaves no spool or Maildir behind.
    let endpoints = Endpoints::open(&config)?;
    let dkim = prepare_as(&config, &who)?;
    let _lock = crate::control::lock_spool(&config.spool_dir)
        .map_err(|e| annotate(e, "spool_dir", &config.spool_dir))?;
    let (spool, queue, smtp) = open_spool(&config, &dkim)?;
    let door = announce(&config, &endpoints, &spool, &queue, &smtp)?;
    let running = Running::start(config, endpoints, spool, queue, smtp, door)?;
    let sig = running.wait_for_stop(&signals, &*load, &dkim)?;
    running.stop(sig, signals);
    Ok(())
}

/// The relay at work: its shared state, its core threads and what the
/// stop sequence closes.
struct Running {
    relay: Rc<Relay>,
    spool: Spool,
    queue: Queue,
    smtp: Option<Rc<Smtp>>,
    door: Option<BackDoor>,
    /// The MTA listener and the submission ones.
    listeners: Vec<Rc<TcpListener>>,
    metrics: Option<Rc<TcpListener>>,
    /// One per listener.
    acceptors: Vec<coro::JoinHandle<()>>,
    committer: coro::JoinHandle<()>,
    journal: coro::JoinHandle<()>,
    /// Set when the stop sequence ends the core threads on purpose.
    ending: Rc<Cell<bool>>,
}

impl Running {
    /// Starts the core threads (committer, journal, queue runner, metrics)
    /// and then the acceptors.
    fn start(
        config: Config,
        endpoints: Endpoints,
        spool: Spool,
        queue: Queue,
        smtp: Option<Rc<Smtp>>,
        door: Option<BackDoor>,
    ) -> io::Result<Running> {
        let Endpoints {
            tls,
            listener,
            metrics,
            submission,
            auth,
        } = endpoints;
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
        let mut listeners = vec![listener];
        let mut acceptors = vec![acceptor("acceptor", &relay, &listeners[0], Port::Mta)?];
        for (listener, port) in submission {
            acceptors.push(acceptor("submission acceptor", &relay, &listener, port)?);
            listeners.push(listener);
        }
        Ok(Running {
            relay,
            spool,
            queue,
            smtp,
            door,
            listeners,
            metrics,
            acceptors,
            committer,
            journal,
            ending,
        })
    }

    /// Serves SIGUSR1 (flush) and SIGHUP (reload) until a stop signal,
    /// which it returns.
    fn wait_for_stop(
        &self,
        signals: &Signals,
        load: &dyn Fn() -> Result<Config, ConfigError>,
        dkim: &Dkim,
    ) -> io::Result<c_int> {
        let relay = &self.relay;
        loop {
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
                    self.queue.flush();
                }
                SIGHUP => {
                    let old = relay.config();
                    if let Some(new) = crate::reload::reload(&old, load, dkim) {
                        *relay.config.borrow_mut() = Rc::new(new);
                    }
                    if let Some(auth) = &relay.auth {
                        auth.reload(&relay.config().submission);
                    }
                }
                sig => return Ok(sig),
            }
        }
    }

    /// The graceful stop after `sig` (see the module's header); a second
    /// signal on `signals` cuts the deadline short.
    fn stop(mut self, sig: c_int, signals: Signals) {
        let t0 = coro::clock::now();
        let deadline = self.relay.config().stop_deadline;
        log::info!(
            "signal {sig}: stopping -- no new sessions or deliveries; {} and {} in flight get {deadline:?}",
            crate::logger::count(self.relay.group.len(), "session"),
            crate::logger::count(self.queue.in_flight(), "delivery")
        );
        self.stop_accepting();
        let second = self.drain(signals, deadline);
        self.queue.finish(deadline.saturating_sub(t0.elapsed()));
        let _ = second.thread().interrupt();
        self.end_core();
        report_spool(&self.spool, &self.queue);
    }

    /// No new session or delivery: the listeners close, their acceptors
    /// end.
    fn stop_accepting(&mut self) {
        self.relay.stopping.set(true);
        self.queue.halt();
        for l in &self.listeners {
            l.close();
        }
        if let Some(l) = &self.metrics {
            l.close();
        }
        for a in self.acceptors.drain(..) {
            let _ = a.join();
        }
    }

    /// Ends the sessions: those waiting between transactions now, the
    /// others by `deadline`, or at once on a second signal. Returns the
    /// thread that waits for that signal (which also cuts the deliveries
    /// in flight short), still waiting.
    fn drain(&self, signals: Signals, deadline: Duration) -> coro::JoinHandle<()> {
        let relay = &self.relay;
        // Sessions waiting for a command between transactions end now.
        for live in relay.sessions.borrow().values() {
            if live.phase.get() == Phase::Idle {
                let _ = live.thread.interrupt();
            }
        }
        let second = {
            let (relay, queue) = (relay.clone(), self.queue.clone());
            coro::spawn(move || {
                while let Ok(sig) = signals.recv() {
                    if sig != SIGUSR1 && sig != SIGHUP {
                        log::info!(
                            "second signal: ending the sessions and deliveries in flight now"
                        );
                        interrupt_all(&relay);
                        queue.cut();
                        return;
                    }
                }
            })
        };
        if coro::with_timeout(deadline, || relay.group.wait()).is_err() {
            interrupt_all(relay);
        }
        let _ = relay.group.wait();
        second
    }

    /// Flushes the committer and the journal (every message that got its
    /// 250 is durable), ends the core threads, says QUIT to cached
    /// upstream connections, closes the back door, removes the pid file.
    fn end_core(&mut self) {
        // Every 250 sent is durable already; this also waits for commits of
        // sessions cut short at the deadline, and for bounces.
        if let Err(e) = self.spool.flush() {
            log::warn!("flushing the spool: {e}");
        }
        if let Err(e) = self.spool.sync_journal() {
            log::warn!("flushing the spool's journal: {e}");
        }
        self.ending.set(true);
        let _ = self.committer.thread().interrupt();
        let _ = self.journal.thread().interrupt();
        if let Some(smtp) = self.smtp.take() {
            smtp.close_all();
        }
        if let Some(door) = self.door.take() {
            door.close();
        }
        crate::control::remove_pid(self.spool.dir());
    }
}

/// Says what the spool holds at the stop, read from the disk (what the
/// next start will find), and warns if that is not what this run tracked.
fn report_spool(spool: &Spool, queue: &Queue) {
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
}

/// Spawns the acceptor of `listener`, ended by the stop closing it.
fn acceptor(
    name: &'static str,
    relay: &Rc<Relay>,
    listener: &Rc<TcpListener>,
    port: Port,
) -> io::Result<coro::JoinHandle<()>> {
    let (relay, listener) = (relay.clone(), listener.clone());
    let l = listener.clone();
    supervised(
        name,
        move || listener.is_closed(),
        move || accept_loop(&relay, &l, port),
    )
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
