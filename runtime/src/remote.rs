//! The `Send` side of a runtime: a [`Handle`] that other OS threads (a
//! library callback, another runtime) use to spawn green threads into it,
//! and [`RemoteWaker`]s that wake one park of one green thread from any OS
//! thread. Everything else in a runtime is `!Send`; these are the bridge.
//!
//! # Design
//!
//! Each runtime owns an inbox, shared through an `Arc` with its handles and
//! remote wakers: closures to spawn and wake-ups to deliver, behind a mutex,
//! and a `pending` flag. A sender pushes under the lock, sets the flag and
//! wakes the loop through the runtime's `mio::Waker` (as the blocking pool
//! does). The loop looks at the flag after every poll and drains the inbox:
//! a wake-up names a task by its key in the thread table, its id and the
//! generation of the park it was made for, so a late one (the thread timed
//! out, finished, or its key was reused) wakes nothing. Closures become
//! green threads there, on the runtime's own OS thread.
//!
//! A remote waker used on its own runtime's OS thread wakes the task
//! directly, without the inbox or a syscall.
//!
//! While a handle, a remote waker or a `block_on` waker exists, something
//! outside may still wake a parked thread, so the loop does not report a
//! deadlock (see `asleep`). Each holds the inbox through an [`Outside`],
//! which counts them; when the last goes on another OS thread it wakes the
//! loop, so that a loop blocked with nothing else to wait for looks again
//! and reports the deadlock instead of sleeping through it.
//!
//! A handle counts for as long as it lives: it can spawn into any later
//! run of the runtime. A waker counts only in the run (`block_on`) that
//! made it: it names a park of a thread of that run, and once the run
//! ended every such thread is gone, so a waker kept past it (in a future
//! left in a channel, a `Sleep` that outlived the run, another OS thread)
//! can never wake anything again, and must not keep a later run from
//! reporting its deadlock.

use std::collections::VecDeque;
use std::fmt;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::context;
use crate::future::FutureWake;
use crate::sched::Scheduler;
use crate::spawn::Builder;
use crate::task::{make_ready, ThreadState};

type Job = Box<dyn FnOnce() + Send + 'static>;

/// A wake-up for one park of one task.
#[derive(Clone, Copy, Debug)]
struct Wake {
    /// Key in the thread table.
    key: usize,
    /// Task id (keys are reused, ids are not).
    id: u64,
    /// Park generation the wake-up was made for.
    gen: u64,
}

#[derive(Default)]
struct Inbox {
    jobs: VecDeque<(Builder, Job)>,
    wakes: Vec<Wake>,
    /// Wake-ups of `future::block_on` calls, sorted out on the loop's
    /// thread (see `future::waker`).
    futures: Vec<Arc<FutureWake>>,
    /// The runtime was dropped: nothing will drain the inbox again.
    closed: bool,
}

pub(crate) struct Shared {
    runtime: u64,
    inbox: Mutex<Inbox>,
    /// Something was pushed since the loop last drained.
    pending: AtomicBool,
    /// Live [`Outside`] references of handles.
    handles: AtomicUsize,
    /// Live [`Outside`] references of wakers (remote wakers, `block_on`
    /// wakers) made in the current run, in the low 32 bits, under the
    /// run's number (see the module docs).
    ///
    /// # Invariant
    /// The count is that of the live references whose `run` is the number
    /// here; [`Remote::end_of_run`] moves to the next number with a count
    /// of 0, so references of an earlier run count nowhere.
    wakers: AtomicU64,
    waker: Arc<mio::Waker>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Inbox> {
        self.inbox.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Tells the loop there is something to drain.
    fn notify(&self) {
        self.pending.store(true, Ordering::Release);
        // A failed wake means the poller is gone with its runtime.
        let _ = self.waker.wake();
    }
}

/// A reference to a runtime's inbox held outside the runtime (by a
/// [`Handle`], a [`RemoteWaker`], a `block_on` waker): while one that
/// counts exists, another OS thread may still wake a parked thread (see
/// the module docs for which count when).
pub(crate) struct Outside {
    shared: Arc<Shared>,
    /// `None` for a handle's; for a waker's, the number of the run it was
    /// made in (it counts only while that run lasts).
    run: Option<u32>,
}

/// The count in [`Shared::wakers`]: its low half.
const COUNT: u64 = (1 << 32) - 1;

impl Outside {
    /// A handle's reference: counts while it lives.
    fn handle(shared: &Arc<Shared>) -> Outside {
        shared.handles.fetch_add(1, Ordering::AcqRel);
        Outside {
            shared: shared.clone(),
            run: None,
        }
    }

    /// A waker's reference: counts while the current run lasts.
    fn waker(shared: &Arc<Shared>) -> Outside {
        let was = shared.wakers.fetch_add(1, Ordering::AcqRel);
        Outside {
            shared: shared.clone(),
            run: Some((was >> 32) as u32),
        }
    }
}

impl std::ops::Deref for Outside {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.shared
    }
}

impl Clone for Outside {
    fn clone(&self) -> Outside {
        match self.run {
            None => Outside::handle(&self.shared),
            Some(run) => {
                // Counted only if its run still lasts; a clone of a past
                // run's waker counts nowhere, as the original.
                let _ = self
                    .shared
                    .wakers
                    .fetch_update(Ordering::AcqRel, Ordering::Acquire, |w| {
                        (w >> 32 == u64::from(run)).then_some(w + 1)
                    });
                Outside {
                    shared: self.shared.clone(),
                    run: Some(run),
                }
            }
        }
    }
}

impl Drop for Outside {
    /// The last one that counts, gone on another OS thread, wakes the
    /// loop: it may be blocked with nothing else that could wake a thread,
    /// and must look again (`asleep`). On the runtime's own thread the loop
    /// is not blocked, and looks before it next blocks.
    fn drop(&mut self) {
        let last = match self.run {
            None => self.shared.handles.fetch_sub(1, Ordering::AcqRel) == 1,
            Some(run) => self
                .shared
                .wakers
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |w| {
                    (w >> 32 == u64::from(run)).then_some(w - 1)
                })
                .is_ok_and(|w| w & COUNT == 1),
        };
        if last {
            let here = context::try_with_sched(|s| s.id == self.shared.runtime) == Some(true);
            if !here {
                // A failed wake means the poller is gone with its runtime.
                let _ = self.shared.waker.wake();
            }
        }
    }
}

/// The runtime side: owned by the scheduler.
pub(crate) struct Remote {
    pub(crate) shared: Arc<Shared>,
}

impl Remote {
    pub(crate) fn new(runtime: u64, waker: Arc<mio::Waker>) -> Remote {
        Remote {
            shared: Arc::new(Shared {
                runtime,
                inbox: Mutex::new(Inbox::default()),
                pending: AtomicBool::new(false),
                handles: AtomicUsize::new(0),
                wakers: AtomicU64::new(0),
                waker,
            }),
        }
    }

    pub(crate) fn handle(&self) -> Handle {
        Handle {
            shared: Outside::handle(&self.shared),
        }
    }

    /// A reference to the inbox for a waker made in the current run.
    pub(crate) fn outside(&self) -> Outside {
        Outside::waker(&self.shared)
    }

    /// Whether a handle, or a remote waker or `block_on` waker of the
    /// current run, exists (or work is queued): a parked thread may still
    /// be woken from outside.
    pub(crate) fn may_wake(&self) -> bool {
        self.shared.handles.load(Ordering::Acquire) > 0
            || self.shared.wakers.load(Ordering::Acquire) & COUNT > 0
            || self.shared.pending.load(Ordering::Acquire)
    }

    /// The run ended, with all its threads: the wakers made in it stop
    /// counting (see the module docs), whoever still holds them.
    pub(crate) fn end_of_run(&self) {
        let _ = self
            .shared
            .wakers
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |w| {
                // The number wraps (the high bits shift out).
                Some(((w >> 32) + 1) << 32)
            });
    }

    /// Delivers queued wake-ups and spawns queued closures. Closures stay
    /// queued while the runtime shuts down (they would start only to have
    /// every blocking call fail); they run when it next runs.
    pub(crate) fn drain(&self, s: &Scheduler) {
        // A plain load first: this runs after every poll.
        if !self.shared.pending.load(Ordering::Relaxed)
            || !self.shared.pending.swap(false, Ordering::Acquire)
        {
            return;
        }
        let (wakes, futures, jobs) = {
            let mut inbox = self.shared.lock();
            let wakes = std::mem::take(&mut inbox.wakes);
            let futures = std::mem::take(&mut inbox.futures);
            let jobs = if s.shutting_down.get() {
                if !inbox.jobs.is_empty() {
                    self.shared.pending.store(true, Ordering::Release);
                }
                VecDeque::new()
            } else {
                std::mem::take(&mut inbox.jobs)
            };
            (wakes, futures, jobs)
        };
        for w in wakes {
            wake_task(s, w);
        }
        for f in futures {
            f.wake_here(s);
        }
        for (builder, job) in jobs {
            if let Err(e) = builder.spawn_in(s, job) {
                log::error!(
                    target: "coro",
                    "a green thread spawned through a runtime Handle could not start: {e}; \
                     its closure is dropped"
                );
            }
        }
    }
}

impl Drop for Remote {
    /// Closes the inbox: later spawns fail, later wakes do nothing. Closures
    /// still queued are dropped here, on the runtime's OS thread.
    fn drop(&mut self) {
        let jobs = {
            let mut inbox = self.shared.lock();
            inbox.closed = true;
            inbox.wakes.clear();
            inbox.futures.clear();
            std::mem::take(&mut inbox.jobs)
        };
        drop(jobs);
    }
}

/// Schedules the task `w` names if it is still in that park.
fn wake_task(s: &Scheduler, w: Wake) {
    let task = s.tasks.borrow().get(w.key).cloned();
    if let Some(t) = task {
        if t.id == w.id && t.park_gen.get() == w.gen && t.state.get() == ThreadState::Parked {
            make_ready(&t);
        }
    }
}

/// A `Send` handle to a runtime: spawns green threads into it from any OS
/// thread, like [`tokio::runtime::Handle`](https://docs.rs/tokio/latest/tokio/runtime/struct.Handle.html).
///
/// Get one with [`handle`] on a green thread or [`Runtime::handle`](crate::Runtime::handle)
/// before running; clone it freely and move it to other threads. Pair it
/// with `coro::sync::remote::channel` to send data in.
///
/// # Deadlock detection
///
/// While a handle (or a [`RemoteWaker`] made in the current
/// [`block_on`](crate::Runtime::block_on)) of a runtime exists, another
/// thread may still wake it, so the runtime does not report a deadlock (nor
/// its parked threads as leaked, see [`leaks`](crate::leaks)) when all of
/// its green threads are parked. Dropping the last one lets it: dropped on
/// another OS thread, it wakes the loop to look again. A remote waker kept
/// past the `block_on` it was made in wakes nothing any more (its thread
/// is gone) and no longer counts.
///
/// # Examples
///
/// ```
/// use std::sync::mpsc;
///
/// coro::run(|| {
///     let handle = coro::handle();
///     let (tx, rx) = mpsc::channel();
///     // A plain OS thread starts a green thread in this runtime.
///     let os = std::thread::spawn(move || {
///         handle
///             .spawn(move || tx.send(coro::current().id()).unwrap())
///             .unwrap();
///     });
///     let id = coro::blocking(move || rx.recv().unwrap()).unwrap();
///     assert!(id > 1);
///     os.join().unwrap();
/// });
/// ```
#[derive(Clone)]
pub struct Handle {
    shared: Outside,
}

impl Handle {
    /// Starts `f` as a new green thread of this runtime. It runs on the
    /// runtime's OS thread once the loop next polls (at once if it is
    /// idle); if the runtime is not inside `block_on` now, when it next is.
    ///
    /// Its value is dropped: send results back through a channel.
    ///
    /// # Errors
    ///
    /// `NotConnected` if the runtime was dropped (`f` is dropped). A spawn
    /// that fails in the runtime (no memory for a stack) is logged there at
    /// ERROR.
    pub fn spawn<F>(&self, f: F) -> io::Result<()>
    where
        F: FnOnce() + Send + 'static,
    {
        self.spawn_with(Builder::new(), f)
    }

    /// [`spawn`](Handle::spawn) with the settings of `builder` (a name, a
    /// stack size); a bad setting is logged by the runtime, which then drops
    /// `f`.
    ///
    /// # Errors
    ///
    /// As [`spawn`](Handle::spawn).
    pub fn spawn_with<F>(&self, builder: Builder, f: F) -> io::Result<()>
    where
        F: FnOnce() + Send + 'static,
    {
        let mut inbox = self.shared.lock();
        if inbox.closed {
            return Err(gone());
        }
        inbox.jobs.push_back((builder, Box::new(f)));
        drop(inbox);
        self.shared.notify();
        Ok(())
    }

    /// Whether the runtime was dropped (every spawn fails).
    pub fn is_closed(&self) -> bool {
        self.shared.lock().closed
    }
}

impl fmt::Debug for Handle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Handle")
            .field("runtime", &self.shared.runtime)
            .finish_non_exhaustive()
    }
}

impl Shared {
    /// The id of the runtime this inbox belongs to.
    pub(crate) fn runtime(&self) -> u64 {
        self.runtime
    }

    /// Queues a `block_on` wake-up for the loop; `false` if the runtime
    /// was dropped.
    pub(crate) fn push_future_wake(&self, f: Arc<FutureWake>) -> bool {
        let mut inbox = self.lock();
        if inbox.closed {
            return false;
        }
        inbox.futures.push(f);
        drop(inbox);
        self.notify();
        true
    }
}

fn gone() -> io::Error {
    io::Error::new(
        io::ErrorKind::NotConnected,
        "coro: the runtime this Handle belongs to was dropped",
    )
}

/// A `Send` handle to the running runtime, for other OS threads.
///
/// # Panics
///
/// Outside a runtime.
#[track_caller]
pub fn handle() -> Handle {
    context::with_sched("coro::handle", |s| s.remote.handle())
}

/// Wakes one park of one green thread from any OS thread: the `Send`
/// counterpart of [`Coro::unpark`](crate::Coro::unpark), for primitives that
/// other threads signal (a channel whose sender is on another OS thread).
///
/// Make it with [`RemoteWaker::current`] before parking, hand it to the
/// other side, then [`park`](crate::park) in a loop that checks the
/// condition. A wake for a park that already ended (a timeout, an
/// interrupt, an earlier wake) does nothing, so waking late or twice is
/// harmless. Converts into a [`std::task::Waker`].
///
/// # Examples
///
/// ```
/// use std::sync::atomic::{AtomicBool, Ordering};
/// use std::sync::Arc;
///
/// coro::run(|| {
///     let done = Arc::new(AtomicBool::new(false));
///     let waker = coro::RemoteWaker::current();
///     let d = done.clone();
///     std::thread::spawn(move || {
///         d.store(true, Ordering::Release);
///         waker.wake();
///     });
///     while !done.load(Ordering::Acquire) {
///         coro::park().unwrap(); // woken by the OS thread
///     }
/// });
/// ```
#[derive(Clone)]
pub struct RemoteWaker {
    shared: Outside,
    wake: Wake,
}

impl RemoteWaker {
    /// A waker for the running green thread's next park.
    ///
    /// # Panics
    ///
    /// Outside a green thread.
    #[track_caller]
    pub fn current() -> RemoteWaker {
        context::with_current("coro::RemoteWaker::current", |s, t| RemoteWaker {
            shared: s.remote.outside(),
            wake: Wake {
                key: t.key.get(),
                id: t.id,
                gen: t.park_gen.get(),
            },
        })
    }

    /// Schedules the green thread if it is still in the park this waker was
    /// made for. Callable from any OS thread; never blocks (beyond a short
    /// lock). Returns `false` if the runtime was dropped.
    pub fn wake(&self) -> bool {
        let local = context::try_with_sched(|s| {
            if s.id == self.shared.runtime {
                wake_task(s, self.wake);
                true
            } else {
                false
            }
        });
        if local == Some(true) {
            return true;
        }
        let mut inbox = self.shared.lock();
        if inbox.closed {
            return false;
        }
        inbox.wakes.push(self.wake);
        drop(inbox);
        self.shared.notify();
        true
    }

    /// This waker as a [`std::task::Waker`].
    pub fn into_waker(self) -> std::task::Waker {
        std::task::Waker::from(Arc::new(self))
    }
}

impl std::task::Wake for RemoteWaker {
    fn wake(self: Arc<Self>) {
        RemoteWaker::wake(&self);
    }

    fn wake_by_ref(self: &Arc<Self>) {
        RemoteWaker::wake(self);
    }
}

impl fmt::Debug for RemoteWaker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RemoteWaker")
            .field("runtime", &self.shared.runtime)
            .field("thread", &self.wake.id)
            .finish()
    }
}

/// Compile-time proof that the bridge types are `Send + Sync`.
const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<Handle>();
    send_sync::<RemoteWaker>();
};
