//! Spawn + join of an empty green thread / task, beside tokio's current-thread
//! runtime and may with one worker. One iteration = one spawn and its join.
//! With `CORO_BENCH_CPU` set, the coro loop is timed by CPU time (see
//! `switch.rs`).

#![allow(missing_docs)] // criterion_group! generates undocumented functions

use std::time::{Duration, Instant};

use criterion::{black_box, criterion_group, criterion_main, Criterion};

fn coro_spawn(c: &mut Criterion) {
    let mut rt = coro_benches::coro_rt();
    c.bench_function("spawn::spawn_join/coro", |b| {
        b.iter_custom(|iters| {
            rt.block_on(move || {
                let t = coro_benches::Stopwatch::start();
                for i in 0..iters {
                    black_box(coro::spawn(move || black_box(i)).join().unwrap());
                }
                t.elapsed()
            })
        })
    });
}

fn tokio_spawn(c: &mut Criterion) {
    let rt = coro_benches::tokio_rt();
    c.bench_function("spawn::spawn_join/tokio", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async move {
                let t = Instant::now();
                for i in 0..iters {
                    black_box(tokio::spawn(async move { black_box(i) }).await.unwrap());
                }
                t.elapsed()
            })
        })
    });
}

fn may_spawn(c: &mut Criterion) {
    coro_benches::may_one_worker();
    c.bench_function("spawn::spawn_join/may", |b| {
        b.iter_custom(|iters| {
            let t = Instant::now();
            for i in 0..iters {
                // SAFETY: the coroutine only returns a value (no blocking, no
                // thread-locals), which is what may's spawn asks of callers.
                let h = unsafe { may::coroutine::spawn(move || black_box(i)) };
                black_box(h.join().unwrap());
            }
            t.elapsed()
        })
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1));
    targets = coro_spawn, tokio_spawn, may_spawn
}
criterion_main!(benches);
