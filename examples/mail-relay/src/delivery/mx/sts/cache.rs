//! The policy cache: each domain's last policy with its TXT `id` and when
//! it was fetched, in memory and in `SPOOL/mta-sts.cache`, so that a
//! restart keeps what was learnt (RFC 8461 §5.1: a cached policy applies
//! until its `max_age` has passed, whatever DNS or the policy host says
//! meanwhile).
//!
//! The file is text, one domain a line:
//!
//! ```text
//! # mail-relay MTA-STS policies: domain id fetched(Unix s) mode max_age mx,...
//! example.org 20240101T000000 1733400000 enforce 604800 mx1.example.org,*.example.net
//! ```
//!
//! It is rewritten whole after each fetch, atomically: written to
//! `mta-sts.cache.new` (mode 0600, no symbolic link followed, as every
//! file of the relay's), synced, renamed over the old one, and the
//! directory synced; a crash leaves the old file or the new one, never a
//! mix. A line that does not parse is skipped with a warning.

use std::collections::HashMap;
use std::fs;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::policy::{Mode, Policy};

/// Its file name in the spool directory.
pub const FILE: &str = "mta-sts.cache";

/// A policy fetched, with what it was fetched for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The TXT record's `id` it was fetched for.
    pub id: String,
    /// The policy.
    pub policy: Arc<Policy>,
    /// When it was fetched.
    pub fetched: SystemTime,
}

impl Entry {
    /// Whether its `max_age` has not passed at `now`.
    pub fn fresh(&self, now: SystemTime) -> bool {
        now < self.fetched + Duration::from_secs(self.policy.max_age)
    }

    /// Whether it is due to be fetched again even with an unchanged id
    /// (half its `max_age`, at most a day, after it was fetched), so that
    /// a policy in use never expires while its host still serves it
    /// (RFC 8461 §3.3's proactive refresh).
    pub fn refresh_due(&self, now: SystemTime) -> bool {
        let after = Duration::from_secs((self.policy.max_age / 2).min(86_400));
        now >= self.fetched + after
    }
}

/// The cache of every domain's policy.
#[derive(Debug, Default)]
pub struct Cache {
    entries: HashMap<String, Entry>,
}

impl Cache {
    /// The cache kept in `spool_dir`, its expired entries left out; an
    /// empty one when there is no file.
    ///
    /// # Errors
    ///
    /// A file that exists and cannot be read.
    pub fn load(spool_dir: &Path) -> io::Result<Cache> {
        let read = |p: &Path| -> io::Result<String> {
            let mut t = String::new();
            crate::files::open_read().open(p)?.read_to_string(&mut t)?;
            Ok(t)
        };
        let text = match read(&spool_dir.join(FILE)) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Cache::default()),
            Err(e) => return Err(io::Error::new(e.kind(), format!("{FILE}: {e}"))),
        };
        let now = SystemTime::now();
        let mut entries = HashMap::new();
        for (n, line) in text.lines().enumerate() {
            if line.starts_with('#') || line.is_empty() {
                continue;
            }
            match parse_line(line) {
                Some((domain, e)) if e.fresh(now) => {
                    entries.insert(domain, e);
                }
                Some(_) => {}
                None => log::warn!("{FILE}: line {} does not parse; skipped", n + 1),
            }
        }
        Ok(Cache { entries })
    }

    /// The entry of `domain`, fresh or not.
    pub fn get(&self, domain: &str) -> Option<&Entry> {
        self.entries.get(domain)
    }

    /// Puts `entry` in for `domain`, and drops the entries expired at
    /// its fetch time.
    pub fn insert(&mut self, domain: &str, entry: Entry) {
        let now = entry.fetched;
        self.entries.retain(|_, e| e.fresh(now));
        self.entries.insert(domain.to_owned(), entry);
    }

    /// The file's text.
    pub fn text(&self) -> String {
        let mut domains: Vec<&String> = self.entries.keys().collect();
        domains.sort();
        let mut out = String::from(
            "# mail-relay MTA-STS policies: domain id fetched(Unix s) mode max_age mx,...\n",
        );
        for d in domains {
            let e = &self.entries[d];
            let at = e.fetched.duration_since(UNIX_EPOCH).unwrap_or_default();
            let mx = if e.policy.mx.is_empty() {
                "-".to_owned()
            } else {
                e.policy.mx.join(",")
            };
            out.push_str(&format!(
                "{d} {} {} {} {} {mx}\n",
                e.id,
                at.as_secs(),
                e.policy.mode,
                e.policy.max_age
            ));
        }
        out
    }
}

/// One line of the file.
fn parse_line(line: &str) -> Option<(String, Entry)> {
    let f: Vec<&str> = line.split(' ').collect();
    let [domain, id, fetched, mode, max_age, mx] = f[..] else {
        return None;
    };
    let mut text = format!("version: STSv1\nmode: {mode}\nmax_age: {max_age}\n");
    for p in mx.split(',').filter(|p| *p != "-") {
        text.push_str(&format!("mx: {p}\n"));
    }
    let policy = Policy::parse(&text).ok()?;
    if super::policy::record_id(&format!("v=STSv1; id={id}")).ok()? != id
        || Mode::parse(mode).is_none()
        || domain.is_empty()
    {
        return None;
    }
    Some((
        domain.to_owned(),
        Entry {
            id: id.to_owned(),
            policy: Arc::new(policy),
            fetched: UNIX_EPOCH + Duration::from_secs(fetched.parse().ok()?),
        },
    ))
}

/// Writes `text` as the cache file of `spool_dir`, atomically (see the
/// module docs).
///
/// # Errors
///
/// The first write, sync or rename that failed (the old file stays).
pub fn save(spool_dir: &Path, text: &str) -> io::Result<()> {
    let path: PathBuf = spool_dir.join(FILE);
    let new = spool_dir.join(format!("{FILE}.new"));
    let r = (|| {
        let mut f = crate::files::open_own()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&new)?;
        f.write_all(text.as_bytes())?;
        f.sync_data()?;
        fs::rename(&new, &path)?;
        fs::File::open(spool_dir)?.sync_all()
    })();
    if r.is_err() {
        let _ = fs::remove_file(&new);
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(id: &str, mode: &str, max_age: u64, ago: u64) -> Entry {
        let text =
            format!("version: STSv1\nmode: {mode}\nmax_age: {max_age}\nmx: *.a.test\nmx: b.test\n");
        Entry {
            id: id.into(),
            policy: Arc::new(Policy::parse(&text).unwrap()),
            fetched: SystemTime::now() - Duration::from_secs(ago),
        }
    }

    #[test]
    fn the_file_round_trips_and_drops_what_expired() {
        let dir = std::env::temp_dir().join(format!("mail-relay-sts-cache-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let mut c = Cache::default();
        c.insert("a.test", entry("id1", "enforce", 86_400, 10));
        c.insert("old.test", entry("id2", "testing", 100, 0));
        c.insert("none.test", entry("id3", "none", 86_400, 0));
        save(&dir, &c.text()).unwrap();
        assert!(!dir.join(format!("{FILE}.new")).exists());
        let back = Cache::load(&dir).unwrap();
        let a = back.get("a.test").unwrap();
        assert_eq!(a.id, "id1");
        assert_eq!(a.policy, c.get("a.test").unwrap().policy);
        assert!(back.get("none.test").is_some());
        // Expired by now in the file: left out at load.
        let mut text = c.text();
        text = text.replace(
            &format!(
                "old.test id2 {}",
                c.get("old.test")
                    .unwrap()
                    .fetched
                    .duration_since(UNIX_EPOCH)
                    .unwrap()
                    .as_secs()
            ),
            "old.test id2 1000",
        );
        text.push_str("garbage line\n");
        save(&dir, &text).unwrap();
        let back = Cache::load(&dir).unwrap();
        assert!(back.get("old.test").is_none());
        assert!(back.get("a.test").is_some());
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn freshness_and_refresh() {
        let now = SystemTime::now();
        let e = entry("x", "enforce", 3600, 1000);
        assert!(e.fresh(now) && !e.refresh_due(now));
        let e = entry("x", "enforce", 3600, 2000);
        assert!(e.fresh(now) && e.refresh_due(now));
        let e = entry("x", "enforce", 3600, 4000);
        assert!(!e.fresh(now));
        let e = entry("x", "enforce", 31_557_600, 90_000);
        assert!(e.refresh_due(now), "at most a day");
    }
}
