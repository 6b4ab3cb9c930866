//! Failed logins by client address (Postfix's anvil, a fail2ban-like
//! limit): each failure counts toward `auth_failure_limit`, a success
//! clears the count, and a failure older than `auth_lockout` no longer
//! counts. The failure that reaches the limit locks the address out for
//! `auth_lockout`: its session ends, and its next connections to the
//! submission ports are refused until then.
//!
//! # Memory
//!
//! One record per address that failed lately, at most [`MAX_TRACKED`]:
//! past it, records that no longer count are dropped first, then the
//! oldest, so a crowd of addresses cannot grow the table without bound
//! (the price: a very wide attack may see an early address forgotten).

use std::cell::RefCell;
use std::collections::HashMap;
use std::net::IpAddr;
use std::time::Duration;

use coro::clock::Instant;

/// The most addresses tracked at once.
pub const MAX_TRACKED: usize = 65_536;

/// One address's recent failures.
#[derive(Debug, Clone, Copy)]
struct Record {
    /// Failures in a row.
    failures: u32,
    /// When the last one was.
    last: Instant,
    /// Refused until then, once the limit was reached.
    locked_until: Option<Instant>,
}

/// What a failure means for its address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Below the limit: `failures` in a row so far.
    Again {
        /// Failures in a row, this one included.
        failures: u32,
    },
    /// The limit is reached: the address is locked out for the lockout.
    LockedOut {
        /// Failures in a row, this one included.
        failures: u32,
    },
}

/// The failure table (one per relay, on its thread).
#[derive(Debug, Default)]
pub struct Anvil {
    records: RefCell<HashMap<IpAddr, Record>>,
}

impl Anvil {
    /// How much longer `ip` is locked out, if it is.
    pub fn locked(&self, ip: IpAddr) -> Option<Duration> {
        let now = coro::clock::now();
        let until = self.records.borrow().get(&ip)?.locked_until?;
        (until > now).then(|| until - now)
    }

    /// Counts a failed login from `ip`; `limit` failures in a row lock it
    /// out for `lockout`.
    pub fn failure(&self, ip: IpAddr, limit: u32, lockout: Duration) -> Verdict {
        let now = coro::clock::now();
        let mut records = self.records.borrow_mut();
        if !records.contains_key(&ip) && records.len() >= MAX_TRACKED {
            make_room(&mut records, now, lockout);
        }
        let r = records.entry(ip).or_insert(Record {
            failures: 0,
            last: now,
            locked_until: None,
        });
        let stale = now - r.last >= lockout && r.locked_until.is_none_or(|t| t <= now);
        if stale {
            r.failures = 0;
            r.locked_until = None;
        }
        r.failures += 1;
        r.last = now;
        if r.failures >= limit {
            r.locked_until = Some(now.saturating_add(lockout));
            Verdict::LockedOut {
                failures: r.failures,
            }
        } else {
            Verdict::Again {
                failures: r.failures,
            }
        }
    }

    /// A successful login from `ip`: its failures no longer count.
    pub fn success(&self, ip: IpAddr) {
        self.records.borrow_mut().remove(&ip);
    }

    /// Addresses tracked now.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.records.borrow().len()
    }
}

/// Drops the records that no longer count; if none, the oldest.
fn make_room(records: &mut HashMap<IpAddr, Record>, now: Instant, lockout: Duration) {
    records.retain(|_, r| now - r.last < lockout || r.locked_until.is_some_and(|t| t > now));
    if records.len() >= MAX_TRACKED {
        if let Some(oldest) = records
            .iter()
            .min_by_key(|(_, r)| r.last)
            .map(|(ip, _)| *ip)
        {
            records.remove(&oldest);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_locks_out_and_a_success_clears() {
        coro::run(|| {
            let a = Anvil::default();
            let (ip, other): (IpAddr, IpAddr) =
                ("192.0.2.1".parse().unwrap(), "192.0.2.2".parse().unwrap());
            let lockout = Duration::from_secs(60);
            assert_eq!(a.failure(ip, 3, lockout), Verdict::Again { failures: 1 });
            assert_eq!(a.failure(ip, 3, lockout), Verdict::Again { failures: 2 });
            a.success(ip);
            assert_eq!(a.failure(ip, 3, lockout), Verdict::Again { failures: 1 });
            a.failure(ip, 3, lockout);
            assert_eq!(
                a.failure(ip, 3, lockout),
                Verdict::LockedOut { failures: 3 }
            );
            assert!(a.locked(ip).is_some_and(|d| d <= lockout));
            assert_eq!(a.locked(other), None);
        });
    }

    #[test]
    fn old_failures_and_lockouts_expire() {
        coro::run(|| {
            let a = Anvil::default();
            let ip: IpAddr = "192.0.2.1".parse().unwrap();
            let lockout = Duration::from_millis(20);
            a.failure(ip, 2, lockout);
            coro::sleep(Duration::from_millis(30)).unwrap();
            assert_eq!(a.failure(ip, 2, lockout), Verdict::Again { failures: 1 });
            assert_eq!(
                a.failure(ip, 2, lockout),
                Verdict::LockedOut { failures: 2 }
            );
            coro::sleep(Duration::from_millis(30)).unwrap();
            assert_eq!(a.locked(ip), None);
            assert_eq!(a.failure(ip, 2, lockout), Verdict::Again { failures: 1 });
        });
    }

    #[test]
    fn the_table_is_bounded() {
        coro::run(|| {
            let a = Anvil::default();
            let lockout = Duration::from_secs(60);
            for i in 0..(MAX_TRACKED as u32 + 10) {
                a.failure(IpAddr::from(i.to_be_bytes()), 5, lockout);
            }
            assert_eq!(a.len(), MAX_TRACKED);
        });
    }
}
