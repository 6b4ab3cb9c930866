//! The cancel tree: the scopes code runs inside (`with_timeout`,
//! [`CancelScope`](crate::CancelScope), [`scope`](crate::scope)), how a
//! deadline or a cancel reaches the blocking calls inside them, and which
//! scope a failed call reports to.
//!
//! # Design
//!
//! Each task keeps a stack of scope entries, innermost last
//! ([`TaskCancel::scopes`]). A `with_timeout` scope is a plain entry (its
//! deadline and a few flags), pushed and popped by its own thread only, so
//! the common case costs a push and a pop. A [`CancelScope`] entry also
//! points at the scope's shared state ([`Shared`]), through which other
//! green threads cancel it, move its deadline or toggle its shield, and
//! which a [`scope`](crate::scope) (a nursery) uses to list the threads
//! spawned in it.
//!
//! A thread spawned in a nursery continues, below its own stack, into its
//! owner's stack at the nursery's entry ([`TaskCancel::parent`]): it is
//! inside every scope that encloses the nursery. The scopes *visible* to
//! running code are its own entries from the innermost out, then those of
//! the nursery owner from the nursery down, and so on, up to and including
//! the innermost shielded scope ([`visit`]): a shield hides what is outside
//! it.
//!
//! A blocking call fails when a visible scope is cancelled (its deadline
//! passed or `cancel` was called). So that a park stays a few loads,
//! [`TaskCancel::pending`] caches that answer; everything that can change it
//! recomputes it ([`recompute`]): leaving a cancelled or shielded scope,
//! entering a cancelled or shielded one, and, through [`propagate`], which
//! also reaches every thread in the task's nurseries and wakes those that
//! are parked, a cancel, an expiry and a shield change.
//!
//! The failed call reports to the visible cancelled scope that was
//! cancelled first (its deadline, or the time `cancel` was called; the
//! outermost on ties) and marks it *delivered* ([`deliver`]); a scope
//! converts the outcome only if it was delivered to, so nested scopes each
//! catch only their own cancellation, also across threads.
//!
//! # Timers
//!
//! Timers stay lazy: only when a thread parks does the earliest deadline
//! visible to it get a timer entry ([`arm`]), on the task that holds the
//! scope, or expire on the spot if it passed. An armed scope remembers the
//! deadline its entry was made for (`Scope::armed`); an entry is live only
//! while that matches (`timer_is_live`), and whoever makes it stale (a
//! cancel, a deadline moved earlier, the scope's exit) gives it up with
//! `TimerHeap::cancel_one`, so the heap's live count stays exact. A deadline
//! moved later keeps its entry, which fires early and re-arms at the new
//! deadline ([`timer_fired`]): a heartbeat that pushes a deadline back on
//! every message leaves no stale entry behind.

use std::cell::{Cell, OnceCell, RefCell};
use std::num::NonZeroU64;
use std::ops::ControlFlow;
use std::ptr;
use std::rc::Rc;
use std::time::Duration;

use slab::Slab;

use crate::clock::{self, Instant};
use crate::context;
use crate::error::WaitError;
use crate::sched::Scheduler;
use crate::task::{make_ready, Task, ThreadState};
use crate::timer::TimerKind;

/// The deadline of a scope without one.
pub(crate) const NO_DEADLINE: u64 = u64::MAX;

/// Why and when a scope became cancelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Cause {
    /// Its deadline (for an expiry), or the tick at which `cancel` was called.
    pub(crate) at: u64,
    /// The deadline passed (otherwise `cancel` was called).
    pub(crate) deadline: bool,
}

impl Cause {
    /// What a blocking call that reports this cancellation returns.
    pub(crate) fn error(self) -> WaitError {
        if self.deadline {
            WaitError::TimedOut
        } else {
            WaitError::Cancelled
        }
    }
}

/// One scope on a task's scope stack.
pub(crate) struct Scope {
    /// Unique per task; timer entries and nursery threads name it by this.
    pub(crate) id: u64,
    /// Deadline in clock ticks ([`NO_DEADLINE`] if none).
    pub(crate) deadline: u64,
    /// # Invariant
    /// `Some(d)` exactly while a live timer entry for this scope, due at
    /// `d`, is in the heap and counted as live there.
    pub(crate) armed: Option<NonZeroU64>,
    /// Set once, when the deadline passes or `cancel` is called.
    pub(crate) cancelled: Option<Cause>,
    /// A blocking call failed on behalf of this scope.
    pub(crate) delivered: bool,
    /// Cancellations of the scopes outside this one do not reach inside.
    pub(crate) shield: bool,
    /// For a [`CancelScope`](crate::CancelScope): its shared state.
    pub(crate) shared: Option<Rc<Shared>>,
}

impl Scope {
    /// A `with_timeout` scope.
    #[inline]
    pub(crate) fn local(id: u64, deadline: u64) -> Scope {
        Scope {
            id,
            deadline,
            armed: None,
            cancelled: None,
            delivered: false,
            shield: false,
            shared: None,
        }
    }

    /// Marks the scope cancelled (the first cause sticks); returns whether
    /// it was not before.
    fn mark(&mut self, cause: Cause) -> bool {
        if self.cancelled.is_some() {
            return false;
        }
        self.cancelled = Some(cause);
        if let Some(sh) = &self.shared {
            if sh.cancelled.get().is_none() {
                sh.cancelled.set(Some(cause));
            }
        }
        true
    }
}

/// Where a [`CancelScope`](crate::CancelScope)'s deadline stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Deadline {
    None,
    /// Absolute, in ticks.
    At(u64),
    /// Relative to entry (becomes `At` when the scope is entered).
    After(Duration),
}

/// Where a [`CancelScope`](crate::CancelScope) is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    New,
    Entered,
    Exited,
}

/// The state of a [`CancelScope`](crate::CancelScope) that its handles
/// share.
///
/// While the scope is entered, its entry on the entering task's stack is
/// what the runtime reads; the fields here mirror it for the handles
/// (`deadline`, `shield`, `cancelled`) and every change goes to both
/// (through this module). `caught` is filled in at exit.
pub(crate) struct Shared {
    pub(crate) deadline: Cell<Deadline>,
    pub(crate) shield: Cell<bool>,
    pub(crate) cancelled: Cell<Option<Cause>>,
    /// A blocking call inside reported this scope's cancellation.
    pub(crate) caught: Cell<bool>,
    pub(crate) phase: Cell<Phase>,
    /// The task that entered it and the id of its entry, while entered.
    pub(crate) entered: RefCell<Option<(Rc<Task>, u64)>>,
    /// For a nursery: the threads spawned in it that have not ended, by the
    /// key their `scope::ChildLink` holds.
    pub(crate) children: RefCell<Slab<Rc<Task>>>,
}

impl Shared {
    pub(crate) fn new(deadline: Deadline) -> Shared {
        Shared {
            deadline: Cell::new(deadline),
            shield: Cell::new(false),
            cancelled: Cell::new(None),
            caught: Cell::new(false),
            phase: Cell::new(Phase::New),
            entered: RefCell::new(None),
            children: RefCell::new(Slab::new()),
        }
    }
}

/// The scope a nursery thread continues into below its own stack.
pub(crate) struct Parent {
    /// The thread that runs the nursery.
    pub(crate) owner: Rc<Task>,
    /// Id of the nursery's entry on the owner's stack.
    pub(crate) scope: u64,
}

/// A task's cancellation state (a field of [`Task`]). `repr(C)`: the
/// fields every park reads come first (see `Task`'s layout).
#[derive(Default)]
#[repr(C)]
pub(crate) struct TaskCancel {
    /// # Invariant
    /// Whether a scope visible to the running code is cancelled (see the
    /// module docs), kept up to date by [`recompute`]; `crate::suspend::check` fails
    /// a blocking call while it is set.
    pub(crate) pending: Cell<bool>,
    /// The scopes this thread entered, innermost last.
    pub(crate) scopes: RefCell<Vec<Scope>>,
    /// For a thread spawned in a nursery; set before it first runs.
    pub(crate) parent: OnceCell<Parent>,
    /// Last scope id handed out.
    seq: Cell<u64>,
}

impl TaskCancel {
    /// Starts scope ids again (a kept task block reused: `Task::reinit`).
    pub(crate) fn reset_seq(&self) {
        self.seq.set(0);
    }

    #[inline]
    fn next_id(&self) -> u64 {
        let id = self.seq.get() + 1;
        self.seq.set(id);
        id
    }
}

/// Calls `f` on each scope visible to the code running at the top of `t`'s
/// stack, innermost first (see the module docs), with the task holding it
/// (`None` for `t` itself), until `f` breaks or a shielded scope was
/// visited. `f` must not touch any task's scope stack.
fn visit(t: &Task, mut f: impl FnMut(Option<&Rc<Task>>, &mut Scope) -> ControlFlow<()>) {
    let mut holder: Option<Rc<Task>> = None;
    let mut end = usize::MAX;
    loop {
        let cur: &Task = holder.as_deref().unwrap_or(t);
        {
            let mut scopes = cur.cancel.scopes.borrow_mut();
            let end = end.min(scopes.len());
            for sc in scopes[..end].iter_mut().rev() {
                let shield = sc.shield;
                if f(holder.as_ref(), sc).is_break() || shield {
                    return;
                }
            }
        }
        let Some(p) = cur.cancel.parent.get() else {
            return;
        };
        let (owner, id) = (p.owner.clone(), p.scope);
        // The nursery waits for its threads, so its entry is there while
        // one of them runs.
        let Some(i) = owner
            .cancel
            .scopes
            .borrow()
            .iter()
            .rposition(|s| s.id == id)
        else {
            return;
        };
        end = i + 1;
        holder = Some(owner);
    }
}

/// Runs `f` on scope `id` of `t`, if `t` has it.
fn with_scope<R>(t: &Task, id: u64, f: impl FnOnce(&mut Scope) -> R) -> Option<R> {
    let mut scopes = t.cancel.scopes.borrow_mut();
    scopes.iter_mut().rev().find(|s| s.id == id).map(f)
}

/// Whether a scope visible to the code running at the top of `t`'s stack
/// is cancelled.
pub(crate) fn visible_cancelled(t: &Task) -> bool {
    let mut hit = false;
    visit(t, |_, sc| {
        if sc.cancelled.is_some() {
            hit = true;
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    });
    hit
}

/// Brings `t`'s cached [`TaskCancel::pending`] up to date; returns it.
pub(crate) fn recompute(t: &Task) -> bool {
    let hit = visible_cancelled(t);
    t.cancel.pending.set(hit);
    hit
}

/// Recomputes `t` and every thread in its nurseries (and theirs), waking
/// those that are parked and now cancelled. With `rearm`, a parked thread
/// that is not cancelled gets a timer for the earliest deadline it now sees
/// (after a shield was lowered: its park armed only what it saw then).
pub(crate) fn propagate(t: &Rc<Task>, rearm: bool) {
    let hit = recompute(t);
    if t.state.get() == ThreadState::Parked {
        if hit {
            make_ready(t);
        } else if rearm {
            context::try_with_sched(|s| arm(s, t).ok());
        }
    }
    let children: Vec<Rc<Task>> = {
        let scopes = t.cancel.scopes.borrow();
        scopes
            .iter()
            .filter_map(|sc| sc.shared.as_ref())
            .flat_map(|sh| {
                sh.children
                    .borrow()
                    .iter()
                    .map(|(_, c)| c.clone())
                    .collect::<Vec<_>>()
            })
            .collect()
    };
    for c in &children {
        propagate(c, rearm);
    }
}

/// Expires every scope visible to `t` whose deadline has passed and that
/// nobody marked yet (timers are lazy: only the earliest is armed), so that
/// [`deliver`] can tell which scope was cancelled first.
fn expire_due(s: &Scheduler, t: &Task) {
    // The clock is read only if a visible scope has a deadline to compare.
    let mut now = None;
    let mut due: Vec<(Option<Rc<Task>>, u64)> = Vec::new();
    visit(t, |holder, sc| {
        if sc.cancelled.is_none()
            && sc.deadline != NO_DEADLINE
            && sc.deadline <= *now.get_or_insert_with(|| clock::now().ticks())
        {
            due.push((holder.cloned(), sc.id));
        }
        ControlFlow::Continue(())
    });
    for (holder, id) in due {
        let owner = holder.unwrap_or_else(|| s.task_rc(t));
        let armed = with_scope(&owner, id, |sc| {
            let deadline = sc.deadline;
            sc.mark(Cause {
                at: deadline,
                deadline: true,
            });
            sc.armed.take()
        })
        .flatten();
        if armed.is_some() {
            s.timers.borrow_mut().cancel_one();
        }
        propagate(&owner, false);
    }
}

/// The error a blocking call of `t` fails with because a visible scope is
/// cancelled; marks the scope it reports to as delivered. `None` if no
/// visible scope is cancelled (then `pending` is cleared).
pub(crate) fn deliver(s: &Scheduler, t: &Task) -> Option<WaitError> {
    expire_due(s, t);
    let mut best: Option<(Cause, *const Task, u64)> = None;
    visit(t, |holder, sc| {
        if let Some(c) = sc.cancelled {
            // Innermost first: `<=` lets the outermost win a tie.
            if best.is_none_or(|(b, _, _)| c.at <= b.at) {
                best = Some((c, holder.map_or(ptr::null(), Rc::as_ptr), sc.id));
            }
        }
        ControlFlow::Continue(())
    });
    let Some((cause, holder, id)) = best else {
        t.cancel.pending.set(false);
        return None;
    };
    visit(t, |h, sc| {
        if sc.id == id && h.map_or(ptr::null(), Rc::as_ptr) == holder {
            sc.delivered = true;
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    });
    Some(cause.error())
}

/// Before `t` parks: makes sure the earliest deadline visible to it has a
/// timer, or expires that scope now (and fails the park) if it passed.
#[inline]
pub(crate) fn arm(s: &Scheduler, t: &Task) -> Result<(), WaitError> {
    if t.cancel.parent.get().is_none() && t.cancel.scopes.borrow().is_empty() {
        return Ok(());
    }
    arm_scoped(s, t)
}

/// [`arm`] for a thread inside cancel scopes (its own or a nursery's).
#[inline(never)]
fn arm_scoped(s: &Scheduler, t: &Task) -> Result<(), WaitError> {
    let mut first: Option<(u64, Option<Rc<Task>>, u64, bool)> = None;
    visit(t, |holder, sc| {
        // Innermost first: `<=` arms the outermost of equal deadlines.
        if sc.cancelled.is_none()
            && sc.deadline != NO_DEADLINE
            && first.as_ref().is_none_or(|f| sc.deadline <= f.0)
        {
            first = Some((sc.deadline, holder.cloned(), sc.id, sc.armed.is_some()));
        }
        ControlFlow::Continue(())
    });
    let Some((deadline, holder, id, armed)) = first else {
        return Ok(());
    };
    if armed {
        return Ok(());
    }
    let owner = holder.unwrap_or_else(|| s.task_rc(t));
    if deadline <= clock::now().ticks() {
        with_scope(&owner, id, |sc| {
            sc.mark(Cause {
                at: deadline,
                deadline: true,
            })
        });
        propagate(&owner, false);
        return Err(deliver(s, t).unwrap_or(WaitError::TimedOut));
    }
    with_scope(&owner, id, |sc| sc.armed = NonZeroU64::new(deadline));
    s.timers
        .borrow_mut()
        .insert(deadline, owner, TimerKind::Scope { id });
    Ok(())
}

/// Whether a scope timer entry of `task`, due at `deadline`, would still do
/// something.
pub(crate) fn timer_is_live(task: &Task, id: u64, deadline: u64) -> bool {
    task.cancel
        .scopes
        .try_borrow()
        .map(|v| {
            v.iter()
                .rev()
                .any(|s| s.id == id && s.armed.map(NonZeroU64::get) == Some(deadline))
        })
        .unwrap_or(true)
}

/// A live scope timer of `task` fired: expires the scope, or, if its
/// deadline moved later meanwhile, returns the deadline to re-arm at (the
/// caller inserts the entry; the scope already records it).
pub(crate) fn timer_fired(task: &Rc<Task>, id: u64) -> Option<u64> {
    let now = clock::now().ticks();
    let expired = with_scope(task, id, |sc| {
        sc.armed = None;
        if sc.cancelled.is_some() || sc.deadline == NO_DEADLINE {
            Ok(false)
        } else if sc.deadline > now {
            sc.armed = NonZeroU64::new(sc.deadline);
            Err(sc.deadline)
        } else {
            Ok(sc.mark(Cause {
                at: sc.deadline,
                deadline: true,
            }))
        }
    })?;
    match expired {
        Ok(true) => {
            propagate(task, false);
            None
        }
        Ok(false) => None,
        Err(rearm) => Some(rearm),
    }
}

/// Enters a `with_timeout` scope on the running task; returns its id.
#[inline]
pub(crate) fn push_local(t: &Task, deadline: u64) -> u64 {
    let id = t.cancel.next_id();
    t.cancel
        .scopes
        .borrow_mut()
        .push(Scope::local(id, deadline));
    id
}

/// What a scope's exit needs to know about it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Left {
    /// A blocking call failed on its behalf.
    pub(crate) delivered: bool,
    pub(crate) deadline: u64,
}

/// Leaves scope `id` of the running task `t`; gives up its timer.
#[inline]
pub(crate) fn pop(s: &Scheduler, t: &Task, id: u64) -> Left {
    let (left, armed, recheck) = {
        let mut scopes = t.cancel.scopes.borrow_mut();
        // Scopes are left in the order they were entered: the innermost.
        let n = scopes.len();
        let i = match scopes.last() {
            Some(sc) if sc.id == id => n - 1,
            _ => scopes
                .iter()
                .rposition(|sc| sc.id == id)
                .expect("coro: scope stack out of order"),
        };
        let sc = &scopes[i];
        let out = (
            Left {
                delivered: sc.delivered,
                deadline: sc.deadline,
            },
            sc.armed.is_some(),
            sc.cancelled.is_some() || sc.shield,
        );
        if i == n - 1 {
            scopes.truncate(i);
        } else {
            scopes.remove(i);
        }
        out
    };
    if armed {
        s.timers.borrow_mut().cancel_one();
    }
    if recheck {
        recompute(t);
        crate::spin::left_cut_short_scope(t);
    }
    left
}

/// Enters the cancel scope `shared` on the running task `t`; returns the
/// entry's id.
///
/// # Panics
///
/// If it was entered before.
pub(crate) fn enter(t: &Rc<Task>, shared: &Rc<Shared>) -> u64 {
    if shared.phase.get() != Phase::New {
        panic!("coro: a CancelScope can be entered only once");
    }
    let deadline = match shared.deadline.get() {
        Deadline::None => NO_DEADLINE,
        Deadline::At(d) => d,
        Deadline::After(d) => clock::now()
            .ticks()
            .saturating_add(clock::duration_to_ticks(d)),
    };
    if deadline != NO_DEADLINE {
        shared.deadline.set(Deadline::At(deadline));
    }
    let id = t.cancel.next_id();
    let scope = Scope {
        id,
        deadline,
        armed: None,
        cancelled: shared.cancelled.get(),
        delivered: false,
        shield: shared.shield.get(),
        shared: Some(shared.clone()),
    };
    let recheck = scope.cancelled.is_some() || scope.shield;
    t.use_cold();
    t.cancel.scopes.borrow_mut().push(scope);
    *shared.entered.borrow_mut() = Some((t.clone(), id));
    shared.phase.set(Phase::Entered);
    if recheck {
        recompute(t);
    }
    id
}

/// Leaves the cancel scope `shared` (entry `id`) of the running task `t`;
/// records what happened in `shared`.
pub(crate) fn exit(s: &Scheduler, t: &Task, shared: &Shared, id: u64) {
    let scope = pop(s, t, id);
    shared.caught.set(scope.delivered);
    if shared.cancelled.get().is_none()
        && scope.deadline != NO_DEADLINE
        && scope.deadline <= clock::now().ticks()
    {
        shared.cancelled.set(Some(Cause {
            at: scope.deadline,
            deadline: true,
        }));
    }
    shared.entered.borrow_mut().take();
    shared.children.borrow_mut().clear();
    shared.phase.set(Phase::Exited);
}

/// The task that entered `shared` and its entry's id, unless that task
/// is dead: a thread leaked at shutdown never leaves the scopes it
/// entered, but its entries are no longer the runtime's (its timers were
/// cleared with the run's, and a later run's heap must not be touched on
/// their behalf).
fn entered_by_live(shared: &Shared) -> Option<(Rc<Task>, u64)> {
    let entered = shared.entered.borrow().clone()?;
    (entered.0.state.get() != ThreadState::Dead).then_some(entered)
}

/// `cancel` of an entered scope: cancels its entry, gives up its timer,
/// and wakes the threads inside.
pub(crate) fn cancel_entered(shared: &Shared, cause: Cause) {
    let Some((task, id)) = entered_by_live(shared) else {
        return;
    };
    let armed = with_scope(&task, id, |sc| {
        sc.mark(cause);
        sc.armed.take()
    })
    .flatten();
    if armed.is_some() {
        context::try_with_sched(|s| s.timers.borrow_mut().cancel_one());
    }
    propagate(&task, false);
}

/// `set_deadline` of an entered scope: a deadline in the past cancels it
/// now; otherwise its timer follows (see the module docs).
pub(crate) fn set_deadline_entered(shared: &Shared, new: u64) {
    let Some((task, id)) = entered_by_live(shared) else {
        return;
    };
    let now = clock::now().ticks();
    let mut stale = false;
    let mut insert = false;
    let mut expired = false;
    with_scope(&task, id, |sc| {
        sc.deadline = new;
        if sc.cancelled.is_some() {
            return;
        }
        if new <= now {
            stale = sc.armed.take().is_some();
            expired = sc.mark(Cause {
                at: new,
                deadline: true,
            });
            return;
        }
        match sc.armed {
            // Later: the entry fires early and re-arms (`timer_fired`).
            Some(a) if new != NO_DEADLINE && new >= a.get() => {}
            Some(_) => {
                stale = true;
                sc.armed = None;
                if new != NO_DEADLINE {
                    sc.armed = NonZeroU64::new(new);
                    insert = true;
                }
            }
            // A thread inside may be parked without a timer for it.
            None if new != NO_DEADLINE => {
                sc.armed = NonZeroU64::new(new);
                insert = true;
            }
            None => {}
        }
    });
    context::try_with_sched(|s| {
        let mut timers = s.timers.borrow_mut();
        if stale {
            timers.cancel_one();
        }
        if insert {
            timers.insert(new, task.clone(), TimerKind::Scope { id });
        }
    });
    if expired {
        propagate(&task, false);
    }
}

/// `set_shield` of an entered scope.
pub(crate) fn set_shield_entered(shared: &Shared, on: bool) {
    let Some((task, id)) = entered_by_live(shared) else {
        return;
    };
    with_scope(&task, id, |sc| sc.shield = on);
    propagate(&task, !on);
}

/// Whether `t` runs a nursery with a thread that has not ended (a leaked
/// thread is dead and does not count). Runtime shutdown unwinds such a
/// task only after those threads (see `scope`).
pub(crate) fn owns_live_threads(t: &Task) -> bool {
    t.cancel
        .scopes
        .borrow()
        .iter()
        .filter_map(|sc| sc.shared.as_ref())
        .any(|sh| {
            sh.children
                .borrow()
                .iter()
                .any(|(_, c)| c.state.get() != ThreadState::Dead)
        })
}

/// How many nurseries `t` is nested in (0 for a thread not spawned in a
/// [`scope`](crate::scope)).
pub(crate) fn scope_depth(t: &Task) -> usize {
    let mut depth = 0;
    let mut p = t.cancel.parent.get();
    while let Some(parent) = p {
        depth += 1;
        p = parent.owner.cancel.parent.get();
    }
    depth
}

/// The earliest deadline that applies to the running code: the deadlines
/// of the scopes around it (and around the nurseries it was spawned in),
/// up to the innermost shielded one. `None` if there is none.
///
/// A scope that is already cancelled counts as a deadline that has passed
/// (the time it was cancelled, or its deadline): the result is then at or
/// before [`clock::now`], and the next blocking call fails at once.
///
/// Use it to skip work that cannot finish in time, or to pass the deadline
/// on to a server (as gRPC does).
///
/// # Panics
///
/// Outside a green thread.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
///
/// coro::run(|| {
///     assert_eq!(coro::current_effective_deadline(), None);
///     coro::with_timeout(Duration::from_secs(10), || {
///         let outer = coro::current_effective_deadline().unwrap();
///         coro::with_timeout(Duration::from_secs(1), || {
///             assert!(coro::current_effective_deadline().unwrap() < outer);
///             // A shielded scope sees only its own deadline (none here).
///             coro::CancelScope::new().shielded().run(|| {
///                 assert_eq!(coro::current_effective_deadline(), None);
///             })
///         })
///     })
///     .unwrap()
///     .unwrap()
///     .unwrap();
/// });
/// ```
#[track_caller]
pub fn current_effective_deadline() -> Option<Instant> {
    context::with_current("coro::current_effective_deadline", |_, t| {
        let mut best = NO_DEADLINE;
        visit(t, |_, sc| {
            best = best.min(sc.cancelled.map_or(sc.deadline, |c| c.at));
            ControlFlow::Continue(())
        });
        (best != NO_DEADLINE).then(|| Instant::from_ticks(best))
    })
}
