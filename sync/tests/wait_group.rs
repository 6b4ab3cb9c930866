//! WaitGroup: wait returns only when every member is counted out (by drop,
//! by `done`, by a return or a panic), wakes every waiter in order, and a
//! waiter's timeout or interrupt leaves the group intact.

mod util;

use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

use coro_runtime::{spawn, with_timeout, JoinHandle, Timeout, WaitError};
use coro_sync::WaitGroup;
use util::{interrupt, join_all, run, settle, Log};

/// Spawns `n` threads waiting on `group`, logging what each wait returned;
/// returns once all are queued.
fn waiters(group: &WaitGroup, log: &Log, n: usize) -> Vec<JoinHandle<()>> {
    let hs = (0..n)
        .map(|i| {
            let (group, log) = (group.clone(), log.clone());
            spawn(move || log.push(i, group.wait()))
        })
        .collect();
    settle();
    hs
}

#[test]
fn empty_group_does_not_wait() {
    run(|| {
        let group = WaitGroup::new();
        assert!(group.is_empty());
        group.wait().unwrap();
        let member = group.add();
        assert_eq!(group.len(), 1);
        member.done();
        assert!(group.is_empty());
        group.wait().unwrap();
    });
}

#[test]
fn wait_returns_after_the_last_member() {
    run(|| {
        let group = WaitGroup::new();
        let finished = Rc::new(Cell::new(0));
        for yields in [5, 1, 3] {
            let finished = finished.clone();
            group.spawn(move || {
                for _ in 0..yields {
                    coro_runtime::yield_now();
                }
                finished.set(finished.get() + 1);
            });
        }
        assert_eq!(group.len(), 3);
        group.wait().unwrap();
        assert_eq!(finished.get(), 3);
        assert!(group.is_empty());
    });
}

#[test]
fn guards_count_out_on_drop_early_return_and_panic() {
    run(|| {
        let group = WaitGroup::new();
        // A member that returns early with an error: its guard still drops.
        let member = group.add();
        let early = spawn(move || -> Result<(), &'static str> {
            let _member = member;
            coro_runtime::yield_now();
            Err("gave up")
        });
        // A member that panics: unwinding drops the guard.
        let panics = group.spawn(|| {
            coro_runtime::yield_now();
            panic!("member failed");
        });
        // A clone of the group hands out members too.
        let other = group.clone();
        let member = other.add();
        spawn(move || {
            coro_runtime::sleep(Duration::from_millis(5)).unwrap();
            drop(member);
        });
        assert_eq!(group.len(), 3);
        group.wait().unwrap();
        assert!(other.is_empty());
        assert_eq!(early.join().unwrap(), Err("gave up"));
        assert!(panics.join().is_err());
    });
}

#[test]
fn every_waiter_wakes_in_order_and_sees_the_zero() {
    run(|| {
        let group = WaitGroup::new();
        let member = group.add();
        let log = Log::new();
        let waiters = waiters(&group, &log, 4);
        assert_eq!(log.len(), 0, "nobody returns while a member is out");
        drop(member);
        // A new member joins before the woken waiters run: they saw the
        // zero and return Ok all the same.
        let late = group.add();
        join_all(waiters);
        assert_eq!(log.order(), [0, 1, 2, 3]);
        assert_eq!(log.with("Ok(())"), [0, 1, 2, 3]);
        assert_eq!(group.len(), 1);
        late.done();
    });
}

#[test]
fn timed_out_waiter_leaves_the_group_intact() {
    run(|| {
        let group = WaitGroup::new();
        let member = group.add();
        for _ in 0..2 {
            // Twice: the first timeout leaves nothing behind.
            let r = with_timeout(Duration::from_millis(10), || group.wait());
            assert_eq!(r, Err(Timeout));
        }
        assert_eq!(group.len(), 1);
        let g = group.clone();
        let waiter = spawn(move || g.wait());
        settle();
        member.done();
        assert_eq!(waiter.join().unwrap(), Ok(()));
    });
}

#[test]
fn interrupted_waiter_leaves_and_the_others_still_wake() {
    run(|| {
        let group = WaitGroup::new();
        let member = group.add();
        let log = Log::new();
        let waiters = waiters(&group, &log, 3);
        interrupt(&waiters, [1]);
        settle();
        assert_eq!(
            log.entries(),
            [(1, format!("{:?}", Err::<(), _>(WaitError::Interrupted)))]
        );
        member.done();
        join_all(waiters);
        assert_eq!(log.with("Ok(())"), [0, 2]);
    });
}

#[test]
fn spawn_with_names_the_thread_and_a_failed_spawn_leaves_no_member() {
    run(|| {
        let group = WaitGroup::new();
        let h = group
            .spawn_with(coro_runtime::Builder::new().name("member".into()), || {
                coro_runtime::yield_now();
                coro_runtime::current().name().map(str::to_owned)
            })
            .unwrap();
        assert_eq!(group.len(), 1);
        let bad = group.spawn_with(coro_runtime::Builder::new().stack_size(0), || ());
        assert_eq!(bad.unwrap_err().kind(), std::io::ErrorKind::InvalidInput);
        assert_eq!(group.len(), 1, "the failed spawn's member was counted out");
        group.wait().unwrap();
        assert_eq!(h.join().unwrap().as_deref(), Some("member"));
    });
}
