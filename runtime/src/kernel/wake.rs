//! Waking a parked thread, and the thread's public handle: [`make_ready`]
//! (the one function that puts a task on a ready queue, and only its own
//! runtime's), [`Waiter`] (a wake for one particular park) and [`Coro`].

use std::fmt;
use std::rc::Rc;

use crate::kernel::context;
use crate::kernel::error::{ScheduleError, ScheduleState};
use crate::kernel::seams::Observer;
use crate::kernel::stack;
use crate::kernel::task::{Task, ThreadState};

/// Wakes a parked task: it goes to the back of its runtime's ready queue.
///
/// Returns `false`, and does nothing, when the task is not parked or its
/// runtime is not the one running on this OS thread (no runtime runs, or
/// another one does): the task belongs to a table this scheduler does not
/// own. It never panics: it is called from destructors (a lock guard
/// handing off), also while a thread unwinds.
#[inline(always)]
pub(crate) fn make_ready(task: &Rc<Task>) -> bool {
    if task.state.get() != ThreadState::Parked {
        return false;
    }
    context::try_with_sched(|s| {
        if s.id != task.runtime {
            return false;
        }
        task.state.set(ThreadState::Ready);
        s.observers.woken(s, task);
        s.ready.borrow_mut().push_back(task.clone());
        true
    })
    .unwrap_or(false)
}

/// A registration for one particular park of one task.
///
/// [`Waiter::wake`] schedules the task only if it is still parked in that same
/// park; a stale waiter (the task timed out, was interrupted, or moved on)
/// does nothing and says so.
pub(crate) struct Waiter {
    pub(in crate::kernel) task: Rc<Task>,
    pub(in crate::kernel) gen: u64,
}

impl Waiter {
    /// A waiter for the current task's next park; `what` names the wait
    /// in the panic outside a green thread.
    pub(crate) fn current(what: &str) -> Waiter {
        let task = context::current_task_rc(what);
        let gen = task.park_gen.get();
        Waiter { task, gen }
    }

    /// Schedules the task if it is still in the park this waiter was made for
    /// (and belongs to the running runtime). Returns whether it did.
    pub(crate) fn wake(&self) -> bool {
        self.is_waiting() && make_ready(&self.task)
    }

    /// Starts bringing what a wake reads of the task's block into the
    /// cache: its first 48 bytes (see `Reactor::prefetch_sources`).
    #[inline]
    pub(crate) fn prefetch_task(&self) {
        stack::prefetch_range(Rc::as_ptr(&self.task).cast::<i8>(), 48);
    }

    /// The task has finished (or was leaked at shutdown).
    pub(crate) fn is_dead(&self) -> bool {
        self.task.state.get() == ThreadState::Dead
    }

    /// The task is still parked in the park this waiter was made for.
    pub(crate) fn is_waiting(&self) -> bool {
        self.task.state.get() == ThreadState::Parked && self.task.park_gen.get() == self.gen
    }

    /// A waiter for `c`'s current park (tests build queues of them).
    #[cfg(test)]
    pub(crate) fn of(c: &Coro) -> Waiter {
        Waiter {
            task: c.0.clone(),
            gen: c.0.park_gen.get(),
        }
    }

    /// The id of the waiting thread.
    #[cfg(test)]
    pub(crate) fn thread_id(&self) -> u64 {
        self.task.id
    }
}

impl fmt::Debug for Waiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Waiter")
            .field("thread", &self.task.id)
            .field("gen", &self.gen)
            .finish()
    }
}

/// A handle to a green thread, like [`std::thread::Thread`].
///
/// Cloning is cheap. A `Coro` can outlive its thread; operations on a dead
/// thread report it ([`ScheduleError`]).
///
/// # `!Send`
///
/// Green threads never leave the OS thread of their runtime, so neither do
/// their handles:
///
/// ```compile_fail
/// fn send<T: Send>() {}
/// send::<coro::Coro>();
/// ```
#[derive(Clone)]
pub struct Coro(pub(crate) Rc<Task>);

impl Coro {
    /// The thread's id, unique within its runtime (the first thread is 1).
    pub fn id(&self) -> u64 {
        self.0.id
    }

    /// The name given with [`Builder::name`](crate::Builder::name), if any.
    pub fn name(&self) -> Option<&str> {
        self.0.name.as_deref()
    }

    /// The thread's current state.
    pub fn state(&self) -> ThreadState {
        self.0.state.get()
    }

    /// Schedules a thread suspended in [`park`](crate::park): its `park`
    /// returns `Ok(())`.
    ///
    /// # No wake-up token
    ///
    /// Unlike [`std::thread::Thread::unpark`], this keeps no token: unparking
    /// a thread that is not parked changes nothing and returns an error, and
    /// the thread's next `park` suspends as usual. std needs the token
    /// because an OS thread can be unparked by another OS thread between
    /// deciding to park and parking. A green thread cannot: no other thread
    /// of its runtime runs until it suspends, so registering somewhere and
    /// then parking, with no blocking call between, never misses a wake-up.
    /// An unpark that finds the thread not parked is therefore a bug in the
    /// caller (a double wake, or a wake of the wrong thread), and it is
    /// reported rather than saved for a later, unrelated park.
    ///
    /// # Errors
    ///
    /// A [`ScheduleError`] if the thread is not parked: it is already
    /// scheduled (ready or not yet started), running (a thread unparking
    /// itself) or dead; or if it belongs to a runtime other than the one
    /// running on this OS thread. This is never a silent double wake.
    ///
    /// # Examples
    ///
    /// ```
    /// coro::run(|| {
    ///     let me = coro::current();
    ///     let waker = coro::spawn(move || me.unpark());
    ///     coro::park().unwrap();                   // suspended until woken
    ///     assert!(waker.join().unwrap().is_ok());
    ///     assert!(coro::current().unpark().is_err()); // running: ScheduleError
    /// });
    /// ```
    pub fn unpark(&self) -> Result<(), ScheduleError> {
        match self.0.state.get() {
            ThreadState::Parked if make_ready(&self.0) => Ok(()),
            ThreadState::Parked => Err(self.foreign()),
            s => Err(ScheduleError {
                id: self.0.id,
                state: ScheduleState::Thread(s),
            }),
        }
    }

    /// The error for a thread of a runtime that is not running here.
    fn foreign(&self) -> ScheduleError {
        ScheduleError {
            id: self.0.id,
            state: ScheduleState::ForeignRuntime,
        }
    }

    /// Interrupts the thread: its current blocking call (if it is parked) or
    /// its next one fails with [`WaitError::Interrupted`](crate::WaitError).
    ///
    /// # Semantics
    ///
    /// * Parked: it is woken at once and its blocking call returns the error.
    /// * Already scheduled by an ordinary wake (a primitive handed it
    ///   something and it has not run yet): **the interrupt wins**, as in
    ///   Shrapnel; its blocking call returns the error, and the primitive
    ///   passes what it handed over on to the next waiter.
    /// * Ready from a `yield_now`, or running (interrupting itself): the flag
    ///   stays set and its next blocking call fails.
    /// * Not yet started: it starts normally and its first blocking call fails.
    ///   (Its closure always runs, so values moved into it are handled by the
    ///   thread's own code.)
    ///
    /// * Inside a shielded [`CancelScope`](crate::CancelScope): it gets
    ///   there all the same. A shield keeps out the cancellations of the
    ///   scopes around it; an interrupt targets the thread.
    /// * Waiting at the end of a [`scope`](crate::scope): the scope is
    ///   cancelled (its threads end sooner) and goes on waiting; the
    ///   interrupt stays pending for the next blocking call after it.
    ///
    /// An interrupt is consumed by the one blocking call that reports it.
    ///
    /// # Errors
    ///
    /// A [`ScheduleError`] if the thread is dead, or is parked in a runtime
    /// other than the one running on this OS thread.
    pub fn interrupt(&self) -> Result<(), ScheduleError> {
        let t = &self.0;
        match t.state.get() {
            ThreadState::Dead => Err(ScheduleError {
                id: t.id,
                state: ScheduleState::Thread(ThreadState::Dead),
            }),
            ThreadState::Parked => {
                if !make_ready(t) {
                    return Err(self.foreign());
                }
                t.interrupted.set(true);
                Ok(())
            }
            _ => {
                t.interrupted.set(true);
                Ok(())
            }
        }
    }

    /// `true` if both handles refer to the same green thread.
    pub fn ptr_eq(&self, other: &Coro) -> bool {
        Rc::ptr_eq(&self.0, &other.0)
    }
}

impl PartialEq for Coro {
    fn eq(&self, other: &Coro) -> bool {
        self.ptr_eq(other)
    }
}

impl Eq for Coro {}

impl fmt::Debug for Coro {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Coro")
            .field("id", &self.0.id)
            .field("name", &self.0.name)
            .field("state", &self.0.state.get())
            .finish()
    }
}
