//! The typed lookups of [`Resolver`]: addresses, MX, TXT, PTR.

use std::io;
use std::net::IpAddr;
use std::panic;

use coro_runtime::{JoinError, WaitError};

use hickory_proto::rr::{Name, RData, RecordType};

use super::cache::Answer;
use super::error::DnsError;
use super::resolver::Resolver;

/// A mail exchanger: one MX record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mx {
    /// Lower is tried first.
    pub preference: u16,
    /// The host, without the trailing dot; `"."` for a null MX.
    pub exchange: String,
}

impl Mx {
    /// Whether this is a null MX (RFC 7505: `MX 0 .`): the domain accepts
    /// no mail.
    pub fn is_null(&self) -> bool {
        self.exchange == "."
    }
}

impl Resolver {
    /// The addresses of `host`: its A records, then its AAAA records.
    ///
    /// An IP address literal is returned as it is. A name with fewer dots
    /// than `ndots` is tried with each `search` domain first, then as it
    /// is; a name ending in `.` is absolute and tried only as it is.
    ///
    /// # Concurrency
    ///
    /// For each name tried, the A and the AAAA questions are asked at
    /// once: the AAAA one on a green thread of its own (in a
    /// [`scope`](coro_runtime::scope)), the A one on the caller's. Each
    /// follows the resolver's policy on its own (per-server timeout,
    /// `attempts` rounds, the next server on a failure), and each is
    /// cached and shares a query in flight like any other question; the
    /// call returns when both are done. When one of the two answers is in
    /// the cache, the other is asked on the caller's thread, without a
    /// second thread.
    ///
    /// # When one family fails
    ///
    /// The addresses found are returned when either question found some.
    /// A family whose question failed temporarily (SERVFAIL, a timeout,
    /// ...) while the other's answered is left out, as `getaddrinfo` and
    /// Postfix do: a host reachable over IPv4 stays reachable when its
    /// AAAA question fails. The failure is logged (debug level) and not
    /// cached, so the next lookup asks again. Such a lookup returns only
    /// once the failing question has used up its timeouts and attempts.
    /// When the caller's deadline passes or the caller is interrupted, both
    /// questions stop at once.
    ///
    /// # Errors
    ///
    /// A [`DnsError`] in the `io::Error`: `NxDomain` when every candidate
    /// does not exist (NXDOMAIN to both questions), `NoRecords` when one
    /// exists without addresses; a temporary failure (`ServFail`,
    /// `Timeout`, ...) when a question failed and none found addresses (a
    /// temporary failure wins over NXDOMAIN and NODATA, so a mail relay
    /// defers rather than bounces); `InvalidName` for a name that is not
    /// one. The caller's deadline or interruption is the runtime's
    /// `WaitError`; no stack for the AAAA thread is `OutOfMemory`.
    ///
    /// # Examples
    ///
    /// ```
    /// use coro::net::dns::{Config, Resolver};
    ///
    /// coro::run(|| -> std::io::Result<()> {
    ///     let r = Resolver::new(Config::with_servers(vec!["127.0.0.1:53".parse().unwrap()]))?;
    ///     // Literals need no server.
    ///     assert_eq!(r.lookup_ip("::1")?, ["::1".parse::<std::net::IpAddr>().unwrap()]);
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn lookup_ip(&self, host: &str) -> io::Result<Vec<IpAddr>> {
        if let Ok(ip) = host.parse::<IpAddr>() {
            return Ok(vec![ip]);
        }
        let mut failure: Option<io::Error> = None;
        for name in self.candidates(host)? {
            let mut ips = Vec::new();
            let mut exists = false;
            let mut failed = None;
            for answer in self.addresses(&name)? {
                match answer {
                    Ok(Answer::Records(rs)) => {
                        exists = true;
                        ips.extend(rs.iter().filter_map(|d| match d {
                            RData::A(a) => Some(IpAddr::V4(a.0)),
                            RData::AAAA(a) => Some(IpAddr::V6(a.0)),
                            _ => None,
                        }));
                    }
                    Ok(Answer::NxDomain) => {}
                    Err(e) => match DnsError::from_io(&e) {
                        Some(d) if d.is_temporary() => failed = Some(e),
                        Some(_) => {}
                        None => return Err(e), // the caller's deadline
                    },
                }
            }
            if !ips.is_empty() {
                if let Some(e) = failed {
                    log::debug!("dns: {name}: addresses of one family only: {e}");
                }
                return Ok(ips);
            }
            if failed.is_some() {
                failure = failed;
            } else if exists && failure.is_none() {
                failure = Some(
                    DnsError::NoRecords {
                        name: name.to_string(),
                        rtype: "A/AAAA".into(),
                    }
                    .into(),
                );
            }
        }
        Err(failure.unwrap_or_else(|| {
            DnsError::NxDomain {
                name: host.to_owned(),
            }
            .into()
        }))
    }

    /// The A and the AAAA answers for `name`, asked at once (see
    /// [`lookup_ip`](Resolver::lookup_ip)). The outer error is a failure to
    /// start the second question (no stack); the inner ones are each
    /// question's.
    fn addresses(&self, name: &Name) -> io::Result<[io::Result<Answer>; 2]> {
        let (a, aaaa) = (RecordType::A, RecordType::AAAA);
        if self.cached(name, a).is_some() || self.cached(name, aaaa).is_some() {
            // One is at hand: a thread would not save a round trip.
            return Ok([self.resolve(name, a), self.resolve(name, aaaa)]);
        }
        let both = coro_runtime::scope(|s| -> io::Result<[io::Result<Answer>; 2]> {
            let second = coro_runtime::Builder::new()
                .name("dns AAAA".to_owned())
                .spawn_scoped(s, || self.resolve(name, aaaa))?;
            let first = self.resolve(name, a);
            if first
                .as_ref()
                .is_err_and(|e| DnsError::from_io(e).is_none())
            {
                // The caller's deadline or interruption (or a local error,
                // which `lookup_ip` returns): the AAAA question stops too.
                s.cancel();
            }
            let second = match second.join() {
                Ok(r) => r,
                Err(JoinError::Panicked(p)) => panic::resume_unwind(p),
                Err(JoinError::Wait(w)) => {
                    // The caller was interrupted while waiting for it.
                    s.cancel();
                    Err(w.into())
                }
                // Runtime shutdown stopped the thread (`Cancelled`), or it
                // ended for a reason a later runtime adds: no answer.
                Err(_) => Err(WaitError::Interrupted.into()),
            };
            Ok([first, second])
        });
        // Only `try_spawn` threads make a `ScopeError`; none here.
        both.map_err(io::Error::from)?
    }

    /// The MX records of `domain` (absolute: no search list), by
    /// preference (equal ones in the server's order: shuffling them is the
    /// mail client's job). Empty when the domain exists without MX records
    /// (then mail goes to its address, RFC 5321 §5.1).
    ///
    /// # Errors
    ///
    /// `NxDomain` when the domain does not exist; a temporary failure
    /// (`ServFail`, `Timeout`, ...); `InvalidName`.
    pub fn lookup_mx(&self, domain: &str) -> io::Result<Vec<Mx>> {
        let rs = self.records(domain, RecordType::MX)?;
        let mut mxs: Vec<Mx> = rs
            .iter()
            .filter_map(|d| match d {
                RData::MX(mx) => Some(Mx {
                    preference: mx.preference(),
                    exchange: if mx.exchange().is_root() {
                        ".".to_owned()
                    } else {
                        mx.exchange().to_ascii().trim_end_matches('.').to_owned()
                    },
                }),
                _ => None,
            })
            .collect();
        mxs.sort_by_key(|m| m.preference);
        Ok(mxs)
    }

    /// The TXT records of `name` (absolute), each one's strings joined.
    /// Empty when the name exists without TXT records.
    ///
    /// # Errors
    ///
    /// As [`lookup_mx`](Resolver::lookup_mx).
    pub fn lookup_txt(&self, name: &str) -> io::Result<Vec<Vec<u8>>> {
        let rs = self.records(name, RecordType::TXT)?;
        Ok(rs
            .iter()
            .filter_map(|d| match d {
                RData::TXT(t) => Some(t.txt_data().concat()),
                _ => None,
            })
            .collect())
    }

    /// The names of `ip` (its PTR records under `in-addr.arpa` or
    /// `ip6.arpa`), without the trailing dot.
    ///
    /// # Errors
    ///
    /// As [`lookup_mx`](Resolver::lookup_mx).
    pub fn lookup_ptr(&self, ip: IpAddr) -> io::Result<Vec<String>> {
        let name = Name::from(ip);
        let rs = match self.resolve(&name, RecordType::PTR)? {
            Answer::Records(rs) => rs,
            Answer::NxDomain => {
                return Err(DnsError::NxDomain {
                    name: name.to_string(),
                }
                .into())
            }
        };
        Ok(rs
            .iter()
            .filter_map(|d| match d {
                RData::PTR(p) => Some(p.0.to_ascii().trim_end_matches('.').to_owned()),
                _ => None,
            })
            .collect())
    }

    /// The records of one type for an absolute name.
    fn records(&self, name: &str, rtype: RecordType) -> io::Result<std::rc::Rc<Vec<RData>>> {
        let n = absolute(name)?;
        match self.resolve(&n, rtype)? {
            Answer::Records(rs) => Ok(rs),
            Answer::NxDomain => Err(DnsError::NxDomain {
                name: name.trim_end_matches('.').to_owned(),
            }
            .into()),
        }
    }

    /// The names to try for `host`, in order (see `lookup_ip`).
    fn candidates(&self, host: &str) -> io::Result<Vec<Name>> {
        let n = absolute(host)?;
        if host.ends_with('.') || self.config().search.is_empty() {
            return Ok(vec![n]);
        }
        let mut relative = parse(host)?;
        relative.set_fqdn(false);
        let mut out: Vec<Name> = Vec::new();
        for d in &self.config().search {
            let Ok(d) = absolute(d) else { continue };
            if let Ok(full) = relative.clone().append_domain(&d) {
                out.push(full);
            }
        }
        let dots = host.matches('.').count();
        if dots >= self.config().ndots {
            out.insert(0, n);
        } else {
            out.push(n);
        }
        Ok(out)
    }
}

/// `name` as a fully qualified name.
fn absolute(name: &str) -> io::Result<Name> {
    let mut n = parse(name)?;
    n.set_fqdn(true);
    Ok(n)
}

fn parse(name: &str) -> io::Result<Name> {
    let invalid = |why: String| -> io::Error {
        DnsError::InvalidName {
            name: name.to_owned(),
            why,
        }
        .into()
    };
    if name.is_empty() || name == "." {
        return Err(invalid("empty".into()));
    }
    let n = Name::from_utf8(name).map_err(|e| invalid(e.to_string()))?;
    if n.is_root() {
        return Err(invalid("empty".into()));
    }
    Ok(n)
}
