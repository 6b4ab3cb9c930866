//! Blocking offload: the call runs on another OS thread while green threads go on.

use std::cell::Cell;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use coro_runtime::{self as coro, Timeout};

use coro_test_support as util;
use coro_test_support::within;

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

/// The timeout fires while the job runs (a job no worker started yet would
/// be dropped instead): `waiter` submits the job and parks, and in the same
/// pass of the scheduler, before it next fires timers, the main thread holds
/// the loop until a worker has started the job.
#[test]
fn blocking_under_timeout_returns_and_the_job_finishes_later() {
    coro::run(|| {
        let (tx, rx) = mpsc::channel::<u32>();
        let (done_tx, done_rx) = mpsc::channel::<u32>();
        let started = Arc::new(AtomicBool::new(false));
        let s = started.clone();
        let waiter = coro::spawn(move || {
            coro::with_timeout(Duration::from_millis(5), || {
                coro::blocking(move || {
                    s.store(true, Ordering::SeqCst);
                    let n = rx.recv().unwrap();
                    done_tx.send(n).unwrap();
                    n
                })
            })
        });
        // The waiter runs first in the next pass, then this thread.
        coro::yield_now();
        let t = std::time::Instant::now();
        while !started.load(Ordering::SeqCst) {
            assert!(
                t.elapsed() < Duration::from_secs(60),
                "the job never started"
            );
            std::hint::spin_loop();
        }
        assert_eq!(waiter.join().unwrap(), Err(Timeout));
        // The job runs on after its caller gave up, and finishes.
        tx.send(7).unwrap();
        let finished = coro::blocking(move || done_rx.recv_timeout(Duration::from_secs(60)));
        assert_eq!(finished.unwrap(), Ok(7));
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
/// already made ready is passed on, not lost. Here: the only worker is
/// busy, 4096 queued callers time out (the queue empties), room waiter X is
/// interrupted, and the busy job completes while X's stale entry is first:
/// Y's wake-up goes to X first; were it lost there, Y would stay parked
/// forever with an empty queue and an idle worker.
#[test]
fn a_room_waiter_is_not_stranded_when_queued_jobs_go_away() {
    let r = within(|| {
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

/// A job given up before a worker took it is dropped with the pool's lock
/// released: its destructors are user code, which may use the pool (here
/// through `stats`, which reads the queue). A drop under the lock
/// deadlocked; `within` turns that into a failure.
#[test]
fn a_queued_job_given_up_is_dropped_outside_the_pools_lock() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    /// Records the queue's length (plus one) when dropped, on the
    /// runtime's thread (the job never runs).
    struct UsesThePool(Arc<AtomicUsize>);
    impl Drop for UsesThePool {
        fn drop(&mut self) {
            self.0
                .store(coro::stats().blocking_queued + 1, Ordering::SeqCst);
        }
    }
    let seen = Arc::new(AtomicUsize::new(0));
    let s = seen.clone();
    within(move || {
        let mut rt = coro::Runtime::builder()
            .blocking_threads(1)
            .build()
            .unwrap();
        rt.block_on(move || {
            let (tx, rx) = mpsc::channel::<()>();
            // Holds the one worker.
            let busy = coro::spawn(move || coro::blocking(move || rx.recv().unwrap()));
            util::yield_until("the worker takes the job", || {
                coro::stats().blocking_queued == 0 && coro::stats().blocking_in_flight == 1
            });
            let value = UsesThePool(s);
            let r = coro::with_timeout(Duration::from_millis(10), move || {
                // Queued behind `busy`, given up at the deadline.
                coro::blocking(move || drop(value))
            });
            assert!(r.is_err());
            tx.send(()).unwrap();
            busy.join().unwrap().unwrap();
        })
    })
    .unwrap();
    assert_eq!(
        seen.load(Ordering::SeqCst),
        1,
        "dropped after it left the queue"
    );
}
