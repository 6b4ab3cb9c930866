//! Blocking offload: run a closure on a pool of OS threads and suspend only
//! the calling green thread until it returns.
//!
//! # Implementation
//!
//! Each runtime owns a pool. Worker OS threads are started on demand, up to
//! the runtime's `blocking_threads` bound (512 by default), and leave after
//! `blocking_keep_alive` idle (10 s by default), so a burst of slow calls
//! gets threads and a quiet server gives them back. A job writes its result
//! into a shared slot, pushes its key onto the runtime's completion list and
//! wakes the runtime's loop through its `mio::Waker`; the loop then wakes the
//! green thread waiting for that key. fsync, name lookup and file I/O go
//! through here.
//!
//! * **Reservation.** A submitted job claims an idle worker at once (the
//!   idle count drops when the job is submitted, not when the worker wakes),
//!   so jobs submitted together start together on a warm pool.
//! * **Cancellation.** A caller that stops waiting (timeout, interrupt,
//!   shutdown) takes its job out of the queue if no worker started it; a job
//!   already running cannot be stopped, and its result is dropped when it
//!   ends.
//! * **Bounded queue.** At most `MAX_QUEUED` jobs wait for a worker; a caller
//!   beyond that waits (in FIFO order, honouring timeouts and interrupts)
//!   until jobs complete, so a stuck resolver cannot grow memory without
//!   bound.

use std::any::Any;
use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::panic::{self, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use crate::context;
use crate::error::WaitError;
use crate::task::Waiter;

type Job = Box<dyn FnOnce() + Send + 'static>;

/// Default idle time after which a worker thread exits.
pub(crate) const DEFAULT_KEEP_ALIVE: Duration = Duration::from_secs(10);

/// Default bound on worker threads (tokio's default as well).
pub(crate) const DEFAULT_MAX_THREADS: usize = 512;

/// Jobs that may wait for a worker before callers wait to submit.
const MAX_QUEUED: usize = 4096;

struct PoolState {
    /// Jobs not yet taken by a worker, in submission order; a caller that
    /// gives up removes its own by sequence number.
    queue: BTreeMap<u64, Job>,
    next_seq: u64,
    /// Worker threads alive.
    threads: usize,
    /// Workers waiting for work that no submitted job has claimed yet.
    idle: usize,
    /// Claims made on idle workers that no worker has taken up yet.
    notified: usize,
    shutdown: bool,
}

/// Shared between the runtime and its worker threads.
pub(crate) struct Shared {
    state: Mutex<PoolState>,
    cv: Condvar,
    max_threads: usize,
    keep_alive: Duration,
    /// Keys of finished jobs, drained by the loop.
    done: Mutex<Vec<usize>>,
    waker: Arc<mio::Waker>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, PoolState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The runtime side of the pool.
pub(crate) struct BlockingPool {
    shared: Arc<Shared>,
    /// Green threads waiting for a job, by key.
    waiting: RefCell<slab::Slab<Option<Waiter>>>,
    /// Green threads waiting for room in the queue, in arrival order.
    room: RefCell<VecDeque<Waiter>>,
}

impl BlockingPool {
    pub(crate) fn new(
        max_threads: usize,
        keep_alive: Duration,
        waker: Arc<mio::Waker>,
    ) -> BlockingPool {
        BlockingPool {
            shared: Arc::new(Shared {
                state: Mutex::new(PoolState {
                    queue: BTreeMap::new(),
                    next_seq: 0,
                    threads: 0,
                    idle: 0,
                    notified: 0,
                    shutdown: false,
                }),
                cv: Condvar::new(),
                max_threads,
                keep_alive,
                done: Mutex::new(Vec::new()),
                waker,
            }),
            waiting: Default::default(),
            room: Default::default(),
        }
    }

    /// Jobs submitted and not yet collected.
    pub(crate) fn in_flight(&self) -> usize {
        self.waiting.borrow().len()
    }

    /// Whether a live green thread waits for a job (or for room to submit
    /// one): a completion may still wake someone. A leaked thread's entry
    /// does not count.
    pub(crate) fn awaited(&self) -> bool {
        let alive = |w: &Waiter| !w.is_dead();
        self.waiting
            .borrow()
            .iter()
            .any(|(_, w)| w.as_ref().is_some_and(alive))
            || self.room.borrow().iter().any(alive)
    }

    /// Worker threads alive and jobs waiting for one.
    pub(crate) fn threads_and_queued(&self) -> (usize, usize) {
        let st = self.shared.lock();
        (st.threads, st.queue.len())
    }

    /// Wakes the green threads whose jobs finished, and as many threads
    /// waiting for room in the queue.
    pub(crate) fn drain_completions(&self) {
        let done = std::mem::take(&mut *self.shared.done.lock().unwrap_or_else(|e| e.into_inner()));
        {
            let waiting = self.waiting.borrow();
            for &key in &done {
                if let Some(Some(w)) = waiting.get(key) {
                    w.wake();
                }
            }
        }
        self.make_room(done.len());
    }

    /// Wakes up to `n` green threads waiting for room in the queue, skipping
    /// any that already gave up or were woken otherwise.
    fn make_room(&self, n: usize) {
        let mut woken = 0;
        while woken < n {
            let next = self.room.borrow_mut().pop_front();
            match next {
                Some(w) => woken += usize::from(w.wake()),
                None => break,
            }
        }
    }

    /// Forgets the waiters and jobs a run left once its threads are all
    /// gone (a thread leaked at shutdown never takes its own out). A job
    /// still running finishes on its own, and its completion finds no one
    /// (or, its key reused, wakes a later call that finds its own job
    /// unfinished and waits again).
    pub(crate) fn end_of_run(&self) {
        let waiting = std::mem::take(&mut *self.waiting.borrow_mut());
        let room = std::mem::take(&mut *self.room.borrow_mut());
        drop((waiting, room));
        // Jobs no worker started: only this runtime's threads submit, and
        // none is left to collect them (a thread that stopped waiting
        // takes its own out; one leaked at shutdown never does). Dropped
        // unrun, as a cut-short wait's, with the lock released and under
        // `caught` (their destructors are user code).
        let queued = std::mem::take(&mut self.shared.lock().queue);
        for (_, job) in queued {
            crate::panic_hook::caught(move || drop(job));
        }
    }

    /// Queues `job` unless the queue is full; returns its sequence number.
    fn try_submit(&self, job: Job) -> Result<u64, Job> {
        let mut st = self.shared.lock();
        if st.queue.len() >= MAX_QUEUED {
            return Err(job);
        }
        let seq = st.next_seq;
        st.next_seq += 1;
        st.queue.insert(seq, job);
        if st.idle > 0 {
            // Claim an idle worker now, so the next job does not count it.
            st.idle -= 1;
            st.notified += 1;
            self.shared.cv.notify_one();
        } else if st.threads < self.shared.max_threads {
            st.threads += 1;
            let shared = self.shared.clone();
            let spawned = std::thread::Builder::new()
                .name("coro-blocking".into())
                .spawn(move || worker(shared));
            if spawned.is_err() {
                st.threads -= 1;
                if st.threads == 0 {
                    // No worker at all: run it here rather than never.
                    let job = st.queue.remove(&seq).expect("just queued");
                    drop(st);
                    job();
                }
            }
        }
        Ok(seq)
    }

    /// Takes a job out of the queue if no worker started it; the room it
    /// leaves goes to the next caller waiting for some.
    fn cancel(&self, seq: u64) -> bool {
        let job = self.shared.lock().queue.remove(&seq);
        // Dropped with the lock released: its destructors are user code,
        // which may use the pool (or `stats`) again.
        let removed = job.is_some();
        drop(job);
        if removed {
            self.make_room(1);
        }
        removed
    }
}

impl Drop for BlockingPool {
    fn drop(&mut self) {
        let mut st = self.shared.lock();
        st.shutdown = true;
        // Every waiter is a worker, counted from before it starts until it
        // leaves; with none, skip the notify (a system call every time).
        if st.threads > 0 {
            self.shared.cv.notify_all();
        }
    }
}

fn worker(shared: Arc<Shared>) {
    let mut st = shared.lock();
    loop {
        if let Some((_, job)) = st.queue.pop_first() {
            drop(st);
            job();
            st = shared.lock();
            continue;
        }
        if st.shutdown {
            break;
        }
        st.idle += 1;
        loop {
            let (guard, res) = shared
                .cv
                .wait_timeout(st, shared.keep_alive)
                .unwrap_or_else(|e| e.into_inner());
            st = guard;
            if st.notified > 0 {
                // Claimed by a submitter, which took us off the idle count.
                st.notified -= 1;
                break;
            }
            if st.shutdown || res.timed_out() {
                st.idle -= 1;
                st.threads -= 1;
                return;
            }
        }
    }
    st.threads -= 1;
}

type Slot<T> = Mutex<Option<Result<T, Box<dyn Any + Send>>>>;

/// Runs `f` on the runtime's blocking-offload pool and suspends only this
/// green thread until it returns.
///
/// Use it for calls that would block the OS thread: `fsync`, file I/O, name
/// lookup, a synchronous library. The other green threads keep running.
///
/// # Pool
///
/// Worker threads start on demand, up to
/// [`RuntimeBuilder::blocking_threads`](crate::RuntimeBuilder::blocking_threads)
/// (512 by default), and exit after
/// [`RuntimeBuilder::blocking_keep_alive`](crate::RuntimeBuilder::blocking_keep_alive)
/// idle (10 s by default). Jobs beyond the running ones wait in a FIFO queue
/// of at most 4 096; a caller beyond that waits for room.
///
/// # Errors
///
/// [`WaitError`] if the wait is cut short by a timeout or an interruption.
/// A job no worker has started yet is then dropped without running; one that
/// is running cannot be cancelled, and its result is dropped when it
/// finishes.
///
/// # Panics
///
/// Outside a runtime. A panic inside `f` is resumed in the calling green
/// thread.
///
/// # Examples
///
/// ```
/// coro::run(|| {
///     let n = coro::blocking(|| std::fs::read_dir(".").map(|d| d.count()).unwrap_or(0)).unwrap();
///     println!("{n} entries");
/// });
/// ```
#[track_caller]
pub fn blocking<F, T>(f: F) -> Result<T, WaitError>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let slot: Arc<Slot<T>> = Arc::new(Mutex::new(None));
    let key = context::with_sched("coro::blocking", |s| {
        s.blocking.waiting.borrow_mut().insert(None)
    });
    // Leaves the waiting table (and the queue, if the job never started) on
    // every path out: return, error, or an unwind at shutdown.
    struct Pending {
        key: usize,
        seq: Option<u64>,
    }
    impl Drop for Pending {
        fn drop(&mut self) {
            context::try_with_sched(|s| {
                if let Some(seq) = self.seq {
                    s.blocking.cancel(seq);
                }
                s.blocking.waiting.borrow_mut().try_remove(self.key);
            });
        }
    }
    let mut pending = Pending { key, seq: None };
    let mut job: Job = {
        let out = slot.clone();
        let shared = context::with_sched("coro::blocking", |s| s.blocking.shared.clone());
        Box::new(move || {
            let r = panic::catch_unwind(AssertUnwindSafe(f));
            *out.lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
            shared
                .done
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(key);
            let _ = shared.waker.wake();
        })
    };
    // Submit, waiting for room in the queue if it is full.
    loop {
        match context::with_sched("coro::blocking", |s| s.blocking.try_submit(job)) {
            Ok(seq) => {
                pending.seq = Some(seq);
                break;
            }
            Err(back) => {
                job = back;
                context::with_sched("coro::blocking", |s| {
                    s.blocking
                        .room
                        .borrow_mut()
                        .push_back(Waiter::current("coro::blocking"))
                });
                let r = crate::suspend::park_as("blocking pool queue");
                context::with_sched("coro::blocking", |s| {
                    s.blocking.room.borrow_mut().retain(Waiter::is_waiting);
                    if r.is_err() {
                        // A wake-up meant for us (room) may have come before
                        // the error won: pass it on.
                        s.blocking.make_room(1);
                    }
                });
                r?;
            }
        }
    }
    loop {
        if let Some(r) = slot.lock().unwrap_or_else(|e| e.into_inner()).take() {
            pending.seq = None;
            drop(pending);
            match r {
                Ok(v) => return Ok(v),
                Err(p) => panic::resume_unwind(p),
            }
        }
        context::with_sched("coro::blocking", |s| {
            s.blocking.waiting.borrow_mut()[key] = Some(Waiter::current("coro::blocking"))
        });
        crate::suspend::park_as("blocking job")?;
    }
}
