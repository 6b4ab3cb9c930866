//! Synchronization primitives: coro's `coro::sync` beside tokio's `sync` types
//! on its current-thread runtime and may's `sync` types with one worker.
//!
//! * `mutex_uncontended`: one lock + unlock with nobody else around.
//! * `mutex_handoff`: two threads each lock, yield while holding, unlock; one
//!   iteration = one hand-off of the lock to the other thread.
//! * `semaphore`: one uncontended acquire(1) + release.
//! * `condvar_pingpong`: two threads take turns incrementing a counter under
//!   a mutex, waking each other through a condition variable; one iteration =
//!   one turn. tokio has no condvar: its peer is `Mutex` + `Notify`.
//! * `channel_1p1c_128`: one producer, one consumer, capacity 128; one
//!   iteration = one item. may has no bounded channel: its peer is its
//!   unbounded `mpsc` (which never blocks the producer).
//!
//! Run: `cargo bench -p coro-benches --bench sync`.

#![allow(missing_docs)] // criterion_group! generates undocumented functions

use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{black_box, criterion_group, criterion_main, Criterion};

fn coro_rt() -> coro::Runtime {
    coro::Runtime::builder()
        .latency_warning(None)
        .build()
        .expect("coro runtime")
}

fn tokio_rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// Runs `f` on a may coroutine (may configured with one worker) and returns
/// what it measured.
fn on_may(f: impl FnOnce() -> Duration + Send + 'static) -> Duration {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        may::config().set_workers(1);
    });
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

fn mutex_uncontended(c: &mut Criterion) {
    let mut g = c.benchmark_group("sync::mutex_uncontended");
    let mut rt = coro_rt();
    g.bench_function("coro", |b| {
        b.iter_custom(|iters| {
            rt.block_on(move || {
                let m = coro::sync::Mutex::new(0u64);
                let t = Instant::now();
                for _ in 0..iters {
                    *black_box(&m).lock().unwrap() += 1;
                }
                t.elapsed()
            })
        })
    });
    let trt = tokio_rt();
    g.bench_function("tokio", |b| {
        b.iter_custom(|iters| {
            trt.block_on(async move {
                let m = tokio::sync::Mutex::new(0u64);
                let t = Instant::now();
                for _ in 0..iters {
                    *black_box(&m).lock().await += 1;
                }
                t.elapsed()
            })
        })
    });
    g.bench_function("may", |b| {
        b.iter_custom(|iters| {
            on_may(move || {
                let m = may::sync::Mutex::new(0u64);
                let t = Instant::now();
                for _ in 0..iters {
                    *black_box(&m).lock().unwrap() += 1;
                }
                t.elapsed()
            })
        })
    });
    g.finish();
}

fn mutex_handoff(c: &mut Criterion) {
    let mut g = c.benchmark_group("sync::mutex_handoff");
    let mut rt = coro_rt();
    g.bench_function("coro", |b| {
        b.iter_custom(|iters| {
            rt.block_on(move || {
                let half = iters.div_ceil(2);
                let m = Rc::new(coro::sync::Mutex::new(0u64));
                let m2 = m.clone();
                let t = Instant::now();
                let other = coro::spawn(move || {
                    for _ in 0..half {
                        let mut g = m2.lock().unwrap();
                        coro::yield_now();
                        *g += 1;
                    }
                });
                for _ in 0..half {
                    let mut g = m.lock().unwrap();
                    coro::yield_now();
                    *g += 1;
                }
                other.join().unwrap();
                t.elapsed()
            })
        })
    });
    let trt = tokio_rt();
    g.bench_function("tokio", |b| {
        b.iter_custom(|iters| {
            trt.block_on(async move {
                let half = iters.div_ceil(2);
                let m = Arc::new(tokio::sync::Mutex::new(0u64));
                let m2 = m.clone();
                let t = Instant::now();
                let other = tokio::spawn(async move {
                    for _ in 0..half {
                        let mut g = m2.lock().await;
                        tokio::task::yield_now().await;
                        *g += 1;
                    }
                });
                for _ in 0..half {
                    let mut g = m.lock().await;
                    tokio::task::yield_now().await;
                    *g += 1;
                }
                other.await.unwrap();
                t.elapsed()
            })
        })
    });
    g.bench_function("may", |b| {
        b.iter_custom(|iters| {
            on_may(move || {
                let half = iters.div_ceil(2);
                let m = Arc::new(may::sync::Mutex::new(0u64));
                let m2 = m.clone();
                let t = Instant::now();
                let other = may_go(move || {
                    for _ in 0..half {
                        let mut g = m2.lock().unwrap();
                        may::coroutine::yield_now();
                        *g += 1;
                    }
                });
                for _ in 0..half {
                    let mut g = m.lock().unwrap();
                    may::coroutine::yield_now();
                    *g += 1;
                }
                other.join().unwrap();
                t.elapsed()
            })
        })
    });
    g.finish();
}

fn semaphore(c: &mut Criterion) {
    let mut g = c.benchmark_group("sync::semaphore");
    let mut rt = coro_rt();
    g.bench_function("coro", |b| {
        b.iter_custom(|iters| {
            rt.block_on(move || {
                let s = coro::sync::Semaphore::new(4);
                let t = Instant::now();
                for _ in 0..iters {
                    drop(black_box(&s).acquire(1).unwrap());
                }
                t.elapsed()
            })
        })
    });
    let trt = tokio_rt();
    g.bench_function("tokio", |b| {
        b.iter_custom(|iters| {
            trt.block_on(async move {
                let s = tokio::sync::Semaphore::new(4);
                let t = Instant::now();
                for _ in 0..iters {
                    drop(black_box(&s).acquire().await.unwrap());
                }
                t.elapsed()
            })
        })
    });
    g.bench_function("may", |b| {
        b.iter_custom(|iters| {
            on_may(move || {
                let s = may::sync::Semphore::new(4);
                let t = Instant::now();
                for _ in 0..iters {
                    black_box(&s).wait();
                    s.post();
                }
                t.elapsed()
            })
        })
    });
    g.finish();
}

fn condvar_pingpong(c: &mut Criterion) {
    let mut g = c.benchmark_group("sync::condvar_pingpong");
    let mut rt = coro_rt();
    g.bench_function("coro", |b| {
        b.iter_custom(|iters| {
            rt.block_on(move || {
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
            })
        })
    });
    let trt = tokio_rt();
    g.bench_function("tokio", |b| {
        b.iter_custom(|iters| {
            trt.block_on(async move {
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
            })
        })
    });
    g.bench_function("may", |b| {
        b.iter_custom(|iters| {
            on_may(move || {
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
            })
        })
    });
    g.finish();
}

fn channel_1p1c(c: &mut Criterion) {
    let mut g = c.benchmark_group("sync::channel_1p1c_128");
    let mut rt = coro_rt();
    g.bench_function("coro", |b| {
        b.iter_custom(|iters| {
            rt.block_on(move || {
                let (tx, rx) = coro::sync::channel(128);
                let t = Instant::now();
                let producer = coro::spawn(move || {
                    for i in 0..iters {
                        tx.send(i).unwrap();
                    }
                });
                while let Some(i) = rx.recv().unwrap() {
                    black_box(i);
                }
                producer.join().unwrap();
                t.elapsed()
            })
        })
    });
    let trt = tokio_rt();
    g.bench_function("tokio", |b| {
        b.iter_custom(|iters| {
            trt.block_on(async move {
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
            })
        })
    });
    g.bench_function("may", |b| {
        b.iter_custom(|iters| {
            on_may(move || {
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
            })
        })
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1));
    targets = mutex_uncontended, mutex_handoff, semaphore, condvar_pingpong, channel_1p1c
}
criterion_main!(benches);
