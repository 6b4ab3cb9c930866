//! `coro::scope`: threads that borrow from the caller's
//! frame, the scope waiting for them on every path (return, body panic,
//! interrupt or cancel of the waiting thread, runtime shutdown, a thread
//! leaked by shutdown, shutdown after the loop panics), cancellation
//! reaching every thread and nested scope, failures propagating once, and
//! `threads()` naming a thread's scope.
//!
//! These tests run under valgrind in CI (`.ci/run`): the shutdown ones check
//! that nothing touches the borrowed frame after it is gone.

use std::cell::{Cell, RefCell};
use std::io;
use std::panic::{self, AssertUnwindSafe};
use std::rc::Rc;
use std::time::Duration;

use coro_runtime::{
    self as coro, with_timeout, Builder, CancelScope, Coro, ThreadState, Timeout, WaitError,
};
use coro_test_support::{run, yield_until};

const LONG: Duration = Duration::from_secs(3600);

/// Yields until the thread behind `h` has finished (yielding is not a
/// blocking call, so it works in a cancelled scope, where a `join` that
/// has to wait fails).
#[track_caller]
fn until_finished<T>(h: &coro::ScopedJoinHandle<'_, T>) {
    yield_until("the thread to finish", || h.is_finished());
}

/// The ids of the live threads whose scope is run by `owner`.
fn children_of(owner: u64) -> Vec<u64> {
    coro::threads()
        .into_iter()
        .filter(|t| t.parent == Some(owner))
        .map(|t| t.id)
        .collect()
}

/// Waits until `owner` and its `n` scope threads are all parked.
#[track_caller]
fn until_scope_blocked(owner: &Coro, n: usize) {
    yield_until("the scope's threads to block", || {
        let c = children_of(owner.id());
        owner.state() == ThreadState::Parked
            && c.len() == n
            && coro::threads()
                .iter()
                .filter(|t| c.contains(&t.id))
                .all(|t| t.state == ThreadState::Parked)
    });
}

/// A cleanup that blocks for a while, shielded from the cancellation that
/// ended the work before it.
fn shielded_cleanup() {
    CancelScope::new()
        .shielded()
        .run(|| coro::sleep(Duration::from_millis(5)))
        .unwrap()
        .unwrap();
}

/// Pushes its name into a log (borrowed from some frame) when dropped.
struct Push<'a>(&'a RefCell<Vec<&'static str>>, &'static str);

impl Drop for Push<'_> {
    fn drop(&mut self) {
        self.0.borrow_mut().push(self.1);
    }
}

#[test]
fn threads_borrow_a_local_vec_mutably_and_immutably() {
    run(|| {
        let input = vec![1u64, 2, 3, 4];
        let mut output = vec![0u64; 4];
        let mut total = 0u64;
        coro::scope(|s| {
            for (slot, x) in output.iter_mut().zip(&input) {
                s.spawn(move || {
                    coro::sleep(Duration::from_millis(*x)).unwrap();
                    *slot = x * 10;
                });
            }
            s.spawn(|| {
                coro::yield_now();
                total = input.iter().sum(); // `input` is shared with the others
            });
        })
        .unwrap();
        assert_eq!(output, [10, 20, 30, 40]);
        assert_eq!(total, 10);
        let s = coro::stats();
        assert_eq!((s.live, s.pending_timers), (1, 0));
    });
}

#[test]
fn returns_after_every_thread_including_ones_spawned_by_threads() {
    run(|| {
        let done = Cell::new(0);
        let done = &done;
        coro::scope(|s| {
            for i in 0..3u64 {
                s.spawn(move || {
                    coro::sleep(Duration::from_millis(i)).unwrap();
                    // Into the same scope, after the body has returned.
                    s.spawn(move || {
                        coro::sleep(Duration::from_millis(2)).unwrap();
                        done.set(done.get() + 1);
                    });
                    done.set(done.get() + 1);
                });
            }
        })
        .unwrap();
        assert_eq!(done.get(), 6);
        assert_eq!(coro::stats().live, 1);
    });
}

#[test]
fn join_handles_return_values_and_joined_panics_are_handled() {
    run(|| {
        let name = String::from("worker");
        let r = coro::scope(|s| {
            let h = s.spawn(|| name.len());
            let p = s.spawn(|| -> u32 { panic!("boom") });
            until_finished(&h);
            until_finished(&p);
            // The panic cancelled the scope: a join that had to wait would
            // fail now, one of a finished thread does not.
            assert_eq!(coro::sleep(Duration::ZERO), Err(WaitError::Cancelled));
            let v = h.join().unwrap();
            let e = p.join().unwrap_err();
            assert_eq!(e.panic_message(), Some("boom"));
            v
        });
        // The panic was joined: the scope does not raise it again.
        assert_eq!(r.unwrap(), 6);
    });
}

#[test]
fn a_panicking_thread_cancels_its_siblings_and_comes_back_from_scope() {
    run(|| {
        let log = RefCell::new(Vec::new());
        let r = panic::catch_unwind(AssertUnwindSafe(|| {
            coro::scope(|s| {
                let sibling = s.spawn(|| {
                    let r = coro::sleep(LONG);
                    log.borrow_mut().push("sibling woke");
                    r
                });
                s.spawn(|| {
                    coro::yield_now();
                    panic!("child failed")
                });
                let body = coro::sleep(LONG);
                log.borrow_mut().push("body woke");
                assert_eq!(body, Err(WaitError::Cancelled));
                // The sibling was cancelled by the scope.
                until_finished(&sibling);
                assert_eq!(sibling.join().unwrap(), Err(WaitError::Cancelled));
            })
        }));
        let payload = r.expect_err("the panic comes back");
        assert_eq!(payload.downcast_ref::<&str>(), Some(&"child failed"));
        let mut log = log.into_inner();
        log.sort();
        assert_eq!(log, ["body woke", "sibling woke"]);
        assert_eq!(coro::stats().live, 1);
    });
}

#[test]
fn a_failing_thread_cancels_the_rest_and_is_reported_once() {
    run(|| {
        let cancelled = Cell::new(0);
        let r = coro::scope(|s| {
            for _ in 0..3 {
                s.try_spawn(|| -> io::Result<()> {
                    coro::sleep(LONG)?; // the scope's cancel: absorbed
                    Ok(())
                });
            }
            Builder::new()
                .name("disk".into())
                .try_spawn_scoped(s, || -> io::Result<()> {
                    coro::sleep(Duration::from_millis(1))?;
                    Err(io::Error::new(io::ErrorKind::StorageFull, "disk full"))
                })
                .unwrap();
            if coro::sleep(LONG) == Err(WaitError::Cancelled) {
                cancelled.set(cancelled.get() + 1);
            }
            "body's value is dropped"
        });
        let e = r.unwrap_err();
        assert_eq!(e.thread_name(), Some("disk"));
        assert!(e.thread_id() > 1);
        assert_eq!(e.error().to_string(), "disk full");
        assert!(e.to_string().contains("'disk'"), "{e}");
        let io = io::Error::from(e);
        assert_eq!(io.kind(), io::ErrorKind::StorageFull);
        assert_eq!(cancelled.get(), 1);
        assert_eq!(coro::stats().live, 1);
    });
}

#[test]
fn a_joined_failure_is_not_reported_again() {
    run(|| {
        let r = coro::scope(|s| {
            let h = s.try_spawn(|| -> Result<(), io::Error> { Err(io::Error::other("handled")) });
            until_finished(&h);
            let inner = h.join().unwrap();
            assert_eq!(inner.unwrap_err().to_string(), "handled");
            // It still cancelled the scope when it failed.
            coro::sleep(Duration::ZERO)
        });
        assert_eq!(r.unwrap(), Err(WaitError::Cancelled));
    });
}

#[test]
fn errors_after_the_scope_is_cancelled_are_absorbed() {
    run(|| {
        let r = coro::scope(|s| {
            for _ in 0..3 {
                s.try_spawn(|| coro::sleep(LONG));
            }
            coro::yield_now();
            s.cancel();
            7
        });
        assert_eq!(r.unwrap(), 7);
    });
}

#[test]
fn cancelling_the_scope_reaches_the_body_threads_and_nested_scopes() {
    run(|| {
        let log = RefCell::new(Vec::new());
        let log = &log;
        let r = coro::scope(|s| {
            s.spawn(|| {
                let inner = coro::scope(|s2| {
                    s2.spawn(|| {
                        let r = coro::sleep(LONG);
                        log.borrow_mut().push(("grandchild", r));
                    });
                    let r = coro::sleep(LONG);
                    log.borrow_mut().push(("child", r));
                });
                assert!(inner.is_ok());
            });
            s.spawn(move || {
                coro::yield_now();
                s.cancel();
            });
            let r = coro::sleep(LONG);
            log.borrow_mut().push(("body", r));
            s.cancel_scope().clone()
        });
        let scope = r.unwrap();
        assert!(scope.cancel_called() && scope.cancelled_caught());
        let mut log = log.take();
        log.sort_by_key(|(who, _)| *who);
        let c = Err(WaitError::Cancelled);
        assert_eq!(log, [("body", c), ("child", c), ("grandchild", c)]);
    });
}

#[test]
fn a_thread_spawned_after_the_cancel_starts_cancelled() {
    run(|| {
        coro::scope(|s| {
            s.cancel();
            let h = s.spawn(|| (coro::sleep(Duration::ZERO), coro::sleep(LONG)));
            until_finished(&h);
            let c = Err(WaitError::Cancelled);
            assert_eq!(h.join().unwrap(), (c, c));
        })
        .unwrap();
    });
}

#[test]
fn an_outer_deadline_reaches_threads_in_nested_scopes_and_is_caught_outside() {
    run(|| {
        let seen = Cell::new(None);
        let seen = &seen;
        // The body returns at once; only the grandchild blocks. Its timer is
        // armed for the outer scope, on the thread that owns it.
        let r = with_timeout(Duration::from_millis(5), || {
            coro::scope(|s| {
                s.spawn(|| {
                    coro::scope(|s2| {
                        s2.spawn(|| seen.set(Some(coro::sleep(LONG))));
                    })
                    .unwrap()
                });
            })
            .unwrap()
        });
        assert_eq!(seen.get(), Some(Err(WaitError::TimedOut)));
        // The grandchild reported the outer scope's expiry: it converts.
        assert_eq!(r, Err(Timeout));
        assert_eq!(coro::stats().pending_timers, 0);
    });
}

#[test]
fn a_deadline_on_the_scope_applies_to_every_thread() {
    run(|| {
        let r = coro::scope(|s| {
            s.cancel_scope()
                .set_deadline(Some(coro::clock::now() + Duration::from_millis(5)));
            for _ in 0..3 {
                s.try_spawn(|| coro::sleep(LONG)); // absorbed: the scope's own
            }
            coro::sleep(LONG)
        });
        assert_eq!(r.unwrap(), Err(WaitError::TimedOut));
    });
}

#[test]
fn a_body_panic_cancels_and_waits_before_it_comes_back() {
    run(|| {
        let log = RefCell::new(Vec::new());
        let r = panic::catch_unwind(AssertUnwindSafe(|| {
            coro::scope(|s| {
                s.spawn(|| {
                    let r = coro::sleep(LONG);
                    // Cleanup that blocks, shielded, still writing to the
                    // caller's frame after the body panicked.
                    shielded_cleanup();
                    log.borrow_mut().push(r);
                });
                coro::yield_now();
                panic!("body failed");
            })
        }));
        assert_eq!(r.unwrap_err().downcast_ref::<&str>(), Some(&"body failed"));
        assert_eq!(log.into_inner(), [Err(WaitError::Cancelled)]);
    });
}

#[test]
fn interrupting_the_waiting_thread_cancels_the_scope_and_still_waits() {
    run(|| {
        let log = Rc::new(RefCell::new(Vec::new()));
        let l = log.clone();
        let owner = coro::spawn(move || {
            let mut local = Vec::new();
            coro::scope(|s| {
                s.spawn(|| {
                    let r = coro::sleep(LONG);
                    shielded_cleanup();
                    local.push(r);
                });
            })
            .unwrap();
            l.borrow_mut().push("scope returned");
            // The interrupt is kept for the next blocking call.
            (local, coro::sleep(Duration::ZERO))
        });
        until_scope_blocked(owner.thread(), 1);
        owner.thread().interrupt().unwrap();
        let (local, next) = owner.join().unwrap();
        assert_eq!(local, [Err(WaitError::Cancelled)]);
        assert_eq!(next, Err(WaitError::Interrupted));
        assert_eq!(*log.borrow(), ["scope returned"]);
    });
}

#[test]
fn cancelling_the_waiting_threads_scope_cancels_the_threads_and_still_waits() {
    run(|| {
        let outer = CancelScope::new();
        let log = Rc::new(RefCell::new(Vec::new()));
        let owner = {
            let (outer, log) = (outer.clone(), log.clone());
            coro::spawn(move || {
                outer.run(|| {
                    let local = RefCell::new(Vec::new());
                    coro::scope(|s| {
                        s.spawn(|| {
                            let r = coro::sleep(LONG);
                            shielded_cleanup();
                            local.borrow_mut().push(r);
                        });
                    })
                    .unwrap();
                    log.borrow_mut().extend(local.take());
                })
            })
        };
        until_scope_blocked(owner.thread(), 1);
        outer.cancel();
        let r = owner.join().unwrap();
        // The thread's call reported the outer scope's cancel: it caught it.
        assert!(r.is_err() && outer.cancelled_caught());
        assert_eq!(*log.borrow(), [Err(WaitError::Cancelled)]);
    });
}

#[test]
fn threads_show_their_scope() {
    run(|| {
        let me = coro::current().id();
        coro::scope(|s| {
            let child = s.spawn(|| {
                let child = coro::current().id();
                coro::scope(|s2| {
                    s2.spawn(coro::yield_now);
                    assert_eq!(children_of(child).len(), 1);
                })
                .unwrap();
                coro::sleep(Duration::from_millis(1)).unwrap();
            });
            assert_eq!(children_of(me), [child.thread().id()]);
            let info = coro::threads();
            assert_eq!(info.iter().find(|t| t.id == me).unwrap().parent, None);
        })
        .unwrap();
        assert!(children_of(me).is_empty());
    });
}

#[test]
#[should_panic(expected = "not allowed here")]
fn a_scope_inside_no_suspend_panics() {
    run(|| {
        coro::no_suspend(|| {
            let _ = coro::scope(|_| ());
        })
    });
}

#[test]
fn the_scope_error_keeps_the_error_kind_for_io() {
    run(|| {
        let timed_out = coro::scope(|s| {
            s.try_spawn(|| with_timeout(Duration::ZERO, coro::park));
        });
        let e = io::Error::from(timed_out.unwrap_err());
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        let wait = coro::scope(|s| {
            s.try_spawn(|| {
                coro::current().interrupt().unwrap();
                coro::park()
            });
        });
        let e = wait.unwrap_err();
        assert!(matches!(
            e.error().downcast_ref::<WaitError>(),
            Some(WaitError::Interrupted)
        ));
        assert_ne!(io::Error::from(e).kind(), io::ErrorKind::Interrupted);
    });
}

/// Runtime shutdown with a scope waiting for threads that swallow every
/// error (so they survive the interrupt pass): the threads are unwound
/// first, their destructors writing into the owner's frame, then the owner.
#[test]
fn shutdown_unwinds_the_threads_before_the_frame_they_borrow() {
    let log = Rc::new(RefCell::new(Vec::new()));
    let out = log.clone();
    run(move || {
        let owner = coro::spawn(move || {
            let local = RefCell::new(Vec::new());
            /// On the owner's frame: reports what the threads wrote into
            /// `local` when the frame unwinds.
            struct Report<'a>(
                &'a RefCell<Vec<&'static str>>,
                Rc<RefCell<Vec<&'static str>>>,
            );
            impl Drop for Report<'_> {
                fn drop(&mut self) {
                    let mut out = self.1.borrow_mut();
                    out.extend(self.0.borrow().iter());
                    out.push("owner");
                }
            }
            let _report = Report(&local, out);
            let _ = coro::scope(|s| {
                for name in ["a", "b", "c"] {
                    let local = &local;
                    s.spawn(move || {
                        let _p = Push(local, name);
                        loop {
                            let _ = coro::sleep(LONG);
                        }
                    });
                }
            });
            unreachable!("the scope's threads never end on their own");
        });
        until_scope_blocked(owner.thread(), 3);
        // main returns: shutdown.
    });
    let mut log = log.take();
    assert_eq!(log.pop(), Some("owner"), "the owner's frame unwinds last");
    log.sort();
    assert_eq!(log, ["a", "b", "c"]);
}

/// A thread of a scope that catches its shutdown unwind and blocks again is
/// leaked: it never runs again, so its owner's frame may unwind under it.
#[test]
fn shutdown_leaks_a_thread_that_will_not_die_and_unwinds_its_owner() {
    let log: Rc<RefCell<Vec<&str>>> = Rc::new(RefCell::new(Vec::new()));
    let out = log.clone();
    run(move || {
        let owner = coro::spawn(move || {
            let _out = out; // dropped when the owner's frame unwinds
            let local = RefCell::new(Vec::new());
            let _ = coro::scope(|s| {
                s.spawn(|| {
                    let _p = Push(&local, "never: leaked");
                    loop {
                        let _ = panic::catch_unwind(AssertUnwindSafe(|| loop {
                            let _ = coro::sleep(LONG);
                        }));
                    }
                });
            });
        });
        until_scope_blocked(owner.thread(), 1);
    });
    // The owner's frame unwound (its closure and `out` dropped) and the
    // leaked thread never pushed.
    assert_eq!(Rc::strong_count(&log), 1, "the owner's closure was dropped");
    assert!(log.borrow().is_empty());
}

/// The scheduler loop panics (a deadlock) while a scope waits; shutdown,
/// run while the OS thread panics, still finishes the scope's thread
/// before its owner returns.
#[test]
fn shutdown_after_a_deadlock_panic_with_a_scope_waiting() {
    let log = Rc::new(RefCell::new(Vec::new()));
    let out = log.clone();
    let r = panic::catch_unwind(AssertUnwindSafe(move || {
        run(move || {
            let local = RefCell::new(Vec::new());
            coro::scope(|s| {
                s.spawn(|| {
                    let _p = Push(&local, "thread");
                    coro::park() // nothing will ever wake it
                });
            })
            .unwrap();
            out.borrow_mut().extend(local.take());
            out.borrow_mut().push("scope returned");
        })
    }));
    let msg = r.unwrap_err();
    let msg = msg
        .downcast_ref::<String>()
        .map(String::as_str)
        .unwrap_or("");
    assert!(msg.contains("deadlock"), "{msg}");
    assert_eq!(*log.borrow(), ["thread", "scope returned"]);
}

#[test]
fn threads_see_the_deadlines_around_their_scope_not_those_the_body_opens() {
    run(|| {
        let at = coro::clock::now() + Duration::from_secs(100);
        coro::with_deadline(at, || {
            coro::scope(|s| {
                s.spawn(|| assert_eq!(coro::current_effective_deadline(), Some(at)));
                with_timeout(Duration::from_secs(1), || {
                    // Spawned from inside a scope the body opened: the
                    // thread runs in the nursery's scope, not in this one.
                    s.spawn(|| assert_eq!(coro::current_effective_deadline(), Some(at)));
                })
                .unwrap();
                // A shield around a nested scope hides the deadline from its
                // threads too.
                CancelScope::new()
                    .shielded()
                    .run(|| {
                        coro::scope(|s2| {
                            s2.spawn(|| assert_eq!(coro::current_effective_deadline(), None));
                        })
                    })
                    .unwrap()
                    .unwrap();
            })
            .unwrap()
        })
        .unwrap();
    });
}

#[test]
fn an_interrupt_that_came_before_the_wait_cancels_the_scope() {
    run(|| {
        let slept = Cell::new(None);
        coro::scope(|s| {
            s.spawn(|| slept.set(Some(coro::sleep(LONG))));
            // Interrupted while running, not blocked: the scope's wait is
            // the next blocking call (without acting on it, it would wait
            // an hour).
            coro::current().interrupt().unwrap();
        })
        .unwrap();
        assert_eq!(slept.get(), Some(Err(WaitError::Cancelled)));
        // The interrupt is kept for the next call.
        assert_eq!(coro::sleep(Duration::ZERO), Err(WaitError::Interrupted));
    });
}
