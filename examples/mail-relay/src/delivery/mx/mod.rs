//! Delivery to the Internet: the [`Transport`] of the `mx` destination,
//! which sends each recipient domain's mail to the domain's mail
//! exchangers (RFC 5321 §5.1) found with `coro::net::dns`.
//!
//! # Design
//!
//! The queue hands this transport jobs like any other; one job's
//! recipients may span domains, so a job is split by domain and each part
//! goes through:
//!
//! 1. the domain's suspension ([`limits`]): a domain none of whose
//!    exchangers could be reached is deferred without a connection
//!    attempt until its dead-destination time has passed;
//! 2. its concurrency slot (`destination_concurrency_limit`, 20) and
//!    its rate delay;
//! 3. the [`plan`]: MX lookup, bounce (null MX, NXDOMAIN, an MX that is
//!    the relay itself, only non-public addresses) or defer (SERVFAIL,
//!    timeout) at once, else the hosts in order, at most
//!    `[mx] address_limit` addresses in all ([`policy`] says which
//!    addresses may be used);
//! 4. each host's addresses in turn, through the shared SMTP connection
//!    cache keyed by the exchanger's address and port ([`Destination`]
//!    for that address): a connection failure or a 4xx/5xx greeting moves
//!    on to the next address or exchanger; a session that took place
//!    decides the recipients' fate.
//!
//! Steps 3 and 4 together run under one deadline, `[smtp]
//! message_timeout`: however many exchangers there are and however
//! slowly they answer (a tarpit that drips its greeting), the attempt
//! ends by then, connection set-up included.
//!
//! `routes`, local domains and `relayhost` are looked up first ([`Router`](
//! super::route::Router)); only what they leave comes here.
//!
//! # TLS and MTA-STS
//!
//! Without an MTA-STS policy ([`sts`]), TLS is opportunistic as set in
//! `[smtp]`; with `verify`, the name checked is the exchanger's address,
//! not its MX name (MX host names are not authenticated without
//! DNSSEC/DANE or MTA-STS). With a policy (looked up before the plan):
//!
//! * `enforce`: only the exchangers whose MX name the policy lists are
//!   used, each over TLS only (STARTTLS required) with a certificate that
//!   chains to a trusted root and is valid for the MX name, on
//!   connections of their own in the cache (never one opened without
//!   that check). An exchanger that fails is skipped like an unreachable
//!   one; when none is left, the mail is deferred (4.7.5) with a reason
//!   that names MTA-STS (`mailq` shows it), never sent in clear nor
//!   bounced, and the domain is not suspended (its exchangers answer).
//! * `testing`: the same checks; a failure is logged as a warning naming
//!   MTA-STS, and the mail goes as without a policy.
//! * `none`: as without a policy.

mod limits;
pub mod plan;
mod policy;
pub mod sts;

use std::io;
use std::net::IpAddr;
use std::rc::Rc;
use std::time::Duration;

use coro::net::dns::{Config as DnsConfig, Resolver};

use self::limits::Limits;
use self::plan::{Plan, Policy};
use self::policy::Own;
use self::sts::{Applied, Mode, Sts};
use super::route::Upstream;
use super::smtp::{within_message_timeout, Destination, Smtp};
use super::{Detail, Job, Outcome, Status, Transport};
use crate::config;

/// Delivery by MX records.
#[derive(Debug)]
pub struct MxDelivery {
    smtp: Rc<Smtp>,
    resolver: Resolver,
    /// The exchangers' SMTP port (25).
    port: u16,
    limits: Limits,
    /// Agents at once for all domains together.
    concurrency: usize,
    /// Addresses tried per attempt at most.
    address_limit: usize,
    /// Non-public exchanger addresses may be used.
    allow_private: bool,
    /// The relay's own addresses (an exchanger there is a loop).
    own: Own,
    /// One attempt's deadline, for all its exchangers.
    message_timeout: Duration,
    /// MTA-STS, unless off.
    sts: Option<Sts>,
}

impl MxDelivery {
    /// MX delivery through `smtp`'s connection cache, with the `[mx]`
    /// settings, for a relay listening on `listen`; `concurrency`
    /// deliveries at once over all domains, each attempt within
    /// `message_timeout`.
    ///
    /// # Errors
    ///
    /// When `/etc/resolv.conf` is needed (no `dns_servers`) and cannot be
    /// read, or the resolver settings are invalid.
    pub fn new(
        smtp: Rc<Smtp>,
        cfg: &config::Mx,
        listen: IpAddr,
        concurrency: usize,
        message_timeout: Duration,
    ) -> io::Result<MxDelivery> {
        let mut dns = if cfg.dns_servers.is_empty() {
            DnsConfig::from_system()?
        } else {
            DnsConfig::with_servers(cfg.dns_servers.clone())
        };
        dns.timeout = cfg.dns_timeout;
        dns.attempts = cfg.dns_attempts;
        Ok(MxDelivery {
            smtp,
            resolver: Resolver::new(dns)?,
            port: cfg.port,
            limits: Limits::new(
                cfg.destination_concurrency_limit,
                cfg.destination_rate_delay,
                cfg.dead_destination_time,
            ),
            concurrency,
            address_limit: cfg.address_limit,
            allow_private: cfg.allow_private_addresses,
            own: Own::new(listen),
            message_timeout,
            sts: None,
        })
    }

    /// The same, applying MTA-STS policies with `sts`.
    pub fn with_sts(self, sts: Sts) -> MxDelivery {
        MxDelivery {
            sts: Some(sts),
            ..self
        }
    }

    /// One job: split by recipient domain, each part delivered on its own,
    /// the statuses put back in the job's order.
    fn deliver_job(&self, job: &Job) -> Outcome {
        let mut parts: Vec<(String, Vec<usize>)> = Vec::new();
        for (pos, rcpt) in job.addresses().enumerate() {
            let domain = crate::protocol::domain(rcpt).unwrap_or_default();
            match parts.iter_mut().find(|(d, _)| *d == domain) {
                Some((_, ps)) => ps.push(pos),
                None => parts.push((domain, vec![pos])),
            }
        }
        let mut statuses: Vec<Option<Status>> = vec![None; job.rcpts.len()];
        let mut relay = "none".to_owned();
        let mut conn_use = 0;
        for (domain, positions) in parts {
            let part = Job {
                msg: job.msg.clone(),
                rcpts: positions.iter().map(|&p| job.rcpts[p]).collect(),
            };
            let out = self.deliver_domain(&domain, &part);
            self.limits.tidy(&domain);
            for (st, &p) in out.rcpts.into_iter().zip(&positions) {
                statuses[p] = Some(st);
            }
            if out.relay != "none" {
                relay = out.relay;
                conn_use = out.conn_use;
            }
        }
        Outcome {
            relay,
            rcpts: statuses
                .into_iter()
                .map(|s| s.expect("every recipient has a part"))
                .collect(),
            dest_failed: false, // suspension is per domain, here
            conn_use,
        }
    }

    /// The recipients of `job`, all at `domain`.
    fn deliver_domain(&self, domain: &str, job: &Job) -> Outcome {
        let defer = |d: Detail| Outcome::all("none", job, Status::Deferred(d));
        if domain.is_empty() {
            return Outcome::all(
                "none",
                job,
                Status::Bounced(Detail::local("5.1.3", "recipient address has no domain")),
            );
        }
        if let Some(why) = self.limits.suspended(domain) {
            return defer(Detail::local(
                "4.4.1",
                format!("delivery temporarily suspended: {why}"),
            ));
        }
        let state = self.limits.domain(domain);
        let _slot = match state.slots.acquire(1) {
            Ok(s) => s,
            Err(w) => {
                return defer(Detail::local(
                    "4.3.0",
                    format!("waiting for a delivery slot for {domain}: {w}"),
                ))
            }
        };
        if let Err(w) = self.limits.pace(&state) {
            return defer(Detail::local(
                "4.3.0",
                format!("waiting for the rate delay of {domain}: {w}"),
            ));
        }
        within_message_timeout(self.message_timeout, || self.try_exchangers(domain, job))
    }

    /// The plan for `domain`, then its exchangers' addresses in turn until
    /// one takes a session (or the attempt's deadline passes).
    fn try_exchangers(&self, domain: &str, job: &Job) -> Outcome {
        let id = &job.msg.env.id;
        let defer = |d: Detail| Outcome::all("none", job, Status::Deferred(d));
        let policy = Policy {
            address_limit: self.address_limit,
            allow_private: self.allow_private,
            ours: &|ip| self.own.contains(ip),
        };
        let sts = self
            .sts
            .as_ref()
            .and_then(|s| s.policy(&self.resolver, domain))
            .filter(|a| a.policy.mode != Mode::None);
        let hosts = match plan::plan(&self.resolver, domain, &policy) {
            Plan::Hosts(h) => h,
            Plan::Bounce(d) => {
                log::info!("{id}: {domain}: {}", d.text);
                return Outcome::all("none", job, Status::Bounced(d));
            }
            Plan::Defer(d) => {
                log::info!("{id}: {domain}: {}", d.text);
                return defer(d);
            }
        };
        let mut failures = Vec::new();
        // Exchangers passed over because of the policy.
        let mut refused_by_policy = false;
        for host in &hosts {
            let listed = sts.as_ref().is_none_or(|a| a.policy.matches(&host.name));
            if let (false, Some(a)) = (listed, &sts) {
                let why = format!(
                    "MTA-STS policy of {domain} (mode {}): {} is not one of its mx patterns",
                    a.policy.mode, host.name
                );
                if a.policy.mode == Mode::Enforce {
                    log::info!("{id}: {why}; not used");
                    failures.push(why);
                    refused_by_policy = true;
                    continue;
                }
                log::warn!("{id}: {why}; delivering anyway (mode testing)");
            }
            for ip in &host.addrs {
                if deadline_passed() {
                    failures.push("the time limit for the attempt ran out".to_owned());
                    return defer(Detail::local(
                        "4.4.1",
                        format!(
                            "no mail exchanger for {domain} answered in time ({})",
                            failures.join("; ")
                        ),
                    ));
                }
                let up = Upstream {
                    host: ip.to_string(),
                    port: self.port,
                };
                let at = format!("{}[{ip}]:{}", host.name, self.port);
                let checked = sts.as_ref().filter(|_| listed);
                let mut out = match checked {
                    Some(a) => self.deliver_verified(job, domain, &host.name, up, &at, a),
                    None => self.deliver_to(job, Destination::new(self.smtp.clone(), up)),
                };
                if out.dest_failed {
                    let why = out.rcpts.first().map(|s| s.detail().text.clone());
                    let why = why.unwrap_or_default();
                    log::info!("{id}: {at}: {why}; trying the next mail exchanger");
                    refused_by_policy |= why.starts_with("MTA-STS");
                    failures.push(format!("{at}: {why}"));
                    continue;
                }
                out.relay = at;
                return out;
            }
        }
        if refused_by_policy {
            // The exchangers answer: no suspension, and the reason says
            // what the policy refused.
            return defer(Detail::local(
                "4.7.5",
                format!(
                    "MTA-STS policy of {domain} (mode enforce): no mail exchanger could be \
                     used securely ({})",
                    failures.join("; ")
                ),
            ));
        }
        let why = format!(
            "no mail exchanger for {domain} could be reached ({})",
            failures.join("; ")
        );
        self.limits.suspend(domain, &why);
        defer(Detail::local("4.4.1", why))
    }

    /// One job through `dest`.
    fn deliver_to(&self, job: &Job, dest: Destination) -> Outcome {
        dest.deliver(std::slice::from_ref(job))
            .pop()
            .expect("one outcome per job")
    }

    /// One job to the exchanger `name` at `up` under the policy `a`: over
    /// TLS verified for `name`. When that cannot be had, mode `enforce`
    /// fails the exchanger with a reason naming MTA-STS, mode `testing`
    /// logs it and delivers as without a policy.
    fn deliver_verified(
        &self,
        job: &Job,
        domain: &str,
        name: &str,
        up: Upstream,
        at: &str,
        a: &Applied,
    ) -> Outcome {
        let id = &job.msg.env.id;
        let dest = Destination::verified(self.smtp.clone(), up.clone(), name);
        let mut out = self.deliver_to(job, dest);
        let tls_failed = out.dest_failed
            && out.rcpts.first().is_some_and(|s| {
                let d = s.detail();
                d.dsn == "4.7.5" || d.text.contains("STARTTLS")
            });
        if !tls_failed {
            return out;
        }
        let why = out.rcpts[0].detail().text.clone();
        if a.policy.mode == Mode::Testing {
            log::warn!(
                "{id}: MTA-STS policy of {domain} (mode testing, id {}): {at}: {why}; \
                 delivering as without a policy",
                a.id
            );
            return self.deliver_to(job, Destination::new(self.smtp.clone(), up));
        }
        for st in &mut out.rcpts {
            if let Status::Deferred(d) = st {
                d.dsn = "4.7.5".to_owned();
                d.text = format!(
                    "MTA-STS policy of {domain} (mode enforce, id {}) requires TLS with a \
                     certificate valid for {name}: {why}",
                    a.id
                );
            }
        }
        out
    }
}

/// Whether the deadline of the attempt under way has passed.
fn deadline_passed() -> bool {
    coro::current_effective_deadline().is_some_and(|d| d <= coro::clock::now())
}

impl Transport for MxDelivery {
    fn deliver(&self, jobs: &[Job]) -> Vec<Outcome> {
        jobs.iter().map(|j| self.deliver_job(j)).collect()
    }

    fn describe(&self) -> String {
        format!(
            "the mail exchangers of each domain (MX, port {}, DNS {:?}, MTA-STS {})",
            self.port,
            self.resolver.config().servers,
            if self.sts.is_some() { "applied" } else { "off" }
        )
    }

    fn batch_limit(&self) -> usize {
        1
    }

    fn concurrency(&self) -> usize {
        self.concurrency
    }

    fn resume(&self) {
        self.limits.resume();
        self.smtp.reset_backoff();
    }
}
