//! Context switches: yield ping-pong between two green threads, beside tokio's
//! current-thread runtime, may with one worker, and a bare corosensei
//! resume/suspend pair (the physical floor). One iteration = one yield.
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
    let t = Instant::now();
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
    targets = corosensei_pair, coro_yield, coro_yield_profiled, tokio_yield, may_yield
}
criterion_main!(benches);
