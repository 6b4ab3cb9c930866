//! Delivery to an SMTP upstream: the [`Transport`] of each SMTP
//! destination, sharing one connection cache ([`pool`]).
//!
//! A delivery takes a session on a connection to its upstream from the
//! cache (waiting while the destination's connections are all busy, or
//! while a new one is opened), runs one transaction ([`client`]), and
//! gives the connection back. All of it runs under one `with_timeout`
//! (`message_timeout`), whatever the per-command timeouts say, and so
//! does the opening of a connection it waits for (greeting, EHLO,
//! STARTTLS), though that runs on the cache's own thread. A
//! connection that broke is marked so and never handed out again; one
//! found dead at its first command after a while in the cache (the server
//! timed it out) is replaced and the message tried once more at once.
//! When no connection can be made at all, the outcome says so and the
//! queue suspends the destination. A failed connection attempt reaches
//! the delivery that made it (the cache logs it); after three in a row the
//! cache backs the upstream off, and deliveries meanwhile are deferred at
//! once with the last error and the time until the next attempt.

pub mod client;
mod error;
pub mod pool;
pub mod reply;

use std::fmt;
use std::rc::Rc;
use std::time::Duration;

use coro::sync::{GetError, GroupPool};

use self::client::{Delivery, Settings};
use self::pool::Connector;
use super::route::Upstream;
use super::{Detail, Job, Outcome, Status, Transport};

/// What every SMTP destination shares: the settings and the cache.
#[derive(Debug)]
pub struct Smtp {
    settings: Rc<Settings>,
    pool: GroupPool<Connector>,
}

impl Smtp {
    /// The shared client with its connection cache.
    ///
    /// # Errors
    ///
    /// If the cache's threads cannot start.
    pub fn new(settings: Settings) -> std::io::Result<Rc<Smtp>> {
        let settings = Rc::new(settings);
        let pool = pool::build(settings.clone())?;
        Ok(Rc::new(Smtp { settings, pool }))
    }

    /// The connection cache's state, as the back door's `pools` prints it:
    /// connections, upstreams, and each upstream whose connects keep
    /// failing (with the error, which may quote the upstream, escaped,
    /// and the time until the next try).
    pub fn pool_status(&self) -> String {
        crate::escape::escape_lines(&self.pool.stats().to_string())
    }

    /// Lets every upstream in connect backoff be tried at once (an
    /// operator's `flush`); returns how many were in backoff.
    pub fn reset_backoff(&self) -> usize {
        let failing = self.pool.stats().failing;
        failing
            .iter()
            .filter(|k| self.pool.reset_backoff(&k.key))
            .count()
    }

    /// Closes every cached connection (QUIT, off the caller's path); the
    /// ones in use close when their message is done.
    pub fn close_all(&self) {
        for up in self.pool.groups() {
            self.pool.detach_group(&up);
        }
    }
}

/// What a cached connection was opened for: its upstream, and the name
/// its certificate was verified for when it had to be (MTA-STS). The
/// cache's key: a connection opened without that check is never handed
/// to a delivery that needs it.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Peer {
    /// Where it goes.
    pub up: Upstream,
    /// STARTTLS required, the certificate valid for this name.
    pub verified_for: Option<String>,
}

impl fmt::Display for Peer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.verified_for {
            None => write!(f, "{}", self.up),
            Some(name) => write!(f, "{} (TLS verified for {name})", self.up),
        }
    }
}

/// As its `Display` (the pool's log lines show keys so).
impl fmt::Debug for Peer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// One upstream as a [`Transport`].
#[derive(Debug)]
pub struct Destination {
    smtp: Rc<Smtp>,
    peer: Peer,
}

/// Runs `attempt` (one message's delivery) under `smtp.message_timeout`
/// (`limit`). When it runs out, the steps under way fail (the timeout is
/// level-triggered) and their outcome says where; each deferral's text
/// adds that the limit was reached.
pub(super) fn within_message_timeout(
    limit: Duration,
    attempt: impl FnOnce() -> Outcome,
) -> Outcome {
    let mut out = None;
    let expired = coro::with_timeout(limit, || out = Some(attempt())).is_err();
    let mut out = out.expect("the attempt runs to its end");
    if expired {
        for st in &mut out.rcpts {
            if let Status::Deferred(d) = st {
                d.text.push_str(&format!(
                    " (the time limit for one message, smtp.message_timeout = {limit:?}, ran out)"
                ));
            }
        }
    }
    out
}

impl Destination {
    /// Delivery to `up` through `smtp`'s cache.
    pub fn new(smtp: Rc<Smtp>, up: Upstream) -> Destination {
        let peer = Peer {
            up,
            verified_for: None,
        };
        Destination { smtp, peer }
    }

    /// Delivery to `up` over TLS only, with a certificate valid for `name`
    /// (an MX host under an MTA-STS policy), on connections of its own.
    pub fn verified(smtp: Rc<Smtp>, up: Upstream, name: &str) -> Destination {
        let peer = Peer {
            up,
            verified_for: Some(name.to_owned()),
        };
        Destination { smtp, peer }
    }

    /// One job under the umbrella timeout ([`within_message_timeout`]).
    fn deliver_one(&self, job: &Job) -> Outcome {
        within_message_timeout(self.smtp.settings.cfg.message_timeout, || self.attempt(job))
    }

    /// A session from the cache and a transaction on it; once more on a
    /// fresh connection if a cached one turns out dead.
    fn attempt(&self, job: &Job) -> Outcome {
        let s = &self.smtp.settings;
        let mut retried = false;
        loop {
            if let Some(deadline) = coro::current_effective_deadline() {
                self.smtp.pool.spawner().wait_until(&self.peer, deadline);
            }
            let mut session = match self.smtp.pool.get(&self.peer) {
                Ok(session) => session,
                Err(e) => return self.no_connection(job, e),
            };
            let relay = session.peer.clone();
            let statuses = match session.deliver(&job.msg, &job.rcpts, s) {
                Delivery::Stale(e) if !retried => {
                    log::info!("{}: {e}; trying a new connection", job.msg.env.id);
                    session.mark_broken();
                    retried = true;
                    continue;
                }
                Delivery::Stale(e) => {
                    vec![Status::Deferred(e.detail(Some(&session.host))); job.rcpts.len()]
                }
                Delivery::Done(st) => st,
            };
            let conn_use = session.uses;
            if session.broken || session.opened.elapsed() >= s.cfg.connection_reuse_time_limit {
                // Detached and closed when the session ends; never reused.
                session.mark_broken();
            }
            return Outcome {
                relay,
                rcpts: statuses,
                dest_failed: false,
                conn_use,
            };
        }
    }

    /// The outcome when the cache could not give a connection.
    fn no_connection(&self, job: &Job, e: GetError<client::SmtpError>) -> Outcome {
        let (detail, dest_failed) = match e {
            GetError::Spawn(e) => (e.detail(None), true),
            GetError::Backoff {
                error,
                failures,
                retry_in,
            } => {
                let mut d = error.detail(None);
                d.text.push_str(&format!(
                    " ({failures} connection attempts in a row failed; the next in {retry_in:.1?})"
                ));
                (d, true)
            }
            GetError::Wait(w) => (
                Detail::local(
                    "4.4.2",
                    format!("waiting for a connection to {}: {w}", self.peer),
                ),
                w == coro::WaitError::TimedOut,
            ),
            other => (Detail::local("4.3.0", other.to_string()), false),
        };
        Outcome {
            dest_failed,
            ..Outcome::all("none", job, Status::Deferred(detail))
        }
    }
}

impl Transport for Destination {
    fn deliver(&self, jobs: &[Job]) -> Vec<Outcome> {
        jobs.iter().map(|j| self.deliver_one(j)).collect()
    }

    fn describe(&self) -> String {
        format!("the upstream {}", self.peer)
    }

    fn batch_limit(&self) -> usize {
        1
    }

    fn concurrency(&self) -> usize {
        self.smtp.settings.cfg.destination_concurrency_limit
    }

    /// An operator's `flush`: the upstream's connect backoff is lifted, so
    /// the flushed messages try it now.
    fn resume(&self) {
        self.smtp.pool.reset_backoff(&self.peer);
    }
}
