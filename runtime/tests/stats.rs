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
