//! park / unpark and ScheduleError.

use std::time::Duration;

use coro_runtime as coro;

#[test]
fn unpark_wakes_a_parked_thread() {
    coro::run(|| {
        let h = coro::spawn(coro::park);
        coro::yield_now();
        assert_eq!(h.thread().state(), coro::ThreadState::Parked);
        h.thread().unpark().unwrap();
        assert_eq!(h.join().unwrap(), Ok(()));
    });
}

#[test]
fn double_unpark_is_a_schedule_error() {
    coro::run(|| {
        let h = coro::spawn(coro::park);
        coro::yield_now();
        let t = h.thread().clone();
        t.unpark().unwrap();
        let e = t.unpark().unwrap_err();
        assert_eq!(e.id(), t.id());
        assert_eq!(e.state(), "ready");
        assert!(e.to_string().contains("ready"));
        h.join().unwrap().unwrap();
    });
}

#[test]
fn unparking_a_new_running_or_dead_thread_is_an_error() {
    coro::run(|| {
        let h = coro::spawn(|| ());
        assert_eq!(h.thread().unpark().unwrap_err().state(), "ready");
        assert_eq!(coro::current().unpark().unwrap_err().state(), "running");
        let t = h.thread().clone();
        h.join().unwrap();
        assert_eq!(t.unpark().unwrap_err().state(), "dead");
        assert!(t.interrupt().is_err());
    });
}

#[test]
fn a_stale_unpark_does_not_wake_a_later_sleep() {
    // The sleeper is unparked while sleeping: sleep keeps sleeping until its
    // deadline instead of returning early.
    coro::run(|| {
        let h = coro::spawn(|| {
            let t = coro::clock::now();
            coro::sleep(Duration::from_millis(30)).unwrap();
            t.elapsed()
        });
        coro::yield_now();
        h.thread().unpark().unwrap();
        assert!(h.join().unwrap() >= Duration::from_millis(30));
    });
}
