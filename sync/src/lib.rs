//! Synchronization primitives for coro green threads.
//!
//! In a cooperative runtime only one green thread runs at a time, so these
//! control *resources* (outstanding requests, access to a file), not memory:
//! a [`Semaphore`] bounds the requests in flight on a link, a [`Mutex`] or an
//! [`RwLock`] serializes access to a file across blocking calls, a [`Fifo`] or
//! a [`channel`] feeds a worker thread, a [`WaitGroup`], an
//! [`InvertedSemaphore`] or [`in_parallel`] waits for a batch of jobs.
//!
//! On these primitives only, the crate builds what a server keeps around:
//! a connection [`Pool`] (ZODB's soft limit and LIFO reuse, r2d2's hard
//! limit), a [`GroupPool`] of workers keyed by anything (Passenger's
//! ApplicationPool), [`PeriodicExecutor`]s (PyMongo's) and [`Deferred`]
//! work for destructors that must not block.
//!
//! Every primitive queues its waiters in FIFO order and hands what it
//! releases (ownership, permits, an item, a notification) straight to the
//! first waiter, so no thread can barge in ahead of the queue. Every call that
//! can wait returns a `Result` and fails with the runtime's
//! [`WaitError`](coro_runtime::WaitError) when it is interrupted, when a
//! [`with_timeout`](coro_runtime::with_timeout) deadline passes, or at
//! shutdown. A call that fails without waiting (a `recv` on a disconnected
//! channel, a `lock` the caller already holds) spends selfishness, so an
//! error loop still yields; `try_*` calls never switch threads (see the
//! runtime's crate docs, "Calls that fail at once").
//!
//! # Implementation
//!
//! All primitives run on the green threads of one runtime, on one OS thread:
//! they are `!Send`, hold their state in `Cell`s and `RefCell`s and use no
//! atomics or OS locks. Waiting is the runtime's `park`/`unpark`. A waiter
//! that is interrupted or times out leaves its queue; if it had already been
//! handed something but had not run yet (the runtime lets the interrupt win,
//! as Shrapnel does), it passes that on to the next waiter or back to the
//! primitive. Nothing is lost, and nothing is woken twice.
//!
//! # Examples
//!
//! ```
//! use std::rc::Rc;
//! use coro::sync::{Mutex, Semaphore};
//!
//! coro::run(|| {
//!     let in_flight = Rc::new(Semaphore::new(2));
//!     let log = Rc::new(Mutex::new(Vec::new()));
//!     let jobs = (0..4).map(|i| {
//!         let (in_flight, log) = (in_flight.clone(), log.clone());
//!         move || {
//!             let _permit = in_flight.acquire(1)?;
//!             coro::yield_now(); // the request
//!             log.lock().map_err(std::io::Error::from)?.push(i);
//!             Ok::<_, std::io::Error>(())
//!         }
//!     });
//!     for r in coro::sync::in_parallel(jobs).unwrap() {
//!         r.unwrap().unwrap();
//!     }
//!     assert_eq!(*log.lock().unwrap(), [0, 1, 2, 3]);
//! });
//! ```

#![warn(missing_docs, missing_debug_implementations, rust_2018_idioms)]
#![warn(clippy::undocumented_unsafe_blocks)]
#![forbid(unsafe_code)]
#![doc(test(attr(deny(warnings))))]

mod channel;
mod condvar;
mod deferred;
mod error;
mod event;
mod executor;
mod group_pool;
mod inverted_semaphore;
mod mutex;
mod parallel;
mod pool;
mod rwlock;
mod semaphore;
mod wait_group;
mod waitlist;

pub use channel::{
    channel, sync_channel, Fifo, IntoIter, Iter, Receiver, RecvError, SendError, Sender, TryIter,
    TryRecvError, TrySendError,
};
pub use condvar::Condvar;
pub use deferred::{Deferred, DEFAULT_DRAIN_INTERVAL};

/// The `Send` bridge into a runtime: a channel that any OS thread or
/// runtime sends into, whose receiver waits on a green thread. See
/// [`remote::channel`].
pub mod remote {
    pub use crate::channel::remote::{channel, Iter, Receiver, Sender};
}
pub use error::{LockError, TryAcquireError, TryLockError};
pub use event::Event;
pub use executor::{CloseOnDrop, ExecutorExit, PeriodicExecutor, SHUTDOWN_JOIN};
pub use group_pool::{
    GetError, GroupOptions, GroupPool, GroupPoolBuilder, GroupPoolStats, KeyBackoff, Session,
    SpawnBackoff, Spawner, DEFAULT_MAX, DEFAULT_MAX_IDLE_TIME, DEFAULT_MAX_QUEUE, MAX_ATTEMPTS,
};
pub use inverted_semaphore::InvertedSemaphore;
pub use mutex::{Mutex, MutexGuard};
pub use parallel::in_parallel;
pub use pool::{
    Builder as PoolBuilder, Manager, Pool, PoolError, PooledConnection, State as PoolState,
    Statistics as PoolStatistics, DEFAULT_CONNECTION_TIMEOUT, DEFAULT_POOL_SIZE,
    DEFAULT_REAPER_RATE,
};
pub use rwlock::{RwLock, RwLockReadGuard, RwLockWriteGuard};
pub use semaphore::{Semaphore, SemaphorePermit};
pub use wait_group::{WaitGroup, WaitGroupGuard};
