//! MTA-STS (RFC 8461): which policy applies to a recipient domain's MX
//! delivery, found and kept as §5.1 says.
//!
//! # How a policy is found
//!
//! For each delivery attempt to a domain:
//!
//! 1. `_mta-sts.DOMAIN` TXT is asked (through the resolver's cache, so at
//!    most once per TTL). Records that do not start with `v=STSv1` are
//!    ignored; anything but exactly one valid record means "no record".
//! 2. With a record whose `id` is the cached policy's, the cached policy
//!    applies, unless half its `max_age` (at most a day) has passed: then
//!    it is fetched again.
//! 3. With a new `id`, or no cached policy, the policy is fetched
//!    ([`fetch`]) and parsed ([`policy`]); the new one replaces the old in
//!    the cache ([`cache`], kept in the spool directory).
//! 4. When there is no record, the lookup fails, or the fetch fails, a
//!    cached policy whose `max_age` has not passed still applies (an
//!    attacker who can block DNS or HTTPS must not be able to turn a
//!    policy off); without one, there is no policy.
//!
//! Fetches for one domain are shared: a delivery that finds one in
//! progress waits for its result. A fetch that failed is not tried again
//! for the same `id` within [`RETRY_FAILED`], so a domain whose policy
//! host is down does not cost every delivery a fetch timeout. A failure
//! is logged (warning) unless a cached policy of mode `none` applies.
//!
//! What the policy then decides (which exchangers, TLS required and
//! verified) is [`super`]'s.

mod cache;
pub mod fetch;
pub mod policy;

use std::cell::RefCell;
use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use coro::clock::Instant;
use coro::net::dns::{DnsError, Resolver};
use coro::sync::{Event, Mutex};

use self::cache::{Cache, Entry};
use self::fetch::Fetcher;
pub use self::policy::{Mode, Policy};
use crate::config::Config;

/// MTA-STS as `[mta_sts]` sets it, with the verifying TLS configuration
/// the SMTP client uses for exchangers under a policy; `None` when off.
///
/// # Errors
///
/// An `mta_sts.ca_file` that cannot be used; a cache file that cannot be
/// read.
pub fn from_config(config: &Config) -> io::Result<Option<(Sts, Arc<rustls::ClientConfig>)>> {
    let c = &config.mta_sts;
    if !c.enabled {
        return Ok(None);
    }
    let (tls, roots) = crate::tls::trusted_config(c.ca_file.as_deref(), "mta_sts.ca_file")?;
    if roots == 0 {
        log::warn!(
            "MTA-STS: no trusted root certificate (the system's store is empty and \
             mta_sts.ca_file is not set): no policy can be fetched"
        );
    }
    let fetcher = Fetcher {
        tls: tls.clone(),
        port: c.policy_port,
        timeout: c.fetch_timeout,
        allow_private: config.mx.allow_private_addresses,
    };
    Ok(Some((Sts::open(fetcher, &config.spool_dir)?, tls)))
}

/// How long a failed fetch of one policy `id` is not tried again.
pub const RETRY_FAILED: Duration = Duration::from_secs(300);

/// The policy that applies to a domain now.
#[derive(Debug, Clone)]
pub struct Applied {
    /// The TXT `id` it was fetched for.
    pub id: String,
    /// The policy.
    pub policy: Arc<Policy>,
}

/// MTA-STS for MX delivery: the fetcher and the cache.
#[derive(Debug)]
pub struct Sts {
    fetcher: Fetcher,
    /// The spool directory, where the cache file is.
    dir: PathBuf,
    cache: RefCell<Cache>,
    /// Fetches in progress, by domain: set when each ends.
    inflight: RefCell<HashMap<String, Rc<Event>>>,
    /// The last failed fetch of each domain: its `id` and when.
    failed: RefCell<HashMap<String, (String, Instant)>>,
    /// One write of the cache file at a time.
    saving: Mutex<()>,
}

impl Sts {
    /// MTA-STS with the cache kept in `spool_dir` (read now, on the
    /// blocking pool), policies fetched with `fetcher`.
    ///
    /// # Errors
    ///
    /// A cache file that exists and cannot be read.
    pub fn open(fetcher: Fetcher, spool_dir: &Path) -> io::Result<Sts> {
        let dir = std::path::absolute(spool_dir)?;
        let d = dir.clone();
        let cache = coro::blocking(move || Cache::load(&d)).map_err(io::Error::from)??;
        Ok(Sts {
            fetcher,
            dir,
            cache: RefCell::new(cache),
            inflight: RefCell::default(),
            failed: RefCell::default(),
            saving: Mutex::new(()),
        })
    }

    /// The policy that applies to `domain` now, if any (see the module
    /// docs); mode `none` included.
    pub fn policy(&self, resolver: &Resolver, domain: &str) -> Option<Applied> {
        let now = SystemTime::now();
        let cached = self.cached(domain, now);
        let Some(id) = self.record(resolver, domain) else {
            return cached;
        };
        if let Some(c) = &cached {
            let due = self
                .cache
                .borrow()
                .get(domain)
                .is_some_and(|e| e.refresh_due(now));
            if c.id == id && !due {
                return cached;
            }
        }
        self.fetch(resolver, domain, &id).or(cached)
    }

    /// The cached policy of `domain` if its `max_age` has not passed.
    fn cached(&self, domain: &str, now: SystemTime) -> Option<Applied> {
        let cache = self.cache.borrow();
        let e = cache.get(domain).filter(|e| e.fresh(now))?;
        Some(Applied {
            id: e.id.clone(),
            policy: e.policy.clone(),
        })
    }

    /// The `id` of `domain`'s one valid `_mta-sts` record, if it has one.
    fn record(&self, resolver: &Resolver, domain: &str) -> Option<String> {
        let name = format!("_mta-sts.{domain}");
        let records = match resolver.lookup_txt(&name) {
            Ok(r) => r,
            Err(e) => {
                if DnsError::from_io(&e).is_none_or(|d| d.is_temporary()) {
                    log::debug!("{name}: TXT lookup failed: {e}");
                }
                return None;
            }
        };
        let sts: Vec<String> = records
            .iter()
            .map(|r| String::from_utf8_lossy(r).into_owned())
            .filter(|r| r.starts_with("v=STSv1"))
            .collect();
        match &sts[..] {
            [] => None,
            [one] => match policy::record_id(one) {
                Ok(id) => Some(id),
                Err(e) => {
                    log::info!("{name}: MTA-STS record {one:?} ignored: {e}");
                    None
                }
            },
            more => {
                log::info!("{name}: {} MTA-STS records: none used", more.len());
                None
            }
        }
    }

    /// Fetches `domain`'s policy for `id`, or waits for a fetch in
    /// progress; the policy when one was fetched.
    fn fetch(&self, resolver: &Resolver, domain: &str, id: &str) -> Option<Applied> {
        let running = self.inflight.borrow().get(domain).cloned();
        if let Some(done) = running {
            done.wait().ok()?;
            return self
                .cached(domain, SystemTime::now())
                .filter(|a| a.id == id);
        }
        if let Some((fid, at)) = self.failed.borrow().get(domain) {
            if fid == id && at.elapsed() < RETRY_FAILED {
                return None;
            }
        }
        let done = Rc::new(Event::new());
        self.inflight
            .borrow_mut()
            .insert(domain.to_owned(), done.clone());
        // Ends the fetch for waiters on every path (a panic, a cut).
        let _ending = Ending(&self.inflight, domain, done);
        let got = self.fetcher.fetch(resolver, domain).and_then(|text| {
            Policy::parse(&text).map_err(|e| format!("the policy does not parse: {e}"))
        });
        let policy = match got {
            Ok(p) => Arc::new(p),
            Err(e) => {
                let mut failed = self.failed.borrow_mut();
                failed.retain(|_, (_, at)| at.elapsed() < RETRY_FAILED);
                failed.insert(domain.to_owned(), (id.to_owned(), coro::clock::now()));
                drop(failed);
                let now = SystemTime::now();
                match self.cached(domain, now) {
                    Some(c) if c.policy.mode == Mode::None => {}
                    Some(c) => log::warn!(
                        "MTA-STS: the policy of {domain} (id {id}) cannot be fetched: {e}; \
                         the cached one (id {}, mode {}) applies",
                        c.id,
                        c.policy.mode
                    ),
                    None => log::warn!(
                        "MTA-STS: the policy of {domain} (id {id}) cannot be fetched: {e}; \
                         delivering as without a policy"
                    ),
                }
                return None;
            }
        };
        self.failed.borrow_mut().remove(domain);
        log::info!(
            "MTA-STS: policy of {domain} (id {id}): mode {}, max_age {}, mx {}",
            policy.mode,
            policy.max_age,
            if policy.mx.is_empty() {
                "none".to_owned()
            } else {
                policy.mx.join(" ")
            }
        );
        let entry = Entry {
            id: id.to_owned(),
            policy: policy.clone(),
            fetched: SystemTime::now(),
        };
        self.cache.borrow_mut().insert(domain, entry);
        self.save();
        Some(Applied {
            id: id.to_owned(),
            policy,
        })
    }

    /// Writes the cache file (on the blocking pool); a failure is logged
    /// (the policies stay in memory).
    fn save(&self) {
        let Ok(_one) = self.saving.lock() else {
            return;
        };
        let (dir, text) = (self.dir.clone(), self.cache.borrow().text());
        let r = coro::blocking(move || cache::save(&dir, &text));
        match r {
            Ok(Ok(())) => {}
            Ok(Err(e)) => log::warn!("MTA-STS: writing {}: {e}", cache::FILE),
            Err(e) => log::warn!("MTA-STS: writing {} cut short: {e}", cache::FILE),
        }
    }
}

/// Removes a domain's fetch from those in progress and wakes its
/// waiters, when the fetch ends however it ends.
struct Ending<'a>(&'a RefCell<HashMap<String, Rc<Event>>>, &'a str, Rc<Event>);

impl Drop for Ending<'_> {
    fn drop(&mut self) {
        self.0.borrow_mut().remove(self.1);
        self.2.set();
    }
}
