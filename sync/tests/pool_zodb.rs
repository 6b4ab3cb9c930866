//! The ZODB connection-pool doctest (`zodb-connection-pool-doctest.txt`),
//! scenario by scenario, with the same counts and the same log messages in
//! the same order.

mod util;

use coro_sync::{Pool, PooledConnection};
use log::Level::{Error, Warn};
use util::conns::Db;
use util::{logs, run};

const TARGET: &str = "coro_sync::pool";

fn msg(level: log::Level, n: usize, p: usize) -> (log::Level, String) {
    (
        level,
        format!("Pool.get() has {n} open connections with a pool_size of {p}"),
    )
}

/// (len(pool.available), len(pool.all))
fn avail_all(pool: &Pool<Db>) -> (usize, usize) {
    let s = pool.state();
    (s.idle_connections, s.connections)
}

fn markers(pool: &Pool<Db>) -> Vec<i32> {
    pool.idle_connections(|c| c.marker.unwrap())
}

#[test]
fn default_pool_size_warns_then_errors() {
    logs::capture();
    run(|| {
        let pool = Pool::new(Db::new().0).unwrap();
        assert_eq!(pool.pool_size(), 7);
        // By default, we can open 7 connections without any log messages.
        let mut conns: Vec<_> = (0..7).map(|_| pool.get().unwrap()).collect();
        assert_eq!(logs::take(TARGET), []);
        // Open one more, and we get a warning.
        conns.push(pool.get().unwrap());
        assert_eq!(logs::take(TARGET), [msg(Warn, 8, 7)]);
        // Open 6 more, and we get 6 more warnings.
        conns.extend((0..6).map(|_| pool.get().unwrap()));
        assert_eq!(conns.len(), 14);
        let six = logs::take(TARGET);
        assert_eq!(six, (9..=14).map(|n| msg(Warn, n, 7)).collect::<Vec<_>>());
        // More than twice the pool size: the level rises.
        conns.push(pool.get().unwrap());
        assert_eq!(conns.len(), 15);
        assert_eq!(logs::take(TARGET), [msg(Error, 15, 7)]);
    });
}

#[test]
fn smaller_pool_size_and_live_resize() {
    logs::capture();
    run(|| {
        const PS: usize = 2;
        let pool = Pool::builder().pool_size(PS).build(Db::new().0).unwrap();
        let mut conns: Vec<_> = (0..PS).map(|_| pool.get().unwrap()).collect();
        assert_eq!(logs::take(TARGET), []);
        conns.push(pool.get().unwrap());
        assert_eq!(logs::take(TARGET), [msg(Warn, 3, 2)]);
        conns.extend((0..PS - 1).map(|_| pool.get().unwrap()));
        assert_eq!(conns.len(), 4);
        assert_eq!(logs::take(TARGET), [msg(Warn, 4, 2)]);
        conns.push(pool.get().unwrap());
        assert_eq!(conns.len(), 5);
        assert_eq!(logs::take(TARGET), [msg(Error, 5, 2)]);
        // We can change the pool size on the fly.
        pool.set_pool_size(6).unwrap();
        conns.push(pool.get().unwrap());
        assert_eq!(logs::take(TARGET), [], "no message: the pool is bigger now");
        conns.push(pool.get().unwrap());
        assert_eq!(logs::take(TARGET), [msg(Warn, 7, 6)]);
    });
}

#[test]
fn stack_like_reuse() {
    logs::capture();
    run(|| {
        let pool = Pool::new(Db::new().0).unwrap();
        let mut c1 = pool.get().unwrap();
        let mut c2 = pool.get().unwrap();
        let mut c3 = pool.get().unwrap();
        assert!(c1.id != c2.id && c1.id != c3.id && c2.id != c3.id);
        c1.marker = Some(1);
        c2.marker = Some(2);
        c3.marker = Some(3);
        // Explicitly close c1 and c2.
        drop(c1);
        drop(c2);
        assert_eq!(avail_all(&pool), (2, 3));
        // c2 was closed last: it is on top of the stack.
        let c1 = pool.get().unwrap();
        assert_eq!(c1.marker, Some(2));
        assert_eq!(avail_all(&pool), (1, 3));
        drop(c3); // now the stack has c3 on top, then c1
        let c2 = pool.get().unwrap();
        assert_eq!(c2.marker, Some(3));
        assert_eq!(avail_all(&pool), (1, 3));
        let c3 = pool.get().unwrap();
        assert_eq!(c3.marker, Some(1));
        assert_eq!(avail_all(&pool), (0, 3));
        // An abandoned connection leaves `all` and does not come back to the
        // stack by magic (Rust: detach it, then drop it).
        let gone = PooledConnection::detach(c3);
        drop(gone);
        assert_eq!(avail_all(&pool), (0, 2));
        assert_eq!(pool.statistics().detached, 1);
        drop((c1, c2));
        assert_eq!(avail_all(&pool), (2, 2));
    });
    assert_eq!(logs::take(TARGET), [], "nothing in that block logs");
}

#[test]
fn closing_pushes_the_oldest_out_and_resizing_purges() {
    logs::capture();
    run(|| {
        let pool = Pool::builder().pool_size(3).build(Db::new().0).unwrap();
        let mut conns: Vec<_> = (0..6).map(|_| pool.get().unwrap()).collect();
        assert_eq!(
            logs::take(TARGET).len(),
            3,
            "3 warnings for the excess connections"
        );
        assert_eq!(avail_all(&pool), (0, 6));
        for (i, c) in conns.iter_mut().enumerate() {
            c.marker = Some(i as i32);
        }
        // Closing connections adds them to the stack.
        let rest = conns.split_off(3);
        drop(conns);
        assert_eq!(avail_all(&pool), (3, 6));
        assert_eq!(markers(&pool), [0, 1, 2]);
        let mut rest = rest.into_iter();
        // Closing another one purges MARKER 0, the first added.
        drop(rest.next()); // MARKER 3
        assert_eq!(avail_all(&pool), (3, 5));
        assert_eq!(markers(&pool), [1, 2, 3]);
        drop(rest.next());
        drop(rest.next());
        assert_eq!(avail_all(&pool), (3, 3));
        assert_eq!(markers(&pool), [3, 4, 5]);
        // Reducing the pool size purges the oldest closed connection.
        pool.set_pool_size(2).unwrap();
        assert_eq!(avail_all(&pool), (2, 2));
        assert_eq!(markers(&pool), [4, 5]);
        // MARKER 5 was added last: it is popped first.
        let c1 = pool.get().unwrap();
        let c2 = pool.get().unwrap();
        assert_eq!((c1.marker, c2.marker), (Some(5), Some(4)));
        assert_eq!(avail_all(&pool), (0, 2));
        assert_eq!(pool.statistics().closed_pushed_out, 4);
        assert_eq!(pool.manager().0.closed.borrow().len(), 4);
    });
}

#[test]
fn a_pushed_out_connection_is_cleared() {
    run(|| {
        let pool = Pool::builder().pool_size(2).build(Db::new().0).unwrap();
        let conn0 = pool.get().unwrap();
        let cache0 = conn0.cache.clone();
        assert_eq!(cache0.borrow().len(), 0, "empty now");
        conn0.cache.borrow_mut().push(1); // the root object, committed
        assert_eq!(cache0.borrow().len(), 1);
        // Open more connections so that the total exceeds pool_size.
        let conn1 = pool.get().unwrap();
        let conn2 = pool.get().unwrap();
        let s = pool.state();
        assert_eq!((s.connections, s.idle_connections), (3, 0));
        // Return pool_size (2) connections.
        drop(conn0);
        drop(conn1);
        let s = pool.state();
        assert_eq!((s.connections, s.idle_connections), (3, 2));
        assert_eq!(cache0.borrow().len(), 1, "nothing relevant has changed yet");
        // Closing the third boots conn0, and clears its cache.
        drop(conn2);
        let s = pool.state();
        assert_eq!((s.connections, s.idle_connections), (2, 2));
        assert_eq!(cache0.borrow().len(), 0, "conn0's cache is empty again");
    });
}

#[test]
fn bad_settings_are_errors_naming_them() {
    run(|| {
        let e = Pool::builder().pool_size(0).build(Db::new().0).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
        assert!(
            e.to_string().contains("pool_size must be at least 1"),
            "{e}"
        );
        let e = Pool::builder()
            .max_size(Some(0))
            .build(Db::new().0)
            .unwrap_err();
        assert!(e.to_string().contains("max_size"), "{e}");
        let e = Pool::builder()
            .pool_size(2)
            .min_idle(3)
            .build(Db::new().0)
            .unwrap_err();
        assert!(e.to_string().contains("min_idle"), "{e}");
        let pool = Pool::new(Db::new().0).unwrap();
        assert!(pool.set_pool_size(0).is_err());
        assert_eq!(pool.pool_size(), 7);
    });
}
