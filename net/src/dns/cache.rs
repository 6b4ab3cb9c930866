//! The answer cache: what a name/type resolved to, until it expires, with
//! a bound on its size. The resolver says when each answer expires (the
//! earliest expiry of the records it rests on).
//!
//! # Design
//!
//! A map from (name, type) to the answer and its expiry, and beside it an
//! index ordered by expiry. An expired entry is dropped when it is looked
//! up; when the cache is full, the entry that expires first goes (expired
//! ones first of all), so a flood of distinct names evicts the short-lived
//! answers and never grows the cache past its bound.

use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;

use coro_runtime::clock::{self, Instant};
use hickory_proto::rr::{Name, RData, RecordType};

/// What a cache entry is keyed by: the lower-cased name and the type.
pub(crate) type Key = (Name, RecordType);

/// An answer to a question, as cached.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Answer {
    /// The records of the type asked for at the end of the CNAME chain;
    /// empty when the name exists without such records (NODATA).
    Records(Rc<Vec<RData>>),
    /// The name does not exist (NXDOMAIN).
    NxDomain,
}

/// The cache.
#[derive(Debug)]
pub(crate) struct Cache {
    /// Entries at most; 0 caches nothing.
    capacity: usize,
    /// Key → (expiry, sequence number in `by_expiry`, answer).
    map: HashMap<Key, (Instant, u64, Answer)>,
    /// (expiry, sequence) → key, for eviction. Holds exactly the entries of
    /// `map`.
    by_expiry: BTreeMap<(Instant, u64), Key>,
    /// The next sequence number (ties of expiry kept apart).
    seq: u64,
}

impl Cache {
    pub fn new(capacity: usize) -> Cache {
        Cache {
            capacity,
            map: HashMap::new(),
            by_expiry: BTreeMap::new(),
            seq: 0,
        }
    }

    /// The answer for `key` while it is fresh.
    pub fn get(&mut self, key: &Key) -> Option<Answer> {
        let &(expiry, seq, _) = self.map.get(key)?;
        if expiry <= clock::now() {
            self.map.remove(key);
            self.by_expiry.remove(&(expiry, seq));
            return None;
        }
        self.map.get(key).map(|e| e.2.clone())
    }

    /// Keeps `answer` until `expiry`, in place of any older answer for
    /// `key`. One that has expired already is not kept, and the older
    /// answer goes all the same: the newest answer is the one that holds.
    pub fn insert(&mut self, key: Key, answer: Answer, expiry: Instant) {
        if let Some((expiry, seq, _)) = self.map.remove(&key) {
            self.by_expiry.remove(&(expiry, seq));
        }
        if self.capacity == 0 || expiry <= clock::now() {
            return;
        }
        while self.map.len() >= self.capacity {
            let Some((_, k)) = self.by_expiry.pop_first() else {
                break;
            };
            self.map.remove(&k);
        }
        self.seq += 1;
        self.by_expiry.insert((expiry, self.seq), key.clone());
        self.map.insert(key, (expiry, self.seq, answer));
    }

    /// Entries held (some may have expired, not yet looked at).
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Drops every entry.
    pub fn clear(&mut self) {
        self.map.clear();
        self.by_expiry.clear();
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn key(n: &str) -> Key {
        (Name::from_ascii(n).unwrap(), RecordType::A)
    }

    fn after(secs: u64) -> Instant {
        clock::now() + Duration::from_secs(secs)
    }

    #[test]
    fn bounded_and_expiring() {
        let mut c = Cache::new(2);
        c.insert(key("a."), Answer::NxDomain, after(30));
        c.insert(key("b."), Answer::NxDomain, after(10));
        c.insert(key("c."), Answer::NxDomain, clock::now()); // expired: not cached
        assert_eq!(c.len(), 2);
        c.insert(key("d."), Answer::NxDomain, after(3600)); // evicts b, the first to expire
        assert_eq!(c.len(), 2);
        assert!(c.get(&key("b.")).is_none());
        assert!(c.get(&key("a.")).is_some() && c.get(&key("d.")).is_some());
        assert_eq!(c.map.len(), c.by_expiry.len());
        // A newer answer that cannot be kept still replaces the older one.
        c.insert(key("a."), Answer::NxDomain, clock::now());
        assert!(c.get(&key("a.")).is_none());
        assert_eq!((c.len(), c.by_expiry.len()), (1, 1));
        c.clear();
        assert_eq!(c.len(), 0);
    }
}
