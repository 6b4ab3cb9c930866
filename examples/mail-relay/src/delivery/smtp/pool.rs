//! The connection cache: a `GroupPool` whose groups are upstreams and
//! whose workers are open SMTP connections, one transaction at a time
//! (the [`Spawner`] documentation's pattern for a mail relay).
//!
//! * `spawn` opens a connection (connect, greeting, EHLO, STARTTLS); it
//!   runs on the pool's spawner thread, within the deadline of the
//!   deliveries waiting for it (each says its deadline before it asks the
//!   pool, [`Connector::wait_until`]), so a server that drips its greeting
//!   holds the connection slot no longer than the delivery it was opened
//!   for would wait. Its error is logged by the pool
//!   (`smtp: spawning a worker for HOST:PORT failed: ...`) and reaches the
//!   delivery that asked for the connection; the upstream's other cached
//!   connections are dropped (Passenger's rule) and deliveries waiting for
//!   one try for themselves. After three failures in a row the upstream
//!   backs off (1 s doubling up to 60 s, the pool's default
//!   `SpawnBackoff`): deliveries get `GetError::Backoff` at once.
//! * `connect` takes the connection out of the worker for the session,
//!   which owns it (`&mut`); `release` puts it back.
//! * `shutdown` says QUIT to a connection that left the pool: idle too
//!   long, used `connection_reuse_count_limit` times, too old, or broken
//!   (then it is only closed).

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use coro::clock::{self, Instant};
use coro::sync::{GroupOptions, GroupPool, Spawner};

use super::client::{Client, Settings, SmtpError};
use super::Peer;
use crate::config::TlsLevel;

/// A cached connection: the client while no session holds it.
#[derive(Debug)]
pub struct Cached(RefCell<Option<Client>>);

/// Opens connections to upstreams for the pool.
#[derive(Debug)]
pub struct Connector {
    settings: Rc<Settings>,
    /// Per upstream, the latest deadline of the deliveries about to wait
    /// for a connection to it (entries past their deadline are dropped).
    deadlines: RefCell<HashMap<Peer, Instant>>,
}

impl Connector {
    /// Says that a delivery is about to ask for a connection to `up` and
    /// waits for it until `deadline`: a connection opened for it gives up
    /// then.
    pub fn wait_until(&self, up: &Peer, deadline: Instant) {
        let now = clock::now();
        let mut d = self.deadlines.borrow_mut();
        d.retain(|_, t| *t > now);
        match d.get_mut(up) {
            Some(t) => *t = (*t).max(deadline),
            None => {
                d.insert(up.clone(), deadline);
            }
        }
    }

    /// Opens a connection to `peer` (with TLS as the policy says, or as
    /// the peer requires).
    fn open(&self, peer: &Peer) -> Result<Client, SmtpError> {
        let (s, up) = (&self.settings, &peer.up);
        if let Some(name) = &peer.verified_for {
            return Client::open_verified(up, s, name);
        }
        match Client::open(up, s, false) {
            // Opportunistic TLS that fails is tried again without it.
            Err(SmtpError::Tls { what }) if s.cfg.tls_security_level == TlsLevel::May => {
                log::info!("{what}; trying {up} again without TLS");
                Client::open(up, s, true)
            }
            r => r,
        }
    }
}

impl Spawner for Connector {
    type Key = Peer;
    type Worker = Cached;
    type Conn = Client;
    type Error = SmtpError;

    fn spawn(&self, up: &Peer) -> Result<Cached, SmtpError> {
        let s = &self.settings;
        let deadline = self
            .deadlines
            .borrow()
            .get(up)
            .copied()
            .unwrap_or_else(|| clock::now() + s.cfg.message_timeout);
        let mut opened = None;
        let expired = coro::with_deadline(deadline, || opened = Some(self.open(up))).is_err();
        let client = opened.expect("open runs to its end").inspect_err(|_| {
            if expired {
                log::info!(
                    "{up}: connection set-up cut short at the deadline of the deliveries waiting for it"
                );
            }
        })?;
        log::debug!(
            "connected to {}{}",
            client.peer,
            if client.is_tls() { " (TLS)" } else { "" }
        );
        Ok(Cached(RefCell::new(Some(client))))
    }

    fn connect(&self, up: &Peer, w: &Cached) -> Result<Client, SmtpError> {
        w.0.borrow_mut().take().ok_or_else(|| SmtpError::Protocol {
            peer: up.to_string(),
            stage: super::client::Stage::Rset,
            what: "cached connection already in use".into(),
        })
    }

    fn release(&self, w: &Cached, conn: Client) {
        *w.0.borrow_mut() = Some(conn);
    }

    fn shutdown(&self, w: Cached) {
        if let Some(c) = w.0.into_inner() {
            log::debug!(
                "closing the connection to {} after {} messages",
                c.peer,
                c.uses
            );
            c.quit(self.settings.cfg.quit_timeout);
        }
    }
}

/// The pool for `settings`: `connection_limit` connections in all,
/// `destination_concurrency_limit` per upstream, one session at a time on
/// each, closed after `connection_reuse_count_limit` messages (after one
/// with the cache off) or `connection_idle_time_limit` idle.
///
/// # Errors
///
/// If the pool's threads cannot start.
pub fn build(settings: Rc<Settings>) -> std::io::Result<GroupPool<Connector>> {
    let c = &settings.cfg;
    let max_requests = if c.connection_cache {
        c.connection_reuse_count_limit
    } else {
        1
    };
    GroupPool::builder()
        .name("smtp")
        .max(c.connection_limit)
        .max_per_app(c.destination_concurrency_limit)
        .max_idle_time(c.connection_idle_time_limit)
        // The queue bounds the deliveries in flight itself (its agents).
        .max_queue(1 << 20)
        .session_limit(1)
        .options(GroupOptions {
            max_requests,
            min_processes: 0,
        })
        .build(Connector {
            settings,
            deadlines: RefCell::new(HashMap::new()),
        })
}
