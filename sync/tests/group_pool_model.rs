//! GroupPool against a reference model: thousands of random get / close /
//! detach / clean / restart / set_max / fail-the-next-spawns /
//! reset-backoff steps; after each, the pool's counts, group lists (order,
//! sessions, requests served), inactive list and failing keys must be the
//! model's, and the document's invariants must hold. A failed spawn
//! removes its group (the document's rule) and its error reaches the
//! caller that started it; three in a row put the key in backoff (an hour
//! here, so only a reset ends it).

mod util;

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use coro_runtime as coro;
use coro_sync::{GetError, GroupOptions, GroupPool, Session, SpawnBackoff};
use util::workers::{Farm, Spawn};
use util::{run, settle};

const KEYS: [&str; 4] = ["a", "b", "c", "d"];
const MAX_REQUESTS: u64 = 3;
/// Failures in a row before a key backs off.
const AFTER: u32 = 3;

/// xorshift64*: a fixed sequence per seed.
struct Rng(u64);
impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33) as usize % n
    }
}

#[derive(Clone, Debug, PartialEq)]
struct W {
    id: u64,
    sessions: usize,
    processed: u64,
}

/// The reference model: plain vectors, no cleverness.
#[derive(Default)]
struct Model {
    /// Each group's workers in list order.
    groups: HashMap<&'static str, Vec<W>>,
    /// Idle workers, least recently used first.
    inactive: Vec<(&'static str, u64)>,
    active: usize,
    max: usize,
    next_id: u64,
    restart: HashMap<&'static str, bool>,
    /// Consecutive failed spawns by key.
    failing: HashMap<&'static str, u32>,
    /// The next this many spawns fail.
    fail_next: u32,
}

#[derive(Debug)]
enum Predict {
    Got(u64),
    Blocked,
    /// The caller's own spawn failed.
    SpawnFailed,
    /// The key is in backoff after this many failures.
    Backoff(u32),
}

impl Model {
    fn count(&self) -> usize {
        self.groups.values().map(Vec::len).sum()
    }

    fn detach(&mut self, key: &'static str, id: u64) {
        let g = self.groups.get_mut(key).unwrap();
        let i = g.iter().position(|w| w.id == id).unwrap();
        let w = g.remove(i);
        if w.sessions == 0 {
            self.inactive.retain(|x| x.1 != id);
        } else {
            self.active -= 1;
        }
        if g.is_empty() {
            self.groups.remove(key);
        }
    }

    fn detach_group(&mut self, key: &'static str) {
        if let Some(g) = self.groups.remove(key) {
            for w in g {
                if w.sessions == 0 {
                    self.inactive.retain(|x| x.1 != w.id);
                } else {
                    self.active -= 1;
                }
            }
        }
    }

    /// Whether the next spawn (for `key`) fails; counts it in the key's run.
    fn spawn_fails(&mut self, key: &'static str) -> bool {
        if self.fail_next > 0 {
            self.fail_next -= 1;
            *self.failing.entry(key).or_default() += 1;
            true
        } else {
            self.failing.remove(key);
            false
        }
    }

    fn in_backoff(&self, key: &'static str) -> Option<u32> {
        self.failing.get(key).copied().filter(|&n| n >= AFTER)
    }

    fn spawn(&mut self, key: &'static str) {
        self.next_id += 1;
        let id = self.next_id;
        self.groups.entry(key).or_default().insert(
            0,
            W {
                id,
                sessions: 0,
                processed: 0,
            },
        );
        self.inactive.push((key, id));
    }

    /// What `get(key)` does, once spawns have finished.
    fn get(&mut self, key: &'static str) -> Predict {
        if std::mem::take(self.restart.entry(key).or_default()) {
            self.detach_group(key);
        }
        if !self.groups.contains_key(key) {
            if let Some(n) = self.in_backoff(key) {
                return Predict::Backoff(n);
            }
            if self.active >= self.max {
                return Predict::Blocked;
            }
            if self.count() >= self.max {
                if self.inactive.is_empty() {
                    return Predict::Blocked;
                }
                let (k, id) = self.inactive[0];
                self.detach(k, id);
            }
            if self.spawn_fails(key) {
                return Predict::SpawnFailed;
            }
            self.spawn(key);
        }
        let count = self.count();
        let backoff = self.in_backoff(key).is_some();
        let g = self.groups.get_mut(key).unwrap();
        if g[0].sessions == 0 {
            let mut w = g.remove(0);
            w.sessions = 1;
            let id = w.id;
            g.push(w);
            self.inactive.retain(|x| x.1 != id);
            self.active += 1;
            return Predict::Got(id);
        }
        let spawn = count < self.max && !backoff;
        let best = (0..g.len()).min_by_key(|&i| g[i].sessions).unwrap();
        let mut w = g.remove(best);
        w.sessions += 1;
        let id = w.id;
        g.push(w);
        if spawn {
            // In the background: a failure removes the whole group, the
            // worker just handed out with it (its session goes on).
            if self.spawn_fails(key) {
                self.detach_group(key);
            } else {
                self.spawn(key);
            }
        }
        Predict::Got(id)
    }

    fn close(&mut self, key: &'static str, id: u64) {
        let Some(g) = self.groups.get_mut(key) else {
            return;
        };
        let Some(i) = g.iter().position(|w| w.id == id) else {
            return;
        };
        g[i].processed += 1;
        if g[i].processed >= MAX_REQUESTS {
            self.detach(key, id);
            return;
        }
        g[i].sessions -= 1;
        if g[i].sessions == 0 {
            let w = g.remove(i);
            g.insert(0, w);
            self.inactive.push((key, id));
            self.active -= 1;
        }
    }

    fn clean(&mut self) {
        for (k, id) in self.inactive.clone() {
            self.detach(k, id);
        }
    }
}

#[track_caller]
fn compare(pool: &GroupPool<Spawn>, m: &Model, step: usize) {
    pool.check_invariants();
    assert_eq!(pool.count(), m.count(), "count after step {step}");
    assert_eq!(pool.active(), m.active, "active after step {step}");
    assert_eq!(pool.spawning(), 0, "spawns done after step {step}");
    assert_eq!(
        pool.inactive(),
        m.inactive,
        "inactive list after step {step}"
    );
    for k in KEYS {
        let want: Vec<(u64, usize, u64)> = m
            .groups
            .get(k)
            .map(|g| g.iter().map(|w| (w.id, w.sessions, w.processed)).collect())
            .unwrap_or_default();
        assert_eq!(pool.workers(&k), want, "group {k} after step {step}");
        assert_eq!(
            pool.group_size(&k),
            m.groups.get(k).map(Vec::len),
            "size of {k}"
        );
    }
    let stats = pool.stats();
    let mut failing: Vec<(&str, u32, bool)> = stats
        .failing
        .iter()
        .map(|f| (f.key, f.failures, f.retry_in.is_some()))
        .collect();
    failing.sort();
    let mut want: Vec<(&str, u32, bool)> = m
        .failing
        .iter()
        .map(|(&k, &n)| (k, n, n >= AFTER))
        .collect();
    want.sort();
    assert_eq!(failing, want, "failing keys after step {step}");
}

fn touch(dir: &std::path::Path, key: &str, n: u64) {
    let f = std::fs::File::create(dir.join(key).join("restart.txt")).unwrap();
    f.set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000 + n))
        .unwrap();
}

fn model_run(seed: u64, steps: usize) {
    run(move || {
        let dir = std::env::temp_dir().join(format!("coro-gp-model-{}-{seed}", std::process::id()));
        for k in KEYS {
            std::fs::create_dir_all(dir.join(k)).unwrap();
        }
        let farm = std::rc::Rc::new(Farm::default());
        *farm.restart_root.borrow_mut() = Some(dir.clone());
        let opts = GroupOptions {
            max_requests: MAX_REQUESTS,
            min_processes: 0,
        };
        let hour = Duration::from_secs(3600);
        let pool = GroupPool::builder()
            .max(4)
            .max_idle_time(Duration::ZERO)
            .options(opts)
            .spawn_backoff(SpawnBackoff {
                after: AFTER,
                initial: hour,
                max: hour,
            })
            .build(Spawn(farm.clone()))
            .unwrap();
        let mut m = Model {
            max: 4,
            ..Model::default()
        };
        let mut rng = Rng(seed);
        let mut held: Vec<Session<Spawn>> = Vec::new();
        let (mut gets, mut blocked, mut failed, mut backoffs) = (0, 0, 0, 0);
        for step in 0..steps {
            match rng.below(100) {
                0..=39 => {
                    let key = KEYS[rng.below(KEYS.len())];
                    let p = pool.clone();
                    let h = coro::spawn(move || p.get(&key));
                    settle();
                    match m.get(key) {
                        Predict::Got(id) => {
                            assert!(h.is_finished(), "step {step}: get({key}) should not wait");
                            let s = h
                                .join()
                                .unwrap()
                                .unwrap_or_else(|e| panic!("step {step}: {e}"));
                            assert_eq!(s.worker_id(), id, "step {step}: get({key}) picked");
                            held.push(s);
                            gets += 1;
                        }
                        Predict::Blocked => {
                            assert!(!h.is_finished(), "step {step}: get({key}) should wait");
                            h.thread().interrupt().unwrap();
                            let r = h.join().unwrap();
                            assert!(matches!(
                                r,
                                Err(GetError::Wait(coro::WaitError::Interrupted))
                            ));
                            blocked += 1;
                        }
                        Predict::SpawnFailed => {
                            assert!(h.is_finished(), "step {step}: get({key}) should fail");
                            match h.join().unwrap() {
                                Err(GetError::Spawn(e)) => assert_eq!(e.0, format!("cannot start {key}")),
                                other => panic!("step {step}: get({key}): expected its spawn's error, got {other:?}"),
                            }
                            failed += 1;
                        }
                        Predict::Backoff(n) => {
                            assert!(
                                h.is_finished(),
                                "step {step}: get({key}) should fail at once"
                            );
                            match h.join().unwrap() {
                                Err(GetError::Backoff { failures, .. }) => {
                                    assert_eq!(failures, n, "step {step}")
                                }
                                other => panic!(
                                    "step {step}: get({key}): expected a backoff, got {other:?}"
                                ),
                            }
                            backoffs += 1;
                        }
                    }
                }
                40..=69 if !held.is_empty() => {
                    let s = held.swap_remove(rng.below(held.len()));
                    m.close(s.key(), s.worker_id());
                    drop(s);
                }
                70..=79 => {
                    let all: Vec<(&'static str, u64)> = m
                        .groups
                        .iter()
                        .flat_map(|(k, g)| g.iter().map(move |w| (*k, w.id)))
                        .collect();
                    if !all.is_empty() {
                        let (k, id) = all[rng.below(all.len())];
                        m.detach(k, id);
                        assert!(pool.detach(id));
                    }
                }
                80..=85 => {
                    pool.set_max_idle_time(Duration::from_nanos(1));
                    coro::sleep(Duration::from_micros(10)).unwrap();
                    pool.clean();
                    pool.set_max_idle_time(Duration::ZERO);
                    m.clean();
                }
                86..=88 => {
                    let n = 1 + rng.below(3) as u32;
                    farm.fail_next.set(n);
                    m.fail_next = n;
                }
                89 | 90 => {
                    let key = KEYS[rng.below(KEYS.len())];
                    assert_eq!(pool.reset_backoff(&key), m.failing.remove(key).is_some());
                }
                91..=94 => {
                    let key = KEYS[rng.below(KEYS.len())];
                    touch(&dir, key, step as u64);
                    m.restart.insert(key, true);
                }
                _ => {
                    let n = 1 + rng.below(5);
                    pool.set_max(n);
                    m.max = n;
                }
            }
            settle();
            compare(&pool, &m, step);
        }
        assert!(
            gets > steps / 5 && blocked > 0 && failed > 0 && backoffs > 0,
            "the run covered all: {gets} gets, {blocked} waits, {failed} failed spawns, {backoffs} backoffs"
        );
        drop(held);
        std::fs::remove_dir_all(&dir).unwrap();
    });
}

#[test]
fn random_steps_match_the_model_seed_1() {
    model_run(0x9E37_79B9_7F4A_7C15, 3000);
}

#[test]
fn random_steps_match_the_model_seed_2() {
    model_run(0xD1B5_4A32_D192_ED03, 3000);
}

#[test]
fn random_steps_match_the_model_seed_3() {
    model_run(0x2545_F491_4F6C_DD1D, 3000);
}
