//! A test spawner: workers are numbered; spawning can be made to fail (per
//! key, or the next n spawns whatever their key), to sleep, or to wait at a
//! gate (a coro semaphore: each permit lets one spawn through);
//! connecting fails for workers marked dead; shutdowns and spawns (and
//! what became of each) are recorded.

use std::cell::{Cell, RefCell};
use std::collections::HashSet;
use std::fmt;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::Duration;

use coro_sync::{Semaphore, Spawner};

#[derive(Debug)]
pub struct Worker {
    pub n: u32,
    pub key: &'static str,
}

#[derive(Debug)]
pub struct Failed(pub String);

impl fmt::Display for Failed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Failed {}

#[derive(Default)]
pub struct Farm {
    pub spawned: Cell<u32>,
    /// Keys whose spawns fail.
    pub fail: RefCell<HashSet<&'static str>>,
    /// Each spawn blocks this long.
    pub delay: Cell<Duration>,
    /// Workers whose connect fails.
    pub dead: RefCell<HashSet<u32>>,
    /// Workers shut down, in order.
    pub shut: RefCell<Vec<u32>>,
    /// Where each key's restart.txt lives.
    pub restart_root: RefCell<Option<PathBuf>>,
    /// Spawns that ran, by spawner thread name.
    pub spawn_threads: RefCell<Vec<String>>,
    /// The next this many spawns fail, whatever their key.
    pub fail_next: Cell<u32>,
    /// While set, each spawn first takes (and keeps) a permit of it.
    pub gate: RefCell<Option<Rc<Semaphore>>>,
    /// What each spawn did, in order: `key: worker N` or `key: failed`.
    pub outcomes: RefCell<Vec<String>>,
}

impl Farm {
    /// Makes every spawn wait at a gate; [`open`](Farm::open) lets them
    /// through one by one.
    pub fn close_gate(&self) {
        *self.gate.borrow_mut() = Some(Rc::new(Semaphore::new(0)));
    }

    /// Lets `n` spawns through the gate.
    pub fn open(&self, n: usize) {
        self.gate
            .borrow()
            .as_ref()
            .expect("the gate is closed")
            .release(n);
    }

    /// Spawns waiting at the gate.
    pub fn at_gate(&self) -> usize {
        self.gate.borrow().as_ref().map_or(0, |g| g.waiters())
    }
}

#[derive(Clone, Default)]
pub struct Spawn(pub Rc<Farm>);

impl Spawner for Spawn {
    type Key = &'static str;
    type Worker = Worker;
    type Conn = u32;
    type Error = Failed;

    fn spawn(&self, key: &&'static str) -> Result<Worker, Failed> {
        let f = &self.0;
        let name = coro_runtime::current().name().unwrap_or("").to_string();
        f.spawn_threads.borrow_mut().push(name);
        let d = f.delay.get();
        if !d.is_zero() {
            coro_runtime::sleep(d).map_err(|e| Failed(format!("spawn stopped: {e}")))?;
        }
        let gate = f.gate.borrow().clone();
        if let Some(gate) = gate {
            gate.acquire(1)
                .map_err(|e| Failed(format!("spawn stopped at the gate: {e}")))?
                .forget();
        }
        let n = f.fail_next.get();
        if n > 0 || f.fail.borrow().contains(key) {
            f.fail_next.set(n.saturating_sub(1));
            f.outcomes.borrow_mut().push(format!("{key}: failed"));
            return Err(Failed(format!("cannot start {key}")));
        }
        f.spawned.set(f.spawned.get() + 1);
        f.outcomes
            .borrow_mut()
            .push(format!("{key}: worker {}", f.spawned.get()));
        Ok(Worker {
            n: f.spawned.get(),
            key,
        })
    }

    fn connect(&self, _: &&'static str, w: &Worker) -> Result<u32, Failed> {
        if self.0.dead.borrow().contains(&w.n) {
            Err(Failed(format!("worker {} is dead", w.n)))
        } else {
            Ok(w.n)
        }
    }

    fn shutdown(&self, w: Worker) {
        self.0.shut.borrow_mut().push(w.n);
    }

    fn restart_dir(&self, key: &&'static str) -> Option<PathBuf> {
        self.0.restart_root.borrow().as_ref().map(|r| r.join(key))
    }
}

/// A pool of test workers.
pub type Pool = coro_sync::GroupPool<Spawn>;

/// What each client got, as text ("app: worker 1", or the error).
pub type Log = Rc<RefCell<Vec<String>>>;

/// A pool built from `b` on a fresh farm.
pub fn pool(b: coro_sync::GroupPoolBuilder<Spawn>) -> (Pool, Rc<Farm>) {
    let farm = Rc::new(Farm::default());
    (b.build(Spawn(farm.clone())).unwrap(), farm)
}

/// A green thread that gets a session of `key`, logs the worker it got (or
/// the error) and holds the session until `hold` is set.
pub fn client(
    p: &Pool,
    key: &'static str,
    log: &Log,
    hold: &Rc<coro_sync::Event>,
) -> coro_runtime::JoinHandle<()> {
    let (p, log, hold) = (p.clone(), log.clone(), hold.clone());
    coro_runtime::spawn(move || match p.get(&key) {
        Ok(s) => {
            log.borrow_mut().push(format!("{key}: worker {}", *s));
            let _ = hold.wait();
            drop(s);
        }
        Err(e) => log.borrow_mut().push(format!("{key}: {e}")),
    })
}
