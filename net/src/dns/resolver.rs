//! [`Resolver`]: the query policy. Cache first; identical questions in
//! flight share one query; servers in turn with timeouts and attempts;
//! TCP when an answer is truncated; CNAME chains followed.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::rc::Rc;

use coro_sync::Event;
use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::{DNSClass, Name, RData, RecordType};

use super::cache::{Answer, Cache, Key};
use super::config::Config;
use super::error::DnsError;
use super::transport::{self, Fail, Outgoing};

/// A stub resolver for green threads: it asks recursive servers (those of
/// `/etc/resolv.conf`, or the ones given) and caches their answers.
///
/// Every lookup suspends only the calling green thread. A resolver is
/// `!Send`, like the sockets it uses: make one per runtime and share it
/// with `Rc`. See the [module documentation](super) for what it does and
/// when to use it rather than [`lookup_host`](crate::lookup_host).
///
/// # Cache and coalescing
///
/// Answers are kept for their TTL (at most [`Config::max_ttl`]); NXDOMAIN
/// and NODATA answers for the SOA's negative TTL (RFC 2308: the smaller of
/// the SOA record's TTL and its `minimum`), not at all without an SOA.
/// Failures (SERVFAIL, timeouts) are not cached. While a question is being
/// asked, green threads asking the same one wait for that query's answer
/// instead of sending their own.
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
            cache: RefCell::new(Cache::new(cfg.cache_size, cfg.max_ttl)),
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
                Ok(a) => {
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
    /// Caches what it learns under the first name.
    fn fetch(&self, name: &Name, rtype: RecordType, chain: &mut Vec<Name>) -> Result<Answer, Stop> {
        let m = self.ask(name, rtype)?;
        let neg_ttl = negative_ttl(&m);
        let mut owner = name.clone();
        let mut ttl = u32::MAX;
        let answer = loop {
            let here = m
                .answers()
                .iter()
                .filter(|r| r.name() == &owner && r.dns_class() == DNSClass::IN);
            let mut found = Vec::new();
            let mut cname = None;
            for r in here {
                if r.record_type() == rtype {
                    ttl = ttl.min(r.ttl());
                    found.push(r.data().clone());
                } else if let RData::CNAME(c) = r.data() {
                    cname = Some((c.0.clone(), r.ttl()));
                }
            }
            if !found.is_empty() {
                break Answer::Records(Rc::new(found));
            }
            if let Some((target, t)) = cname {
                ttl = ttl.min(t);
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
                ttl = ttl.min(neg_ttl.unwrap_or(0));
                break Answer::NxDomain;
            }
            if owner == *name || neg_ttl.is_some() {
                // NODATA: the name (or the chain's end) has no such records.
                ttl = ttl.min(neg_ttl.unwrap_or(0));
                break Answer::Records(Rc::new(Vec::new()));
            }
            // The answer stopped at a CNAME whose target it does not cover:
            // ask about the target.
            let rest = self.fetch(&owner, rtype, chain)?;
            // The target's answer is cached under its own name; this one
            // only as long as the links seen here.
            break rest;
        };
        self.cache.borrow_mut().insert(
            (name.to_lowercase(), rtype),
            answer.clone(),
            if ttl == u32::MAX { 0 } else { ttl },
        );
        Ok(answer)
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
    /// `rotate`), `attempts` rounds, until one answers it (an answer or
    /// NXDOMAIN). A truncated UDP answer is asked again over TCP; a FORMERR
    /// to a query with EDNS0 is asked again without.
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
                    Ok(m) => match m.response_code() {
                        ResponseCode::NoError | ResponseCode::NXDomain => return Ok(m),
                        ResponseCode::ServFail => {
                            last = Some(DnsError::ServFail {
                                name: name.to_string(),
                                server,
                            })
                        }
                        other => {
                            last = Some(DnsError::Refused {
                                name: name.to_string(),
                                server,
                                rcode: other.to_string(),
                            })
                        }
                    },
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

    /// One exchange with one server, with the TCP and no-EDNS0 retries.
    fn ask_one(&self, server: SocketAddr, name: &Name, rtype: RecordType) -> Result<Message, Fail> {
        let q = Outgoing::new(name, rtype, self.cfg.edns_payload).map_err(Fail::Caller)?;
        self.count();
        let m = transport::udp(server, &q, &self.cfg)?;
        if m.truncated() {
            log::debug!("dns: truncated answer for {name} from {server}; asking over TCP");
            self.count();
            let q = Outgoing::new(name, rtype, self.cfg.edns_payload).map_err(Fail::Caller)?;
            return transport::tcp(server, &q, &self.cfg);
        }
        if m.response_code() == ResponseCode::FormErr && q.edns {
            // RFC 6891 §7: a server that does not know EDNS0 may say FORMERR.
            self.count();
            let q = Outgoing::new(name, rtype, 0).map_err(Fail::Caller)?;
            return transport::udp(server, &q, &self.cfg);
        }
        Ok(m)
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
