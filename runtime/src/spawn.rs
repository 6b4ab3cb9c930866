//! Starting green threads and waiting for them: [`spawn`], [`Builder`],
//! [`JoinHandle`], [`current`].
//!
//! # Invariant: no panic ever leaves a coroutine
//!
//! [`entry`] is the first frame on every green thread's stack. Everything it
//! does after the thread's closure starts runs under `catch_unwind`: the
//! closure itself, dropping a closure that never ran (a thread unwound at
//! shutdown before its first resume), dropping the result or panic payload
//! of a detached thread, waking the joiners. A panic from a destructor there
//! is caught, logged and its payload leaked (dropping it could panic again).
//! The scheduler also catches anything that would escape `resume` and
//! treats it as that thread's panic (`sched::Scheduler::resume`), so an
//! unwind never crosses a stack switch into the scheduler.

use std::cell::RefCell;
use std::fmt;
use std::io;
use std::panic::{self, AssertUnwindSafe};
use std::rc::Rc;
use std::sync::Arc;

use corosensei::{Coroutine, Yielder};

use crate::context;
use crate::error::{JoinError, WaitError};
use crate::sched::{self, Scheduler};
use crate::stack::MIN_STACK_SIZE;
use crate::task::{Coro, TaskInit, ThreadState, Waiter};

/// Closures up to this size are moved onto the new stack directly.
const INLINE_CLOSURE: usize = 256;

/// Largest selfishness budget.
pub const MAX_SELFISHNESS: u32 = 32768;

pub(crate) fn check_selfishness(n: u32) -> io::Result<u32> {
    if (1..=MAX_SELFISHNESS).contains(&n) {
        Ok(n)
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("selfishness must be in 1..={MAX_SELFISHNESS}, got {n}"),
        ))
    }
}

pub(crate) fn check_stack_size(n: usize) -> io::Result<usize> {
    if (MIN_STACK_SIZE..=(1 << 40)).contains(&n) {
        Ok(n)
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "stack size must be at least {MIN_STACK_SIZE} bytes (and at most 1 TiB), got {n}"
            ),
        ))
    }
}

/// Where a thread's result goes, shared by the thread and its handle.
struct Packet<T> {
    result: RefCell<Option<Result<T, JoinError>>>,
    /// Every green thread waiting in [`JoinHandle::wait`] (a handle can be
    /// shared, so there may be several); all are woken when the thread ends.
    joiners: RefCell<Vec<Waiter>>,
    /// Gives the packet back for a later spawn once its result is out
    /// ([`keep_packet`], instantiated where `T: 'static` is known, so that
    /// `JoinHandle::join` needs no such bound).
    keep: fn(Rc<Packet<T>>),
}

impl<T: 'static> Packet<T> {
    /// An empty packet: a kept one if there is one (`task_pool`).
    fn new() -> Rc<Packet<T>> {
        crate::task_pool::take().unwrap_or_else(|| {
            Rc::new(Packet {
                result: RefCell::new(None),
                joiners: RefCell::new(Vec::new()),
                keep: keep_packet::<T>,
            })
        })
    }
}

/// Largest packet kept for reuse: one of a large result type (which the
/// packet holds inline) is freed, or a thousand kept ones would hold on to
/// megabytes for the OS thread's life.
const KEPT_PACKET_MAX: usize = 256;

/// Keeps `packet` for a later spawn if nothing else holds it and it is
/// small; it is emptied first (its result was taken or dropped already;
/// stale joiners' entries go).
fn keep_packet<T: 'static>(packet: Rc<Packet<T>>) {
    if std::mem::size_of::<Packet<T>>() > KEPT_PACKET_MAX {
        return;
    }
    crate::task_pool::keep(packet, |p| {
        debug_assert!(p.result.get_mut().is_none());
        p.joiners.get_mut().clear();
    });
}

/// Settings for a new green thread, like [`std::thread::Builder`].
///
/// # Examples
///
/// ```
/// coro::run(|| {
///     let h = coro::Builder::new()
///         .name("worker".into())
///         .stack_size(64 * 1024)
///         .spawn(|| coro::current().name().map(str::to_owned))
///         .unwrap();
///     assert_eq!(h.join().unwrap().as_deref(), Some("worker"));
/// });
/// ```
#[derive(Debug, Default)]
pub struct Builder {
    name: Option<String>,
    stack_size: Option<usize>,
    selfishness: Option<u32>,
}

impl Builder {
    /// Default settings: no name, the runtime's stack size and selfishness.
    pub fn new() -> Builder {
        Builder::default()
    }

    /// Names the thread (shown in latency warnings, stack-overflow messages,
    /// [`threads`](crate::threads)).
    pub fn name(mut self, name: String) -> Builder {
        self.name = Some(name);
        self
    }

    /// Usable stack size in bytes (rounded up to whole pages; at least
    /// [`MIN_STACK_SIZE`](crate::MIN_STACK_SIZE)).
    pub fn stack_size(mut self, bytes: usize) -> Builder {
        self.stack_size = Some(bytes);
        self
    }

    /// Selfishness budget for this thread (1..=32768).
    pub fn selfishness(mut self, n: u32) -> Builder {
        self.selfishness = Some(n);
        self
    }

    /// Spawns the thread. It is queued behind the threads ready now.
    ///
    /// # Errors
    ///
    /// `InvalidInput` for a bad stack size or selfishness; `OutOfMemory` when
    /// no stack can be mapped (out of memory, or the kernel's
    /// `vm.max_map_count`, which the message names).
    ///
    /// # Panics
    ///
    /// Outside a runtime.
    #[track_caller]
    pub fn spawn<F, T>(self, f: F) -> io::Result<JoinHandle<T>>
    where
        F: FnOnce() -> T + 'static,
        T: 'static,
    {
        context::with_sched("Builder::spawn", |s| self.spawn_in(s, f))
    }

    pub(crate) fn spawn_in<F, T>(self, s: &Scheduler, f: F) -> io::Result<JoinHandle<T>>
    where
        F: FnOnce() -> T + 'static,
        T: 'static,
    {
        let size = match self.stack_size {
            Some(n) => check_stack_size(n)?,
            None => s.stacks.borrow().size(),
        };
        let selfishness = match self.selfishness {
            Some(n) => check_selfishness(n)?,
            None => s.config.selfishness,
        };
        let stack = s.stacks.borrow_mut().get(size)?;
        let id = s.next_id.get();
        s.next_id.set(id + 1);
        let name: Option<Arc<str>> = self.name.map(Into::into);
        let limit = stack.limit_addr();
        let usable = stack.usable_size();
        let guard = stack.guard_size();
        let task = crate::task_pool::new_task(TaskInit {
            id,
            runtime: s.id,
            name,
            selfishness,
            stack_limit: limit,
            stack_guard: guard,
            stack_size: usable,
            // The loop's last clock reading: a clock read here costs about
            // as much as a switch (see `Scheduler::coarse_now`).
            spawned_at: s.coarse_now.get(),
        });
        let packet = Packet::new();
        let their_packet = packet.clone();
        // corosensei moves the initial closure onto the new stack through a
        // small fixed-size slot; a large closure travels boxed instead.
        let co = if std::mem::size_of::<F>() <= INLINE_CLOSURE {
            Coroutine::with_stack(stack, move |y: &Yielder<(), ()>, ()| {
                entry(y, f, their_packet);
            })
        } else {
            let f = Box::new(f);
            Coroutine::with_stack(stack, move |y: &Yielder<(), ()>, ()| {
                entry(y, *f, their_packet);
            })
        };
        *task.coroutine.borrow_mut() = Some(co);
        let key = s.tasks.borrow_mut().insert(task.clone());
        task.key.set(key);
        if let (Some(w), Some(n)) = (&s.watchdog, &task.name) {
            w.shared
                .names
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(id, n.clone());
        }
        s.counters.spawned.set(s.counters.spawned.get() + 1);
        s.flight.spawned(crate::flight::key(s), &task);
        s.ready.borrow_mut().push_back(task.clone());
        Ok(JoinHandle {
            coro: Coro(task),
            packet,
        })
    }
}

/// The first frame on every green thread's stack (see the module docs:
/// nothing unwinds out of it).
fn entry<F, T>(y: &Yielder<(), ()>, f: F, packet: Rc<Packet<T>>)
where
    F: FnOnce() -> T,
{
    // The scheduler resumes a task only with its own runtime current, so
    // `current` is this task (invariant in `context`).
    let unwound_before_start = context::with_current("entry", |_, t| {
        t.yielder.set(y);
        t.unwinding.get()
    });
    let outcome = panic::catch_unwind(AssertUnwindSafe(move || {
        let r = if unwound_before_start {
            // Shutdown unwinds a thread that never ran: its closure is
            // dropped here, on its own stack, under this catch.
            drop(f);
            Err(JoinError::Cancelled)
        } else {
            match panic::catch_unwind(AssertUnwindSafe(f)) {
                Ok(v) => Ok(v),
                Err(p) if p.is::<sched::ForcedUnwind>() => Err(JoinError::Cancelled),
                Err(p) => {
                    // Re-fetched after the closure: nothing saved before it
                    // is trusted to be alive now.
                    context::try_with_sched(|s| {
                        s.counters.panicked.set(s.counters.panicked.get() + 1)
                    });
                    Err(JoinError::Panicked(p))
                }
            }
        };
        // Its green-thread locals go before its joiners wake.
        crate::local::drop_all();
        deliver(packet, r);
    }));
    if let Err(p) = outcome {
        destructor_panicked(p);
    }
}

/// Hands the result to the joiners, or drops it if the thread is detached.
fn deliver<T>(packet: Rc<Packet<T>>, r: Result<T, JoinError>) {
    if Rc::strong_count(&packet) == 1 {
        // Detached: nobody can see the result. Drop it (a value's or a panic
        // payload's destructor may panic: that is caught by `entry`).
        drop(r);
        (packet.keep)(packet);
        return;
    }
    *packet.result.borrow_mut() = Some(r);
    let joiners = std::mem::take(&mut *packet.joiners.borrow_mut());
    for w in joiners {
        w.wake();
    }
}

/// A destructor panicked while a green thread ended (its detached result,
/// its panic payload, a closure that never ran). The thread is over; the
/// panic is logged and its payload leaked, since dropping it could panic
/// again.
#[cold]
fn destructor_panicked(p: Box<dyn std::any::Any + Send>) {
    let msg = p
        .downcast_ref::<&'static str>()
        .copied()
        .or_else(|| p.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("<non-string payload>")
        .to_owned();
    context::try_with_current(|s, t| {
        s.counters.panicked.set(s.counters.panicked.get() + 1);
        log::error!(
            target: "coro",
            "green thread #{} '{}': a destructor panicked as the thread ended ({msg}); ignored",
            t.id,
            t.display_name(),
        );
    });
    std::mem::forget(p);
}

/// An owned permission to join a green thread, like
/// [`std::thread::JoinHandle`]. Dropping it detaches the thread.
pub struct JoinHandle<T> {
    coro: Coro,
    packet: Rc<Packet<T>>,
}

impl<T> JoinHandle<T> {
    /// The thread's handle.
    pub fn thread(&self) -> &Coro {
        &self.coro
    }

    /// Whether the thread has finished (its result is waiting).
    pub fn is_finished(&self) -> bool {
        self.packet.result.borrow().is_some() || self.coro.state() == ThreadState::Dead
    }

    /// Waits for the thread to finish without taking its result.
    ///
    /// Several green threads may wait on one handle (shared through an `Rc`,
    /// say): all of them return when the thread ends.
    ///
    /// # Errors
    ///
    /// [`WaitError`] if the wait is cut short (timeout, interrupt).
    #[track_caller]
    pub fn wait(&self) -> Result<(), WaitError> {
        self.wait_named("JoinHandle::wait")
    }

    /// [`wait`](JoinHandle::wait); `call` names the public call in the panic
    /// outside a green thread.
    #[track_caller]
    fn wait_named(&self, call: &'static str) -> Result<(), WaitError> {
        let site = std::panic::Location::caller();
        while !self.is_finished() {
            self.packet.joiners.borrow_mut().push(Waiter::current(call));
            let r = crate::suspend::park_waiting(
                "join",
                call,
                crate::suspend::Wait {
                    target: None,
                    thread: self.coro.id(),
                    site: Some(site),
                },
            );
            // Leave the list: our entry (and any other given-up one) is stale.
            self.packet.joiners.borrow_mut().retain(Waiter::is_waiting);
            r?;
        }
        Ok(())
    }

    /// Waits for the thread to finish and returns its value.
    ///
    /// # Errors
    ///
    /// * [`JoinError::Panicked`] with the payload if the thread panicked; the
    ///   runtime and the other threads carry on.
    /// * [`JoinError::Cancelled`] if runtime shutdown unwound it.
    /// * [`JoinError::Wait`] if waiting was cut short; the thread goes on,
    ///   detached.
    ///
    /// # Panics
    ///
    /// Outside a green thread, unless the thread already finished.
    #[track_caller]
    pub fn join(self) -> Result<T, JoinError> {
        if !self.is_finished() {
            self.wait_named("JoinHandle::join")?;
        }
        let JoinHandle { coro, packet } = self;
        let r = packet
            .result
            .borrow_mut()
            .take()
            .unwrap_or(Err(JoinError::Cancelled));
        if coro.0.state.get() == ThreadState::Dead {
            crate::task_pool::recycle(coro.0);
        }
        (packet.keep)(packet);
        r
    }
}

impl<T> fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinHandle")
            .field("thread", &self.coro)
            .finish_non_exhaustive()
    }
}

/// Spawns a green thread with default settings and returns its handle.
///
/// The thread runs when the scheduler gets to it (after the threads ready
/// now); the caller keeps running.
///
/// # Panics
///
/// Outside a runtime, or if no stack can be mapped (out of memory, or about
/// 32 000 live threads with the default stack size and Linux's default
/// `vm.max_map_count`). Use [`Builder::spawn`] to get that as an
/// `OutOfMemory` error instead, **in any loop that spawns per request**: a
/// panic there kills only the spawning thread (an accept loop), and the
/// server goes on running, deaf. Handle the error by shedding the request
/// and backing off; see the accept loop of `examples/lib.rs`
/// (`coro_examples::accept_loop`) and README's server snippet.
///
/// # Examples
///
/// ```
/// coro::run(|| {
///     let h = coro::spawn(|| 6 * 7);
///     assert_eq!(h.join().unwrap(), 42);
/// });
/// ```
#[track_caller]
pub fn spawn<F, T>(f: F) -> JoinHandle<T>
where
    F: FnOnce() -> T + 'static,
    T: 'static,
{
    context::with_sched("coro::spawn", |s| Builder::new().spawn_in(s, f))
        .unwrap_or_else(|e| panic!("coro::spawn: {e}"))
}

/// The handle of the running green thread.
///
/// # Panics
///
/// Outside a green thread.
#[track_caller]
pub fn current() -> Coro {
    Coro(context::current_task_rc("coro::current"))
}

/// The id of the running green thread ([`Coro::id`] of [`current`]), or
/// `None` outside one. Cheaper than `current().id()`: no handle is made,
/// which matters on the fast paths of locks that record their owner.
///
/// # Examples
///
/// ```
/// assert_eq!(coro::current_id(), None);
/// coro::run(|| {
///     assert_eq!(coro::current_id(), Some(coro::current().id()));
/// });
/// ```
#[inline]
pub fn current_id() -> Option<u64> {
    context::try_with_current(|_, t| t.id)
}

/// Sets the running thread's selfishness budget (1..=32768) and refills it.
///
/// # Errors
///
/// `InvalidInput` outside that range.
#[track_caller]
pub fn set_selfishness(n: u32) -> io::Result<()> {
    let n = check_selfishness(n)?;
    context::with_current("coro::set_selfishness", |_, t| {
        t.selfish_max.set(n);
        t.selfish_left.set(n);
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::rc::Rc;

    fn packet<T>(h: &super::JoinHandle<T>) -> *const super::Packet<T> {
        Rc::as_ptr(&h.packet)
    }

    #[test]
    fn a_joined_threads_packet_is_reused_by_the_next_spawn_of_its_type() {
        crate::run(|| {
            let h = crate::spawn(|| 1u64);
            let first = packet(&h);
            assert_eq!(h.join().unwrap(), 1);
            // Another result type gets a packet of its own.
            let s = crate::spawn(|| String::from("two"));
            assert_ne!(packet(&s).cast::<()>(), first.cast());
            assert_eq!(s.join().unwrap(), "two");
            let h = crate::spawn(|| 3u64);
            assert_eq!(packet(&h), first);
            assert_eq!(h.join().unwrap(), 3);
        });
    }

    #[test]
    fn a_detached_threads_packet_is_reused_once_it_ends() {
        crate::run(|| {
            let h = crate::spawn(|| 1u64);
            let first = packet(&h);
            drop(h);
            crate::yield_now(); // it runs and ends
            let h = crate::spawn(|| 2u64);
            assert_eq!(packet(&h), first);
            h.join().unwrap();
        });
    }

    #[test]
    fn a_packet_with_a_live_handle_is_never_reused() {
        crate::run(|| {
            // Waited on but not joined: the handle keeps its packet, with
            // the result in it.
            let h = crate::spawn(|| 1u64);
            h.wait().unwrap();
            let first = packet(&h);
            let other = crate::spawn(|| 2u64);
            assert_ne!(packet(&other), first);
            assert_eq!(other.join().unwrap(), 2);
            assert_eq!(h.join().unwrap(), 1);
        });
    }

    #[test]
    fn a_large_results_packet_is_not_kept() {
        crate::run(|| {
            assert!(std::mem::size_of::<super::Packet<[u8; 4096]>>() > super::KEPT_PACKET_MAX);
            let h = crate::spawn(|| [7u8; 4096]);
            assert_eq!(h.join().unwrap()[4095], 7);
            assert_eq!(crate::task_pool::kept::<super::Packet<[u8; 4096]>>(), 0);
            // A small one is.
            crate::spawn(|| 1u64).join().unwrap();
            assert_eq!(crate::task_pool::kept::<super::Packet<u64>>(), 1);
        });
    }

    #[test]
    fn a_reused_packet_carries_nothing_of_its_last_thread() {
        crate::run(|| {
            let h = crate::spawn(|| 1u64);
            let first = packet(&h);
            // Joined after a wait: the packet had a joiner entry.
            h.wait().unwrap();
            assert_eq!(h.join().unwrap(), 1);
            let h = crate::spawn(|| 5u64);
            assert_eq!(packet(&h), first);
            assert!(h.packet.result.borrow().is_none());
            assert!(h.packet.joiners.borrow().is_empty());
            assert_eq!(h.join().unwrap(), 5);
        });
    }
}
