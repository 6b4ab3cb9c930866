//! GroupPool: each branch of Passenger's algorithm as a scenario.

mod util;

use std::rc::Rc;
use std::time::Duration;

use coro_runtime as coro;
use coro_sync::{GetError, GroupOptions, GroupPool, Session};
use util::workers::{client, pool, Log, Spawn};
use util::{run, settle, yield_until};

#[test]
fn first_get_spawns_on_a_spawner_thread_then_reuses_the_idle_worker() {
    run(|| {
        let (p, farm) = pool(GroupPool::builder());
        let s = p.get(&"app").unwrap();
        assert_eq!(*s, 1);
        assert_eq!(*farm.spawn_threads.borrow(), ["GroupPool spawner \"app\""]);
        assert_eq!((p.count(), p.active()), (1, 1));
        drop(s);
        assert_eq!((p.count(), p.active()), (1, 0));
        assert_eq!(p.inactive().len(), 1);
        let s = p.get(&"app").unwrap();
        assert_eq!(*s, 1, "the idle worker is used");
        assert_eq!(farm.spawned.get(), 1);
    });
}

#[test]
fn all_busy_spawns_in_the_background_and_queues_at_the_least_busy() {
    run(|| {
        let (p, farm) = pool(GroupPool::builder().max(2));
        let a = p.get(&"app").unwrap();
        // Worker 1 is busy: a second worker is spawned in the background,
        // and this caller queues at worker 1 meanwhile.
        let b = p.get(&"app").unwrap();
        assert_eq!((*a, *b), (1, 1));
        assert_eq!(p.spawning(), 1);
        settle();
        assert_eq!(farm.spawned.get(), 2);
        assert_eq!(
            p.workers(&"app"),
            [(2, 0, 0), (1, 2, 0)],
            "idle first, then active"
        );
        let c = p.get(&"app").unwrap();
        assert_eq!(*c, 2, "the idle worker");
        // max reached: no more spawns; the least busy worker takes it.
        let d = p.get(&"app").unwrap();
        assert_eq!(*d, 2);
        assert_eq!(p.spawning(), 0);
        drop((a, b, c, d));
        assert_eq!((p.count(), p.active()), (2, 0));
    });
}

#[test]
fn global_queue_waits_for_a_free_worker() {
    run(|| {
        let (p, _) = pool(GroupPool::builder().max(1).global_queue(true));
        let log: Log = Rc::default();
        let a = p.get(&"app").unwrap();
        let hold = Rc::new(coro_sync::Event::new());
        let w = client(&p, "app", &log, &hold);
        settle();
        assert!(log.borrow().is_empty(), "waiting in the global queue");
        drop(a);
        yield_until("the waiter's session", || !log.borrow().is_empty());
        assert_eq!(*log.borrow(), ["app: worker 1"]);
        hold.set();
        w.join().unwrap();
    });
}

#[test]
fn full_pool_evicts_an_idle_worker_of_another_group() {
    run(|| {
        let (p, farm) = pool(GroupPool::builder().max(2));
        drop(p.get(&"a").unwrap());
        let b = p.get(&"b").unwrap();
        assert_eq!(p.count(), 2);
        let c = p.get(&"c").unwrap(); // a's idle worker makes room
        assert_eq!(*c, 3);
        assert_eq!(p.group_size(&"a"), None, "a's only worker left, so did a");
        assert_eq!(p.count(), 2);
        settle();
        assert_eq!(*farm.shut.borrow(), [1]);
        drop((b, c));
    });
}

#[test]
fn full_pool_with_all_busy_waits_for_room() {
    run(|| {
        let (p, _) = pool(GroupPool::builder().max(1));
        let log: Log = Rc::default();
        let a = p.get(&"a").unwrap();
        let hold = Rc::new(coro_sync::Event::new());
        hold.set();
        let w = client(&p, "b", &log, &hold);
        settle();
        assert!(
            log.borrow().is_empty(),
            "waiting until a group is creatable"
        );
        drop(a); // a's worker goes idle: b evicts it
        w.join().unwrap();
        assert_eq!(*log.borrow(), ["b: worker 2"]);
        assert_eq!(p.groups(), ["b"]);
    });
}

#[test]
fn live_max_change_wakes_waiters() {
    run(|| {
        let (p, _) = pool(GroupPool::builder().max(1));
        let log: Log = Rc::default();
        let _a = p.get(&"a").unwrap();
        let hold = Rc::new(coro_sync::Event::new());
        hold.set();
        let w = client(&p, "b", &log, &hold);
        settle();
        assert!(log.borrow().is_empty());
        p.set_max(2);
        w.join().unwrap();
        assert_eq!(*log.borrow(), ["b: worker 2"]);
        assert_eq!(p.count(), 2);
    });
}

#[test]
fn max_per_app_limits_a_group() {
    run(|| {
        let (p, _) = pool(GroupPool::builder().max(4).max_per_app(1));
        let a = p.get(&"app").unwrap();
        let b = p.get(&"app").unwrap();
        settle();
        assert_eq!(p.group_size(&"app"), Some(1));
        assert_eq!((*a, *b), (1, 1));
        p.set_max_per_app(2);
        let c = p.get(&"app").unwrap();
        settle();
        assert_eq!(p.group_size(&"app"), Some(2));
        drop((a, b, c));
    });
}

#[test]
fn max_requests_recycles_a_worker() {
    run(|| {
        let opts = GroupOptions {
            max_requests: 2,
            min_processes: 0,
        };
        let (p, farm) = pool(GroupPool::builder().options(opts));
        drop(p.get(&"app").unwrap());
        assert_eq!(p.workers(&"app"), [(1, 0, 1)]);
        drop(p.get(&"app").unwrap()); // the second request: recycled
        assert_eq!(p.count(), 0);
        assert_eq!(p.group_size(&"app"), None);
        settle();
        assert_eq!(*farm.shut.borrow(), [1]);
        assert_eq!(*p.get(&"app").unwrap(), 2);
    });
}

#[test]
fn cleaner_reaps_idle_workers_keeping_min_processes() {
    run(|| {
        let (p, farm) = pool(GroupPool::builder().max_idle_time(Duration::from_millis(5)));
        drop(p.get(&"app").unwrap());
        while p.count() > 0 {
            coro::sleep(Duration::from_millis(1)).unwrap();
        }
        settle();
        assert_eq!(*farm.shut.borrow(), [1]);

        let opts = GroupOptions {
            max_requests: 0,
            min_processes: 1,
        };
        let (p, _) = pool(
            GroupPool::builder()
                .max_idle_time(Duration::ZERO)
                .options(opts),
        );
        drop(p.get(&"app").unwrap());
        p.set_max_idle_time(Duration::from_nanos(1));
        coro::sleep(Duration::from_millis(5)).unwrap();
        assert_eq!(p.clean(), 0, "min_processes is kept");
        assert_eq!(p.count(), 1);
    });
}

#[test]
fn min_processes_spawns_up_front() {
    run(|| {
        let opts = GroupOptions {
            max_requests: 0,
            min_processes: 3,
        };
        let (p, _) = pool(GroupPool::builder().options(opts));
        drop(p.get(&"app").unwrap());
        settle();
        assert_eq!(p.group_size(&"app"), Some(3));
    });
}

#[test]
fn restart_txt_restarts_the_group() {
    run(|| {
        let dir = std::env::temp_dir().join(format!("coro-gp-restart-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("app")).unwrap();
        let (p, farm) = pool(GroupPool::builder());
        *farm.restart_root.borrow_mut() = Some(dir.clone());
        drop(p.get(&"app").unwrap());
        assert_eq!(*p.get(&"app").unwrap(), 1, "no restart.txt: no restart");
        let f = std::fs::File::create(dir.join("app/restart.txt")).unwrap();
        assert_eq!(*p.get(&"app").unwrap(), 2, "restart.txt appeared");
        assert_eq!(*p.get(&"app").unwrap(), 2, "unchanged: no restart");
        f.set_modified(std::time::SystemTime::now() + Duration::from_secs(10))
            .unwrap();
        assert_eq!(*p.get(&"app").unwrap(), 3, "touched");
        std::fs::File::create(dir.join("app/always_restart.txt")).unwrap();
        assert_eq!(*p.get(&"app").unwrap(), 4);
        assert_eq!(*p.get(&"app").unwrap(), 5, "always");
        std::fs::remove_dir_all(&dir).unwrap();
        settle();
        assert_eq!(*farm.shut.borrow(), [1, 2, 3, 4]);
    });
}

#[test]
fn a_failed_connect_detaches_the_worker_and_retries() {
    run(|| {
        let (p, farm) = pool(GroupPool::builder());
        drop(p.get(&"app").unwrap());
        farm.dead.borrow_mut().insert(1);
        let s = p.get(&"app").unwrap();
        assert_eq!(*s, 2, "worker 1 was detached, a new one spawned");
        drop(s);
        // Every worker dies: MAX_ATTEMPTS then the error.
        farm.dead.borrow_mut().extend(2..100);
        match p.get(&"app") {
            Err(GetError::Connect(e)) => assert!(e.0.contains("is dead"), "{e}"),
            other => panic!("expected a connect error, got {other:?}"),
        }
        assert_eq!(farm.spawned.get(), 2 + 9);
    });
}

#[test]
fn each_waiter_spawns_for_itself_then_the_key_backs_off() {
    run(|| {
        let (p, farm) = pool(GroupPool::builder());
        farm.fail.borrow_mut().insert("app");
        farm.delay.set(Duration::from_millis(2));
        let log: Log = Rc::default();
        let hold = Rc::new(coro_sync::Event::new());
        hold.set();
        let hs: Vec<_> = (0..3).map(|_| client(&p, "app", &log, &hold)).collect();
        util::join_all(hs);
        assert_eq!(
            *log.borrow(),
            vec!["app: cannot spawn a worker: cannot start app"; 3]
        );
        assert_eq!(
            *farm.outcomes.borrow(),
            ["app: failed"; 3],
            "each caller's own spawn"
        );
        assert_eq!(p.groups(), Vec::<&str>::new());
        assert_eq!(p.spawning(), 0);
        farm.fail.borrow_mut().clear();
        // Three in a row: the key is in backoff until reset.
        assert!(matches!(
            p.get(&"app"),
            Err(GetError::Backoff { failures: 3, .. })
        ));
        assert!(p.reset_backoff(&"app"));
        assert_eq!(*p.get(&"app").unwrap(), 1);
    });
}

#[test]
fn the_wait_queue_is_bounded() {
    run(|| {
        let (p, farm) = pool(GroupPool::builder().max_queue(2));
        // The spawn waits at the gate until the refusal is seen.
        farm.close_gate();
        let log: Log = Rc::default();
        let hold = Rc::new(coro_sync::Event::new());
        hold.set();
        let hs: Vec<_> = (0..3).map(|_| client(&p, "app", &log, &hold)).collect();
        settle();
        assert_eq!(
            *log.borrow(),
            ["app: the group's wait queue is full (2 callers waiting)"]
        );
        farm.open(3);
        util::join_all(hs);
        assert_eq!(log.borrow().len(), 3);
    });
}

#[test]
fn session_limit_makes_callers_wait_and_broken_workers_leave() {
    run(|| {
        let (p, farm) = pool(GroupPool::builder().max(1).session_limit(1));
        let log: Log = Rc::default();
        let mut a = p.get(&"host").unwrap();
        let hold = Rc::new(coro_sync::Event::new());
        hold.set();
        let w = client(&p, "host", &log, &hold);
        settle();
        assert!(log.borrow().is_empty(), "one session per worker");
        a.mark_broken();
        drop(a);
        w.join().unwrap();
        assert_eq!(
            *log.borrow(),
            ["host: worker 2"],
            "the broken worker was never reused"
        );
        settle();
        assert_eq!(*farm.shut.borrow(), [1]);
    });
}

#[test]
fn detach_leaves_sessions_running_and_shuts_down_after_the_last() {
    run(|| {
        let (p, farm) = pool(GroupPool::builder());
        let s: Session<Spawn> = p.get(&"app").unwrap();
        assert!(p.detach(s.worker_id()));
        assert!(!p.detach(s.worker_id()));
        assert_eq!(p.count(), 0);
        settle();
        assert!(farm.shut.borrow().is_empty(), "its session still runs");
        drop(s);
        settle();
        assert_eq!(*farm.shut.borrow(), [1]);
        drop(p.get(&"app").unwrap());
        assert!(p.detach_group(&"app"));
        assert_eq!(p.count(), 0);
    });
}

#[test]
fn detaching_a_group_interrupts_its_spawn() {
    run(|| {
        let (p, farm) = pool(GroupPool::builder());
        farm.delay.set(Duration::from_secs(3600));
        let log: Log = Rc::default();
        let hold = Rc::new(coro_sync::Event::new());
        let w = client(&p, "app", &log, &hold);
        yield_until("the spawn began", || farm.spawn_threads.borrow().len() == 1);
        farm.delay.set(Duration::ZERO); // for the waiter's next spawn
        assert!(p.detach_group(&"app"));
        yield_until("the spawns ended", || p.spawning() == 0);
        assert_eq!(farm.spawn_threads.borrow().len(), 2);
        hold.set();
        w.join().unwrap();
        assert_eq!(*log.borrow(), ["app: worker 1"], "the waiter retried");
        assert!(
            farm.shut.borrow().is_empty(),
            "the interrupted spawn made no worker"
        );
    });
}
