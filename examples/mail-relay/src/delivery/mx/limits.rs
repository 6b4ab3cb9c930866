//! Per recipient domain: how many deliveries at once, how fast, and
//! whether the domain is suspended because none of its mail exchangers
//! could be reached (Postfix's dead destination).

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::time::Duration;

use coro::clock::{self, Instant};
use coro::sync::Semaphore;
use coro::WaitError;

/// One domain's state.
#[derive(Debug)]
pub struct Domain {
    /// Deliveries at once.
    pub slots: Semaphore,
    /// When the next delivery may start (the rate delay).
    next_start: Cell<Instant>,
    /// Until when it is suspended, and why.
    suspended: RefCell<Option<(Instant, String)>>,
}

/// Every domain's state.
#[derive(Debug)]
pub struct Limits {
    concurrency: usize,
    rate_delay: Duration,
    dead_time: Duration,
    /// By lower-cased domain; an entry goes when it is idle and holds
    /// nothing to remember.
    domains: RefCell<HashMap<String, Rc<Domain>>>,
}

impl Limits {
    pub fn new(concurrency: usize, rate_delay: Duration, dead_time: Duration) -> Limits {
        Limits {
            concurrency,
            rate_delay,
            dead_time,
            domains: RefCell::new(HashMap::new()),
        }
    }

    /// `domain`'s state (made on first use).
    pub fn domain(&self, domain: &str) -> Rc<Domain> {
        self.domains
            .borrow_mut()
            .entry(domain.to_owned())
            .or_insert_with(|| {
                Rc::new(Domain {
                    slots: Semaphore::new(self.concurrency),
                    next_start: Cell::new(clock::now()),
                    suspended: RefCell::new(None),
                })
            })
            .clone()
    }

    /// Why `domain` is suspended, while it is.
    pub fn suspended(&self, domain: &str) -> Option<String> {
        let d = self.domains.borrow().get(domain).cloned()?;
        let s = d.suspended.borrow();
        s.as_ref()
            .filter(|(until, _)| *until > clock::now())
            .map(|(_, why)| why.clone())
    }

    /// Suspends `domain` for the dead-destination time.
    pub fn suspend(&self, domain: &str, why: &str) {
        let d = self.domain(domain);
        log::warn!(
            "{domain}: delivery suspended for {:?}: {why}; mail for it is deferred meanwhile",
            self.dead_time
        );
        *d.suspended.borrow_mut() = Some((clock::now() + self.dead_time, why.to_owned()));
    }

    /// Lifts every suspension (`flush`).
    pub fn resume(&self) {
        for d in self.domains.borrow().values() {
            d.suspended.borrow_mut().take();
        }
    }

    /// Waits for `d`'s rate delay, if any, and books the next start.
    pub fn pace(&self, d: &Domain) -> Result<(), WaitError> {
        if self.rate_delay.is_zero() {
            return Ok(());
        }
        loop {
            let now = clock::now();
            let next = d.next_start.get();
            if next <= now {
                d.next_start.set(now + self.rate_delay);
                return Ok(());
            }
            coro::sleep(next.duration_since(now))?;
        }
    }

    /// Forgets `domain` if nothing is in flight for it and there is
    /// nothing to remember (no suspension, no pending rate delay).
    pub fn tidy(&self, domain: &str) {
        let mut map = self.domains.borrow_mut();
        let Some(d) = map.get(domain) else { return };
        let now = clock::now();
        let idle = Rc::strong_count(d) == 1
            && d.slots.available() == self.concurrency
            && d.next_start.get() <= now
            && d.suspended.borrow().as_ref().is_none_or(|(t, _)| *t <= now);
        if idle {
            map.remove(domain);
        }
    }

    /// Domains remembered.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.domains.borrow().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn concurrency_suspension_and_tidying() {
        coro::run(|| {
            let l = Limits::new(2, Duration::ZERO, Duration::from_secs(60));
            let d = l.domain("a.test");
            let p1 = d.slots.try_acquire(1).unwrap();
            let p2 = d.slots.try_acquire(1).unwrap();
            assert!(d.slots.try_acquire(1).is_err(), "the third waits");
            drop(p1);
            assert!(l.suspended("a.test").is_none());
            l.suspend("a.test", "no route");
            assert_eq!(l.suspended("a.test").as_deref(), Some("no route"));
            l.resume();
            assert!(l.suspended("a.test").is_none());
            drop(p2);
            drop(d);
            l.tidy("a.test");
            assert_eq!(l.len(), 0);
        });
    }

    #[test]
    fn rate_delay_spaces_starts() {
        coro::run(|| {
            let l = Limits::new(20, Duration::from_millis(50), Duration::from_secs(60));
            let d = l.domain("a.test");
            let t0 = clock::now();
            for _ in 0..3 {
                l.pace(&d).unwrap();
            }
            assert!(
                t0.elapsed() >= Duration::from_millis(100),
                "{:?}",
                t0.elapsed()
            );
        });
    }
}
