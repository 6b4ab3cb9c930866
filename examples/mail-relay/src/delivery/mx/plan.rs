//! Which hosts to try for a recipient domain, from its MX records (RFC
//! 5321 §5.1), or whether to bounce or defer at once.
//!
//! * MX records by preference, equal preferences in a random order;
//! * no MX records: the domain's own address (the implicit MX);
//! * a null MX (RFC 7505, `MX 0 .`): bounce, 5.1.10;
//! * NXDOMAIN: bounce, 5.1.2;
//! * SERVFAIL, a timeout, a broken answer: defer, 4.4.3, the reason kept
//!   for `mailq`.
//!
//! Names are resolved in that order only until `[mx] address_limit`
//! addresses are found (Postfix's `smtp_mx_address_limit`), so a domain
//! with many MX records costs a bounded number of lookups and connection
//! attempts. An address is checked against the [`policy`](super::policy):
//! an exchanger with one of the relay's own addresses means the relay is
//! itself an MX of the domain, so only the better ones are kept, and with
//! none left the mail bounces, 5.4.6 "mail for X loops back to myself"
//! (Postfix's rule); a non-public address is skipped unless allowed, and
//! a domain whose exchangers all have such addresses bounces, 5.4.4.
//!
//! The texts follow Postfix's, which operators grep for.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::io;
use std::net::IpAddr;

use coro::net::dns::{DnsError, Mx, Resolver};

use super::policy::{non_public, unusable};
use crate::delivery::Detail;

/// A mail exchanger to try, with its addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Host {
    /// Its name (the domain itself for the implicit MX).
    pub name: String,
    /// Its MX preference (0 for the implicit MX).
    pub preference: u16,
    /// Its addresses to try, in the resolver's order.
    pub addrs: Vec<IpAddr>,
}

/// What the plan may use.
pub struct Policy<'a> {
    /// Addresses at most, over all the hosts.
    pub address_limit: usize,
    /// Non-public addresses may be used.
    pub allow_private: bool,
    /// Whether an address is one of the relay's own.
    pub ours: &'a dyn Fn(IpAddr) -> bool,
}

/// What to do with a domain's mail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// Try these hosts in order.
    Hosts(Vec<Host>),
    /// Return the mail to its sender.
    Bounce(Detail),
    /// Keep it and try later.
    Defer(Detail),
}

/// The plan for `domain` under `policy`.
pub fn plan(resolver: &Resolver, domain: &str, policy: &Policy<'_>) -> Plan {
    let mxs = match resolver.lookup_mx(domain) {
        Ok(m) => m,
        Err(e) => return dns_failure(domain, "MX", &e),
    };
    if mxs.len() == 1 && mxs[0].is_null() {
        return Plan::Bounce(Detail::local(
            "5.1.10",
            format!("Domain {domain} does not accept mail (nullMX)"),
        ));
    }
    let names: Vec<(u16, String)> = if mxs.is_empty() {
        vec![(0, domain.to_owned())] // RFC 5321 §5.1: the implicit MX
    } else {
        order(mxs, &mut random_u64)
            .into_iter()
            .filter(|m| !m.is_null())
            .map(|m| (m.preference, m.exchange))
            .collect()
    };
    let mut hosts: Vec<Host> = Vec::new();
    let mut found = 0;
    let mut temporary: Option<Plan> = None;
    let mut permanent: Option<String> = None;
    let mut refused: Vec<String> = Vec::new();
    let mut looped = false;
    for (preference, name) in names {
        if found >= policy.address_limit {
            break;
        }
        let addrs = match resolver.lookup_ip(&format!("{name}.")) {
            Ok(addrs) => addrs,
            Err(e) => {
                match DnsError::from_io(&e) {
                    Some(d) if !d.is_temporary() => {
                        log::info!("{domain}: mail exchanger {name} has no address: {d}");
                        permanent = Some(format!("{name}: {d}"));
                    }
                    _ => temporary = Some(dns_failure(&name, "A/AAAA", &e)),
                }
                continue;
            }
        };
        if addrs.iter().any(|&a| (policy.ours)(a)) {
            // We are this exchanger: only better ones may take the mail.
            hosts.retain(|h| h.preference < preference);
            looped = true;
            break;
        }
        let mut usable = Vec::new();
        for a in addrs {
            let kind = non_public(a).filter(|_| !policy.allow_private || unusable(a));
            if let Some(kind) = kind {
                log::info!("{domain}: mail exchanger {name}[{a}] not used: {kind}");
                refused.push(format!("{name}[{a}]: {kind}"));
            } else if found < policy.address_limit {
                usable.push(a);
                found += 1;
            }
        }
        if !usable.is_empty() {
            hosts.push(Host {
                name,
                preference,
                addrs: usable,
            });
        }
    }
    if !hosts.is_empty() {
        return Plan::Hosts(hosts);
    }
    if looped {
        return Plan::Bounce(Detail::local(
            "5.4.6",
            format!("mail for {domain} loops back to myself"),
        ));
    }
    if let Some(p) = temporary {
        return p;
    }
    if !refused.is_empty() {
        return Plan::Bounce(Detail::local(
            "5.4.4",
            format!(
                "no usable address for the mail exchangers of {domain}: {}{}",
                refused.join("; "),
                if policy.allow_private {
                    ""
                } else {
                    " (refused: [mx] allow_private_addresses is off)"
                }
            ),
        ));
    }
    Plan::Bounce(Detail::local(
        "5.4.4",
        format!(
            "Host or domain name not found: no address for the mail exchangers of {domain} ({})",
            permanent.unwrap_or_default()
        ),
    ))
}

/// A lookup that failed: NXDOMAIN bounces, anything else defers.
fn dns_failure(name: &str, rtype: &str, e: &io::Error) -> Plan {
    match DnsError::from_io(e) {
        Some(DnsError::NxDomain { .. }) => Plan::Bounce(Detail::local(
            "5.1.2",
            format!(
                "Host or domain name not found. Name service error for name={name} type={rtype}: Host not found"
            ),
        )),
        _ => Plan::Defer(Detail::local(
            "4.4.3",
            format!(
                "Host or domain name not found. Name service error for name={name} type={rtype}: Host not found, try again ({e})"
            ),
        )),
    }
}

/// `mxs` by preference, each run of equal preferences shuffled
/// (Fisher-Yates, `rand` giving the draws).
pub fn order(mut mxs: Vec<Mx>, rand: &mut impl FnMut() -> u64) -> Vec<Mx> {
    mxs.sort_by_key(|m| m.preference);
    let mut start = 0;
    while start < mxs.len() {
        let end = start
            + mxs[start..]
                .iter()
                .take_while(|m| m.preference == mxs[start].preference)
                .count();
        for i in (start + 1..end).rev() {
            let j = start + (rand() % (i - start + 1) as u64) as usize;
            mxs.swap(i, j);
        }
        start = end;
    }
    mxs
}

/// A random number from std's randomly keyed hasher (no dependency for
/// a shuffle that needs no cryptographic strength).
fn random_u64() -> u64 {
    RandomState::new().build_hasher().finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mx(preference: u16, exchange: &str) -> Mx {
        Mx {
            preference,
            exchange: exchange.into(),
        }
    }

    #[test]
    fn preference_order_with_equals_shuffled() {
        let mxs = vec![
            mx(20, "c"),
            mx(10, "a1"),
            mx(10, "a2"),
            mx(10, "a3"),
            mx(30, "d"),
        ];
        let mut firsts = std::collections::HashSet::new();
        for _ in 0..60 {
            let o = order(mxs.clone(), &mut random_u64);
            let prefs: Vec<u16> = o.iter().map(|m| m.preference).collect();
            assert_eq!(prefs, [10, 10, 10, 20, 30]);
            assert_eq!((o[3].exchange.as_str(), o[4].exchange.as_str()), ("c", "d"));
            firsts.insert(o[0].exchange.clone());
        }
        assert_eq!(
            firsts.len(),
            3,
            "every equal MX comes first sometimes: {firsts:?}"
        );
    }
}
