//! A test spawner: workers are numbered; spawning can be made to fail or
//! block per key; connecting fails for workers marked dead; shutdowns and
//! spawns are recorded.

use std::cell::{Cell, RefCell};
use std::collections::HashSet;
use std::fmt;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::Duration;

use coro_sync::Spawner;

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
        if f.fail.borrow().contains(key) {
            return Err(Failed(format!("cannot start {key}")));
        }
        f.spawned.set(f.spawned.get() + 1);
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
