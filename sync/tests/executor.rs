//! PeriodicExecutor: wake, min_interval, close (also from Drop and
//! no_suspend), reopen, join with a timeout, weakly held owners, a panicking
//! target, live interval changes, and closing and joining at shutdown.

mod util;

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Duration;

use coro_runtime as coro;
use coro_sync::{ExecutorExit, PeriodicExecutor};
use util::{logs, run, settle};

const HOUR: Duration = Duration::from_secs(3600);

/// An executor that counts its runs.
fn counter(interval: Duration, min: Duration, name: &str) -> (PeriodicExecutor, Rc<Cell<u32>>) {
    let runs = Rc::new(Cell::new(0));
    let r = runs.clone();
    let ex = PeriodicExecutor::new(interval, min, name, move || {
        r.set(r.get() + 1);
        true
    });
    (ex, runs)
}

/// Sleeps a millisecond at a time until `cond` holds (bounded by the test's
/// time limit).
#[track_caller]
fn wait_for(what: &str, cond: impl Fn() -> bool) {
    while !cond() {
        coro::sleep(Duration::from_millis(1)).unwrap_or_else(|e| panic!("waiting for {what}: {e}"));
    }
}

#[test]
fn first_run_on_open_then_only_when_woken() {
    run(|| {
        let (ex, runs) = counter(HOUR, Duration::ZERO, "wake");
        ex.open().unwrap();
        settle();
        assert_eq!(runs.get(), 1);
        settle();
        assert_eq!(runs.get(), 1, "no second run within the hour");
        ex.wake();
        settle();
        assert_eq!(runs.get(), 2);
        ex.close();
        assert!(ex.join(HOUR).unwrap());
        assert_eq!(ex.exit(), Some(ExecutorExit::Closed));
    });
}

#[test]
fn interval_runs_repeat() {
    run(|| {
        let (ex, runs) = counter(Duration::from_millis(5), Duration::ZERO, "tick");
        let t = coro::clock::now();
        ex.open().unwrap();
        wait_for("4 runs", || runs.get() >= 4);
        assert!(t.elapsed() >= Duration::from_millis(15), "runs 5 ms apart");
        ex.close();
        assert!(ex.join(HOUR).unwrap());
    });
}

#[test]
fn a_wake_waits_for_min_interval() {
    run(|| {
        let (ex, runs) = counter(HOUR, Duration::from_millis(40), "min");
        ex.open().unwrap();
        settle();
        assert_eq!(runs.get(), 1);
        let t = coro::clock::now();
        ex.wake();
        settle();
        assert_eq!(runs.get(), 1, "not sooner than min_interval after the run");
        wait_for("the woken run", || runs.get() == 2);
        assert!(t.elapsed() >= Duration::from_millis(35));
        ex.close();
    });
}

#[test]
fn a_wake_during_a_run_asks_for_another() {
    run(|| {
        let runs = Rc::new(Cell::new(0));
        let slot: Rc<RefCell<Option<PeriodicExecutor>>> = Rc::default();
        let (r, s) = (runs.clone(), slot.clone());
        let ex = PeriodicExecutor::new(HOUR, Duration::ZERO, "self-wake", move || {
            r.set(r.get() + 1);
            if r.get() == 1 {
                s.borrow().as_ref().unwrap().wake(); // during the run
            }
            true
        });
        *slot.borrow_mut() = Some(ex.clone());
        ex.open().unwrap();
        settle();
        assert_eq!(runs.get(), 2);
        ex.close();
        slot.borrow_mut().take();
    });
}

#[test]
fn skip_sleep_runs_again_at_once() {
    run(|| {
        let (ex, runs) = counter(HOUR, HOUR, "skip");
        ex.skip_sleep();
        ex.open().unwrap();
        settle();
        assert_eq!(
            runs.get(),
            2,
            "the sleep after the first run was skipped once"
        );
        ex.close();
    });
}

#[test]
fn update_interval_applies_to_the_wait_in_progress() {
    run(|| {
        let (ex, runs) = counter(HOUR, Duration::ZERO, "retime");
        ex.open().unwrap();
        settle();
        assert_eq!(runs.get(), 1);
        ex.update_interval(Duration::from_millis(2));
        wait_for("a run on the new interval", || runs.get() >= 3);
        assert_eq!(ex.interval(), Duration::from_millis(2));
        ex.close();
    });
}

#[test]
fn close_never_suspends_and_stops_the_thread_at_once() {
    run(|| {
        let (ex, _runs) = counter(HOUR, HOUR, "close");
        ex.open().unwrap();
        settle();
        // From a no_suspend region and from a destructor: neither blocks.
        coro::no_suspend(|| ex.close());
        struct Closer(PeriodicExecutor);
        impl Drop for Closer {
            fn drop(&mut self) {
                self.0.close();
            }
        }
        drop(Closer(ex.clone()));
        assert!(ex.is_closed());
        assert!(ex.join(HOUR).unwrap(), "closed within the hour-long wait");
        assert!(!ex.is_running());
        assert_eq!(ex.exit(), Some(ExecutorExit::Closed));
    });
}

#[test]
fn a_run_in_progress_finishes_before_close_takes_effect() {
    run(|| {
        let log = Rc::new(RefCell::new(Vec::new()));
        let l = log.clone();
        let ex = PeriodicExecutor::new(HOUR, Duration::ZERO, "slow", move || {
            l.borrow_mut().push("start");
            coro::sleep(Duration::from_millis(20)).unwrap();
            l.borrow_mut().push("end");
            true
        });
        ex.open().unwrap();
        util::settle();
        ex.close();
        assert!(
            !ex.join(Duration::from_millis(1)).unwrap(),
            "still in its run"
        );
        assert!(ex.join(HOUR).unwrap());
        assert_eq!(*log.borrow(), ["start", "end"]);
        assert_eq!(ex.exit(), Some(ExecutorExit::Closed));
    });
}

#[test]
fn open_is_idempotent_and_restartable() {
    run(|| {
        let (ex, runs) = counter(HOUR, Duration::ZERO, "reopen");
        ex.open().unwrap();
        ex.open().unwrap();
        settle();
        assert_eq!(runs.get(), 1, "one thread");
        // close then open before the thread acted: the same thread goes on.
        ex.close();
        ex.open().unwrap();
        settle();
        assert!(ex.is_running());
        assert_eq!(runs.get(), 1);
        // close, let it end, open again: a new thread runs at once.
        ex.close();
        assert!(ex.join(HOUR).unwrap());
        ex.open().unwrap();
        settle();
        assert_eq!(runs.get(), 2);
        assert!(ex.is_running());
        ex.close();
        assert!(ex.join(HOUR).unwrap());
    });
}

#[test]
fn target_returning_false_stops() {
    run(|| {
        let ex = PeriodicExecutor::new(Duration::from_millis(1), Duration::ZERO, "once", || false);
        ex.open().unwrap();
        assert!(ex.join(HOUR).unwrap());
        assert_eq!(ex.exit(), Some(ExecutorExit::Stopped));
        assert_eq!(ex.runs(), 1);
    });
}

struct Topology {
    _monitor: coro_sync::CloseOnDrop,
}

#[test]
fn owner_dropped_with_a_close_guard_stops_the_executor_at_once() {
    run(|| {
        let seen = Rc::new(Cell::new(0));
        let owner = Rc::new(RefCell::new(None::<Topology>));
        let s = seen.clone();
        let ex = PeriodicExecutor::with_owner(&owner, HOUR, Duration::ZERO, "monitor", move |_| {
            s.set(s.get() + 1);
            true
        });
        *owner.borrow_mut() = Some(Topology {
            _monitor: ex.close_on_drop(),
        });
        ex.open().unwrap();
        settle();
        assert_eq!(seen.get(), 1);
        assert_eq!(
            Rc::strong_count(&owner),
            1,
            "the executor holds its owner weakly"
        );
        drop(owner);
        assert!(
            ex.join(Duration::from_secs(5)).unwrap(),
            "stopped without waiting an hour"
        );
        assert_eq!(ex.exit(), Some(ExecutorExit::Closed));
    });
}

#[test]
fn owner_dropped_without_a_guard_stops_the_executor_at_its_next_run() {
    run(|| {
        let owner = Rc::new(5u32);
        let ex = PeriodicExecutor::with_owner(
            &owner,
            Duration::from_millis(2),
            Duration::ZERO,
            "weak",
            |o| *o == 5,
        );
        ex.open().unwrap();
        settle();
        assert!(ex.is_running());
        drop(owner);
        assert!(ex.join(Duration::from_secs(5)).unwrap());
        assert_eq!(ex.exit(), Some(ExecutorExit::Stopped));
    });
}

#[test]
fn a_panicking_target_is_logged_and_stops_only_its_executor() {
    logs::capture();
    run(|| {
        let bad = PeriodicExecutor::new(HOUR, Duration::ZERO, "bad-monitor", || panic!("boom"));
        let (good, runs) = counter(HOUR, Duration::ZERO, "good");
        bad.open().unwrap();
        good.open().unwrap();
        assert!(bad.join(HOUR).unwrap());
        assert_eq!(bad.exit(), Some(ExecutorExit::Panicked));
        good.wake();
        settle();
        assert_eq!(runs.get(), 2, "the other executor goes on");
        assert!(good.is_running());
        good.close();
    });
    let records = logs::take("coro_sync::executor");
    assert_eq!(
        records,
        [(
            log::Level::Error,
            "periodic executor 'bad-monitor' panicked: boom; this executor stops".to_string()
        )]
    );
}

#[test]
fn join_times_out_while_the_target_blocks() {
    run(|| {
        let ex = PeriodicExecutor::new(HOUR, Duration::ZERO, "stuck", || {
            let _ = coro::sleep(HOUR);
            true
        });
        ex.open().unwrap();
        settle();
        ex.close();
        let t = coro::clock::now();
        assert!(!ex.join(Duration::from_millis(10)).unwrap());
        assert!(t.elapsed() >= Duration::from_millis(10));
    });
}

#[test]
fn shutdown_closes_and_joins_executors_before_interrupting() {
    logs::capture();
    let idle: Rc<RefCell<Option<PeriodicExecutor>>> = Rc::default();
    let stuck: Rc<RefCell<Option<PeriodicExecutor>>> = Rc::default();
    let slept: Rc<RefCell<Vec<String>>> = Rc::default();
    let (i, s, sl) = (idle.clone(), stuck.clone(), slept.clone());
    let t = std::time::Instant::now();
    coro::run(move || {
        let (ex, _) = counter(HOUR, HOUR, "idle-monitor");
        ex.open().unwrap();
        *i.borrow_mut() = Some(ex);
        let ex = PeriodicExecutor::new(HOUR, Duration::ZERO, "stuck-monitor", move || {
            let r = coro::sleep(HOUR); // ignores close while it runs
            sl.borrow_mut().push(format!("{r:?}"));
            true
        });
        ex.open().unwrap();
        *s.borrow_mut() = Some(ex);
        settle();
    });
    let idle = idle.borrow_mut().take().unwrap();
    let stuck = stuck.borrow_mut().take().unwrap();
    assert_eq!(
        idle.exit(),
        Some(ExecutorExit::Closed),
        "closed by the hook, not interrupted"
    );
    // The stuck one ran until the runtime interrupted its sleep, then saw
    // that it was closed.
    assert_eq!(*slept.borrow(), ["Err(Interrupted)"]);
    assert_eq!(stuck.exit(), Some(ExecutorExit::Closed));
    assert!(
        t.elapsed() >= coro_sync::SHUTDOWN_JOIN,
        "the stuck one was waited for"
    );
    let warned = logs::take("coro_sync::executor");
    assert_eq!(warned.len(), 1, "{warned:?}");
    assert!(
        warned[0].1.contains("'stuck-monitor' did not finish"),
        "{warned:?}"
    );
}
