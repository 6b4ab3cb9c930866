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

use std::fmt;
use std::io;
use std::marker::PhantomData;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Arc;

use corosensei::{Coroutine, Yielder};

use crate::kernel::context;
use crate::kernel::error::{JoinError, WaitError};
use crate::kernel::panic_hook;
use crate::kernel::sched::{self, Scheduler};
use crate::kernel::seams::Observer;
use crate::kernel::stack::MIN_STACK_SIZE;
use crate::kernel::task::{Task, TaskInit, ThreadState};
use crate::kernel::wake::{Coro, Waiter};

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
        let id = s.next_id.get();
        let flight_tag = s.observers.tag(s, id)?;
        let stack = match s.stacks.borrow_mut().get(size) {
            Ok(stack) => stack,
            Err(e) => {
                s.observers.untag(s, flight_tag);
                return Err(e);
            }
        };
        s.next_id.set(id + 1);
        let name: Option<Arc<str>> = self.name.map(Into::into);
        let limit = stack.limit_addr();
        let usable = stack.usable_size();
        let guard = stack.guard_size();
        let task = crate::kernel::task_pool::new_task(TaskInit {
            id,
            flight_tag,
            runtime: s.id,
            name,
            selfishness,
            stack_limit: limit,
            stack_guard: guard,
            stack_size: usable,
            // The loop's last clock reading: a spawn reads no clock (see
            // `Scheduler::coarse_now`).
            spawned_at: s.coarse_now.get(),
        });
        // corosensei moves the initial closure onto the new stack through a
        // small fixed-size slot; a large closure travels boxed instead.
        // Built straight into the block (a kept block has no coroutine):
        // built beside it and moved in, the copy's wide loads read bytes
        // just written by narrower stores, and wait for them (a failed
        // store-to-load forward).
        let mut slot = task.coroutine.borrow_mut();
        // Always empty (`Task::new` and `Task::reinit` leave it so); were
        // it not, `get_or_insert_with` would keep another spawn's
        // coroutine, whose result this spawn's handle would read as `T`.
        // The check costs nothing: it is the one `get_or_insert_with`
        // makes.
        assert!(slot.is_none(), "a new task block holds a coroutine");
        if std::mem::size_of::<F>() <= INLINE_CLOSURE {
            slot.get_or_insert_with(|| {
                Coroutine::with_stack(stack, move |y: &Yielder<(), ()>, ()| {
                    entry::<F, T>(y, f);
                })
            });
        } else {
            let f = Box::new(f);
            slot.get_or_insert_with(|| {
                Coroutine::with_stack(stack, move |y: &Yielder<(), ()>, ()| {
                    entry::<F, T>(y, *f);
                })
            });
        }
        drop(slot);
        let key = s.tasks.borrow_mut().insert(task.clone());
        task.key.set(key);
        s.counters.spawned.set(s.counters.spawned.get() + 1);
        s.observers.spawned(s, &task);
        s.ready.borrow_mut().push_back(task.clone());
        Ok(JoinHandle {
            coro: Coro(task),
            result: PhantomData,
        })
    }
}

/// The first frame on every green thread's stack (see the module docs:
/// nothing unwinds out of it).
fn entry<F, T>(y: &Yielder<(), ()>, f: F)
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
        crate::kernel::local::drop_all();
        deliver(r);
    }));
    if let Err(p) = outcome {
        destructor_panicked(p);
    }
}

/// Hands the result to the joiners, or drops it if the thread is detached.
fn deliver<T>(r: Result<T, JoinError>) {
    // A detached thread's result is handed back out of the closure and
    // dropped after it: its destructor runs with no reference held.
    let joiners = context::with_current("coro::spawn", |_, t| {
        if t.detached.get() {
            return Err(r);
        }
        // The handle of this spawn is alive and reads the slot as this
        // type (the invariant in `result_slot`).
        t.result.put(r);
        // Only a thread that was joined while it ran has joiners (a join
        // marks it `cold_used`): a plain thread's end reads none of the
        // tail's lines.
        if !t.cold_used.get() {
            return Ok(Vec::new());
        }
        Ok(std::mem::take(&mut *t.tail.joiners.borrow_mut()))
    });
    match joiners {
        Ok(joiners) => {
            for w in joiners {
                w.wake();
            }
        }
        // Nobody can see the result. Drop it (a value's or a panic
        // payload's destructor may panic: that is caught by `entry`).
        Err(r) => drop(r),
    }
}

/// A destructor panicked while a green thread ended (its detached result,
/// its panic payload, a closure that never ran). The thread is over; the
/// panic is logged and its payload leaked, since dropping it could panic
/// again.
#[cold]
fn destructor_panicked(p: Box<dyn std::any::Any + Send>) {
    let msg = panic_hook::payload_message(&*p).to_owned();
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
    /// The handle owns the result waiting in the thread's block
    /// (`Task::result`, read as `Result<T, JoinError>`).
    result: PhantomData<Result<T, JoinError>>,
}

impl<T> JoinHandle<T> {
    /// The thread's handle.
    pub fn thread(&self) -> &Coro {
        &self.coro
    }

    /// Whether the thread has finished (its result is waiting).
    pub fn is_finished(&self) -> bool {
        self.coro.0.result.is_full() || self.coro.state() == ThreadState::Dead
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
            self.coro
                .0
                .tail_to_fill()
                .joiners
                .borrow_mut()
                .push(Waiter::current(call));
            let r = crate::kernel::suspend::park_waiting(
                "join",
                call,
                crate::kernel::suspend::Wait {
                    target: None,
                    thread: self.coro.id(),
                    site: Some(site),
                },
            );
            // Leave the list: our entry (and any other given-up one) is stale.
            self.coro
                .0
                .tail
                .joiners
                .borrow_mut()
                .retain(Waiter::is_waiting);
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
        let r = self.take_result().unwrap_or(Err(JoinError::Cancelled));
        let task = self.coro.0.clone();
        drop(self);
        if task.state.get() == ThreadState::Dead {
            Task::recycle(task);
        }
        r
    }

    /// The result, if the thread has finished and it is still there.
    fn take_result(&self) -> Option<Result<T, JoinError>> {
        // SAFETY: this handle's spawn started the thread with `entry::<F,
        // T>`, the only code that fills this block's slot, with a
        // `Result<T, JoinError>`, and only while this handle is alive (see
        // `result_slot`); the block was not reused since: this handle
        // holds it.
        unsafe { self.coro.0.result.take::<Result<T, JoinError>>() }
    }
}

impl<T> Drop for JoinHandle<T> {
    /// Detaches the thread: its result is dropped, now if it is already
    /// there, else when the thread ends.
    fn drop(&mut self) {
        self.coro.0.detached.set(true);
        drop(self.take_result());
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
    use std::cell::Cell;
    use std::rc::Rc;

    use crate::kernel::task::Task;
    use crate::JoinError;

    fn block<T>(h: &super::JoinHandle<T>) -> *const Task {
        Rc::as_ptr(&h.coro.0)
    }

    /// Counts its drops.
    struct Counted(Rc<Cell<u32>>);

    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.set(self.0.get() + 1);
        }
    }

    #[test]
    fn results_of_every_shape_come_back() {
        crate::run(|| {
            assert_eq!(crate::spawn(|| 42u64).join().unwrap(), 42);
            crate::spawn(|| ()).join().unwrap();
            assert_eq!(crate::spawn(|| String::from("two")).join().unwrap(), "two");
            // Too large to sit in the block, and over-aligned: boxed.
            let big = crate::spawn(|| [7u8; 4096]).join().unwrap();
            assert_eq!((big[0], big[4095]), (7, 7));
            assert_eq!(
                crate::spawn(|| u128::MAX - 1).join().unwrap(),
                u128::MAX - 1
            );
            #[repr(align(64))]
            struct Wide(u8);
            assert_eq!(crate::spawn(|| Wide(9)).join().unwrap().0, 9);
            let err = crate::spawn(|| -> u64 { panic!("boom") })
                .join()
                .unwrap_err();
            assert!(matches!(err, JoinError::Panicked(_)));
        });
    }

    #[test]
    fn dropping_the_handle_drops_the_result_once_whenever_the_thread_ends() {
        crate::run(|| {
            let drops = Rc::new(Cell::new(0));
            // Finished before the handle goes: dropped with the handle.
            let d = drops.clone();
            let h = crate::spawn(move || Counted(d));
            h.wait().unwrap();
            assert_eq!(drops.get(), 0);
            drop(h);
            assert_eq!(drops.get(), 1);
            // The handle goes first: dropped as the thread ends.
            let d = drops.clone();
            drop(crate::spawn(move || Counted(d)));
            crate::yield_now();
            assert_eq!(drops.get(), 2);
            // Joined: the caller owns it.
            let d = drops.clone();
            let v = crate::spawn(move || Counted(d)).join().unwrap();
            assert_eq!(drops.get(), 2);
            drop(v);
            assert_eq!(drops.get(), 3);
            // Boxed ones alike.
            let d = drops.clone();
            let h = crate::spawn(move || (Counted(d), [0u64; 16]));
            h.wait().unwrap();
            drop(h);
            assert_eq!(drops.get(), 4);
        });
    }

    #[test]
    fn a_reused_block_carries_nothing_of_its_last_thread() {
        crate::run(|| {
            let h = crate::spawn(|| String::from("first"));
            let first = block(&h);
            // Joined after a wait (a joiner entry), then a detached one.
            h.wait().unwrap();
            assert_eq!(h.join().unwrap(), "first");
            let h = crate::spawn(|| 5u64);
            assert_eq!(block(&h), first);
            assert!(!h.coro.0.result.is_full());
            assert!(h.coro.0.tail.joiners.borrow().is_empty());
            assert!(!h.coro.0.detached.get());
            assert_eq!(h.join().unwrap(), 5);
            drop(crate::spawn(|| 6u64));
            crate::yield_now();
            let h = crate::spawn(|| 7u64);
            assert_eq!(block(&h), first);
            assert!(!h.coro.0.detached.get());
            assert_eq!(h.join().unwrap(), 7);
        });
    }

    #[test]
    fn a_block_with_a_live_handle_is_never_reused() {
        crate::run(|| {
            // Waited on but not joined: the handle keeps the block, with
            // the result in it.
            let h = crate::spawn(|| 1u64);
            h.wait().unwrap();
            let other = crate::spawn(|| 2u64);
            assert_ne!(block(&other), block(&h));
            assert_eq!(other.join().unwrap(), 2);
            assert_eq!(h.join().unwrap(), 1);
        });
    }

    #[test]
    fn every_waiter_on_a_shared_handle_wakes() {
        crate::run(|| {
            let h = Rc::new(crate::spawn(|| {
                crate::yield_now();
                3u64
            }));
            let woken = Rc::new(Cell::new(0));
            let waiters: Vec<_> = (0..3)
                .map(|_| {
                    let (h, woken) = (h.clone(), woken.clone());
                    crate::spawn(move || {
                        h.wait().unwrap();
                        woken.set(woken.get() + 1);
                    })
                })
                .collect();
            for w in waiters {
                w.join().unwrap();
            }
            assert_eq!(woken.get(), 3);
            let h = Rc::try_unwrap(h).unwrap_or_else(|_| unreachable!("last handle"));
            assert_eq!(h.join().unwrap(), 3);
        });
    }
}
