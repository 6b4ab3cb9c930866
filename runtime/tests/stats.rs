//! stats() and threads().

use std::time::Duration;

use coro_runtime::{self as coro, ThreadState};

#[test]
fn threads_lists_states_and_what_they_wait_on() {
    coro::run(|| {
        let sleeper = coro::Builder::new()
            .name("sleeper".into())
            .spawn(|| coro::sleep(Duration::from_secs(3600)))
            .unwrap();
        let parked = coro::spawn(coro::park);
        let fresh = coro::spawn(|| ());
        coro::yield_now();
        let list = coro::threads();
        let get = |id| list.iter().find(|t| t.id == id).unwrap().clone();
        let me = get(coro::current().id());
        assert_eq!(me.state, ThreadState::Running);
        let s = get(sleeper.thread().id());
        assert_eq!(s.name.as_deref(), Some("sleeper"));
        assert_eq!(s.state, ThreadState::Parked);
        assert_eq!(s.waiting_on, "sleep");
        assert_eq!(get(parked.thread().id()).waiting_on, "park");
        assert!(fresh.is_finished());
        let st = coro::stats();
        assert_eq!(st.live, 3);
        assert_eq!(st.pending_timers, 1);
        assert!(st.switches >= 4 && st.spawned == 4, "{st:?}");
        sleeper.thread().interrupt().unwrap();
        parked.thread().interrupt().unwrap();
    });
}

#[test]
fn polls_are_counted() {
    coro::run(|| {
        coro::sleep(Duration::from_millis(2)).unwrap();
        assert!(coro::stats().polls >= 1);
    });
}

/// A thread's age counts from when `block_on` started, not from the last
/// clock reading of an earlier `block_on` on the same runtime (or of its
/// build): spawns are dated by the loop's coarse clock, which `block_on`
/// sets as it starts.
#[test]
fn ages_start_with_the_block_on_that_spawned_them() {
    let idle = Duration::from_millis(1500);
    let mut rt = coro::Runtime::builder().build().unwrap();
    std::thread::sleep(idle); // built long before it runs
    let ages = |rt: &mut coro::Runtime| {
        rt.block_on(|| {
            let child = coro::spawn(|| ());
            let list = coro::threads();
            let age = |id| list.iter().find(|t| t.id == id).unwrap().age;
            let ages = (age(coro::current().id()), age(child.thread().id()));
            child.join().unwrap();
            ages
        })
    };
    let first = ages(&mut rt);
    std::thread::sleep(idle); // and again between two block_on calls
    let second = ages(&mut rt);
    // Both would be about `idle` if dated by the earlier clock reading.
    for (main, child) in [first, second] {
        assert!(main < idle / 2 && child < idle / 2, "{first:?} {second:?}");
    }
}
