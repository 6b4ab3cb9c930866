//! Blocking offload: run a closure on a small pool of OS threads and suspend
//! only the calling green thread until it returns.
//!
//! # Implementation
//!
//! Each runtime owns a pool. Worker OS threads are started on demand, up to
//! the runtime's `blocking_threads` bound, and leave after 10 s idle. A job
//! writes its result into a shared slot, pushes its key onto the runtime's
//! completion list and wakes the runtime's loop through its `mio::Waker`; the
//! loop then wakes the green thread waiting for that key. fsync, name lookup
//! and file I/O go through here.

use std::any::Any;
use std::collections::VecDeque;
use std::panic::{self, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use crate::context;
use crate::error::WaitError;
use crate::sched;
use crate::task::Waiter;

type Job = Box<dyn FnOnce() + Send + 'static>;

const IDLE_EXIT: Duration = Duration::from_secs(10);

struct PoolState {
    queue: VecDeque<Job>,
    threads: usize,
    idle: usize,
    shutdown: bool,
}

/// Shared between the runtime and its worker threads.
pub(crate) struct Shared {
    state: Mutex<PoolState>,
    cv: Condvar,
    max_threads: usize,
    /// Keys of finished jobs, drained by the loop.
    done: Mutex<Vec<usize>>,
    waker: Arc<mio::Waker>,
}

/// The runtime side of the pool.
pub(crate) struct BlockingPool {
    shared: Arc<Shared>,
    /// Green threads waiting for a job, by key.
    waiting: std::cell::RefCell<slab::Slab<Option<Waiter>>>,
}

impl BlockingPool {
    pub(crate) fn new(max_threads: usize, waker: Arc<mio::Waker>) -> BlockingPool {
        BlockingPool {
            shared: Arc::new(Shared {
                state: Mutex::new(PoolState {
                    queue: VecDeque::new(),
                    threads: 0,
                    idle: 0,
                    shutdown: false,
                }),
                cv: Condvar::new(),
                max_threads,
                done: Mutex::new(Vec::new()),
                waker,
            }),
            waiting: Default::default(),
        }
    }

    /// Jobs submitted and not yet collected.
    pub(crate) fn in_flight(&self) -> usize {
        self.waiting.borrow().len()
    }

    /// Wakes the green threads whose jobs finished.
    pub(crate) fn drain_completions(&self) {
        let done = std::mem::take(&mut *self.shared.done.lock().unwrap_or_else(|e| e.into_inner()));
        let waiting = self.waiting.borrow();
        for key in done {
            if let Some(Some(w)) = waiting.get(key) {
                w.wake();
            }
        }
    }

    fn submit(&self, job: Job) {
        let mut st = self.shared.state.lock().unwrap_or_else(|e| e.into_inner());
        st.queue.push_back(job);
        if st.idle == 0 && st.threads < self.shared.max_threads {
            st.threads += 1;
            let shared = self.shared.clone();
            let spawned = std::thread::Builder::new()
                .name("coro-blocking".into())
                .spawn(move || worker(shared));
            if spawned.is_err() {
                st.threads -= 1;
                if st.threads == 0 {
                    // No worker at all: run it here rather than never.
                    let job = st.queue.pop_back().expect("just pushed");
                    drop(st);
                    job();
                }
            }
        } else {
            self.shared.cv.notify_one();
        }
    }
}

impl Drop for BlockingPool {
    fn drop(&mut self) {
        let mut st = self.shared.state.lock().unwrap_or_else(|e| e.into_inner());
        st.shutdown = true;
        self.shared.cv.notify_all();
    }
}

fn worker(shared: Arc<Shared>) {
    let mut st = shared.state.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        if let Some(job) = st.queue.pop_front() {
            drop(st);
            job();
            st = shared.state.lock().unwrap_or_else(|e| e.into_inner());
            continue;
        }
        if st.shutdown {
            break;
        }
        st.idle += 1;
        let (guard, res) = shared
            .cv
            .wait_timeout(st, IDLE_EXIT)
            .unwrap_or_else(|e| e.into_inner());
        st = guard;
        st.idle -= 1;
        if res.timed_out() && st.queue.is_empty() {
            break;
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
/// # Errors
///
/// [`WaitError`] if the wait is cut short by a timeout or an interruption.
/// The job keeps running on its OS thread (it cannot be cancelled); its
/// result is dropped when it finishes.
///
/// # Panics
///
/// Outside a runtime. A panic inside `f` is resumed in the calling green
/// thread.
///
/// # Examples
///
/// ```
/// # use coro_runtime as coro;
/// coro::run(|| {
///     let n = coro::blocking(|| std::fs::read_dir(".").map(|d| d.count()).unwrap_or(0)).unwrap();
///     println!("{n} entries");
/// });
/// ```
pub fn blocking<F, T>(f: F) -> Result<T, WaitError>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let slot: Arc<Slot<T>> = Arc::new(Mutex::new(None));
    let key = context::with_sched("coro::blocking", |s| {
        let pool = &s.blocking;
        let key = pool.waiting.borrow_mut().insert(None);
        let shared = pool.shared.clone();
        let out = slot.clone();
        pool.submit(Box::new(move || {
            let r = panic::catch_unwind(AssertUnwindSafe(f));
            *out.lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
            shared
                .done
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(key);
            let _ = shared.waker.wake();
        }));
        key
    });
    let forget = || {
        context::with_sched("coro::blocking", |s| {
            s.blocking.waiting.borrow_mut().remove(key)
        })
    };
    loop {
        if let Some(r) = slot.lock().unwrap_or_else(|e| e.into_inner()).take() {
            forget();
            match r {
                Ok(v) => return Ok(v),
                Err(p) => panic::resume_unwind(p),
            }
        }
        context::with_sched("coro::blocking", |s| {
            s.blocking.waiting.borrow_mut()[key] = Some(Waiter::current("coro::blocking"))
        });
        if let Err(e) = sched::park_as("blocking job") {
            forget();
            return Err(e);
        }
    }
}
