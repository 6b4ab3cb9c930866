//! GroupPool's spawn failures and first workers: a failed
//! background spawn removes its group and the next caller sees the error;
//! a key that keeps failing backs off; a waiter whose group's spawn failed
//! spawns for itself; with `min_processes > 1` the caller that started the
//! spawn gets the first worker. The spawner records each spawn, fails the
//! next n on demand, and holds spawns at a gate (a coro semaphore) to force
//! the interleavings.

mod util;

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use coro_runtime as coro;
use coro_sync::{GetError, GroupOptions, GroupPool, GroupPoolBuilder, SpawnBackoff};
use util::workers::{Farm, Spawn};
use util::{logs, run, settle, yield_until};

type Pool = GroupPool<Spawn>;
type Log = Rc<RefCell<Vec<String>>>;

fn pool(b: GroupPoolBuilder<Spawn>) -> (Pool, Rc<Farm>) {
    let farm = Rc::new(Farm::default());
    (b.build(Spawn(farm.clone())).unwrap(), farm)
}

/// A green thread that gets a session of `key`, logs the worker it got (or
/// the error) and holds the session until `hold` is set.
fn client(
    p: &Pool,
    key: &'static str,
    log: &Log,
    hold: &Rc<coro_sync::Event>,
) -> coro::JoinHandle<()> {
    let (p, log, hold) = (p.clone(), log.clone(), hold.clone());
    coro::spawn(move || match p.get(&key) {
        Ok(s) => {
            log.borrow_mut().push(format!("{key}: worker {}", *s));
            let _ = hold.wait();
            drop(s);
        }
        Err(e) => log.borrow_mut().push(format!("{key}: {e}")),
    })
}

#[test]
fn a_failed_background_spawn_removes_the_group_and_the_next_get_sees_the_error() {
    run(|| {
        logs::capture();
        let (p, farm) = pool(GroupPool::builder().max(2));
        let a = p.get(&"app").unwrap();
        // Worker 1 is busy: this get queues at it and starts a background
        // spawn, which fails.
        farm.fail.borrow_mut().insert("app");
        let b = p.get(&"app").unwrap();
        assert_eq!((*a, *b), (1, 1));
        settle();
        assert_eq!(*farm.outcomes.borrow(), ["app: worker 1", "app: failed"]);
        let warned = logs::take("coro_sync::group_pool");
        assert!(
            warned.iter().any(|(l, m)| *l == log::Level::Warn
                && m == "GroupPool: spawning a worker for \"app\" failed: cannot start app; the group is removed"),
            "{warned:?}"
        );
        // The document: the entire group goes, though worker 1 lives on
        // for its sessions...
        assert_eq!(p.groups(), Vec::<&str>::new());
        assert_eq!((p.count(), p.active()), (0, 0));
        // ...and the next get spawns, and its caller gets the error
        // instead of a share of worker 1.
        match p.get(&"app") {
            Err(GetError::Spawn(e)) => assert_eq!(e.0, "cannot start app"),
            other => panic!("expected the spawn error, got {other:?}"),
        }
        drop((a, b));
        settle();
        assert_eq!(*farm.shut.borrow(), [1], "worker 1 ends with its sessions");
    });
}

#[test]
fn a_key_that_keeps_failing_backs_off_with_the_stored_error() {
    run(|| {
        let backoff = SpawnBackoff {
            after: 3,
            initial: Duration::from_millis(20),
            max: Duration::from_millis(40),
        };
        let (p, farm) = pool(GroupPool::builder().spawn_backoff(backoff));
        farm.fail.borrow_mut().insert("app");
        for i in 1..=3 {
            assert!(
                matches!(p.get(&"app"), Err(GetError::Spawn(_))),
                "failure {i} is the caller's own spawn"
            );
        }
        // In backoff: the stored error at once, no spawn.
        let retry_in = match p.get(&"app") {
            Err(GetError::Backoff {
                error,
                failures,
                retry_in,
            }) => {
                assert_eq!((error.0.as_str(), failures), ("cannot start app", 3));
                retry_in
            }
            other => panic!("expected a backoff, got {other:?}"),
        };
        assert!(
            !retry_in.is_zero() && retry_in <= backoff.initial,
            "{retry_in:?}"
        );
        assert_eq!(
            farm.outcomes.borrow().len(),
            3,
            "no spawn while backing off"
        );
        assert_eq!(p.groups(), Vec::<&str>::new());
        let stats = p.stats();
        assert_eq!(stats.in_backoff().count(), 1);
        let k = &stats.failing[0];
        assert_eq!((k.key, k.failures), ("app", 3));
        assert!(k.retry_in.is_some_and(|d| d <= backoff.initial));
        let shown = stats.to_string();
        assert!(
            shown.starts_with("GroupPool: 0 workers (0 active, 0 idle), 0 spawning, max 6, 0 groups\n  backoff \"app\": 3 failed spawns in a row, next try in ")
                && shown.ends_with(": cannot start app"),
            "{shown}"
        );
        // The delay over, one caller spawns (and fails: 4 in a row); the
        // delay doubles, then stays at the cap.
        for failures in 4..=5 {
            coro::sleep(retry_in_of(&p)).unwrap();
            assert!(matches!(p.get(&"app"), Err(GetError::Spawn(_))));
            match p.get(&"app") {
                Err(GetError::Backoff {
                    failures: f,
                    retry_in,
                    ..
                }) => {
                    assert_eq!(f, failures);
                    assert!(retry_in <= backoff.max, "capped: {retry_in:?}");
                }
                other => panic!("expected a backoff, got {other:?}"),
            }
        }
        assert_eq!(farm.outcomes.borrow().len(), 5);
        // A success ends the run.
        farm.fail.borrow_mut().clear();
        coro::sleep(retry_in_of(&p)).unwrap();
        assert_eq!(*p.get(&"app").unwrap(), 1);
        assert!(p.stats().failing.is_empty());
    });
}

/// How long until `p` may spawn for "app" again (a little more).
fn retry_in_of(p: &Pool) -> Duration {
    let d = p.stats().failing[0].retry_in.unwrap_or_default();
    d + Duration::from_millis(1)
}

#[test]
fn backoff_settings_are_checked() {
    run(|| {
        let bad = SpawnBackoff {
            after: 3,
            initial: Duration::from_secs(2),
            max: Duration::from_secs(1),
        };
        let e = GroupPool::builder()
            .spawn_backoff(bad)
            .build(Spawn::default())
            .unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
        assert!(
            e.to_string()
                .contains("spawn_backoff needs 0 < initial <= max"),
            "{e}"
        );
        // after = 0: never back off.
        let off = SpawnBackoff { after: 0, ..bad };
        let (p, farm) = pool(GroupPool::builder().spawn_backoff(off));
        farm.fail.borrow_mut().insert("app");
        for _ in 0..5 {
            assert!(matches!(p.get(&"app"), Err(GetError::Spawn(_))));
        }
        assert_eq!(p.stats().in_backoff().count(), 0);
        assert_eq!(p.stats().failing[0].failures, 5);
    });
}

#[test]
fn a_waiter_whose_groups_spawn_failed_spawns_for_itself() {
    run(|| {
        let (p, farm) = pool(GroupPool::builder());
        farm.close_gate();
        let log: Log = Rc::default();
        let hold = Rc::new(coro_sync::Event::new());
        // Caller 0 starts the spawn; 1 and 2 wait for the group.
        let hs: Vec<_> = (0..3).map(|_| client(&p, "app", &log, &hold)).collect();
        yield_until("the spawn is at the gate", || farm.at_gate() == 1);
        settle();
        assert!(log.borrow().is_empty());
        // A flaky spawner: that one spawn fails.
        farm.fail_next.set(1);
        farm.open(1);
        yield_until("caller 0 has its error", || !log.borrow().is_empty());
        assert_eq!(
            *log.borrow(),
            ["app: cannot spawn a worker: cannot start app"]
        );
        // The waiters started over: one spawns for itself, the other
        // waits for it; the spawn succeeds and serves both.
        yield_until("a waiter's spawn is at the gate", || farm.at_gate() == 1);
        farm.open(1);
        yield_until("both waiters served", || log.borrow().len() == 3);
        assert_eq!(
            *log.borrow(),
            [
                "app: cannot spawn a worker: cannot start app",
                "app: worker 1",
                "app: worker 1",
            ],
            "one failure cost one caller"
        );
        farm.open(8);
        hold.set();
        util::join_all(hs);
        settle();
        assert_eq!(
            *farm.outcomes.borrow(),
            ["app: failed", "app: worker 1", "app: worker 2"]
        );
    });
}

#[test]
fn waiters_get_the_backoff_error_at_once_after_the_third_failure() {
    run(|| {
        let (p, farm) = pool(GroupPool::builder());
        farm.close_gate();
        farm.fail.borrow_mut().insert("app");
        let log: Log = Rc::default();
        let hold = Rc::new(coro_sync::Event::new());
        let hs: Vec<_> = (0..5).map(|_| client(&p, "app", &log, &hold)).collect();
        for n in 1..=3 {
            yield_until("a spawn at the gate", || farm.at_gate() == 1);
            farm.open(1);
            yield_until("its caller has the error", || log.borrow().len() >= n);
        }
        // The third failure put the key in backoff: the two callers left
        // get it without a spawn.
        util::join_all(hs);
        let log = log.borrow();
        assert_eq!(
            log[..3],
            vec!["app: cannot spawn a worker: cannot start app"; 3]
        );
        for l in &log[3..] {
            assert!(
                l.starts_with("app: cannot spawn a worker: cannot start app (3 failures in a row; next try in "),
                "{l}"
            );
        }
        assert_eq!(farm.outcomes.borrow().len(), 3);
        assert_eq!(farm.at_gate(), 0);
    });
}

#[test]
fn with_min_processes_the_first_caller_gets_the_first_worker() {
    run(|| {
        let opts = GroupOptions {
            max_requests: 0,
            min_processes: 3,
        };
        // A spawner that returns without pausing: the whole loop runs
        // before the caller is woken.
        let (p, _) = pool(GroupPool::builder().options(opts));
        let s = p.get(&"app").unwrap();
        assert_eq!(*s, 1, "the worker spawned for the caller");
        assert_eq!(p.workers(&"app"), [(3, 0, 0), (2, 0, 0), (1, 1, 0)]);
    });
}

#[test]
fn with_min_processes_the_first_caller_does_not_wait_for_the_loop() {
    run(|| {
        let opts = GroupOptions {
            max_requests: 0,
            min_processes: 3,
        };
        let (p, farm) = pool(GroupPool::builder().options(opts));
        farm.close_gate();
        let log: Log = Rc::default();
        let hold = Rc::new(coro_sync::Event::new());
        let h = client(&p, "app", &log, &hold);
        yield_until("the spawn is at the gate", || farm.at_gate() == 1);
        farm.open(1);
        yield_until("the caller is served", || !log.borrow().is_empty());
        assert_eq!(*log.borrow(), ["app: worker 1"]);
        assert_eq!(farm.at_gate(), 1, "the second spawn is still held");
        assert_eq!(p.spawning(), 1);
        farm.open(2);
        yield_until("the loop ended", || p.spawning() == 0);
        assert_eq!(p.group_size(&"app"), Some(3));
        hold.set();
        h.join().unwrap();
    });
}

#[test]
fn a_caller_interrupted_as_its_worker_arrives_gives_it_back() {
    run(|| {
        let (p, farm) = pool(GroupPool::builder());
        farm.close_gate();
        let p2 = p.clone();
        let h = coro::spawn(move || p2.get(&"app").map(|s| *s));
        yield_until("the spawn is at the gate", || farm.at_gate() == 1);
        // The spawner runs first (its permit came first) and hands the
        // worker over; the caller then wakes interrupted.
        farm.open(1);
        h.thread().interrupt().unwrap();
        let r = h.join().unwrap();
        assert!(
            matches!(r, Err(GetError::Wait(coro::WaitError::Interrupted))),
            "{r:?}"
        );
        assert_eq!((p.count(), p.active()), (1, 0), "the worker went back idle");
        p.check_invariants();
        assert_eq!(*p.get(&"app").unwrap(), 1);
    });
}

#[test]
fn a_caller_waiting_for_the_spawn_it_started_gets_its_error() {
    run(|| {
        // One session per worker (a mail relay's connections): a caller
        // that finds every worker busy starts a spawn and waits for it.
        let (p, farm) = pool(GroupPool::builder().session_limit(1));
        let a = p.get(&"host").unwrap();
        farm.close_gate();
        let log: Log = Rc::default();
        let hold = Rc::new(coro_sync::Event::new());
        let b = client(&p, "host", &log, &hold);
        yield_until("b's spawn is at the gate", || farm.at_gate() == 1);
        let c = client(&p, "host", &log, &hold);
        settle();
        farm.fail_next.set(1);
        farm.open(1);
        yield_until("b has its error", || !log.borrow().is_empty());
        assert_eq!(
            *log.borrow(),
            ["host: cannot spawn a worker: cannot start host"]
        );
        // c started over and spawns for itself.
        yield_until("c's spawn is at the gate", || farm.at_gate() == 1);
        farm.open(1);
        yield_until("c is served", || log.borrow().len() == 2);
        assert_eq!(log.borrow()[1], "host: worker 2");
        assert_eq!(
            p.workers(&"host"),
            [(2, 1, 0)],
            "the group with worker 1 was removed"
        );
        assert_eq!(*a, 1, "a's session went on");
        drop(a);
        hold.set();
        util::join_all(vec![b, c]);
    });
}

#[test]
fn the_cleaner_forgets_old_runs_of_failures() {
    run(|| {
        let backoff = SpawnBackoff {
            after: 3,
            initial: Duration::from_millis(250),
            max: Duration::from_millis(250),
        };
        let (p, farm) = pool(GroupPool::builder().spawn_backoff(backoff));
        farm.fail.borrow_mut().insert("app");
        assert!(p.get(&"app").is_err());
        assert_eq!(p.stats().failing.len(), 1);
        p.clean();
        assert_eq!(p.stats().failing.len(), 1, "a recent failure is kept");
        // Older than twice `max`: forgotten, so the pool's memory does not
        // grow with every key that ever failed.
        coro::sleep(Duration::from_millis(510)).unwrap();
        p.clean();
        assert!(p.stats().failing.is_empty());
        assert!(!p.reset_backoff(&"app"));
    });
}
