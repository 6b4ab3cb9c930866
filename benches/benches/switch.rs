//! Context switches: yield ping-pong between two green threads, beside tokio's
//! current-thread runtime, may with one worker, and a bare corosensei
//! resume/suspend pair (the physical floor). One iteration = one yield.
//!
//! `yield_ring/1000` is the same with 1 000 threads yielding in turn (each
//! switch goes to a thread whose stack was last touched 999 switches ago);
//! `park_unpark` is a hand-off between two threads that take turns, each
//! unparking the other and parking (tokio: two `Notify`s; may: its own
//! park/unpark). One iteration = one yield or one hand-off.
//!
//! With `CORO_BENCH_CPU` set, the coro loops time themselves by the OS
//! thread's CPU time instead of wall time (`coro_benches::Stopwatch`): the
//! figure to compare two builds by on a shared machine, in alternating
//! runs.
//!
//! `yield_pingpong/coro+profiler` is the same loop with `coro::profile`
//! recording: the cost of its two samples (clock + getrusage) per switch.
//! The profiler's cost when off is the difference of `yield_pingpong/coro`
//! with and without its flag test in `Scheduler::resume` (BENCHMARKS.md).

#![allow(missing_docs)] // criterion_group! generates undocumented functions

use std::time::{Duration, Instant};

use criterion::{black_box, criterion_group, criterion_main, Criterion};

/// Two green threads yielding to each other `iters` times in all.
fn pingpong(iters: u64) -> Duration {
    let half = iters.div_ceil(2);
    let t = coro_benches::Stopwatch::start();
    let a = coro::spawn(move || {
        for _ in 0..half {
            coro::yield_now();
        }
    });
    for _ in 0..half {
        coro::yield_now();
    }
    a.join().unwrap();
    t.elapsed()
}

fn coro_yield(c: &mut Criterion) {
    let mut rt = coro_benches::coro_rt();
    c.bench_function("switch::yield_pingpong/coro", |b| {
        b.iter_custom(|iters| rt.block_on(move || pingpong(iters)))
    });
}

fn coro_yield_profiled(c: &mut Criterion) {
    let mut rt = coro_benches::coro_rt();
    c.bench_function("switch::yield_pingpong/coro+profiler", |b| {
        b.iter_custom(|iters| {
            rt.block_on(move || {
                coro::profile::start().unwrap();
                let elapsed = pingpong(iters);
                black_box(coro::profile::stop());
                elapsed
            })
        })
    });
}

fn tokio_yield(c: &mut Criterion) {
    let rt = coro_benches::tokio_rt();
    c.bench_function("switch::yield_pingpong/tokio", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async move {
                let half = iters.div_ceil(2);
                let t = Instant::now();
                let a = tokio::spawn(async move {
                    for _ in 0..half {
                        tokio::task::yield_now().await;
                    }
                });
                for _ in 0..half {
                    tokio::task::yield_now().await;
                }
                a.await.unwrap();
                t.elapsed()
            })
        })
    });
}

fn may_yield(c: &mut Criterion) {
    coro_benches::may_one_worker();
    c.bench_function("switch::yield_pingpong/may", |b| {
        b.iter_custom(|iters| {
            let half = iters.div_ceil(2);
            let go = |n: u64| {
                // SAFETY: may requires `unsafe` to spawn because a coroutine must
                // not block its worker thread or use thread-locals across
                // yields; this closure only yields.
                unsafe {
                    may::coroutine::spawn(move || {
                        for _ in 0..n {
                            may::coroutine::yield_now();
                        }
                    })
                }
            };
            let t = Instant::now();
            let a = go(half);
            let b2 = go(half);
            a.join().unwrap();
            b2.join().unwrap();
            t.elapsed()
        })
    });
}

/// Threads in the ring of `yield_ring`.
const RING: u64 = 1_000;

fn yield_ring(c: &mut Criterion) {
    let mut g = c.benchmark_group("switch::yield_ring/1000");
    let mut rt = coro_benches::coro_rt();
    g.bench_function("coro", |b| {
        b.iter_custom(|iters| {
            rt.block_on(move || {
                let each = iters.div_ceil(RING);
                let t = coro_benches::Stopwatch::start();
                let hs: Vec<_> = (0..RING)
                    .map(|_| {
                        coro::spawn(move || {
                            for _ in 0..each {
                                coro::yield_now();
                            }
                        })
                    })
                    .collect();
                for h in hs {
                    h.join().unwrap();
                }
                t.elapsed().mul_f64(iters as f64 / (each * RING) as f64)
            })
        })
    });
    let trt = coro_benches::tokio_rt();
    g.bench_function("tokio", |b| {
        b.iter_custom(|iters| {
            trt.block_on(async move {
                let each = iters.div_ceil(RING);
                let t = Instant::now();
                let hs: Vec<_> = (0..RING)
                    .map(|_| {
                        tokio::spawn(async move {
                            for _ in 0..each {
                                tokio::task::yield_now().await;
                            }
                        })
                    })
                    .collect();
                for h in hs {
                    h.await.unwrap();
                }
                t.elapsed().mul_f64(iters as f64 / (each * RING) as f64)
            })
        })
    });
    coro_benches::may_one_worker();
    g.bench_function("may", |b| {
        b.iter_custom(|iters| {
            let each = iters.div_ceil(RING);
            let t = Instant::now();
            let hs: Vec<_> = (0..RING)
                .map(|_| {
                    // SAFETY: the coroutine only yields (see `may_yield`).
                    unsafe {
                        may::coroutine::spawn(move || {
                            for _ in 0..each {
                                may::coroutine::yield_now();
                            }
                        })
                    }
                })
                .collect();
            for h in hs {
                h.join().unwrap();
            }
            t.elapsed().mul_f64(iters as f64 / (each * RING) as f64)
        })
    });
    g.finish();
}

fn park_unpark(c: &mut Criterion) {
    let mut g = c.benchmark_group("switch::park_unpark");
    let mut rt = coro_benches::coro_rt();
    g.bench_function("coro", |b| {
        b.iter_custom(|iters| {
            rt.block_on(move || {
                let half = iters.div_ceil(2);
                let main = coro::current();
                let t = coro_benches::Stopwatch::start();
                let other = coro::spawn(move || {
                    for _ in 0..half {
                        coro::park().unwrap();
                        main.unpark().unwrap();
                    }
                });
                let o = other.thread().clone();
                coro::yield_now(); // it runs and parks
                for _ in 0..half {
                    o.unpark().unwrap();
                    coro::park().unwrap();
                }
                other.join().unwrap();
                t.elapsed()
            })
        })
    });
    let trt = coro_benches::tokio_rt();
    g.bench_function("tokio", |b| {
        b.iter_custom(|iters| {
            trt.block_on(async move {
                use std::sync::Arc;
                let half = iters.div_ceil(2);
                let (a, b2) = (
                    Arc::new(tokio::sync::Notify::new()),
                    Arc::new(tokio::sync::Notify::new()),
                );
                let (a2, b3) = (a.clone(), b2.clone());
                let t = Instant::now();
                let other = tokio::spawn(async move {
                    for _ in 0..half {
                        a2.notified().await;
                        b3.notify_one();
                    }
                });
                for _ in 0..half {
                    a.notify_one();
                    b2.notified().await;
                }
                other.await.unwrap();
                t.elapsed()
            })
        })
    });
    coro_benches::may_one_worker();
    g.bench_function("may", |b| {
        b.iter_custom(|iters| {
            let half = iters.div_ceil(2);
            let t = Instant::now();
            // SAFETY: the coroutines only park and unpark each other.
            let h = unsafe {
                may::coroutine::spawn(move || {
                    let main = may::coroutine::current();
                    let other = may::coroutine::spawn(move || {
                        for _ in 0..half {
                            may::coroutine::park();
                            main.unpark();
                        }
                    });
                    for _ in 0..half {
                        other.coroutine().unpark();
                        may::coroutine::park();
                    }
                    other.join().unwrap();
                })
            };
            h.join().unwrap();
            t.elapsed()
        })
    });
    g.finish();
}

fn corosensei_pair(c: &mut Criterion) {
    let mut co = corosensei::Coroutine::new(|y: &corosensei::Yielder<(), ()>, ()| loop {
        y.suspend(());
    });
    c.bench_function("switch::resume_suspend/corosensei", |b| {
        b.iter(|| black_box(co.resume(())))
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1));
    targets = corosensei_pair, coro_yield, coro_yield_profiled, tokio_yield, may_yield, yield_ring, park_unpark
}
criterion_main!(benches);
