//! Shutdown hooks: work that must run when a runtime's main closure has
//! returned, before the green threads still alive are interrupted.
//!
//! # Design
//!
//! A hook is a closure registered with [`on_shutdown`] while a runtime runs.
//! The list is thread-local: a runtime is bound to its OS thread and
//! `block_on` does not nest, so the runtime running on this thread is the
//! one a hook belongs to; each entry also records that runtime's scheduler,
//! and entries of another one (left behind by a `block_on` that panicked
//! before its shutdown) are dropped, never run.
//!
//! The first step of shutdown takes the hooks and runs them, in registration
//! order, on a green thread of their own (named `shutdown-hooks`), while every
//! other thread still runs normally: a hook may block, e.g. to close a
//! periodic executor and join its thread. The whole batch runs inside a
//! `with_timeout` of [`HOOKS_LIMIT`], so a hook that blocks too long gets
//! `TimedOut` from its blocking calls instead of holding shutdown up. A hook
//! that panics is logged and the others still run. Hooks registered while the
//! hooks run are run in a following round (at most [`MAX_ROUNDS`]).

use std::cell::RefCell;
use std::panic::{self, AssertUnwindSafe};
use std::time::Duration;

use crate::context;
use crate::sched::Scheduler;
use crate::spawn::Builder;
use crate::timeout::with_timeout;

/// How long the hooks of one shutdown may block in all.
pub const HOOKS_LIMIT: Duration = Duration::from_secs(2);

/// Rounds of hooks registered by hooks.
const MAX_ROUNDS: usize = 4;

type Hook = Box<dyn FnOnce() + 'static>;

thread_local! {
    /// Hooks registered on this OS thread, each with the scheduler it was
    /// registered on.
    static HOOKS: RefCell<Vec<(u64, Hook)>> = const { RefCell::new(Vec::new()) };
}

/// Registers `f` to run when the current runtime shuts down: after its main
/// closure returned, before the green threads still alive are interrupted.
///
/// Hooks run once, in registration order, on one green thread of their own
/// while the other threads still run, so a hook may block (join a thread,
/// flush a queue). Together they may block for at most [`HOOKS_LIMIT`]:
/// after that their blocking calls fail with
/// [`WaitError::TimedOut`](crate::WaitError). A hook that panics is logged;
/// the others still run.
///
/// `coro::sync`'s periodic executors use it to close and join themselves
/// before the rest of the runtime is stopped.
///
/// # Panics
///
/// Outside a runtime.
///
/// # Examples
///
/// ```
/// use std::cell::Cell;
/// use std::rc::Rc;
///
/// let ran = Rc::new(Cell::new(false));
/// let r = ran.clone();
/// coro::run(move || {
///     coro::on_shutdown(move || {
///         coro::sleep(std::time::Duration::from_millis(1)).unwrap(); // may block
///         r.set(true);
///     });
/// });
/// assert!(ran.get());
/// ```
#[track_caller]
pub fn on_shutdown(f: impl FnOnce() + 'static) {
    let s = context::with_sched("coro::on_shutdown", |s| s.id);
    let kept = HOOKS.try_with(|h| h.borrow_mut().push((s, Box::new(f))));
    if kept.is_err() {
        // A runtime run from a thread-local's destructor, after this
        // module's list was destroyed.
        panic!("coro::on_shutdown: this OS thread is exiting (its thread-locals are gone): the hook cannot be kept");
    }
}

/// Runs the hooks registered on `s` (the first step of shutdown). Drives the
/// scheduler until the hooks' thread has finished.
pub(crate) fn run(s: &Scheduler) {
    for _ in 0..MAX_ROUNDS {
        // Gone while the OS thread exits (a runtime run from another
        // thread-local's destructor): no hook could be registered.
        let all = HOOKS
            .try_with(|h| std::mem::take(&mut *h.borrow_mut()))
            .unwrap_or_default();
        let (mine, foreign): (Vec<_>, Vec<_>) =
            all.into_iter().partition(|(owner, _)| *owner == s.id);
        // Hooks another runtime left behind (registered during its own
        // shutdown, after its hooks ran) are dropped, never run. Their
        // destructors are user code on the scheduler's stack: a panic in
        // one is swallowed, and the others are still dropped.
        for (_, f) in foreign {
            crate::panic_hook::caught(move || drop(f));
        }
        let mine: Vec<Hook> = mine.into_iter().map(|(_, f)| f).collect();
        if mine.is_empty() {
            return;
        }
        let spawned = Builder::new()
            .name("shutdown-hooks".into())
            .spawn_in(s, move || {
                let _ = with_timeout(HOOKS_LIMIT, move || {
                    for f in mine {
                        if let Err(p) = panic::catch_unwind(AssertUnwindSafe(f)) {
                            let msg = crate::panic_hook::payload_message(&*p).to_owned();
                            std::mem::forget(p);
                            crate::panic_hook::caught(
                                || log::error!(target: "coro", "a shutdown hook panicked: {msg}"),
                            );
                        }
                    }
                });
            });
        match spawned {
            Ok(h) => {
                // Never unwinds out of shutdown: a panic of the loop here is
                // logged, and shutdown goes on.
                let main = h.thread().0.clone();
                if let Err(p) = panic::catch_unwind(AssertUnwindSafe(|| s.run_until(&main))) {
                    std::mem::forget(p);
                    crate::panic_hook::caught(
                        || log::error!(target: "coro", "the loop panicked while shutdown hooks ran"),
                    );
                    return;
                }
            }
            Err(e) => {
                crate::panic_hook::caught(
                    || log::error!(target: "coro", "cannot start the shutdown hooks' thread: {e}"),
                );
                return;
            }
        }
    }
}

/// Drops the hooks registered on `s` that its shutdown did not run
/// (registered while its threads were being unwound, or past the last
/// round): they belong to the run that ended, and the runtime's next
/// `block_on` must not run them at its own shutdown. A hook's destructor
/// is user code: a panic in one is swallowed, and hooks that destructors
/// keep registering are leaked (never run, never dropped) after
/// [`MAX_ROUNDS`].
pub(crate) fn discard(s: &Scheduler) {
    for round in 0..=MAX_ROUNDS {
        let mine = take_hooks_of(s.id);
        if mine.is_empty() {
            return;
        }
        for (_, f) in mine {
            if round == MAX_ROUNDS {
                std::mem::forget(f);
            } else {
                crate::panic_hook::caught(move || drop(f));
            }
        }
    }
}

/// Takes the hooks registered on runtime `id` out of the list.
fn take_hooks_of(id: u64) -> Vec<(u64, Hook)> {
    HOOKS
        .try_with(|h| {
            let mut h = h.borrow_mut();
            let (mine, others): (Vec<_>, Vec<_>) = std::mem::take(&mut *h)
                .into_iter()
                .partition(|(owner, _)| *owner == id);
            *h = others;
            mine
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::sync::atomic::{AtomicU8, Ordering};

    static RAN: AtomicU8 = AtomicU8::new(0);

    /// Runs a runtime when dropped.
    struct RunLater;

    impl Drop for RunLater {
        fn drop(&mut self) {
            let v = crate::run(|| crate::spawn(|| 7u8).join().unwrap());
            RAN.store(v, Ordering::SeqCst);
        }
    }

    thread_local! {
        static LATER: RefCell<Option<RunLater>> = const { RefCell::new(None) };
    }

    /// A runtime run from a thread-local's destructor, after the hook list
    /// was destroyed (registered later, so destroyed first), shuts down
    /// (the process is not aborted with "the runtime's shutdown panicked").
    #[test]
    fn a_runtime_runs_in_a_thread_locals_destructor() {
        std::thread::spawn(|| {
            crate::run(|| LATER.with(|l| *l.borrow_mut() = Some(RunLater)));
        })
        .join()
        .unwrap();
        assert_eq!(RAN.load(Ordering::SeqCst), 7);
    }
}
