//! in_parallel: results in job order, a panicking job reported in its place,
//! and a cut-short wait interrupts the jobs still running.

mod util;

use std::rc::Rc;
use std::time::Duration;

use coro_runtime::{spawn, with_timeout, yield_now, Timeout};
use coro_sync::{in_parallel, Event};
use util::run;

#[test]
fn results_come_back_in_job_order() {
    run(|| {
        // Later jobs finish first.
        let jobs = (0..5usize).map(|i| {
            move || {
                for _ in 0..(5 - i) {
                    yield_now();
                }
                i
            }
        });
        let r: Vec<usize> = in_parallel(jobs)
            .unwrap()
            .into_iter()
            .map(Result::unwrap)
            .collect();
        assert_eq!(r, [0, 1, 2, 3, 4]);
    });
}

#[test]
fn a_panicking_job_is_reported_in_its_place() {
    run(|| {
        let jobs: Vec<Box<dyn FnOnce() -> u32>> = vec![
            Box::new(|| 1),
            Box::new(|| panic!("job failed")),
            Box::new(|| 3),
        ];
        let r = in_parallel(jobs).unwrap();
        assert_eq!(*r[0].as_ref().unwrap(), 1);
        assert_eq!(
            r[1].as_ref().unwrap_err().panic_message(),
            Some("job failed")
        );
        assert_eq!(*r[2].as_ref().unwrap(), 3);
    });
}

#[test]
fn no_jobs() {
    run(|| {
        let jobs: Vec<fn() -> ()> = Vec::new();
        assert!(in_parallel(jobs).unwrap().is_empty());
    });
}

#[test]
fn a_cut_short_wait_interrupts_the_running_jobs() {
    run(|| {
        let never = Rc::new(Event::new());
        let jobs: Vec<_> = (0..3)
            .map(|_| {
                let never = never.clone();
                move || never.wait()
            })
            .collect();
        let parent =
            spawn(move || with_timeout(Duration::from_millis(5), || in_parallel(jobs).map(drop)));
        assert_eq!(parent.join().unwrap(), Err(Timeout));
        for _ in 0..8 {
            yield_now();
        }
        // The jobs were interrupted and have left.
        assert_eq!(never.waiters(), 0);
    });
}
