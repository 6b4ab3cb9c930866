//! Timers: the `with_timeout` fast path (an operation that completes at once)
//! beside tokio's `timeout`, and 100 000 timers inserted and fired (100 000
//! timers with distinct deadlines: 10 000 sleeping threads / tasks, each
//! sleeping 10 times, so 10 000 timers are pending at once) beside tokio.
//! (may with one worker did not finish this workload's warm-up within several
//! minutes here, so it is left out.)
//!
//! `timer::pending_100k` keeps 100 000 timers pending at once: 100 000 green
//! threads / tasks, each doing 5 rounds of a sleep inside a 60 s timeout
//! (`with_timeout` / `tokio::time::timeout`), so every round inserts two
//! timers per thread (the sleep's, which fires, and the scope's, which is
//! cancelled) while the other 99 999 threads' are pending. One iteration =
//! one round of one thread; the time is the runtime thread's CPU time
//! (the deadlines are spread over seconds, so wall time would mostly be
//! waiting).

#![allow(missing_docs)] // criterion_group! generates undocumented functions

use std::time::{Duration, Instant};

use criterion::{black_box, criterion_group, criterion_main, Criterion};

const THREADS: u64 = 10_000;
const ROUNDS: u64 = 10;
/// Deadline of round `r` of thread `i`: all distinct, interleaved across threads.
fn offset(r: u64, i: u64) -> Duration {
    Duration::from_nanos(r * 200_000 + i * 10)
}

fn with_timeout_fast_path(c: &mut Criterion) {
    let mut rt = coro_benches::coro_rt();
    c.bench_function("timer::with_timeout_ready/coro", |b| {
        b.iter_custom(|iters| {
            rt.block_on(move || {
                let t = Instant::now();
                for i in 0..iters {
                    black_box(coro::with_timeout(Duration::from_secs(1), || black_box(i)).unwrap());
                }
                t.elapsed()
            })
        })
    });
    let tokio = coro_benches::tokio_rt();
    c.bench_function("timer::with_timeout_ready/tokio", |b| {
        b.iter_custom(|iters| {
            tokio.block_on(async move {
                let t = Instant::now();
                for i in 0..iters {
                    let r =
                        tokio::time::timeout(Duration::from_secs(1), async { black_box(i) }).await;
                    black_box(r.unwrap());
                }
                t.elapsed()
            })
        })
    });
}

fn timers_100k(c: &mut Criterion) {
    let mut g = c.benchmark_group("timer::insert_fire_100k");
    g.sample_size(10);
    // Keep every stack in the pool between iterations: the bench measures
    // timers, not mapping 10 000 fresh stacks each time.
    let mut rt = coro::Runtime::builder()
        .latency_warning(None)
        .stack_pool(THREADS as usize + 16)
        .build()
        .unwrap();
    g.bench_function("coro", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                total += rt.block_on(|| {
                    let t = Instant::now();
                    let base = coro::clock::now() + Duration::from_millis(1);
                    let hs: Vec<_> = (0..THREADS)
                        .map(|i| {
                            coro::spawn(move || {
                                for r in 0..ROUNDS {
                                    coro::sleep_until(base + offset(r, i)).unwrap()
                                }
                            })
                        })
                        .collect();
                    for h in hs {
                        h.join().unwrap();
                    }
                    t.elapsed()
                });
            }
            total
        })
    });
    let tokio = coro_benches::tokio_rt();
    g.bench_function("tokio", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                total += tokio.block_on(async {
                    let t = Instant::now();
                    let base = tokio::time::Instant::now() + Duration::from_millis(1);
                    let hs: Vec<_> = (0..THREADS)
                        .map(|i| {
                            tokio::spawn(async move {
                                for r in 0..ROUNDS {
                                    tokio::time::sleep_until(base + offset(r, i)).await
                                }
                            })
                        })
                        .collect();
                    for h in hs {
                        h.await.unwrap();
                    }
                    t.elapsed()
                });
            }
            total
        })
    });
    g.finish();
}

const PENDING: u64 = 100_000;
const PENDING_ROUNDS: u64 = 5;

/// Deadline offset of round `r` of thread `i` for `pending_100k`: rounds
/// 200 ms apart, threads spread over 100 ms inside a round.
fn pending_offset(r: u64, i: u64) -> Duration {
    Duration::from_micros(300_000 + r * 200_000 + i)
}

fn timers_pending_100k(c: &mut Criterion) {
    let mut g = c.benchmark_group("timer::pending_100k");
    g.sample_size(10);
    let per =
        |cpu: Duration, iters: u64| cpu.mul_f64(iters as f64 / (PENDING * PENDING_ROUNDS) as f64);
    let mut rt = coro_benches::coro_rt();
    g.bench_function("coro", |b| {
        b.iter_custom(|iters| {
            let reps = iters.div_ceil(PENDING * PENDING_ROUNDS);
            let mut cpu = Duration::ZERO;
            for _ in 0..reps {
                cpu += rt.block_on(|| {
                    let t = coro_benches::thread_cpu();
                    let base = coro::clock::now();
                    let hs: Vec<_> = (0..PENDING)
                        .map(|i| {
                            coro::spawn(move || {
                                for r in 0..PENDING_ROUNDS {
                                    let d = base + pending_offset(r, i);
                                    coro::with_timeout(Duration::from_secs(60), || {
                                        coro::sleep_until(d)
                                    })
                                    .unwrap()
                                    .unwrap();
                                }
                            })
                        })
                        .collect();
                    for h in hs {
                        h.join().unwrap();
                    }
                    assert_eq!(coro::stats().pending_timers, 0);
                    coro_benches::thread_cpu() - t
                });
            }
            per(cpu, iters / reps)
        })
    });
    let tokio = coro_benches::tokio_rt();
    g.bench_function("tokio", |b| {
        b.iter_custom(|iters| {
            let reps = iters.div_ceil(PENDING * PENDING_ROUNDS);
            let mut cpu = Duration::ZERO;
            for _ in 0..reps {
                cpu += tokio.block_on(async {
                    let t = coro_benches::thread_cpu();
                    let base = tokio::time::Instant::now();
                    let hs: Vec<_> = (0..PENDING)
                        .map(|i| {
                            tokio::spawn(async move {
                                for r in 0..PENDING_ROUNDS {
                                    let d = base + pending_offset(r, i);
                                    tokio::time::timeout(
                                        Duration::from_secs(60),
                                        tokio::time::sleep_until(d),
                                    )
                                    .await
                                    .unwrap();
                                }
                            })
                        })
                        .collect();
                    for h in hs {
                        h.await.unwrap();
                    }
                    coro_benches::thread_cpu() - t
                });
            }
            per(cpu, iters / reps)
        })
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1));
    targets = with_timeout_fast_path, timers_100k, timers_pending_100k
}
criterion_main!(benches);
