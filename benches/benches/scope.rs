//! Structured concurrency and cancellation, beside tokio's
//! current-thread runtime:
//!
//! * `scope::nursery_1000`: start 1 000 threads / tasks that return their
//!   index and wait for all of them: a `coro::scope` (threads borrow a
//!   local slice), plain `coro::spawn` + `join`, and tokio's `JoinSet`.
//! * `scope::cancel_blocked`: a thread blocked inside a cancel scope is
//!   cancelled by another, its blocked call fails and the scope returns:
//!   `CancelScope::run` + `cancel` (coro) against a `select!` of the
//!   blocked future with a oneshot fired by another task (tokio's idiom
//!   without tokio-util). One iteration = one cancellation, including the
//!   switches to and from the cancelled thread.
//! * `scope::cancel_in_place`: the same without a second thread: the scope
//!   cancels itself, then blocks (the machinery alone).

#![allow(missing_docs)] // criterion_group! generates undocumented functions

use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use criterion::{black_box, criterion_group, criterion_main, Criterion};

const N: usize = 1000;

fn nursery(c: &mut Criterion) {
    let mut g = c.benchmark_group("scope::nursery_1000");
    let mut rt = coro::Runtime::builder()
        .latency_warning(None)
        .stack_pool(N + 16)
        .build()
        .unwrap();
    g.bench_function("coro_scope", |b| {
        b.iter_custom(|iters| {
            rt.block_on(move || {
                let input: Vec<usize> = (0..N).collect();
                let mut out = vec![0usize; N];
                let t = Instant::now();
                for _ in 0..iters {
                    coro::scope(|s| {
                        for (slot, x) in out.iter_mut().zip(&input) {
                            s.spawn(move || *slot = black_box(*x));
                        }
                    })
                    .unwrap();
                }
                black_box(&out);
                t.elapsed()
            })
        })
    });
    g.bench_function("coro_spawn_join", |b| {
        b.iter_custom(|iters| {
            rt.block_on(move || {
                let t = Instant::now();
                for _ in 0..iters {
                    let hs: Vec<_> = (0..N).map(|i| coro::spawn(move || black_box(i))).collect();
                    for h in hs {
                        black_box(h.join().unwrap());
                    }
                }
                t.elapsed()
            })
        })
    });
    let tokio = coro_benches::tokio_rt();
    g.bench_function("tokio_joinset", |b| {
        b.iter_custom(|iters| {
            tokio.block_on(async move {
                let t = Instant::now();
                for _ in 0..iters {
                    let mut set = tokio::task::JoinSet::new();
                    for i in 0..N {
                        set.spawn(async move { black_box(i) });
                    }
                    while let Some(r) = set.join_next().await {
                        black_box(r.unwrap());
                    }
                }
                t.elapsed()
            })
        })
    });
    g.finish();
}

fn cancel_blocked(c: &mut Criterion) {
    let mut g = c.benchmark_group("scope::cancel_blocked");
    let mut rt = coro_benches::coro_rt();
    g.bench_function("coro", |b| {
        b.iter_custom(|iters| {
            rt.block_on(move || {
                // The current scope of the cancelled thread, published for
                // the canceller.
                let slot: Rc<RefCell<Option<coro::CancelScope>>> = Rc::default();
                let inside = {
                    let slot = slot.clone();
                    coro::spawn(move || {
                        for _ in 0..iters {
                            let scope = coro::CancelScope::new();
                            *slot.borrow_mut() = Some(scope.clone());
                            let r = scope.run(coro::park);
                            assert!(r.is_err());
                        }
                    })
                };
                let t = Instant::now();
                for _ in 0..iters {
                    let scope = loop {
                        if let Some(s) = slot.borrow_mut().take() {
                            break s;
                        }
                        coro::yield_now();
                    };
                    while inside.thread().state() != coro::ThreadState::Parked {
                        coro::yield_now();
                    }
                    scope.cancel();
                }
                inside.join().unwrap();
                t.elapsed()
            })
        })
    });
    let tokio = coro_benches::tokio_rt();
    g.bench_function("tokio", |b| {
        b.iter_custom(|iters| {
            let local = tokio::task::LocalSet::new();
            local.block_on(&tokio, async move {
                let slot: Rc<RefCell<Option<tokio::sync::oneshot::Sender<()>>>> = Rc::default();
                let inside = {
                    let slot = slot.clone();
                    tokio::task::spawn_local(async move {
                        for _ in 0..iters {
                            let (tx, rx) = tokio::sync::oneshot::channel();
                            *slot.borrow_mut() = Some(tx);
                            tokio::select! {
                                _ = rx => {}
                                _ = std::future::pending::<()>() => unreachable!(),
                            }
                        }
                    })
                };
                let t = Instant::now();
                for _ in 0..iters {
                    let tx = loop {
                        if let Some(tx) = slot.borrow_mut().take() {
                            break tx;
                        }
                        tokio::task::yield_now().await;
                    };
                    tx.send(()).unwrap();
                }
                inside.await.unwrap();
                t.elapsed()
            })
        })
    });
    g.finish();
}

fn cancel_in_place(c: &mut Criterion) {
    let mut g = c.benchmark_group("scope::cancel_in_place");
    let mut rt = coro_benches::coro_rt();
    g.bench_function("coro", |b| {
        b.iter_custom(|iters| {
            rt.block_on(move || {
                let t = Instant::now();
                for _ in 0..iters {
                    let scope = coro::CancelScope::new();
                    let r = scope.run(|| {
                        scope.cancel();
                        coro::park()
                    });
                    black_box(r.is_err());
                }
                t.elapsed()
            })
        })
    });
    let tokio = coro_benches::tokio_rt();
    g.bench_function("tokio", |b| {
        b.iter_custom(|iters| {
            tokio.block_on(async move {
                let t = Instant::now();
                for _ in 0..iters {
                    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
                    tx.send(()).unwrap();
                    let cancelled = tokio::select! {
                        _ = rx => true,
                        _ = std::future::pending::<()>() => false,
                    };
                    black_box(cancelled);
                }
                t.elapsed()
            })
        })
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1));
    targets = nursery, cancel_blocked, cancel_in_place
}
criterion_main!(benches);
