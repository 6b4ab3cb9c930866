//! The green thread control block ([`Task`]), its public handle [`Coro`], and
//! the wake rules: unpark, interrupt, and waiters that only wake the park they
//! were registered for.
//!
//! # Design
//!
//! A task is shared through `Rc`: the thread table, the ready queue, timer
//! entries and waiter lists each hold one. Its fields are `Cell`s because only
//! one green thread of a runtime runs at a time, on one OS thread.
//!
//! Every park has a generation (`park_gen`, bumped whenever a park ends,
//! also when it fails before suspending). A [`Waiter`] (and a sleep's timer)
//! remembers the generation it was made for, so a wake-up that arrives after
//! the waiter gave up (timed out, was interrupted) can never wake a later,
//! unrelated park of the same thread: nothing is woken twice.
//!
//! # Invariant: a task is only woken by the runtime that owns it
//!
//! Each task records the id of the runtime that spawned it
//! ([`Task::runtime`]). [`make_ready`], the one function that puts a task on
//! a ready queue, does so only when that runtime is the one running on this
//! OS thread; otherwise it refuses (and never panics, since it runs inside
//! destructors such as a lock guard's). So a task can never be resumed by a
//! scheduler whose thread table and stack pool are not its own.

use std::cell::{Cell, RefCell};
use std::fmt;
use std::rc::Rc;
use std::sync::Arc;

use corosensei::{Coroutine, Yielder};

use crate::cancel::TaskCancel;
use crate::context;
use crate::error::ScheduleError;
use crate::result_slot::ResultSlot;
use crate::stack::{GreenStack, ThreadStack};

pub(crate) type GreenCoroutine = Coroutine<(), (), (), GreenStack>;

/// Where a green thread is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ThreadState {
    /// Spawned and queued, has not run yet.
    New,
    /// In the ready queue.
    Ready,
    /// Running now (the caller of [`threads`](crate::threads) itself).
    Running,
    /// Suspended in a blocking call until something wakes it.
    Parked,
    /// Finished; only seen through a stale [`Coro`] handle.
    Dead,
}

impl ThreadState {
    pub(crate) fn name(self) -> &'static str {
        match self {
            ThreadState::New => "ready",
            ThreadState::Ready => "ready",
            ThreadState::Running => "running",
            ThreadState::Parked => "parked",
            ThreadState::Dead => "dead",
        }
    }
}

/// The control block of one green thread.
///
/// # Layout
///
/// `repr(C)`, with the fields a park, a wake and a resume touch first, so
/// that they share few cache lines instead of being spread over the whole
/// block: with a thousand threads alive the blocks do not all fit in a
/// core's L2, and every line a switch touches is a likely miss. The fields
/// every spawn writes follow. Last comes the tail: fields a plain thread
/// never fills (joiners, wait target, unwind counts, locals, future
/// waker). A kept block's tail is always empty (`task_pool::recycle`
/// empties it when `cold_used` is set), so [`Task::reinit`] leaves it
/// alone, and a plain thread's spawn, run, finish and join never touch its
/// lines: about two fewer misses a thread in a cold spawn+join.
#[repr(C)]
pub(crate) struct Task {
    // Hot: touched on every park, wake and resume.
    pub(crate) state: Cell<ThreadState>,
    /// An interrupt is pending: the current or next blocking call fails.
    pub(crate) interrupted: Cell<bool>,
    /// Shutdown asked this task to unwind: its next blocking call or yield
    /// raises `sched::ForcedUnwind` (see `crate::suspend::forced_unwind_point`).
    pub(crate) unwinding: Cell<bool>,
    /// Set when a `Wake` timer of this task fires, cleared when a sleep
    /// registers one: tells a sleep whether its timer entry left the heap.
    pub(crate) timer_fired: Cell<bool>,
    /// Reported as leaked (see `waits`): it is reported once per park.
    pub(crate) leaked: Cell<bool>,
    /// One of the cold fields (its name, cancel scopes or nursery, or any
    /// field of the tail: joiners, wait target, future waker,
    /// green-thread locals, unwind counts) has been filled at some point.
    /// `task_pool::recycle` empties those only then: keeping the block of
    /// a plain thread reads none of their cache lines. Set by whatever
    /// fills them ([`Task::use_cold`]).
    pub(crate) cold_used: Cell<bool>,
    /// Its `JoinHandle` is gone: the result is dropped, not kept.
    pub(crate) detached: Cell<bool>,
    /// Its tag in the flight recorder's resume ring, shifted as the ring
    /// stores it (the state after a resume is or-ed in; see `flight`).
    pub(crate) flight_tag: u32,
    pub(crate) selfish_left: Cell<u32>,
    /// Depth of `no_suspend` regions.
    pub(crate) no_suspend: Cell<u32>,
    pub(crate) selfish_max: Cell<u32>,
    /// Generation of the current park; bumped each time a park returns.
    pub(crate) park_gen: Cell<u64>,
    /// Its id: every wake and resume records it (flight recorder, watchdog).
    pub(crate) id: u64,
    /// Id of the runtime that spawned it (see the module docs); every wake
    /// checks it.
    pub(crate) runtime: u64,
    /// # Invariant
    /// Null until the coroutine first runs; afterwards points at the
    /// `Yielder` on the coroutine's own stack, which lives as long as the
    /// coroutine has not returned. Only dereferenced by the task itself while
    /// it runs.
    pub(crate) yielder: Cell<*const Yielder<(), ()>>,
    /// Key in the scheduler's thread table.
    pub(crate) key: Cell<usize>,
    /// Scheduler clock ticks (to its last poll) when its current park began.
    pub(crate) wait_since: Cell<u64>,
    /// The caller of the blocking call it is parked in, where known.
    pub(crate) wait_site: Cell<Option<&'static std::panic::Location<'static>>>,
    /// What the task waits on while parked, for `threads()`.
    pub(crate) waiting_on: Cell<&'static str>,
    /// Its stack's state: where it last suspended (`stack`).
    pub(crate) stack: ThreadStack,
    /// The scopes it runs inside (`with_timeout`, cancel scopes, nurseries)
    /// and whether one of them is cancelled (see `cancel`).
    pub(crate) cancel: TaskCancel,
    /// The coroutine; borrowed mutably only by the scheduler while it resumes
    /// it, taken out when the thread finishes or is unwound.
    pub(crate) coroutine: RefCell<Option<GreenCoroutine>>,
    /// Its result, from when it finishes until its `JoinHandle` takes it
    /// (see `result_slot` for who fills and reads it, as which type).
    pub(crate) result: ResultSlot,
    // Written by every spawn, read at finish and by reports.
    pub(crate) name: Option<Arc<str>>,
    /// Lowest address of the stack's slot (its guard gap starts here), the
    /// guard gap's size, and the usable size above it; read by the
    /// stack-overflow handler.
    pub(crate) stack_limit: usize,
    pub(crate) stack_guard: usize,
    pub(crate) stack_size: usize,
    /// Clock ticks when it was spawned (the scheduler's coarse clock: its
    /// age in `threads()`).
    pub(crate) spawned_at: u64,
    /// What a plain thread never fills: last, so that a plain thread
    /// never touches its lines (see the layout notes above).
    pub(crate) tail: Tail,
}

/// The fields of a [`Task`] a plain thread never fills: the tail of the
/// block.
///
/// # Invariant
///
/// In every block `task_pool` keeps for reuse, the tail is empty
/// ([`Tail::is_empty`]): whatever fills one of its fields reaches it
/// through [`Task::tail_to_fill`], which marks the task `cold_used`, and `task_pool::recycle` resets
/// the tail of a marked task before keeping it. So [`Task::reinit`] leaves
/// the tail alone.
#[derive(Default)]
pub(crate) struct Tail {
    /// Every green thread waiting for it to finish (`JoinHandle::wait`: a
    /// handle can be shared, so there may be several); all are woken when
    /// it ends.
    pub(crate) joiners: RefCell<Vec<Waiter>>,
    /// Who-waits-on-whom (see `waits`): the object it is parked on, set by
    /// [`park_on`](crate::park_on) for the length of the park.
    pub(crate) wait_target: Cell<Option<Rc<crate::waits::WaitTarget>>>,
    /// The green thread it is parked joining (0: none).
    pub(crate) wait_thread: Cell<u64>,
    /// Times the task raised shutdown's unwind.
    pub(crate) unwind_rounds: Cell<u32>,
    /// Blocking calls refused while the task was being unwound (bounds a
    /// loop that keeps catching its unwind while the OS thread panics).
    pub(crate) unwind_refusals: Cell<u32>,
    /// A refused `yield_now` was logged (it is logged once per thread).
    pub(crate) yield_refusal_logged: Cell<bool>,
    /// Its run of blocking calls refused at once (see `spin`).
    pub(crate) spin: crate::spin::Streak,
    /// Its `green_local!` values (see `local`).
    pub(crate) locals: RefCell<crate::local::Locals>,
    /// The waker state of its last `future::block_on`, kept for the next
    /// one when no clone of that waker survived (see `future`).
    pub(crate) future_wake: Cell<Option<Arc<crate::future::FutureWake>>>,
}

impl Tail {
    /// Whether every field holds what `Tail::default()` holds.
    pub(crate) fn is_empty(&mut self) -> bool {
        let Tail {
            joiners,
            wait_target,
            wait_thread,
            unwind_rounds,
            unwind_refusals,
            yield_refusal_logged,
            spin,
            locals,
            future_wake,
        } = self;
        joiners.get_mut().is_empty()
            && wait_target.get_mut().is_none()
            && wait_thread.get() == 0
            && unwind_rounds.get() == 0
            && unwind_refusals.get() == 0
            && !yield_refusal_logged.get()
            && spin.is_empty()
            && locals.get_mut().is_empty()
            && future_wake.get_mut().is_none()
    }
}

/// What a new task is made of: what [`Task::new`] and [`Task::reinit`]
/// take.
pub(crate) struct TaskInit {
    pub(crate) id: u64,
    /// Its flight-recorder tag (`flight::Recorder::tag`).
    pub(crate) flight_tag: u32,
    pub(crate) runtime: u64,
    pub(crate) name: Option<Arc<str>>,
    pub(crate) selfishness: u32,
    pub(crate) stack_limit: usize,
    pub(crate) stack_guard: usize,
    pub(crate) stack_size: usize,
    /// Clock ticks of its spawn.
    pub(crate) spawned_at: u64,
}

impl Task {
    pub(crate) fn new(init: TaskInit) -> Task {
        let TaskInit {
            id,
            flight_tag,
            runtime,
            name,
            selfishness,
            stack_limit,
            stack_guard,
            stack_size,
            spawned_at,
        } = init;
        Task {
            id,
            flight_tag,
            runtime,
            cold_used: Cell::new(name.is_some()),
            detached: Cell::new(false),
            result: ResultSlot::new(),
            name,
            key: Cell::new(usize::MAX),
            state: Cell::new(ThreadState::New),
            coroutine: RefCell::new(None),
            yielder: Cell::new(std::ptr::null()),
            park_gen: Cell::new(0),
            interrupted: Cell::new(false),
            cancel: TaskCancel::default(),
            selfish_left: Cell::new(selfishness),
            selfish_max: Cell::new(selfishness),
            no_suspend: Cell::new(0),
            waiting_on: Cell::new(""),
            wait_site: Cell::new(None),
            wait_since: Cell::new(0),
            leaked: Cell::new(false),
            stack_limit,
            stack_guard,
            stack_size,
            unwinding: Cell::new(false),
            timer_fired: Cell::new(false),
            spawned_at,
            stack: ThreadStack::default(),
            tail: Tail::default(),
        }
    }

    /// Makes a kept block into a new task, in place: what
    /// `*self = Task::new(init)` does, without building the task beside
    /// the block and copying it over, and without the drop checks of
    /// fields `task_pool::recycle` left empty (when it keeps a block the
    /// coroutine is gone and the cold fields are empty). Every field is
    /// named (the pattern is exhaustive), so a field added to `Task` fails
    /// to compile here until it is reset too; the tail is only checked
    /// (in debug builds), since a kept block's is empty (see [`Tail`]).
    #[inline(always)]
    pub(crate) fn reinit(&mut self, init: TaskInit) {
        let Task {
            state,
            interrupted,
            unwinding,
            timer_fired,
            leaked,
            cold_used,
            detached,
            flight_tag,
            selfish_left,
            no_suspend,
            selfish_max,
            park_gen,
            id,
            runtime,
            yielder,
            key,
            wait_since,
            wait_site,
            waiting_on,
            stack,
            cancel,
            coroutine,
            result,
            name,
            stack_limit,
            stack_guard,
            stack_size,
            spawned_at,
            tail,
        } = self;
        state.set(ThreadState::New);
        interrupted.set(false);
        unwinding.set(false);
        timer_fired.set(false);
        leaked.set(false);
        cold_used.set(init.name.is_some());
        detached.set(false);
        *flight_tag = init.flight_tag;
        selfish_left.set(init.selfishness);
        no_suspend.set(0);
        selfish_max.set(init.selfishness);
        park_gen.set(0);
        *id = init.id;
        *runtime = init.runtime;
        yielder.set(std::ptr::null());
        key.set(usize::MAX);
        wait_since.set(0);
        wait_site.set(None);
        waiting_on.set("");
        *stack = ThreadStack::default();
        if cancel.pending.get()
            || cancel.parent.get().is_some()
            || !cancel.scopes.get_mut().is_empty()
        {
            *cancel = TaskCancel::default();
        } else {
            cancel.reset_seq();
        }
        *stack_limit = init.stack_limit;
        *stack_guard = init.stack_guard;
        *stack_size = init.stack_size;
        *spawned_at = init.spawned_at;
        // Empty in a kept block; reset all the same (a drop check).
        *coroutine.get_mut() = None;
        // Empty in a kept block (its handle emptied it before letting go,
        // see `result_slot`); a value left by a misuse is leaked, never
        // read as the next thread's type.
        *result = ResultSlot::new();
        *name = init.name;
        // The tail is not written: a kept block's is empty (the invariant
        // on `Tail`).
        debug_assert!(tail.is_empty());
    }

    /// Notes that a cold field holding references is being filled (see
    /// [`Task::cold_used`]).
    #[inline]
    pub(crate) fn use_cold(&self) {
        self.cold_used.set(true);
    }

    /// The tail, for filling one of its fields: marks the task first, so
    /// that `task_pool::recycle` empties the tail again (the invariant on
    /// [`Tail`]). Every write that may leave a tail field filled when the
    /// thread ends goes through here.
    #[inline]
    pub(crate) fn tail_to_fill(&self) -> &Tail {
        self.use_cold();
        &self.tail
    }

    pub(crate) fn display_name(&self) -> &str {
        self.name.as_deref().unwrap_or("<unnamed>")
    }
}

impl Drop for Task {
    /// The backstop of the invariant that tasks are unwound by their own
    /// scheduler with the runtime current (`runtime::shutdown`, run by a
    /// guard in `block_on` on every path, takes every coroutine out before
    /// the runtime leaves). A coroutine still here was never finished by its
    /// scheduler: dropping it would unwind its stack with no runtime (or
    /// another one) current, running code that expects its own. It is leaked
    /// instead (its stack and what lives on it stay allocated), and said so.
    fn drop(&mut self) {
        // Locals left here belong to a leaked thread: leaked with it.
        std::mem::forget(std::mem::take(self.tail.locals.get_mut()));
        if let Some(co) = self.coroutine.get_mut().take() {
            if co.done() {
                return;
            }
            log::error!(
                target: "coro",
                "green thread #{} '{}' was dropped without being finished by its runtime; \
                 its stack is leaked rather than unwound outside the runtime",
                self.id,
                self.display_name(),
            );
            std::mem::forget(co);
        }
    }
}

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
        s.flight.woken(crate::flight::key(s), task.id);
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
    task: Rc<Task>,
    gen: u64,
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
    /// cache: its first 48 bytes, and the `Rc`'s counts before them (see
    /// `Reactor::prefetch_sources`). The 16 bytes of counts are std's
    /// layout of an `Rc` block, not a promise: were it to change, the hint
    /// would miss, and nothing else.
    #[inline]
    pub(crate) fn prefetch_task(&self) {
        crate::stack::prefetch_range(Rc::as_ptr(&self.task).cast::<i8>().wrapping_sub(16), 64);
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
                state: s.name(),
            }),
        }
    }

    /// The error for a thread of a runtime that is not running here.
    fn foreign(&self) -> ScheduleError {
        ScheduleError {
            id: self.0.id,
            state: "owned by a runtime that is not running on this OS thread",
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
                state: "dead",
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
#[cfg(test)]
mod reinit_tests {
    use super::{Task, TaskInit, ThreadState};
    use std::sync::Arc;

    fn init(id: u64, name: Option<&str>) -> TaskInit {
        TaskInit {
            id,
            flight_tag: (id as u32 + 5) << 4,
            runtime: id + 100,
            name: name.map(Into::into),
            selfishness: id as u32 + 3,
            stack_limit: 0x1000 * id as usize,
            stack_guard: 0x2000,
            stack_size: 0x8000 + id as usize,
            spawned_at: 1_000 * id,
        }
    }

    /// Every field of `t` that can be compared, as text.
    fn fields(t: &Task) -> String {
        format!(
            "{:?}",
            (
                (
                    t.state.get(),
                    t.interrupted.get(),
                    t.unwinding.get(),
                    t.timer_fired.get(),
                    t.leaked.get(),
                    t.cold_used.get(),
                    t.flight_tag,
                    t.selfish_left.get(),
                    t.no_suspend.get(),
                    t.selfish_max.get(),
                    t.park_gen.get(),
                    t.id,
                ),
                (
                    t.runtime,
                    t.yielder.get(),
                    t.key.get(),
                    t.wait_since.get(),
                    t.wait_site.get().map(|l| l.line()),
                    t.tail.wait_thread.get(),
                    t.waiting_on.get(),
                    t.stack.sp.get(),
                    t.cancel.pending.get(),
                    t.cancel.scopes.borrow().len(),
                    t.cancel.parent.get().is_some(),
                    t.coroutine.borrow().is_some(),
                ),
                (
                    t.name.clone(),
                    t.stack_limit,
                    t.stack_guard,
                    t.stack_size,
                    t.tail.unwind_rounds.get(),
                    t.tail.unwind_refusals.get(),
                    t.tail.yield_refusal_logged.get(),
                    t.tail.spin.count.get(),
                    t.spawned_at,
                    t.tail.locals.borrow().len(),
                ),
            )
        )
    }

    #[test]
    fn a_reinit_block_is_a_new_task() {
        let mut t = Task::new(init(1, Some("old")));
        // Dirty what a thread's life dirties.
        t.state.set(ThreadState::Dead);
        t.interrupted.set(true);
        t.unwinding.set(true);
        t.timer_fired.set(true);
        t.leaked.set(true);
        t.selfish_left.set(0);
        t.no_suspend.set(2);
        t.park_gen.set(9);
        t.key.set(4);
        t.wait_since.set(5);
        t.wait_site.set(Some(std::panic::Location::caller()));
        t.waiting_on.set("x");
        t.stack.sp.set(0x1234);
        t.cancel.pending.set(true);
        // What recycle leaves (the tail, empty, is not for reinit to
        // reset: see `Tail`).
        t.name = None;
        for (id, name) in [(2, None), (3, Some("new"))] {
            t.reinit(init(id, name));
            assert_eq!(fields(&t), fields(&Task::new(init(id, name))));
        }
        assert_eq!(t.name.as_deref(), Some("new"));
        let _: Option<Arc<str>> = t.name.take();
    }

    /// `Tail::is_empty` sees each of its fields filled.
    #[test]
    fn a_tail_with_any_field_filled_is_not_empty() {
        let other = std::rc::Rc::new(Task::new(init(9, None)));
        let fills: [&dyn Fn(&super::Tail); 9] = [
            &|t| {
                t.joiners.borrow_mut().push(super::Waiter {
                    task: other.clone(),
                    gen: 0,
                })
            },
            &|t| t.wait_target.set(Some(crate::WaitTarget::new("x"))),
            &|t| t.wait_thread.set(3),
            &|t| t.unwind_rounds.set(1),
            &|t| t.unwind_refusals.set(1),
            &|t| t.yield_refusal_logged.set(true),
            &|t| t.spin.gen.set(1),
            &|t| t.spin.count.set(1),
            &|t| t.locals.borrow_mut().push((1, std::rc::Rc::new(5u8))),
        ];
        for (i, fill) in fills.iter().enumerate() {
            let mut tail = super::Tail::default();
            assert!(tail.is_empty());
            fill(&tail);
            assert!(!tail.is_empty(), "field {i} filled, yet empty");
        }
    }
}

#[cfg(test)]
mod layout_tests {
    use super::Task;
    use std::mem::{offset_of, size_of};

    /// The fields a park, a wake and a resume touch come first (see the
    /// layout notes on `Task`): they end before the cold ones start, within
    /// five cache lines of the block with the `Rc`'s two counts.
    #[test]
    fn hot_fields_come_first() {
        let hot_end = offset_of!(Task, coroutine)
            + size_of::<std::cell::RefCell<Option<super::GreenCoroutine>>>();
        assert!(
            hot_end <= offset_of!(Task, name),
            "hot fields end at {hot_end}"
        );
        assert!(16 + hot_end <= 5 * 64, "hot fields end at {hot_end}");
        assert!(offset_of!(Task, state) < 64 && offset_of!(Task, runtime) < 64 - 16);
    }

    /// The tail (which `reinit` does not write) is the block's last field,
    /// so a plain thread never touches its lines.
    #[test]
    fn the_tail_comes_last() {
        assert_eq!(
            offset_of!(Task, tail) + size_of::<super::Tail>(),
            size_of::<Task>()
        );
        assert!(offset_of!(Task, spawned_at) < offset_of!(Task, tail));
    }
}
