//! Pool: the hard max_size (FIFO waiters, connection_timeout, an enclosing
//! with_timeout, interrupts and timeouts before and after a hand-off),
//! connect failures and connects that block, broken and invalid
//! connections, returns that never suspend, blocking closes on the closer
//! thread, reaping, close, statistics.

mod util;

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use coro_runtime as coro;
use coro_runtime::{ThreadState, WaitError};
use coro_sync::{Pool, PoolError, PooledConnection};
use util::conns::{Db, SlowClose};
use util::{run, settle, yield_until};

type Log = Rc<RefCell<Vec<String>>>;

fn max1() -> Pool<Db> {
    Pool::builder()
        .max_size(Some(1))
        .build(Db::new().0)
        .unwrap()
}

/// Spawns a waiter `name` that gets a connection and logs what it got, then
/// drops it.
fn waiter(pool: &Pool<Db>, log: &Log, name: &'static str) -> coro::JoinHandle<()> {
    let (pool, log) = (pool.clone(), log.clone());
    coro::spawn(move || {
        let r = pool.get().map(|c| c.id);
        log.borrow_mut().push(format!("{name}: {r:?}"));
    })
}

#[test]
fn waiters_beyond_max_size_are_served_fifo() {
    run(|| {
        let pool = max1();
        let log: Log = Rc::default();
        let held = pool.get().unwrap();
        let hs: Vec<_> = ["a", "b", "c"]
            .iter()
            .map(|n| waiter(&pool, &log, n))
            .collect();
        settle();
        assert_eq!(pool.state().waiting, 3);
        drop(held);
        util::join_all(hs);
        assert_eq!(*log.borrow(), ["a: Ok(1)", "b: Ok(1)", "c: Ok(1)"]);
        let s = pool.statistics();
        assert_eq!(
            (s.get_direct, s.get_waited, s.connections_created),
            (1, 3, 1)
        );
        assert!(s.get_wait_time > Duration::ZERO);
    });
}

#[test]
fn connection_timeout_ends_the_wait() {
    run(|| {
        let pool = Pool::builder()
            .max_size(Some(1))
            .connection_timeout(Duration::from_millis(20))
            .build(Db::new().0)
            .unwrap();
        let _held = pool.get().unwrap();
        let t = coro::clock::now();
        assert!(matches!(pool.get(), Err(PoolError::Timeout)));
        assert!(t.elapsed() >= Duration::from_millis(20));
        assert_eq!(pool.statistics().get_timed_out, 1);
        assert_eq!(pool.state().waiting, 0);
    });
}

#[test]
fn an_enclosing_with_timeout_is_passed_on_unchanged() {
    run(|| {
        let pool = max1();
        let _held = pool.get().unwrap();
        let r = coro::with_timeout(Duration::from_millis(5), || pool.get().map(|_| ()));
        assert_eq!(r.map(|r| r.map_err(|e| e.to_string())), Err(coro::Timeout));
        assert_eq!(pool.state().waiting, 0);
        assert_eq!(
            pool.statistics().get_timed_out,
            0,
            "not the pool's own timeout"
        );
    });
}

#[test]
fn interrupted_while_waiting_leaves_the_queue() {
    run(|| {
        let pool = max1();
        let log: Log = Rc::default();
        let held = pool.get().unwrap();
        let a = waiter(&pool, &log, "a");
        let b = waiter(&pool, &log, "b");
        settle();
        a.thread().interrupt().unwrap(); // before anything is returned
        settle();
        assert_eq!(pool.state().waiting, 1);
        drop(held);
        a.join().unwrap();
        b.join().unwrap();
        assert_eq!(*log.borrow(), ["a: Err(Wait(Interrupted))", "b: Ok(1)"]);
    });
}

#[test]
fn interrupted_after_the_hand_off_passes_the_connection_on() {
    run(|| {
        let pool = max1();
        let log: Log = Rc::default();
        let held = pool.get().unwrap();
        let a = waiter(&pool, &log, "a");
        let b = waiter(&pool, &log, "b");
        yield_until("both waiting", || pool.state().waiting == 2);
        drop(held); // handed to a, which has not run yet
        assert_eq!(a.thread().state(), ThreadState::Ready);
        a.thread().interrupt().unwrap(); // the interrupt wins
        a.join().unwrap();
        b.join().unwrap();
        assert_eq!(*log.borrow(), ["a: Err(Wait(Interrupted))", "b: Ok(1)"]);
        assert_eq!(pool.state().connections, 1);
        assert_eq!(
            pool.statistics().connections_created,
            1,
            "the same connection"
        );
    });
}

#[test]
fn timed_out_while_waiting_leaves_the_queue() {
    run(|| {
        let pool = max1();
        let log: Log = Rc::default();
        let held = pool.get().unwrap();
        let (p, l) = (pool.clone(), log.clone());
        let a = coro::spawn(move || {
            let r = coro::with_timeout(Duration::from_millis(5), || p.get().map(|c| c.id));
            l.borrow_mut().push(format!("a: {:?}", r.is_err()));
        });
        let b = waiter(&pool, &log, "b");
        a.join().unwrap(); // a times out first, while b still waits
        assert_eq!(pool.state().waiting, 1);
        drop(held);
        b.join().unwrap();
        assert_eq!(*log.borrow(), ["a: true", "b: Ok(1)"]);
    });
}

#[test]
fn timed_out_after_the_hand_off_passes_the_connection_on() {
    run(|| {
        let pool = max1();
        let log: Log = Rc::default();
        let held = pool.get().unwrap();
        let (p, l) = (pool.clone(), log.clone());
        // Long enough for both to be waiting before it ends, on any machine.
        let a_limit = Duration::from_millis(500);
        let a = coro::spawn(move || {
            let r = coro::with_timeout(a_limit, || p.get().map(|c| c.id));
            l.borrow_mut().push(format!("a: {r:?}"));
        });
        let b = waiter(&pool, &log, "b");
        yield_until("both waiting", || pool.state().waiting == 2);
        drop(held); // handed to a...
        assert_eq!(a.thread().state(), ThreadState::Ready);
        // ...whose deadline passes before it runs: the timeout wins.
        std::thread::sleep(a_limit);
        a.join().unwrap();
        b.join().unwrap();
        assert_eq!(*log.borrow(), ["a: Err(Timeout)", "b: Ok(1)"]);
        assert_eq!(pool.statistics().connections_created, 1);
    });
}

#[test]
fn connect_errors_reach_the_caller_and_free_the_slot() {
    run(|| {
        let (db, backend) = Db::new();
        let pool = Pool::builder().max_size(Some(1)).build(db).unwrap();
        backend.refuse.set(true);
        let e = pool.get().map(|_| ()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "cannot open a pooled connection: connection 1 refused"
        );
        assert_eq!(pool.state().connecting, 0);
        backend.refuse.set(false);
        assert_eq!(pool.get().unwrap().id, 1, "the slot came back");
        assert_eq!(pool.statistics().connect_failed, 1);
    });
}

#[test]
fn a_blocking_connect_counts_against_max_size() {
    run(|| {
        let (db, backend) = Db::new();
        backend.connect_delay.set(Duration::from_millis(10));
        let pool = Pool::builder().max_size(Some(1)).build(db).unwrap();
        let log: Log = Rc::default();
        let a = {
            let (p, l) = (pool.clone(), log.clone());
            coro::spawn(move || {
                let c = p.get().unwrap();
                l.borrow_mut().push(format!("a: {}", c.id));
            })
        };
        yield_until("a connecting", || pool.state().connecting == 1);
        let (p, l) = (pool.clone(), log.clone());
        let b = coro::spawn(move || {
            let c = p.get().unwrap();
            l.borrow_mut().push(format!("b: {}", c.id));
        });
        yield_until("b waiting", || pool.state().waiting == 1);
        assert_eq!(pool.state().connections, 0);
        a.join().unwrap();
        b.join().unwrap();
        assert_eq!(*log.borrow(), ["a: 1", "b: 1"]);
        assert_eq!(backend.opened.get(), 1);
    });
}

#[test]
fn a_failed_connect_wakes_the_next_waiter_to_try() {
    run(|| {
        let (db, backend) = Db::new();
        backend.connect_delay.set(Duration::from_millis(5));
        backend.refuse.set(true);
        let pool = Pool::builder().max_size(Some(1)).build(db).unwrap();
        let log: Log = Rc::default();
        let a = waiter(&pool, &log, "a");
        yield_until("a connecting", || pool.state().connecting == 1);
        let b = waiter(&pool, &log, "b");
        yield_until("b waiting", || pool.state().waiting == 1);
        // Let the second attempt succeed: b's connect, woken by a's failure,
        // is still in its delay when this runs.
        yield_until("a refused", || !log.borrow().is_empty());
        backend.refuse.set(false);
        a.join().unwrap();
        b.join().unwrap();
        assert_eq!(*log.borrow(), ["a: Err(Connect(Refused(1)))", "b: Ok(1)"]);
    });
}

#[test]
fn broken_and_invalid_connections_are_never_handed_out_again() {
    run(|| {
        let (db, backend) = Db::new();
        let pool = Pool::new(db).unwrap();
        let mut c = pool.get().unwrap();
        c.broken = true; // has_broken says so on return
        drop(c);
        let mut c = pool.get().unwrap();
        assert_eq!(c.id, 2);
        PooledConnection::mark_broken(&mut c);
        drop(c);
        let mut c = pool.get().unwrap();
        assert_eq!(c.id, 3);
        c.invalid = true; // is_valid fails on the next checkout
        drop(c);
        assert_eq!(pool.get().unwrap().id, 4);
        assert_eq!(*backend.closed.borrow(), [1, 2, 3]);
        let s = pool.statistics();
        assert_eq!((s.closed_broken, s.closed_invalid), (2, 1));
        assert_eq!(pool.state().connections, 1);
    });
}

#[test]
fn returning_never_suspends() {
    run(|| {
        let (db, backend) = Db::new();
        let pool = Pool::new(db).unwrap();
        let c = pool.get().unwrap();
        backend.block_in_has_broken.set(true);
        drop(c);
        assert_eq!(
            *backend.has_broken_block.borrow(),
            ["Err(SuspendForbidden)"],
            "has_broken tried to block in the guard's Drop and was refused"
        );
        assert_eq!(pool.state().idle_connections, 1);
    });
}

#[test]
fn a_blocking_close_runs_on_the_closer_thread() {
    run(|| {
        let (db, backend) = Db::new();
        let pool = Pool::new(SlowClose(db)).unwrap();
        let mut c = pool.get().unwrap();
        c.broken = true;
        coro::no_suspend(|| drop(c)); // no blocking here...
        assert!(backend.closed.borrow().is_empty());
        util::settle();
        coro::sleep(Duration::from_millis(5)).unwrap();
        assert_eq!(
            *backend.closed.borrow(),
            [1],
            "...closed later by the closer"
        );
    });
}

#[test]
fn reaper_keeps_min_idle_and_closes_expired() {
    run(|| {
        let (db, backend) = Db::new();
        let pool = Pool::builder()
            .min_idle(2)
            .reaper_rate(Duration::from_millis(2))
            .build(db)
            .unwrap();
        yield_until("min_idle opened", || pool.state().idle_connections == 2);
        drop(pool);

        let (db, backend2) = Db::new();
        let pool = Pool::builder()
            .idle_timeout(Some(Duration::from_millis(5)))
            .reaper_rate(Duration::from_millis(2))
            .build(db)
            .unwrap();
        drop((pool.get().unwrap(), pool.get().unwrap()));
        assert_eq!(pool.state().idle_connections, 2);
        while pool.state().connections > 0 {
            coro::sleep(Duration::from_millis(1)).unwrap();
        }
        assert_eq!(pool.statistics().closed_idle_timeout, 2);
        assert_eq!(backend2.closed.borrow().len(), 2);

        let (db, _) = Db::new();
        let pool = Pool::builder()
            .max_lifetime(Some(Duration::from_millis(5)))
            .build(db)
            .unwrap();
        let c = pool.get().unwrap();
        coro::sleep(Duration::from_millis(6)).unwrap();
        drop(c); // too old: closed on return
        assert_eq!(pool.statistics().closed_max_lifetime, 1);
        assert_eq!(pool.state().connections, 0);
        drop(backend);
    });
}

#[test]
fn close_fails_waiters_and_later_gets() {
    run(|| {
        let pool = max1();
        let log: Log = Rc::default();
        let held = pool.get().unwrap();
        let a = waiter(&pool, &log, "a");
        settle();
        pool.close();
        a.join().unwrap();
        assert_eq!(*log.borrow(), ["a: Err(Closed)"]);
        assert!(matches!(pool.get(), Err(PoolError::Closed)));
        drop(held);
        assert_eq!(pool.state().connections, 0);
        assert_eq!(pool.statistics().closed_by_pool, 1);
    });
}

#[test]
fn a_guard_dropped_outside_the_runtime_is_fine() {
    let keep: Rc<RefCell<Option<PooledConnection<Db>>>> = Rc::default();
    let k = keep.clone();
    coro::run(move || {
        let pool = Pool::new(Db::new().0).unwrap();
        *k.borrow_mut() = Some(pool.get().unwrap());
    });
    drop(keep.borrow_mut().take());
    let _ = WaitError::Interrupted;
}
