//! Nurseries: [`scope`] runs a closure that starts green threads
//! ([`Scope::spawn`]) which may borrow from the caller's stack frame, cancels
//! them together, and returns only after every one of them has ended.
//!
//! # Design
//!
//! A scope is a [`CancelScope`] entered on the calling thread (the *owner*)
//! plus the list of threads spawned in it (`cancel::Shared::children`).
//! Each such thread continues into the owner's scope stack below its own
//! (`cancel::Parent`), so the scope's cancellation, and that of every scope
//! around it, reaches it (see `cancel`). The thread's closure runs inside
//! `child_main`, whose `ChildLink` leaves the list when the closure is done
//! (returned, panicked or unwound) and wakes the owner when the list is
//! empty. The owner, after its closure returned (or panicked: caught, and
//! re-raised after the wait), parks until then with
//! `crate::kernel::suspend::park_unchecked`, which no interrupt or cancellation ends early.
//!
//! # Why borrowing is sound
//!
//! Spawned closures capture references that live only as long as the
//! caller's frame (`'scope`); the runtime runs them on another stack. That
//! is sound only if `scope` never returns, and never unwinds past its frame,
//! while one of those closures (or the result it produced, or a value it
//! captured) can still be touched. The argument, path by path:
//!
//! * **Return and body panic.** `scope` catches the body's panic, then
//!   waits in a loop until no thread of the scope is live (`State::wait_all`).
//!   A thread counts as ended only once its `ChildLink` was dropped, the
//!   last thing it does with `'scope` data (`child_main` drops its result
//!   packet and its closure before it); what runs on its stack after that
//!   (the runtime's `entry` epilogue) touches none.
//! * **Interrupt or cancel of the owner.** The wait ignores both: an
//!   interrupt cancels the scope (so the threads end sooner) and is kept for
//!   the owner's next blocking call; a cancellation of the owner's scopes
//!   reaches the threads by itself. The wait goes on.
//! * **Runtime shutdown.** The interrupt pass is the case above. In the
//!   forced-unwind pass, `runtime::shutdown` unwinds the deepest scope
//!   threads first and skips a thread that
//!   [`owns live threads`](crate::services::cancel::owns_live_threads) until they are
//!   unwound: the threads unwind first, while the frame they borrow from is
//!   intact. The owner's wait is no unwind point (`crate::kernel::suspend::park_unchecked`):
//!   should shutdown resume the owner to unwind it while its threads live
//!   anyway, it parks again, and shutdown leaks it after a few rounds; a
//!   leaked thread's stack is never freed nor unwound, so the borrowed frame
//!   stays. A `ForcedUnwind` raised in the body is caught like any panic of
//!   the body, and resumed after the wait. Past shutdown's unwind passes,
//!   what is left is leaked, which is safe in any order.
//! * **A leaked thread.** A thread that shutdown leaks (it caught its
//!   unwind and blocked again 8 times) never runs again and its stack is
//!   never freed or unwound, so it never touches the borrowed data; it is
//!   dead, so it does not hold its owner back, and the owner's frame may go.
//! * **Anything else.** A guard (`Waiting`) aborts the process if `scope`
//!   is left by an unwind of its own code while a thread is live: freeing
//!   memory a thread still uses is never an option.

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::error::Error;
use std::fmt;
use std::io;
use std::marker::PhantomData;
use std::mem;
use std::panic::{self, AssertUnwindSafe};
use std::rc::Rc;
use std::sync::Arc;

use crate::api::cancel_scope::CancelScope;
use crate::kernel::context;
use crate::kernel::error::{JoinError, WaitError};
use crate::kernel::sched::ForcedUnwind;
use crate::kernel::spawn::{Builder, JoinHandle};
use crate::kernel::task::{Task, ThreadState};
use crate::kernel::wake::{Coro, Waiter};
use crate::services::cancel::{self, Parent};

type BoxError = Box<dyn Error + Send + Sync>;

/// Runs `f` with a [`Scope`] in which it can start green threads that
/// borrow from the caller, and returns only after all of them have ended:
/// `std::thread::scope` on green threads, with Trio's nursery semantics
/// (cancelled together, failures propagate).
///
/// Threads spawned in the scope (also by each other, into the same scope)
/// may borrow anything that outlives the call, `&` or `&mut`, with no
/// `'static`, `Rc` or clone. `scope` waits for them when `f` returns, when
/// `f` panics (after cancelling them), when the waiting thread is
/// interrupted or cancelled (that cancels them; it still waits) and during
/// runtime shutdown (they are unwound before the frame they borrow from).
///
/// # Cancellation
///
/// The scope is a [`CancelScope`] ([`Scope::cancel_scope`]): cancelling it
/// makes the blocking calls of `f` and of every thread in the scope fail
/// with [`WaitError::Cancelled`], also in the scopes they open; a deadline
/// set on it applies to all of them. The cancels and deadlines of the
/// scopes around the call reach the threads as well.
///
/// # Failures
///
/// A thread *fails* when it panics, or when one started with
/// [`try_spawn`](Scope::try_spawn) returns `Err` while its scope was not
/// cancelled. The first failure cancels the scope (the other threads and
/// `f`). Errors returned after the scope was cancelled are taken to be that
/// cancellation's consequence and are not failures: the cancellations a
/// scope causes are absorbed.
///
/// When everything has ended, `scope` reports, in this order:
///
/// 1. a panic of `f`: resumed (as `std::thread::scope` does);
/// 2. the first thread panic whose handle nobody joined: resumed with the
///    thread's own payload;
/// 3. the first `try_spawn` error whose handle nobody joined: returned as
///    `Err(ScopeError)`, naming the thread.
///
/// A failure whose [`ScopedJoinHandle`] was joined was handled by whoever
/// joined it (it still cancelled the scope when it happened). Otherwise
/// `scope` returns `Ok` with `f`'s value (which may carry the errors of a
/// cancellation of the scope, e.g. after [`Scope::cancel`]).
///
/// # Panics
///
/// Outside a green thread; inside [`no_suspend`](crate::no_suspend) or in a
/// destructor run by an unwind (the scope could not wait there). And as
/// above, with the panic of `f` or of a thread.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
///
/// coro::run(|| {
///     let mut counts = vec![0u32; 4];
///     let words = ["a", "bb", "ccc"];
///     coro::scope(|s| {
///         for (i, slot) in counts.iter_mut().enumerate() {
///             let words = &words; // borrowed, not cloned
///             s.spawn(move || {
///                 coro::sleep(Duration::from_millis(1)).unwrap();
///                 *slot = words.iter().filter(|w| w.len() > i).count() as u32;
///             });
///         }
///     })
///     .unwrap();
///     assert_eq!(counts, [3, 2, 1, 0]); // every thread has ended
/// });
/// ```
///
/// A failure cancels the other threads and is reported once:
///
/// ```
/// use std::io;
/// use std::time::Duration;
///
/// coro::run(|| {
///     let r = coro::scope(|s| {
///         s.try_spawn(|| -> io::Result<()> {
///             coro::sleep(Duration::from_secs(60))?; // cancelled: absorbed
///             Ok(())
///         });
///         s.try_spawn(|| -> io::Result<()> { Err(io::Error::other("disk full")) });
///     });
///     assert_eq!(r.unwrap_err().error().to_string(), "disk full");
/// });
/// ```
#[track_caller]
pub fn scope<'env, F, T>(f: F) -> Result<T, ScopeError>
where
    F: for<'scope> FnOnce(&'scope Scope<'scope, 'env>) -> T,
{
    let owner = context::current_task_rc("coro::scope");
    if owner.no_suspend.get() > 0 || std::thread::panicking() {
        panic!(
            "coro::scope: a scope must be able to wait for its threads, which is not \
             allowed here (inside no_suspend, or in a destructor while unwinding)"
        );
    }
    let cancel = CancelScope::new();
    let entry = cancel::enter(&owner, &cancel.shared);
    let scope = Scope {
        state: Rc::new(State {
            cancel,
            owner,
            entry,
            waiter: RefCell::new(None),
            failures: RefCell::new(Vec::new()),
        }),
        scope: PhantomData,
        env: PhantomData,
    };
    let state = &*scope.state;
    // The scope's threads borrow from the owner's stack while the owner is
    // parked in `wait_all`: it must stay in place, not be copied out when
    // the owner has waited long (`stack::copy`'s invariant).
    let pin = state.owner.stack.pin();
    let waiting = Waiting(state);
    let body = panic::catch_unwind(AssertUnwindSafe(|| f(&scope)));
    if body.is_err() {
        state.cancel.cancel();
    }
    state.wait_all();
    // Every thread has ended: nothing can touch `'scope` data any more.
    mem::forget(waiting);
    drop(pin);
    let failures = mem::take(&mut *state.failures.borrow_mut());
    let outcomes: Vec<(u64, Option<Arc<str>>, Outcome)> = failures
        .into_iter()
        .filter_map(|f| (f.take)().map(|o| (f.thread, f.name, o)))
        .collect();
    context::with_current("coro::scope", |s, t| {
        cancel::exit(s, t, &state.cancel.shared, state.entry)
    });
    let value = match body {
        Ok(v) => v,
        Err(p) => panic::resume_unwind(p),
    };
    let mut error = None;
    for (thread, name, outcome) in outcomes {
        match outcome {
            Outcome::Panic(p) => panic::resume_unwind(p),
            Outcome::Error(e) => {
                error.get_or_insert(ScopeError {
                    thread,
                    name,
                    error: e,
                });
            }
        }
    }
    match error {
        Some(e) => Err(e),
        None => Ok(value),
    }
}

/// A scope to spawn green threads in; see [`scope`].
///
/// Threads spawned here may borrow anything that outlives the `scope` call
/// (`'env`); they all end before it returns (`'scope`).
pub struct Scope<'scope, 'env: 'scope> {
    state: Rc<State>,
    /// Invariance over `'scope` and `'env`, as `std::thread::Scope`.
    scope: PhantomData<&'scope mut &'scope ()>,
    env: PhantomData<&'env mut &'env ()>,
}

/// What the owner and the threads of one scope share.
struct State {
    /// The scope's cancel scope, entered on the owner.
    cancel: CancelScope,
    /// The thread that called `scope`.
    owner: Rc<Task>,
    /// Id of the cancel scope's entry on the owner's stack.
    entry: u64,
    /// The owner, parked at the end of the scope waiting for the last
    /// thread.
    waiter: RefCell<Option<Waiter>>,
    /// Failures in the order they happened; the owner takes them out before
    /// `scope` returns, on every path.
    failures: RefCell<Vec<Failure>>,
}

/// A thread that failed.
struct Failure {
    thread: u64,
    name: Option<Arc<str>>,
    /// Takes the panic or error out of the thread's result, unless a join
    /// took it first.
    ///
    /// # Invariant
    /// It holds the thread's `'scope` result packet (its lifetime is erased
    /// in [`State::fail`]); the owner takes every failure out and runs it
    /// before `scope` returns or unwinds, so none is run or dropped later.
    take: Box<dyn FnOnce() -> Option<Outcome>>,
}

enum Outcome {
    Panic(Box<dyn Any + Send>),
    Error(BoxError),
}

impl State {
    /// Whether a thread of the scope has not ended (a leaked one is dead
    /// and does not count).
    fn threads_live(&self) -> bool {
        self.cancel
            .shared
            .children
            .borrow()
            .iter()
            .any(|(_, t)| t.state.get() != ThreadState::Dead)
    }

    /// The owner's wait at the end of the scope: parks until no thread of
    /// the scope is live, whatever happens meanwhile (see the module docs).
    fn wait_all(&self) {
        let mut interrupted = false;
        loop {
            // An interrupt that came before the wait, or woke it.
            if context::with_current("coro::scope", |_, t| t.interrupted.replace(false)) {
                interrupted = true;
                self.cancel.cancel();
            }
            if !self.threads_live() {
                break;
            }
            *self.waiter.borrow_mut() = Some(Waiter::current("coro::scope"));
            crate::kernel::suspend::park_unchecked("scope");
            self.waiter.borrow_mut().take();
        }
        if interrupted {
            // For the owner's next blocking call, as `Coro::interrupt` says.
            context::with_current("coro::scope", |_, t| t.interrupted.set(true));
        }
    }
}

/// Aborts the process if `scope` is left by an unwind while one of its
/// threads is live (see the module docs: the paths that wait never unwind;
/// this is the backstop that makes it a guard, not a convention).
struct Waiting<'a>(&'a State);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if self.0.threads_live() {
            eprintln!(
                "coro::scope: unwinding out of a scope while its green threads still run \
                 would free memory they borrow; aborting"
            );
            std::process::abort();
        }
    }
}

/// Held by a scope's thread while it may touch `'scope` data; dropping it
/// tells the owner the thread is done with all of it.
struct ChildLink {
    state: Rc<State>,
    /// The thread's key in the scope's list of threads.
    key: usize,
}

impl Drop for ChildLink {
    fn drop(&mut self) {
        let empty = {
            let mut children = self.state.cancel.shared.children.borrow_mut();
            children.try_remove(self.key);
            children.is_empty()
        };
        if empty {
            if let Some(w) = self.state.waiter.borrow_mut().take() {
                w.wake();
            }
        }
    }
}

/// A scoped thread's closure and result, in one allocation shared by the
/// thread (which runs the closure) and its handle (which takes the result).
struct Child<F, T> {
    /// Taken by the thread when it starts.
    f: Cell<Option<F>>,
    result: RefCell<Option<Result<T, JoinError>>>,
    /// Whether a value the closure returned is a failure (`try_spawn`).
    failed: fn(&T) -> bool,
    /// The error inside a failed value.
    into_error: fn(T) -> Option<BoxError>,
}

/// A [`Child`] as its handle sees it (without the closure's type).
trait Packet<T> {
    fn result(&self) -> &RefCell<Option<Result<T, JoinError>>>;
}

impl<F, T> Packet<T> for Child<F, T> {
    fn result(&self) -> &RefCell<Option<Result<T, JoinError>>> {
        &self.result
    }
}

/// A [`Child`] as its thread sees it (without its types).
trait Run {
    fn run(self: Rc<Self>, link: ChildLink);
}

impl<F: FnOnce() -> T, T> Run for Child<F, T> {
    fn run(self: Rc<Self>, link: ChildLink) {
        child_main(link, self);
    }
}

/// What a scope's thread starts with.
struct Start {
    child: Rc<dyn Run>,
    /// Declared last: dropped last, also if the thread never runs.
    link: ChildLink,
}

/// The closure a scope's thread runs (see the module docs for what it
/// guarantees the owner).
fn child_main<F: FnOnce() -> T, T>(link: ChildLink, child: Rc<Child<F, T>>) {
    // Locals drop in reverse order: the child (its closure and result),
    // then the link, last.
    let link = link;
    let child = child;
    let f = child.f.take().expect("a scoped thread runs once");
    match panic::catch_unwind(AssertUnwindSafe(f)) {
        Ok(v) => {
            // Its own scopes are all closed: what it sees is the scope's.
            let fail = (child.failed)(&v)
                && !context::with_current("coro::scope", |_, t| cancel::visible_cancelled(t));
            *child.result.borrow_mut() = Some(Ok(v));
            if fail {
                link.state.fail(&child);
            }
        }
        Err(p) if p.is::<ForcedUnwind>() => {
            // Runtime shutdown unwinds this thread: let go of the scope,
            // then carry on unwinding (the runtime's `entry` reports it).
            drop(child);
            drop(link);
            panic::resume_unwind(p);
        }
        Err(p) => {
            context::with_sched("coro::scope", |s| {
                s.counters.panicked.set(s.counters.panicked.get() + 1)
            });
            *child.result.borrow_mut() = Some(Err(JoinError::Panicked(p)));
            link.state.fail(&child);
        }
    }
}

impl State {
    /// Records the running thread's failure and cancels the scope.
    fn fail<'scope, F: 'scope, T: 'scope>(&self, child: &Rc<Child<F, T>>) {
        let (thread, name) = context::with_current("coro::scope", |_, t| (t.id, t.name.clone()));
        let child = child.clone();
        let take: Box<dyn FnOnce() -> Option<Outcome> + 'scope> =
            Box::new(move || match child.result.borrow_mut().take()? {
                Ok(v) => (child.into_error)(v).map(Outcome::Error),
                Err(JoinError::Panicked(p)) => Some(Outcome::Panic(p)),
                Err(_) => None,
            });
        // SAFETY: only the lifetime changes. The owner takes this closure
        // out of `failures` and runs it after the last thread ended and
        // before `scope` returns or resumes an unwind (see `scope`); `State`
        // outlives the call only when a leaked thread holds it, and a
        // leaked thread never runs or drops anything again. So the child
        // it holds is never touched after `'scope`.
        let take = unsafe {
            mem::transmute::<
                Box<dyn FnOnce() -> Option<Outcome> + 'scope>,
                Box<dyn FnOnce() -> Option<Outcome>>,
            >(take)
        };
        self.failures
            .borrow_mut()
            .push(Failure { thread, name, take });
        self.cancel.cancel();
    }
}

/// Spawns a thread into `scope` (see [`Builder::spawn_scoped`]).
fn spawn_child<'scope, F, T>(
    builder: Builder,
    scope: &'scope Scope<'scope, '_>,
    f: F,
    failed: fn(&T) -> bool,
    into_error: fn(T) -> Option<BoxError>,
) -> io::Result<ScopedJoinHandle<'scope, T>>
where
    F: FnOnce() -> T + 'scope,
    T: 'scope,
{
    let state = &scope.state;
    let children = &state.cancel.shared.children;
    let key = children.borrow().vacant_key();
    let child = Rc::new(Child {
        f: Cell::new(Some(f)),
        result: RefCell::new(None),
        failed,
        into_error,
    });
    let run: Rc<dyn Run + 'scope> = child.clone();
    // SAFETY: only the lifetime changes (the layout of an `Rc<dyn Run>`
    // does not depend on it). What is `'scope` behind it (the caller's `f`
    // and what it borrows, the result) is run or dropped through this `Rc`
    // only by the new thread, on its own stack (a thread never started is
    // unwound on its stack at shutdown, dropping it there; if `spawn_in`
    // fails it drops it here, before returning), or through the handle,
    // which is `'scope`. The owner does not leave `scope` (by return or
    // unwind) until that thread dropped its `ChildLink` (after the rest: see
    // `Start` and `child_main`), or was leaked and never runs again: see
    // the module docs, path by path.
    let run = unsafe { mem::transmute::<Rc<dyn Run + 'scope>, Rc<dyn Run>>(run) };
    let start = Start {
        child: run,
        link: ChildLink {
            state: state.clone(),
            key,
        },
    };
    let main = move || {
        let Start { child, link } = start;
        child.run(link);
    };
    let inner = context::with_sched("coro::Scope::spawn", |s| builder.spawn_in(s, main))?;
    let task = inner.thread().0.clone();
    // Before the thread first runs (it is only queued).
    task.use_cold();
    let _ = task.cancel.parent.set(Parent {
        owner: state.owner.clone(),
        scope: state.entry,
    });
    let k = children.borrow_mut().insert(task.clone());
    debug_assert_eq!(k, key);
    cancel::recompute(&task);
    Ok(ScopedJoinHandle {
        inner,
        packet: child,
    })
}

impl<'scope, 'env> Scope<'scope, 'env> {
    /// Starts a green thread in the scope; `f` may borrow from the caller of
    /// [`scope`]. The thread is queued behind the threads ready now.
    ///
    /// If it panics, the scope is cancelled; the panic comes back from the
    /// handle's [`join`](ScopedJoinHandle::join), or, if nobody joins it,
    /// from `scope` once everything has ended.
    ///
    /// # Panics
    ///
    /// If no stack can be mapped; use [`Builder::spawn_scoped`] to get that
    /// as an error.
    pub fn spawn<F, T>(&'scope self, f: F) -> ScopedJoinHandle<'scope, T>
    where
        F: FnOnce() -> T + 'scope,
        T: 'scope,
    {
        Builder::new()
            .spawn_scoped(self, f)
            .unwrap_or_else(|e| panic!("coro::Scope::spawn: {e}"))
    }

    /// Starts a green thread whose `Err` is a failure of the scope: it
    /// cancels the scope (the other threads and the body), and, unless the
    /// handle is joined, [`scope`] returns it as a [`ScopeError`] naming the
    /// thread. An `Err` returned after the scope was cancelled is the
    /// cancellation's consequence, not a failure.
    ///
    /// # Panics
    ///
    /// If no stack can be mapped; use [`Builder::try_spawn_scoped`] to get
    /// that as an error.
    pub fn try_spawn<F, T, E>(&'scope self, f: F) -> ScopedJoinHandle<'scope, Result<T, E>>
    where
        F: FnOnce() -> Result<T, E> + 'scope,
        T: 'scope,
        E: Into<BoxError> + 'scope,
    {
        Builder::new()
            .try_spawn_scoped(self, f)
            .unwrap_or_else(|e| panic!("coro::Scope::try_spawn: {e}"))
    }

    /// Cancels the scope: the blocking calls of the body and of every thread
    /// in it (and in the scopes they open) fail with
    /// [`WaitError::Cancelled`]. Idempotent; any thread may call it.
    pub fn cancel(&self) {
        self.state.cancel.cancel();
    }

    /// The scope's [`CancelScope`]: cancel it, query it, give it a deadline
    /// for everything in the scope, or hand a clone of it to code outside.
    /// It is already entered: its [`run`](CancelScope::run) panics.
    pub fn cancel_scope(&self) -> &CancelScope {
        &self.state.cancel
    }
}

impl fmt::Debug for Scope<'_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scope")
            .field("owner", &self.state.owner.id)
            .field("threads", &self.state.cancel.shared.children.borrow().len())
            .field("cancel_scope", &self.state.cancel)
            .finish()
    }
}

impl Builder {
    /// Spawns a green thread in `scope` with these settings (see
    /// [`Scope::spawn`]), like `std::thread::Builder::spawn_scoped`.
    ///
    /// # Errors
    ///
    /// As [`Builder::spawn`]: a bad setting, or no stack.
    pub fn spawn_scoped<'scope, 'env, F, T>(
        self,
        scope: &'scope Scope<'scope, 'env>,
        f: F,
    ) -> io::Result<ScopedJoinHandle<'scope, T>>
    where
        F: FnOnce() -> T + 'scope,
        T: 'scope,
    {
        spawn_child(self, scope, f, |_| false, |_| None)
    }

    /// Spawns a green thread in `scope` whose `Err` is a failure of the
    /// scope (see [`Scope::try_spawn`]), with these settings.
    ///
    /// # Errors
    ///
    /// As [`Builder::spawn`]: a bad setting, or no stack.
    pub fn try_spawn_scoped<'scope, 'env, F, T, E>(
        self,
        scope: &'scope Scope<'scope, 'env>,
        f: F,
    ) -> io::Result<ScopedJoinHandle<'scope, Result<T, E>>>
    where
        F: FnOnce() -> Result<T, E> + 'scope,
        T: 'scope,
        E: Into<BoxError> + 'scope,
    {
        spawn_child(self, scope, f, Result::is_err, |r| r.err().map(Into::into))
    }
}

/// A handle to a thread spawned in a [`scope`], like
/// `std::thread::ScopedJoinHandle`. Dropping it does not detach the thread:
/// the scope waits for it anyway.
pub struct ScopedJoinHandle<'scope, T> {
    inner: JoinHandle<()>,
    packet: Rc<dyn Packet<T> + 'scope>,
}

impl<T> ScopedJoinHandle<'_, T> {
    /// The thread's handle.
    pub fn thread(&self) -> &Coro {
        self.inner.thread()
    }

    /// Whether the thread has finished.
    pub fn is_finished(&self) -> bool {
        self.packet.result().borrow().is_some() || self.inner.is_finished()
    }

    /// Waits for the thread to finish and returns its value.
    ///
    /// Joining a thread that failed takes its failure: [`scope`] then does
    /// not report it (it was still cancelled when the thread failed).
    ///
    /// # Errors
    ///
    /// * [`JoinError::Panicked`] with the payload if the thread panicked.
    /// * [`JoinError::Cancelled`] if runtime shutdown unwound it.
    /// * [`JoinError::Wait`] if waiting was cut short (a timeout, a
    ///   cancellation, an interrupt); the thread goes on.
    pub fn join(self) -> Result<T, JoinError> {
        self.inner.wait()?;
        self.packet
            .result()
            .borrow_mut()
            .take()
            .unwrap_or(Err(JoinError::Cancelled))
    }
}

impl<T> fmt::Debug for ScopedJoinHandle<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScopedJoinHandle")
            .field("thread", self.thread())
            .finish_non_exhaustive()
    }
}

/// The failure a [`scope`] reports: the `Err` of a thread started with
/// [`Scope::try_spawn`], with the thread it came from.
///
/// It converts into an [`io::Error`] of the inner error's kind (an inner
/// `io::Error`'s own kind, `TimedOut` for a timeout), so `?` works in
/// functions that return `io::Result`.
pub struct ScopeError {
    thread: u64,
    name: Option<Arc<str>>,
    error: BoxError,
}

impl ScopeError {
    /// Id of the thread that failed.
    pub fn thread_id(&self) -> u64 {
        self.thread
    }

    /// Its name, if it had one.
    pub fn thread_name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// The error it returned.
    pub fn error(&self) -> &(dyn Error + Send + Sync + 'static) {
        &*self.error
    }

    /// The error it returned, owned (`downcast` it to the thread's type).
    pub fn into_error(self) -> BoxError {
        self.error
    }

    /// The [`io::ErrorKind`] that fits the inner error.
    fn kind(&self) -> io::ErrorKind {
        if let Some(e) = self.error.downcast_ref::<io::Error>() {
            e.kind()
        } else if let Some(&w) = self.error.downcast_ref::<WaitError>() {
            io::Error::from(w).kind()
        } else if self.error.is::<crate::kernel::error::Timeout>() {
            io::ErrorKind::TimedOut
        } else {
            io::ErrorKind::Other
        }
    }
}

impl fmt::Debug for ScopeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScopeError")
            .field("thread", &self.thread)
            .field("name", &self.name)
            .field("error", &self.error)
            .finish()
    }
}

impl fmt::Display for ScopeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "green thread #{} '{}' of a coro::scope failed: {}",
            self.thread,
            self.name.as_deref().unwrap_or("<unnamed>"),
            self.error
        )
    }
}

impl Error for ScopeError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        Some(&*self.error)
    }
}

impl From<ScopeError> for io::Error {
    fn from(e: ScopeError) -> io::Error {
        io::Error::new(e.kind(), e)
    }
}
