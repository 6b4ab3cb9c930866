//! Deferred: push from destructors (also while unwinding and inside
//! no_suspend), handled later in order; the PyPy post's deadlock scenario
//! done naively (reported, never a hang) and with Deferred (completes).

mod util;

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use coro_runtime as coro;
use coro_sync::{Deferred, LockError, Mutex};
use util::{logs, run, settle};

type Seen = Rc<RefCell<Vec<u64>>>;

/// A deferred queue that records the items it handles.
fn recorder(name: &str) -> (Rc<Deferred<u64>>, Seen) {
    let seen: Seen = Rc::default();
    let s = seen.clone();
    let d = Deferred::new(name, move |id| s.borrow_mut().push(id)).unwrap();
    (Rc::new(d), seen)
}

/// A cursor whose destructor hands its id to a deferred queue.
struct Cursor(u64, Rc<Deferred<u64>>);
impl Drop for Cursor {
    fn drop(&mut self) {
        self.1.push(self.0);
    }
}

#[test]
fn items_are_handled_soon_after_push_in_order() {
    run(|| {
        let (d, seen) = recorder("order");
        for i in 0..5 {
            d.push(i);
        }
        assert_eq!(d.len(), 5);
        settle();
        assert_eq!(*seen.borrow(), [0, 1, 2, 3, 4]);
        assert_eq!(d.handled(), 5);
        assert!(d.is_empty());
    });
}

#[test]
fn push_inside_no_suspend_is_fine() {
    run(|| {
        let (d, seen) = recorder("no-suspend");
        coro::no_suspend(|| drop(Cursor(1, d.clone())));
        settle();
        assert_eq!(*seen.borrow(), [1]);
    });
}

#[test]
fn push_from_drop_during_unwinding() {
    run(|| {
        let (d, seen) = recorder("unwinding");
        let d2 = d.clone();
        let h = coro::spawn(move || {
            let _c = Cursor(42, d2);
            panic!("the iteration failed"); // the cursor is dropped while unwinding
        });
        assert!(h.join().unwrap_err().is_panic());
        settle();
        assert_eq!(*seen.borrow(), [42]);
    });
}

#[test]
fn a_handler_that_blocks_runs_on_the_executors_thread() {
    run(|| {
        let seen: Seen = Rc::default();
        let s = seen.clone();
        let d = Deferred::new("slow", move |id| {
            coro::sleep(Duration::from_millis(2)).unwrap(); // blocking is fine here
            s.borrow_mut().push(id);
        })
        .unwrap();
        d.push(1);
        d.push(2);
        d.flush().unwrap();
        assert_eq!(*seen.borrow(), [1, 2]);
    });
}

#[test]
fn a_panicking_handler_is_logged_and_the_next_items_still_run() {
    logs::capture();
    run(|| {
        let seen: Seen = Rc::default();
        let s = seen.clone();
        let d = Deferred::new("fragile", move |id| {
            if id == 2 {
                panic!("cannot close cursor 2");
            }
            s.borrow_mut().push(id);
        })
        .unwrap();
        for i in 1..=3 {
            d.push(i);
        }
        settle();
        assert_eq!(*seen.borrow(), [1, 3]);
    });
    assert_eq!(
        logs::take("coro_sync::deferred"),
        [(
            log::Level::Error,
            "deferred queue 'fragile': the handler panicked: cannot close cursor 2".to_string()
        )]
    );
}

#[test]
fn dropping_the_queue_handles_what_is_left_then_stops() {
    run(|| {
        let seen: Seen = Rc::default();
        let s = seen.clone();
        let d = Deferred::new("orphan", move |id| s.borrow_mut().push(id)).unwrap();
        let ex = d.executor().clone();
        d.push(9);
        drop(d);
        assert!(ex.join(Duration::from_secs(5)).unwrap());
        assert_eq!(*seen.borrow(), [9]);
        assert_eq!(ex.exit(), Some(coro_sync::ExecutorExit::Stopped));
    });
}

#[test]
fn items_queued_at_shutdown_are_handled() {
    let seen: Seen = Rc::default();
    let s = seen.clone();
    coro::run(move || {
        let s2 = s.clone();
        let d = Deferred::new("at-exit", move |id| {
            coro::sleep(Duration::from_millis(1)).unwrap();
            s2.borrow_mut().push(id);
        })
        .unwrap();
        // Leaked on purpose: its executor is closed at shutdown, the hook
        // drains what is queued.
        let d = Box::leak(Box::new(d));
        d.push(1);
        d.push(2);
    });
    assert_eq!(*seen.borrow(), [1, 2]);
}

// The PyPy post: a destructor that takes a lock the interrupted code already
// holds. Done naively, coro reports it at once; with Deferred it completes.

/// A cursor whose destructor takes the client's lock itself (the bug).
struct NaiveCursor {
    id: u64,
    client: Rc<Mutex<Vec<u64>>>,
    outcome: Rc<RefCell<Vec<String>>>,
}
impl Drop for NaiveCursor {
    fn drop(&mut self) {
        let r = self.client.lock().map(|mut g| g.push(self.id));
        self.outcome.borrow_mut().push(format!("{r:?}"));
    }
}

#[test]
fn pypy_scenario_naive_same_thread_reports_would_deadlock() {
    run(|| {
        let client = Rc::new(Mutex::new(Vec::new()));
        let outcome = Rc::default();
        let c = NaiveCursor {
            id: 1,
            client: client.clone(),
            outcome: Rc::clone(&outcome),
        };
        let held = client.lock().unwrap();
        drop(c); // "del c" while the lock is held: CPython deadlocks here
        drop(held);
        assert_eq!(
            *outcome.borrow(),
            [format!("{:?}", Err::<(), _>(LockError::WouldDeadlock))]
        );
        assert!(client.lock().unwrap().is_empty());
    });
}

#[test]
fn pypy_scenario_naive_collected_inside_a_critical_section_is_refused_and_logged() {
    logs::capture();
    run(|| {
        let client = Rc::new(Mutex::new(Vec::new()));
        // Another thread holds the client's lock across a blocking call.
        let c2 = client.clone();
        let holder = coro::Builder::new()
            .name("topology".into())
            .spawn(move || {
                let _g = c2.lock().unwrap();
                // Held until the scenario is over, however slow the machine.
                coro::park().unwrap();
            })
            .unwrap();
        settle();
        let outcome = Rc::new(RefCell::new(Vec::new()));
        // The "garbage collector" runs the destructor at an arbitrary point,
        // where this thread must not block: inside no_suspend, and while
        // unwinding from a panic.
        let c = NaiveCursor {
            id: 1,
            client: client.clone(),
            outcome: outcome.clone(),
        };
        coro::no_suspend(|| drop(c));
        let (c3, o3) = (client.clone(), outcome.clone());
        let h = coro::Builder::new()
            .name("iterating".into())
            .spawn(move || {
                let _c = NaiveCursor {
                    id: 2,
                    client: c3,
                    outcome: o3,
                };
                panic!("1 / 0");
            })
            .unwrap();
        assert!(h.join().unwrap_err().is_panic());
        holder.thread().unpark().unwrap();
        holder.join().unwrap();
        let refused = format!(
            "{:?}",
            Err::<(), _>(LockError::Wait(coro::WaitError::SuspendForbidden))
        );
        assert_eq!(*outcome.borrow(), [refused.clone(), refused]);
        assert!(
            client.lock().unwrap().is_empty(),
            "nothing done, nothing hung"
        );
    });
    let errors: Vec<String> = logs::take("coro")
        .into_iter()
        .filter(|(l, _)| *l == log::Level::Error)
        .map(|(_, m)| m)
        .collect();
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(
        errors[0].contains("'main'") && errors[0].contains("no_suspend"),
        "{errors:?}"
    );
    assert!(
        errors[1].contains("'iterating'") && errors[1].contains("unwinding"),
        "{errors:?}"
    );
}

#[test]
fn pypy_scenario_with_deferred_completes() {
    run(|| {
        let client = Rc::new(Mutex::new(Vec::new()));
        let c = client.clone();
        let kill_cursors =
            Rc::new(Deferred::new("kill-cursors", move |id| c.lock().unwrap().push(id)).unwrap());
        // Same thread: the cursor dies while its own thread holds the lock.
        let held = client.lock().unwrap();
        drop(Cursor(1, kill_cursors.clone()));
        coro::no_suspend(|| drop(Cursor(2, kill_cursors.clone())));
        settle(); // the handler waits for the lock like any other thread
        assert!(held.is_empty(), "the handler is queued for the lock");
        assert_eq!(
            kill_cursors.len(),
            1,
            "item 1 is in the handler, item 2 waits"
        );
        drop(held);
        // While unwinding on another thread.
        let k = kill_cursors.clone();
        let h = coro::spawn(move || {
            let _c = Cursor(3, k);
            panic!("1 / 0");
        });
        assert!(h.join().unwrap_err().is_panic());
        kill_cursors.flush().unwrap();
        settle();
        assert_eq!(*client.lock().unwrap(), [1, 2, 3]);
    });
}
