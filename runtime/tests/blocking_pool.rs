//! The blocking-offload pool's size and queue: the pool grows on demand up
//! to its bound and shrinks when idle; jobs submitted together on a warm
//! pool run together; a job whose caller stopped waiting before a worker
//! took it never runs; the queue is bounded.

use std::sync::mpsc;
use std::sync::{Arc, Barrier, Condvar, Mutex};
use std::time::Duration;

use coro_runtime::{self as coro, Runtime};

use coro_test_support::{bounded, wait_until, LIMIT};

/// Four jobs submitted together on a warm pool of four threads run
/// at the same time (they meet at a barrier; run one after another they
/// would never all arrive).
#[test]
fn jobs_submitted_together_run_together_on_a_warm_pool() {
    bounded(|| {
        let mut rt = coro::Runtime::builder()
            .blocking_threads(4)
            .build()
            .unwrap();
        rt.block_on(|| {
            for round in 0..3 {
                let barrier = Arc::new(Barrier::new(4));
                let hs: Vec<_> = (0..4)
                    .map(|_| {
                        let b = barrier.clone();
                        coro::spawn(move || {
                            coro::blocking(move || {
                                // A wait that times out means the jobs were
                                // not all running at once.
                                let (tx, rx) = mpsc::channel();
                                std::thread::spawn(move || {
                                    b.wait();
                                    let _ = tx.send(());
                                });
                                rx.recv_timeout(Duration::from_secs(20)).is_ok()
                            })
                        })
                    })
                    .collect();
                for h in hs {
                    assert_eq!(h.join().unwrap(), Ok(true), "round {round}");
                }
            }
            assert!(coro::stats().blocking_threads <= 4);
        })
    });
}

/// A job whose caller stopped waiting before a worker took it never
/// runs, and callers beyond the queue's bound wait instead of growing it.
#[test]
fn abandoned_jobs_are_dropped_and_the_queue_is_bounded() {
    bounded(|| {
        let mut rt = coro::Runtime::builder()
            .blocking_threads(1)
            .build()
            .unwrap();
        rt.block_on(|| {
            let (release, stuck) = mpsc::channel::<()>();
            let holder = coro::spawn(move || coro::blocking(move || stuck.recv().is_ok()));
            // Until the worker has taken the holder's job (one yield is not
            // enough where threads are slow to start: under valgrind).
            coro::yield_now();
            while coro::stats().blocking_queued > 0 {
                coro::sleep(Duration::from_millis(1)).unwrap();
            }
            let ran = Arc::new(Mutex::new(false));
            let r = ran.clone();
            let gave_up = coro::with_timeout(Duration::from_millis(10), || {
                coro::blocking(move || *r.lock().unwrap() = true)
            });
            assert!(gave_up.is_err());
            assert_eq!(
                coro::stats().blocking_queued,
                0,
                "the abandoned job left the queue"
            );
            // Many callers that give up: the queue stays bounded.
            let callers: Vec<_> = (0..5000)
                .map(|_| {
                    coro::spawn(|| {
                        coro::with_timeout(Duration::from_millis(200), || coro::blocking(|| ()))
                    })
                })
                .collect();
            coro::yield_now();
            coro::yield_now();
            assert!(coro::stats().blocking_queued <= 4096);
            for c in callers {
                assert!(c.join().unwrap().is_err());
            }
            assert_eq!(coro::stats().blocking_queued, 0);
            release.send(()).unwrap();
            assert_eq!(holder.join().unwrap(), Ok(true));
            // A job submitted now runs after the holder: the abandoned one,
            // queued before it, would have run first.
            coro::blocking(|| ()).unwrap();
            assert!(!*ran.lock().unwrap(), "an abandoned job ran");
        })
    });
}

/// Jobs that must all run at once get a thread each (a pool fixed at 4
/// threads would deadlock here), jobs beyond the bound queue, and idle threads
/// exit after the keep-alive.
#[test]
fn the_blocking_pool_grows_on_demand_and_shrinks_when_idle() {
    // The default pool (coro::run) is not capped at a handful of threads.
    coro::run(|| {
        let all = Arc::new(Barrier::new(16));
        let jobs: Vec<_> = (0..16)
            .map(|_| {
                let all = all.clone();
                coro::spawn(move || coro::blocking(move || all.wait().is_leader()))
            })
            .collect();
        let leaders = coro::with_timeout(LIMIT, || {
            jobs.into_iter()
                .map(|h| h.join().unwrap().unwrap())
                .filter(|&l| l)
                .count()
        })
        .expect("16 jobs that wait for each other ran at once");
        assert_eq!(leaders, 1);
        assert!(coro::stats().blocking_threads >= 16);
    });

    let mut rt = Runtime::builder()
        .blocking_threads(4)
        .blocking_keep_alive(Duration::from_millis(100))
        .build()
        .unwrap();
    rt.block_on(|| {
        assert_eq!(coro::stats().blocking_threads, 0, "the pool starts empty");
        let gate = Arc::new((Mutex::new(false), Condvar::new()));
        let jobs: Vec<_> = (0..5)
            .map(|_| {
                let gate = gate.clone();
                coro::spawn(move || {
                    coro::blocking(move || {
                        let (open, cv) = &*gate;
                        let mut open = open.lock().unwrap();
                        while !*open {
                            open = cv.wait(open).unwrap();
                        }
                    })
                })
            })
            .collect();
        wait_until("four threads busy and one job queued", || {
            let s = coro::stats();
            s.blocking_threads == 4 && s.blocking_queued == 1
        });
        *gate.0.lock().unwrap() = true;
        gate.1.notify_all();
        for h in jobs {
            h.join().unwrap().unwrap();
        }
        assert_eq!(coro::stats().blocking_threads, 4);
        wait_until("idle threads to exit after the keep-alive", || {
            coro::stats().blocking_threads == 0
        });
        // And it grows again.
        assert_eq!(coro::blocking(|| 7).unwrap(), 7);
        assert_eq!(coro::stats().blocking_threads, 1);
    });
}
