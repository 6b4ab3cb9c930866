//! Blocking offload: the call runs on another OS thread while green threads
//! go on. The pool grows on demand up to its bound and shrinks when idle;
//! jobs submitted together run together; a job whose caller stopped waiting
//! before a worker took it never runs; the queue is bounded.

use std::cell::Cell;
use std::rc::Rc;
use std::sync::mpsc;
use std::sync::{Arc, Barrier, Condvar, Mutex};
use std::time::{Duration, Instant};

use coro_runtime::{self as coro, Runtime, Timeout};

mod util;
use util::{bounded, within};

#[test]
fn blocking_runs_elsewhere_and_others_keep_running() {
    coro::run(|| {
        let ticks = Rc::new(Cell::new(0));
        let t = ticks.clone();
        let ticker = coro::spawn(move || {
            for _ in 0..5 {
                coro::sleep(Duration::from_millis(2)).unwrap();
                t.set(t.get() + 1);
            }
        });
        let (tx, rx) = mpsc::channel::<()>();
        let here = std::thread::current().id();
        let job = coro::spawn(move || {
            coro::blocking(move || {
                // Blocks its OS thread until the ticker is done.
                rx.recv().unwrap();
                std::thread::current().id()
            })
        });
        ticker.join().unwrap();
        assert_eq!(ticks.get(), 5, "green threads ran while the job blocked");
        tx.send(()).unwrap();
        let there = job.join().unwrap().unwrap();
        assert_ne!(here, there);
    });
}

#[test]
fn blocking_under_timeout_returns_and_the_job_finishes_later() {
    coro::run(|| {
        let (tx, rx) = mpsc::channel::<u32>();
        let r = coro::with_timeout(Duration::from_millis(5), || {
            coro::blocking(move || rx.recv_timeout(Duration::from_secs(5)).unwrap_or(0))
        });
        assert_eq!(r, Err(Timeout));
        tx.send(1).unwrap();
        // The runtime still works, and another job completes.
        assert_eq!(coro::blocking(|| 5).unwrap(), 5);
    });
}

#[test]
fn a_panic_in_a_blocking_job_reaches_the_caller() {
    coro::run(|| {
        let h = coro::spawn(|| coro::blocking(|| -> u8 { panic!("job failed") }));
        let e = h.join().unwrap_err();
        assert_eq!(e.panic_message(), Some("job failed"));
    });
}

#[test]
fn many_jobs_on_a_small_pool() {
    let mut rt = coro::Runtime::builder()
        .blocking_threads(2)
        .build()
        .unwrap();
    let total = rt.block_on(|| {
        let hs: Vec<_> = (0..50u64)
            .map(|i| coro::spawn(move || coro::blocking(move || i * 2).unwrap()))
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).sum::<u64>()
    });
    assert_eq!(total, (0..50).map(|i| i * 2).sum());
}

/// A caller waiting for room in the full queue is woken when queued jobs are
/// cancelled, and a wake-up popped for a room waiter that an interrupt
/// already made ready is passed on, not lost. Here: the only
/// worker is busy, 4096 queued callers time out (the queue empties), room
/// waiter X is interrupted, and the busy job completes while X's stale
/// entry is first: Y's wake-up goes to X. Were it lost there, Y would stay
/// parked forever with an empty queue and an idle worker.
#[test]
fn a_room_waiter_is_not_stranded_when_queued_jobs_go_away() {
    let r = within(60, || {
        let mut rt = coro::Runtime::builder()
            .blocking_threads(1)
            .latency_warning(None)
            .build()
            .unwrap();
        rt.block_on(|| {
            let (release, stuck) = mpsc::channel::<()>();
            let holder = coro::spawn(move || coro::blocking(move || stuck.recv().is_ok()));
            coro::yield_now();
            // Fill the queue with callers that give up after 300 ms.
            let fillers: Vec<_> = (0..4096)
                .map(|_| {
                    coro::Builder::new()
                        .stack_size(16 * 1024)
                        .spawn(|| {
                            coro::with_timeout(Duration::from_millis(300), || coro::blocking(|| ()))
                        })
                        .unwrap()
                })
                .collect();
            coro::yield_now();
            assert_eq!(coro::stats().blocking_queued, 4096);
            let x = coro::spawn(|| coro::blocking(|| ()));
            let y_done = Rc::new(Cell::new(false));
            let yd = y_done.clone();
            let y = coro::spawn(move || {
                let r = coro::blocking(|| ());
                yd.set(true);
                r
            });
            coro::yield_now(); // x, y wait for room
            for f in fillers {
                assert!(f.join().unwrap().is_err());
            }
            assert!(
                coro::stats().blocking_queued <= 2,
                "the fillers' jobs were cancelled (x and y took the room)"
            );
            // Keep the loop busy so that it polls after every pass.
            let stop = Rc::new(Cell::new(false));
            let spinners: Vec<_> = (0..300)
                .map(|_| {
                    let s = stop.clone();
                    coro::Builder::new()
                        .stack_size(16 * 1024)
                        .spawn(move || {
                            while !s.get() {
                                coro::yield_now();
                            }
                        })
                        .unwrap()
                })
                .collect();
            coro::yield_now();
            // The busy job finishes; its completion is drained before x runs.
            release.send(()).unwrap();
            std::thread::sleep(Duration::from_millis(100));
            let _ = x.thread().interrupt();
            coro::yield_now();
            stop.set(true);
            for s in spinners {
                s.join().unwrap();
            }
            assert!(holder.join().unwrap().unwrap());
            let _ = x.join(); // interrupted, or done if its room came first
                              // Nothing is queued and the worker is idle: y should run now.
            coro::sleep(Duration::from_secs(2)).unwrap();
            let st = coro::stats();
            println!(
                "after 2 s: y finished = {}, queued = {}, workers = {}, in flight = {}",
                y_done.get(),
                st.blocking_queued,
                st.blocking_threads,
                st.blocking_in_flight
            );
            let ok = y_done.get();
            let _ = y.thread().interrupt();
            let _ = y.join();
            ok
        })
    });
    assert_eq!(r, Ok(true), "y must get its job run");
}

/// Four jobs submitted together on a warm pool of four threads run
/// at the same time (they meet at a barrier; run one after another they
/// would never all arrive).
#[test]
fn jobs_submitted_together_run_together_on_a_warm_pool() {
    bounded(120, || {
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
    bounded(120, || {
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

const LIMIT: Duration = Duration::from_secs(30);

/// Sleeps a millisecond at a time until `cond` holds; fails after [`LIMIT`].
#[track_caller]
fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < LIMIT, "still waiting for {what}");
        coro::sleep(Duration::from_millis(1)).unwrap();
    }
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
