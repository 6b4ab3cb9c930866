//! [`Resolver`]: the query policy. Cache first; identical questions in
//! flight share one query; servers in turn with timeouts and attempts;
//! the retries `reply.rs` asks for (TCP, no EDNS0); CNAME chains followed,
//! each answer cached until the first of the records it rests on expires.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use coro_runtime::clock::{self, Instant};
use coro_sync::Event;
use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::{DNSClass, Name, RData, RecordType};

use super::cache::{Answer, Cache, Key};
use super::config::Config;
use super::error::DnsError;
use super::reply::{self, Verdict};
use super::transport::{self, Fail, Outgoing, Via};

/// The largest TTL there is (RFC 2181 §8: 31 bits); one with the top bit
/// set counts as 0.
const MAX_TTL: u32 = i32::MAX as u32;

/// A stub resolver for green threads: it asks recursive servers (those of
/// `/etc/resolv.conf`, or the ones given) and caches their answers.
///
/// Every lookup suspends only the calling green thread. A resolver is
/// `!Send`, like the sockets it uses: make one per runtime and share it
/// with `Rc`. See the [module documentation](super) for what it does and
/// when to use it rather than [`lookup_host`](crate::lookup_host).
///
/// # What counts as an answer
///
/// Every reply, however it was fetched (over UDP, over TCP, asked again
/// without EDNS0 after a FORMERR), passes the same judgement before it is
/// read: a truncated UDP reply is asked again over TCP, and a truncated
/// TCP reply is an error, never "no records"; SERVFAIL, REFUSED and the
/// other failure codes, and a reply without records from a server that
/// neither recurses nor is authoritative (a referral), send the query to
/// the next server.
///
/// # Cache and coalescing
///
/// Answers are kept for their TTL (at most [`Config::max_ttl`]; a TTL with
/// its top bit set counts as 0, RFC 2181 §8); NXDOMAIN and NODATA answers
/// for the SOA's negative TTL (RFC 2308: the smaller of the SOA record's
/// TTL and its `minimum`), not at all without an SOA. An answer reached
/// through CNAMEs lasts no longer than its shortest link (RFC 2181 §5.2):
/// each CNAME's TTL, the records' TTL or, for a negative answer, the
/// SOA's, each counted from when the reply that carried it arrived, also
/// when the chain's end had to be asked separately. Failures (SERVFAIL,
/// timeouts) are not cached. While a question is being asked, green
/// threads asking the same one wait for that query's answer instead of
/// sending their own.
///
/// # Errors
///
/// Lookups return `io::Error`s carrying a [`DnsError`]; a deadline or an
/// interruption of the caller comes back as the runtime's `WaitError`.
///
/// # Examples
///
/// ```no_run
/// use coro::net::dns::Resolver;
///
/// coro::run(|| -> std::io::Result<()> {
///     let r = Resolver::from_system()?;
///     for mx in r.lookup_mx("example.org")? {
///         println!("{} {}", mx.preference, mx.exchange);
///     }
///     Ok(())
/// })
/// .unwrap();
/// ```
pub struct Resolver {
    /// The settings, checked.
    cfg: Config,
    /// Answers by (lower-cased name, type).
    cache: RefCell<Cache>,
    /// Questions being asked, with what their askers wait on.
    in_flight: RefCell<HashMap<Key, Rc<Flight>>>,
    /// The server the next query starts at (`rotate`).
    next_server: Cell<usize>,
    /// Queries sent (each attempt at each server counts).
    sent: Cell<u64>,
}

/// A question being asked.
#[derive(Default)]
struct Flight {
    /// Set when the asker is done (answered, failed, or gave up).
    done: Event,
    /// Its result; `None` if the asker gave up (its own deadline), then
    /// the waiters ask again themselves.
    result: RefCell<Option<Result<Answer, DnsError>>>,
}

/// Takes a flight out of the in-flight table and wakes its waiters however
/// the asker leaves (an answer, an error, an unwinding panic).
struct FlightGuard<'a> {
    resolver: &'a Resolver,
    key: Key,
    flight: Rc<Flight>,
}

impl Drop for FlightGuard<'_> {
    fn drop(&mut self) {
        self.resolver.in_flight.borrow_mut().remove(&self.key);
        self.flight.done.set(); // never blocks
    }
}

/// Why a lookup stops.
enum Stop {
    /// The answer says so, or the servers failed.
    Dns(DnsError),
    /// The caller's deadline or interruption, or a local error.
    Caller(io::Error),
}

impl From<DnsError> for Stop {
    fn from(e: DnsError) -> Stop {
        Stop::Dns(e)
    }
}

impl From<Stop> for io::Error {
    fn from(s: Stop) -> io::Error {
        match s {
            Stop::Dns(e) => e.into(),
            Stop::Caller(e) => e,
        }
    }
}

impl Resolver {
    /// A resolver with these settings.
    ///
    /// # Errors
    ///
    /// `InvalidInput` naming the problem: no servers, zero attempts or
    /// timeout, an EDNS0 payload below 512.
    pub fn new(cfg: Config) -> io::Result<Resolver> {
        cfg.validate()?;
        Ok(Resolver {
            cache: RefCell::new(Cache::new(cfg.cache_size)),
            cfg,
            in_flight: RefCell::new(HashMap::new()),
            next_server: Cell::new(0),
            sent: Cell::new(0),
        })
    }

    /// A resolver with the system's settings (`/etc/resolv.conf`).
    ///
    /// # Errors
    ///
    /// As [`Config::from_system`].
    pub fn from_system() -> io::Result<Resolver> {
        Resolver::new(Config::from_system()?)
    }

    /// The settings.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// Answers in the cache (expired ones included until looked up).
    pub fn cache_len(&self) -> usize {
        self.cache.borrow().len()
    }

    /// Empties the cache.
    pub fn clear_cache(&self) {
        self.cache.borrow_mut().clear();
    }

    /// Queries sent to servers so far (every attempt counts; answers from
    /// the cache and coalesced questions do not).
    pub fn queries_sent(&self) -> u64 {
        self.sent.get()
    }

    /// The cached answer for `name` (absolute) and `rtype`, while fresh.
    pub(crate) fn cached(&self, name: &Name, rtype: RecordType) -> Option<Answer> {
        self.cache.borrow_mut().get(&(name.to_lowercase(), rtype))
    }

    /// The records of type `rtype` for `name` (absolute), following CNAMEs:
    /// from the cache, from a query already in flight, or asked now.
    pub(crate) fn resolve(&self, name: &Name, rtype: RecordType) -> io::Result<Answer> {
        let key = (name.to_lowercase(), rtype);
        loop {
            if let Some(a) = self.cache.borrow_mut().get(&key) {
                return Ok(a);
            }
            let pending = self.in_flight.borrow().get(&key).cloned();
            if let Some(f) = pending {
                f.done.wait()?;
                match f.result.borrow().clone() {
                    Some(r) => return r.map_err(io::Error::from),
                    None => continue, // its asker gave up: ask ourselves
                }
            }
            let flight = Rc::new(Flight::default());
            self.in_flight
                .borrow_mut()
                .insert(key.clone(), flight.clone());
            let _guard = FlightGuard {
                resolver: self,
                key: key.clone(),
                flight: flight.clone(),
            };
            let mut chain = vec![key.0.clone()];
            return match self.fetch(name, rtype, &mut chain) {
                Ok((a, _)) => {
                    *flight.result.borrow_mut() = Some(Ok(a.clone()));
                    Ok(a)
                }
                Err(Stop::Dns(e)) => {
                    *flight.result.borrow_mut() = Some(Err(e.clone()));
                    Err(e.into())
                }
                Err(Stop::Caller(e)) => Err(e),
            };
        }
    }

    /// Asks the servers about `name`, reads the chain of CNAMEs in the
    /// answer, and asks again about the chain's end if the answer stopped
    /// short of it. `chain` holds the names seen so far (lower-cased).
    /// Caches what it learns under the first name, until the first of the
    /// records it rests on expires, and returns that expiry with it.
    fn fetch(
        &self,
        name: &Name,
        rtype: RecordType,
        chain: &mut Vec<Name>,
    ) -> Result<(Answer, Instant), Stop> {
        let m = self.ask(name, rtype)?;
        let received = clock::now();
        let lasts = |ttl: u32| self.expiry(received, ttl);
        // The negative answer's expiry, or now if there is no SOA: a
        // negative answer without one is not cached (RFC 2308 §5).
        let soa = negative_ttl(&m);
        let negative = soa.map_or(received, lasts);
        let mut owner = name.clone();
        let mut until = lasts(MAX_TTL);
        let answer = loop {
            let here = m
                .answers()
                .iter()
                .filter(|r| r.name() == &owner && r.dns_class() == DNSClass::IN);
            let mut found = Vec::new();
            let mut cname = None;
            for r in here {
                if r.record_type() == rtype {
                    until = until.min(lasts(r.ttl()));
                    found.push(r.data().clone());
                } else if let RData::CNAME(c) = r.data() {
                    cname = Some((c.0.clone(), r.ttl()));
                }
            }
            if !found.is_empty() {
                break Answer::Records(Rc::new(found));
            }
            if let Some((target, ttl)) = cname {
                until = until.min(lasts(ttl));
                let target = target.to_lowercase();
                if chain.contains(&target) {
                    return Err(self.chain_error(name, chain, "it loops"));
                }
                chain.push(target.clone());
                if chain.len() > self.cfg.max_cnames + 1 {
                    return Err(self.chain_error(name, chain, "it is too long"));
                }
                owner = target;
                continue;
            }
            if m.response_code() == ResponseCode::NXDomain {
                until = until.min(negative);
                break Answer::NxDomain;
            }
            if owner == *name || soa.is_some() {
                // NODATA: the name (or the chain's end) has no such records.
                until = until.min(negative);
                break Answer::Records(Rc::new(Vec::new()));
            }
            // The answer stopped at a CNAME whose target it does not cover:
            // ask about the target. The composite answer lasts no longer
            // than the target's (RFC 2181 §5.2, RFC 2308 §5).
            let (rest, rest_until) = self.fetch(&owner, rtype, chain)?;
            until = until.min(rest_until);
            break rest;
        };
        self.cache
            .borrow_mut()
            .insert((name.to_lowercase(), rtype), answer.clone(), until);
        Ok((answer, until))
    }

    /// When a record received at `received` with `ttl` expires: at most
    /// [`Config::max_ttl`] later, at once for a TTL with its top bit set
    /// (RFC 2181 §8).
    fn expiry(&self, received: Instant, ttl: u32) -> Instant {
        let ttl = if ttl > MAX_TTL { 0 } else { ttl };
        received.saturating_add(Duration::from_secs(u64::from(ttl)).min(self.cfg.max_ttl))
    }

    fn chain_error(&self, name: &Name, chain: &[Name], why: &str) -> Stop {
        let path: Vec<String> = chain.iter().map(|n| n.to_string()).collect();
        Stop::Dns(DnsError::CnameChain {
            name: name.to_string(),
            why: format!(
                "{why} ({}; at most {} links followed)",
                path.join(" -> "),
                self.cfg.max_cnames
            ),
        })
    }

    /// One question to the servers: each in turn (from the next one with
    /// `rotate`), `attempts` rounds, until one answers it (see
    /// [`ask_one`](Self::ask_one)).
    fn ask(&self, name: &Name, rtype: RecordType) -> Result<Message, Stop> {
        let servers = &self.cfg.servers;
        let start = if self.cfg.rotate {
            let s = self.next_server.get();
            self.next_server.set(s.wrapping_add(1));
            s
        } else {
            0
        };
        let mut last: Option<DnsError> = None;
        let mut dropped = 0;
        for _ in 0..self.cfg.attempts {
            for i in 0..servers.len() {
                let server = servers[(start + i) % servers.len()];
                match self.ask_one(server, name, rtype) {
                    Ok(m) => return Ok(m),
                    Err(Fail::Timeout { dropped: d }) => dropped += d,
                    Err(Fail::Dns(e)) => {
                        log::debug!("{e}");
                        last = Some(e);
                    }
                    Err(Fail::Caller(e)) => return Err(Stop::Caller(e)),
                }
            }
        }
        Err(Stop::Dns(last.unwrap_or_else(|| DnsError::Timeout {
            name: name.to_string(),
            servers: servers.clone(),
            dropped,
        })))
    }

    /// One question to one server: over UDP with EDNS0, then as each
    /// reply's verdict asks (over TCP, without EDNS0), until a reply
    /// answers it. Every reply, on every path, is judged by
    /// `reply::judge`; only an answer comes back.
    fn ask_one(&self, server: SocketAddr, name: &Name, rtype: RecordType) -> Result<Message, Fail> {
        let mut edns_payload = self.cfg.edns_payload;
        let mut via = Via::Udp;
        // Each retry moves `via` from UDP to TCP or drops EDNS0, never
        // back: four queries at most.
        loop {
            let q = Outgoing::new(name, rtype, edns_payload).map_err(Fail::Caller)?;
            self.count();
            let m = transport::exchange(server, &q, via, &self.cfg)?;
            match reply::judge(server, name, &q, &m, via) {
                Verdict::Answer => return Ok(m),
                Verdict::OverTcp => {
                    log::debug!("dns: truncated answer for {name} from {server}; asking over TCP");
                    via = Via::Tcp;
                }
                Verdict::WithoutEdns => {
                    log::debug!("dns: FORMERR for {name} from {server}; asking without EDNS0");
                    edns_payload = 0;
                }
                Verdict::Fail(e) => return Err(Fail::Dns(e)),
            }
        }
    }

    fn count(&self) {
        self.sent.set(self.sent.get() + 1);
    }
}

/// The negative TTL of an answer (RFC 2308 §5): the SOA in the authority
/// section, the smaller of its TTL and its `minimum`.
fn negative_ttl(m: &Message) -> Option<u32> {
    m.name_servers().iter().find_map(|r| match r.data() {
        RData::SOA(soa) => Some(r.ttl().min(soa.minimum())),
        _ => None,
    })
}

impl fmt::Debug for Resolver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Resolver")
            .field("servers", &self.cfg.servers)
            .field("cached", &self.cache.borrow().len())
            .field("in_flight", &self.in_flight.borrow().len())
            .finish_non_exhaustive()
    }
}
