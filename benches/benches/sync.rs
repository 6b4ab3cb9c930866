//! Synchronization primitives: coro's `coro::sync` beside tokio's `sync` types
//! on its current-thread runtime and may's `sync` types with one worker.
//!
//! * `mutex_uncontended`: one lock + unlock with nobody else around.
//! * `mutex_handoff`: two threads each lock, yield while holding, unlock; one
//!   iteration = one hand-off of the lock to the other thread. Each peer
//!   counts how often the holder changed and the bench fails unless every
//!   acquisition was a hand-off (see `assert_handed_off`).
//! * `semaphore`: one uncontended acquire(1) + release.
//! * `condvar_pingpong`: two threads take turns incrementing a counter under
//!   a mutex, waking each other through a condition variable; one iteration =
//!   one turn. tokio has no condvar: its peer is `Mutex` + `Notify`.
//! * `channel_1p1c_128`: one producer, one consumer, capacity 128; one
//!   iteration = one item. may has no bounded channel: its peer is its
//!   unbounded `mpsc` (which never blocks the producer).
//! * `remote_pingpong`: a round trip between a green thread (a task, a may
//!   coroutine) and a plain OS thread over `Send` channels: one iteration =
//!   one value there and back, two cross-thread wake-ups. coro's is
//!   `coro::sync::remote::channel` (the runtime is woken through its mio
//!   waker); tokio's is `mpsc::unbounded_channel` with `blocking_recv` on
//!   the OS thread; may's is its `mpsc`, which OS threads can use.
//!
//! Run: `cargo bench -p coro-benches --bench sync`.

#![allow(missing_docs)] // criterion_group! generates undocumented functions

use std::future::Future;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{black_box, criterion_group, criterion_main, Criterion};

/// Runs `f` on a may coroutine (may configured with one worker) and returns
/// what it measured.
fn on_may(f: impl FnOnce() -> Duration + Send + 'static) -> Duration {
    coro_benches::may_one_worker();
    // SAFETY: may requires `unsafe` to spawn because a coroutine must not
    // block its worker thread or keep thread-locals across yields; the bench
    // closures only use may's own primitives and yields.
    let h = unsafe { may::coroutine::spawn(f) };
    h.join().expect("may coroutine")
}

/// Spawns `f` on a may coroutine.
fn may_go<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> may::coroutine::JoinHandle<T> {
    // SAFETY: as in `on_may`.
    unsafe { may::coroutine::spawn(f) }
}

/// Registers the group `name` with one bench per peer: `coro` on a coro
/// runtime, `tokio` on tokio's current-thread runtime, `may` on a may
/// coroutine (one worker).
///
/// Each body gets criterion's iteration count and returns the time it
/// measured itself, so its setup before `Instant::now()` is not counted.
fn peers<F>(
    c: &mut Criterion,
    name: &str,
    coro: impl Fn(u64) -> Duration + Copy + 'static,
    tokio: impl Fn(u64) -> F,
    may: impl Fn(u64) -> Duration + Copy + Send + 'static,
) where
    F: Future<Output = Duration>,
{
    let mut g = c.benchmark_group(name);
    let mut rt = coro_benches::coro_rt();
    g.bench_function("coro", |b| {
        b.iter_custom(|iters| rt.block_on(move || coro(iters)))
    });
    let trt = coro_benches::tokio_rt();
    g.bench_function("tokio", |b| {
        b.iter_custom(|iters| trt.block_on(tokio(iters)))
    });
    g.bench_function("may", |b| b.iter_custom(|iters| on_may(move || may(iters))));
    g.finish();
}

fn mutex_uncontended(c: &mut Criterion) {
    peers(
        c,
        "sync::mutex_uncontended",
        |iters| {
            let m = coro::sync::Mutex::new(0u64);
            let t = Instant::now();
            for _ in 0..iters {
                *black_box(&m).lock().unwrap() += 1;
            }
            t.elapsed()
        },
        |iters| async move {
            let m = tokio::sync::Mutex::new(0u64);
            let t = Instant::now();
            for _ in 0..iters {
                *black_box(&m).lock().await += 1;
            }
            t.elapsed()
        },
        |iters| {
            let m = may::sync::Mutex::new(0u64);
            let t = Instant::now();
            for _ in 0..iters {
                *black_box(&m).lock().unwrap() += 1;
            }
            t.elapsed()
        },
    );
}

/// What the lock guards in `mutex_handoff`: the last holder and how many
/// times the holder changed, so each peer proves it measured hand-offs.
#[derive(Default)]
struct Holders {
    last: u8,
    changes: u64,
}

impl Holders {
    fn took(&mut self, id: u8) {
        if self.last != id {
            self.last = id;
            self.changes += 1;
        }
    }
}

/// Fails the bench unless every acquisition of the `total` passed the lock
/// to the other thread. A scheduler whose yield resumes the yielding thread
/// while the other waits in the ready queue makes no hand-off at all: the
/// first thread takes the lock uncontended `half` times, then the second
/// (may, with the second coroutine spawned from the first: 1 owner change
/// in a million acquisitions), which is not what this row measures.
fn assert_handed_off(h: &Holders, total: u64) {
    assert!(
        h.changes + 2 >= total,
        "mutex_handoff: the lock changed hands {} times in {total} acquisitions: \
         the threads did not alternate, so this was no hand-off",
        h.changes
    );
}

fn mutex_handoff(c: &mut Criterion) {
    // Two workers, ids 1 and 2, take turns: lock, yield holding the lock
    // (so the other queues on it), unlock. The timing thread only joins.
    peers(
        c,
        "sync::mutex_handoff",
        |iters| {
            let half = iters.div_ceil(2);
            let m = Rc::new(coro::sync::Mutex::new(Holders::default()));
            let worker = |id: u8| {
                let m = m.clone();
                move || {
                    for _ in 0..half {
                        let mut g = m.lock().unwrap();
                        coro::yield_now();
                        g.took(id);
                    }
                }
            };
            let t = Instant::now();
            let a = coro::spawn(worker(1));
            let b = coro::spawn(worker(2));
            a.join().unwrap();
            b.join().unwrap();
            let e = t.elapsed();
            assert_handed_off(&m.lock().unwrap(), 2 * half);
            e
        },
        |iters| async move {
            let half = iters.div_ceil(2);
            let m = Arc::new(tokio::sync::Mutex::new(Holders::default()));
            let worker = |id: u8| {
                let m = m.clone();
                async move {
                    for _ in 0..half {
                        let mut g = m.lock().await;
                        tokio::task::yield_now().await;
                        g.took(id);
                    }
                }
            };
            let t = Instant::now();
            let a = tokio::spawn(worker(1));
            let b = tokio::spawn(worker(2));
            a.await.unwrap();
            b.await.unwrap();
            let e = t.elapsed();
            assert_handed_off(&*m.lock().await, 2 * half);
            e
        },
        |iters| {
            let half = iters.div_ceil(2);
            let m = Arc::new(may::sync::Mutex::new(Holders::default()));
            let worker = |id: u8| {
                let m = m.clone();
                move || {
                    for _ in 0..half {
                        let mut g = m.lock().unwrap();
                        may::coroutine::yield_now();
                        g.took(id);
                    }
                }
            };
            let t = Instant::now();
            let a = may_go(worker(1));
            let b = may_go(worker(2));
            a.join().unwrap();
            b.join().unwrap();
            let e = t.elapsed();
            assert_handed_off(&m.lock().unwrap(), 2 * half);
            e
        },
    );
}

fn semaphore(c: &mut Criterion) {
    peers(
        c,
        "sync::semaphore",
        |iters| {
            let s = coro::sync::Semaphore::new(4);
            let t = Instant::now();
            for _ in 0..iters {
                drop(black_box(&s).acquire(1).unwrap());
            }
            t.elapsed()
        },
        |iters| async move {
            let s = tokio::sync::Semaphore::new(4);
            let t = Instant::now();
            for _ in 0..iters {
                drop(black_box(&s).acquire().await.unwrap());
            }
            t.elapsed()
        },
        |iters| {
            let s = may::sync::Semphore::new(4);
            let t = Instant::now();
            for _ in 0..iters {
                black_box(&s).wait();
                s.post();
            }
            t.elapsed()
        },
    );
}

fn condvar_pingpong(c: &mut Criterion) {
    peers(
        c,
        "sync::condvar_pingpong",
        |iters| {
            let half = iters.div_ceil(2);
            let s = Rc::new((coro::sync::Mutex::new(0u64), coro::sync::Condvar::new()));
            let turn = move |s: &(coro::sync::Mutex<u64>, coro::sync::Condvar), parity: u64| {
                for _ in 0..half {
                    let mut g =
                        s.1.wait_while(s.0.lock().unwrap(), |n| *n % 2 != parity)
                            .unwrap();
                    *g += 1;
                    drop(g);
                    s.1.notify_one();
                }
            };
            let s2 = s.clone();
            let t = Instant::now();
            let other = coro::spawn(move || turn(&s2, 1));
            turn(&s, 0);
            other.join().unwrap();
            t.elapsed()
        },
        |iters| async move {
            let half = iters.div_ceil(2);
            let s = Arc::new((tokio::sync::Mutex::new(0u64), tokio::sync::Notify::new()));
            async fn turn(
                s: Arc<(tokio::sync::Mutex<u64>, tokio::sync::Notify)>,
                parity: u64,
                n: u64,
            ) {
                for _ in 0..n {
                    loop {
                        let notified = s.1.notified();
                        let mut g = s.0.lock().await;
                        if *g % 2 == parity {
                            *g += 1;
                            break;
                        }
                        drop(g);
                        notified.await;
                    }
                    s.1.notify_one();
                }
            }
            let t = Instant::now();
            let other = tokio::spawn(turn(s.clone(), 1, half));
            turn(s, 0, half).await;
            other.await.unwrap();
            t.elapsed()
        },
        |iters| {
            let half = iters.div_ceil(2);
            let s = Arc::new((may::sync::Mutex::new(0u64), may::sync::Condvar::new()));
            let turn = move |s: &(may::sync::Mutex<u64>, may::sync::Condvar), parity: u64| {
                for _ in 0..half {
                    let mut g =
                        s.1.wait_while(s.0.lock().unwrap(), |n| *n % 2 != parity)
                            .unwrap();
                    *g += 1;
                    drop(g);
                    s.1.notify_one();
                }
            };
            let s2 = s.clone();
            let t = Instant::now();
            let other = may_go(move || turn(&s2, 1));
            turn(&s, 0);
            other.join().unwrap();
            t.elapsed()
        },
    );
}

fn channel_1p1c(c: &mut Criterion) {
    peers(
        c,
        "sync::channel_1p1c_128",
        |iters| {
            let (tx, rx) = coro::sync::sync_channel(128);
            let t = Instant::now();
            let producer = coro::spawn(move || {
                for i in 0..iters {
                    tx.send(i).unwrap();
                }
            });
            while let Ok(i) = rx.recv() {
                black_box(i);
            }
            producer.join().unwrap();
            t.elapsed()
        },
        |iters| async move {
            let (tx, mut rx) = tokio::sync::mpsc::channel(128);
            let t = Instant::now();
            let producer = tokio::spawn(async move {
                for i in 0..iters {
                    tx.send(i).await.unwrap();
                }
            });
            while let Some(i) = rx.recv().await {
                black_box(i);
            }
            producer.await.unwrap();
            t.elapsed()
        },
        |iters| {
            let (tx, rx) = may::sync::mpsc::channel();
            let t = Instant::now();
            let producer = may_go(move || {
                for i in 0..iters {
                    tx.send(i).unwrap();
                }
            });
            while let Ok(i) = rx.recv() {
                black_box(i);
            }
            producer.join().unwrap();
            t.elapsed()
        },
    );
}

fn remote_pingpong(c: &mut Criterion) {
    peers(
        c,
        "sync::remote_pingpong",
        |iters| {
            let (to_os, os_rx) = coro::sync::remote::channel::<u64>();
            let (os_tx, from_os) = coro::sync::remote::channel::<u64>();
            let os = std::thread::spawn(move || {
                while let Ok(i) = os_rx.recv() {
                    os_tx.send(i).unwrap();
                }
            });
            let t = Instant::now();
            for i in 0..iters {
                to_os.send(i).unwrap();
                black_box(from_os.recv().unwrap());
            }
            let e = t.elapsed();
            drop(to_os);
            os.join().unwrap();
            e
        },
        |iters| async move {
            let (to_os, mut os_rx) = tokio::sync::mpsc::unbounded_channel::<u64>();
            let (os_tx, mut from_os) = tokio::sync::mpsc::unbounded_channel::<u64>();
            let os = std::thread::spawn(move || {
                while let Some(i) = os_rx.blocking_recv() {
                    os_tx.send(i).unwrap();
                }
            });
            let t = Instant::now();
            for i in 0..iters {
                to_os.send(i).unwrap();
                black_box(from_os.recv().await.unwrap());
            }
            let e = t.elapsed();
            drop(to_os);
            os.join().unwrap();
            e
        },
        |iters| {
            let (to_os, os_rx) = may::sync::mpsc::channel::<u64>();
            let (os_tx, from_os) = may::sync::mpsc::channel::<u64>();
            let os = std::thread::spawn(move || {
                while let Ok(i) = os_rx.recv() {
                    os_tx.send(i).unwrap();
                }
            });
            let t = Instant::now();
            for i in 0..iters {
                to_os.send(i).unwrap();
                black_box(from_os.recv().unwrap());
            }
            let e = t.elapsed();
            drop(to_os);
            os.join().unwrap();
            e
        },
    );
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1));
    targets = mutex_uncontended, mutex_handoff, semaphore, condvar_pingpong, channel_1p1c, remote_pingpong
}
criterion_main!(benches);
