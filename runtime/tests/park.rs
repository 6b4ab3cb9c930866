//! park / unpark and ScheduleError.

use std::time::Duration;

use coro_runtime as coro;
use coro_runtime::{ScheduleState, ThreadState};

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
        assert_eq!(e.state(), ScheduleState::Thread(ThreadState::Ready));
        assert_eq!(
            e.to_string(),
            format!("cannot schedule green thread #{}: it is ready", t.id())
        );
        h.join().unwrap().unwrap();
    });
}

#[test]
fn unparking_a_new_running_or_dead_thread_is_an_error() {
    coro::run(|| {
        let h = coro::spawn(|| ());
        let thread = |s| ScheduleState::Thread(s);
        assert_eq!(
            h.thread().unpark().unwrap_err().state(),
            thread(ThreadState::New)
        );
        assert_eq!(
            coro::current().unpark().unwrap_err().state(),
            thread(ThreadState::Running)
        );
        let t = h.thread().clone();
        h.join().unwrap();
        assert_eq!(t.unpark().unwrap_err().state(), thread(ThreadState::Dead));
        assert_eq!(
            t.interrupt().unwrap_err().state(),
            thread(ThreadState::Dead)
        );
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

#[test]
fn a_thread_that_has_not_started_is_new_not_ready() {
    coro::run(|| {
        let h = coro::spawn(|| ());
        let e = h.thread().unpark().unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("cannot schedule green thread #{}: it is new", e.id())
        );
        h.join().unwrap();
    });
}

#[test]
fn each_thread_state_displays_its_own_name() {
    let names: Vec<String> = [
        ThreadState::New,
        ThreadState::Ready,
        ThreadState::Running,
        ThreadState::Parked,
        ThreadState::Dead,
    ]
    .iter()
    .map(ToString::to_string)
    .collect();
    assert_eq!(names, ["new", "ready", "running", "parked", "dead"]);
}

#[test]
fn a_foreign_runtime_reads_as_a_sentence() {
    assert_eq!(
        ScheduleState::ForeignRuntime.to_string(),
        "owned by a runtime that is not running on this OS thread"
    );
}
