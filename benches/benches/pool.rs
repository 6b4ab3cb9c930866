//! Pools and executors: coro's `Pool`, `GroupPool` and `PeriodicExecutor`
//! beside their peers, each on its own runtime.
//!
//! * `pool::checkout_return`: one uncontended `get` and drop of the guard
//!   (validation on checkout on in every pool, with a no-op check): coro's
//!   `Pool` on a coro green thread, r2d2's on a plain OS thread, deadpool's
//!   managed pool on tokio's current-thread runtime.
//! * `pool::group_get_close`: `GroupPool::get` + dropping the session, with
//!   one live worker already spawned (no peer: Passenger's pool is C++
//!   inside a web server).
//! * `executor::wake_latency`: from `wake()` to the target having run, with
//!   an hour-long interval; the tokio peer is the same loop written the
//!   usual way (a task in `select!` over `sleep` and `Notify`).
//!
//! Run: `cargo bench -p coro-benches --bench pool`.

#![allow(missing_docs)] // criterion_group! generates undocumented functions

use std::cell::Cell;
use std::convert::Infallible;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{black_box, criterion_group, criterion_main, Criterion};

const HOUR: Duration = Duration::from_secs(3600);

struct CoroConns;
impl coro::sync::Manager for CoroConns {
    type Connection = u64;
    type Error = Infallible;
    fn connect(&self) -> Result<u64, Infallible> {
        Ok(7)
    }
    fn is_valid(&self, conn: &mut u64) -> Result<(), Infallible> {
        black_box(conn);
        Ok(())
    }
}

#[derive(Debug)]
struct NoError;
impl std::fmt::Display for NoError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("no error")
    }
}
impl std::error::Error for NoError {}

struct R2d2Conns;
impl r2d2::ManageConnection for R2d2Conns {
    type Connection = u64;
    type Error = NoError;
    fn connect(&self) -> Result<u64, NoError> {
        Ok(7)
    }
    fn is_valid(&self, conn: &mut u64) -> Result<(), NoError> {
        black_box(conn);
        Ok(())
    }
    fn has_broken(&self, _: &mut u64) -> bool {
        false
    }
}

struct DeadpoolConns;
impl deadpool::managed::Manager for DeadpoolConns {
    type Type = u64;
    type Error = Infallible;
    async fn create(&self) -> Result<u64, Infallible> {
        Ok(7)
    }
    async fn recycle(
        &self,
        conn: &mut u64,
        _: &deadpool::managed::Metrics,
    ) -> deadpool::managed::RecycleResult<Infallible> {
        black_box(conn);
        Ok(())
    }
}

fn checkout_return(c: &mut Criterion) {
    let mut g = c.benchmark_group("pool::checkout_return");
    let mut rt = coro_benches::coro_rt();
    g.bench_function("coro", |b| {
        b.iter_custom(|iters| {
            rt.block_on(move || {
                let pool = coro::sync::Pool::builder()
                    .max_size(Some(1))
                    .build(CoroConns)
                    .unwrap();
                drop(pool.get().unwrap());
                let t = Instant::now();
                for _ in 0..iters {
                    let c = black_box(&pool).get().unwrap();
                    black_box(&*c);
                }
                t.elapsed()
            })
        })
    });
    let r2 = r2d2::Pool::builder().max_size(1).build(R2d2Conns).unwrap();
    g.bench_function("r2d2", |b| {
        b.iter(|| {
            let c = black_box(&r2).get().unwrap();
            black_box(&*c);
        })
    });
    let trt = coro_benches::tokio_rt();
    let dp = deadpool::managed::Pool::<DeadpoolConns>::builder(DeadpoolConns)
        .max_size(1)
        .build()
        .unwrap();
    g.bench_function("deadpool", |b| {
        b.iter_custom(|iters| {
            trt.block_on(async {
                drop(dp.get().await.unwrap());
                let t = Instant::now();
                for _ in 0..iters {
                    let c = black_box(&dp).get().await.unwrap();
                    black_box(&*c);
                }
                t.elapsed()
            })
        })
    });
    g.finish();
}

struct OneWorker;
impl coro::sync::Spawner for OneWorker {
    type Key = u8;
    type Worker = u64;
    type Conn = u64;
    type Error = Infallible;
    fn spawn(&self, _: &u8) -> Result<u64, Infallible> {
        Ok(1)
    }
    fn connect(&self, _: &u8, w: &u64) -> Result<u64, Infallible> {
        Ok(*w)
    }
}

fn group_get_close(c: &mut Criterion) {
    let mut g = c.benchmark_group("pool::group_get_close");
    let mut rt = coro_benches::coro_rt();
    g.bench_function("coro", |b| {
        b.iter_custom(|iters| {
            rt.block_on(move || {
                let pool = coro::sync::GroupPool::builder().build(OneWorker).unwrap();
                drop(pool.get(&1).unwrap()); // the live worker
                let t = Instant::now();
                for _ in 0..iters {
                    let s = black_box(&pool).get(&1).unwrap();
                    black_box(&*s);
                }
                t.elapsed()
            })
        })
    });
    g.finish();
}

fn wake_latency(c: &mut Criterion) {
    let mut g = c.benchmark_group("executor::wake_latency");
    let mut rt = coro_benches::coro_rt();
    g.bench_function("coro", |b| {
        b.iter_custom(|iters| {
            rt.block_on(move || {
                let runs = Rc::new(Cell::new(0u64));
                let r = runs.clone();
                let ex =
                    coro::sync::PeriodicExecutor::new(HOUR, Duration::ZERO, "bench", move || {
                        r.set(r.get() + 1);
                        true
                    });
                ex.open().unwrap();
                coro::yield_now();
                let t = Instant::now();
                for _ in 0..iters {
                    let before = runs.get();
                    ex.wake();
                    while runs.get() == before {
                        coro::yield_now();
                    }
                }
                let e = t.elapsed();
                ex.close();
                e
            })
        })
    });
    let trt = coro_benches::tokio_rt();
    g.bench_function("tokio", |b| {
        b.iter_custom(|iters| {
            trt.block_on(async {
                let runs = Arc::new(AtomicU64::new(0));
                let notify = Arc::new(tokio::sync::Notify::new());
                let (r, n) = (runs.clone(), notify.clone());
                let task = tokio::spawn(async move {
                    loop {
                        tokio::select! {
                            _ = tokio::time::sleep(HOUR) => {}
                            _ = n.notified() => {}
                        }
                        r.fetch_add(1, Ordering::Relaxed);
                    }
                });
                tokio::task::yield_now().await;
                let t = Instant::now();
                for _ in 0..iters {
                    let before = runs.load(Ordering::Relaxed);
                    notify.notify_one();
                    while runs.load(Ordering::Relaxed) == before {
                        tokio::task::yield_now().await;
                    }
                }
                let e = t.elapsed();
                task.abort();
                e
            })
        })
    });
    g.finish();
}

criterion_group!(benches, checkout_return, group_get_close, wake_latency);
criterion_main!(benches);
