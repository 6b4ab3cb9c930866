//! The tokio bridge (`coro::tokio`), beside tokio itself. Every tokio
//! runtime here, the bridge's and the peer's, is multi-thread with 2
//! workers.
//!
//! * `tokio_bridge::round_trip`: the cost of one call of a trivial future.
//!   `bridge`: `coro::tokio::run(async { i })` on a green thread (spawned
//!   on the bridge, the green thread parked, woken from the worker through
//!   the runtime's remote inbox). `block_on_ready`: `coro::future::block_on`
//!   of a ready future on a green thread (no bridge: the floor of a green
//!   thread waiting for a future). `tokio_spawn`: `tokio::spawn(async { i
//!   }).await` inside the peer's `block_on` (a plain tokio task round
//!   trip). One iteration = one call.
//! * `tokio_bridge::reqwest/N×D`: N green threads each GET, with one
//!   shared reqwest client through the bridge, a page that a server (coro,
//!   on an OS thread of its own) answers after D; one iteration = all N
//!   done (connections are kept alive between iterations, as a client's
//!   pool does). `tokio`: the same N GETs as N tokio tasks of the peer
//!   runtime. The wall time stays near D plus the bridge's cost, not
//!   N × D / pool size.
//!
//! Run: `cargo bench -p coro-benches --bench tokio_bridge`.

#![allow(missing_docs)] // criterion_group! generates undocumented functions

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use coro::net::{TcpListener, TcpStream};
use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion};

const WORKERS: usize = 2;

/// The peer: tokio's multi-thread runtime with the bridge's worker count.
fn tokio_multi() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(WORKERS)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// Starts the bridge with the peer's worker count (once per process).
fn bridge() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        coro::tokio::Builder::new()
            .worker_threads(WORKERS)
            .start()
            .expect("the tokio bridge")
    });
}

fn round_trip(c: &mut Criterion) {
    bridge();
    let mut g = c.benchmark_group("tokio_bridge::round_trip");
    let mut rt = coro_benches::coro_rt();
    g.bench_function("bridge", |b| {
        b.iter_custom(|iters| {
            rt.block_on(move || {
                let t = Instant::now();
                for i in 0..iters {
                    black_box(coro::tokio::run(async move { black_box(i) }).unwrap());
                }
                t.elapsed()
            })
        })
    });
    g.bench_function("block_on_ready", |b| {
        b.iter_custom(|iters| {
            rt.block_on(move || {
                let t = Instant::now();
                for i in 0..iters {
                    black_box(coro::future::block_on(std::future::ready(black_box(i))).unwrap());
                }
                t.elapsed()
            })
        })
    });
    let tk = tokio_multi();
    g.bench_function("tokio_spawn", |b| {
        b.iter_custom(|iters| {
            tk.block_on(async move {
                let t = Instant::now();
                for i in 0..iters {
                    black_box(tokio::spawn(async move { black_box(i) }).await.unwrap());
                }
                t.elapsed()
            })
        })
    });
    g.finish();
}

/// An HTTP/1.1 server on an OS thread of its own (a coro runtime, a green
/// thread per connection) that answers every request with `ok` after
/// `delay`, keeping the connection alive. Runs until the process ends.
fn slow_server(delay: Duration) -> SocketAddr {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut rt = coro_benches::coro_rt();
        rt.block_on(move || {
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            for stream in listener.incoming().flatten() {
                coro::spawn(move || serve(stream, delay));
            }
        })
    });
    rx.recv().unwrap()
}

fn serve(mut stream: TcpStream, delay: Duration) -> std::io::Result<()> {
    stream.set_nodelay(true)?;
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = stream.read(&mut buf)?;
        if n == 0 {
            return Ok(());
        }
        head.extend_from_slice(&buf[..n]);
        while let Some(end) = head.windows(4).position(|w| w == b"\r\n\r\n") {
            head.drain(..end + 4);
            coro::sleep(delay)?;
            stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")?;
        }
    }
}

fn client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .no_proxy()
        .pool_max_idle_per_host(usize::MAX)
        .build()
        .expect("reqwest client")
}

fn reqwest_calls(c: &mut Criterion) {
    bridge();
    let mut g = c.benchmark_group("tokio_bridge::reqwest");
    g.sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5));
    let mut rt = coro_benches::coro_rt();
    let tk = tokio_multi();
    for (n, delay) in [
        (1000, Duration::from_millis(100)),
        (200, Duration::from_millis(300)),
    ] {
        let addr = slow_server(delay);
        let url = format!("http://{addr}/");
        let name = format!("{n}x{}ms", delay.as_millis());
        let http = client();
        g.bench_function(BenchmarkId::new("bridge", &name), |b| {
            b.iter_custom(|iters| {
                let (http, url) = (http.clone(), url.clone());
                rt.block_on(move || {
                    let t = Instant::now();
                    for _ in 0..iters {
                        let getters: Vec<_> = (0..n)
                            .map(|_| {
                                let (http, url) = (http.clone(), url.clone());
                                coro::spawn(move || {
                                    coro::tokio::run(async move {
                                        http.get(url).send().await?.text().await
                                    })
                                })
                            })
                            .collect();
                        for g in getters {
                            assert_eq!(g.join().unwrap().unwrap().unwrap(), "ok");
                        }
                    }
                    t.elapsed()
                })
            })
        });
        let http = client();
        g.bench_function(BenchmarkId::new("tokio", &name), |b| {
            b.iter_custom(|iters| {
                let (http, url) = (http.clone(), url.clone());
                tk.block_on(async move {
                    let t = Instant::now();
                    for _ in 0..iters {
                        let getters: Vec<_> = (0..n)
                            .map(|_| {
                                let (http, url) = (http.clone(), url.clone());
                                tokio::spawn(
                                    async move { http.get(url).send().await?.text().await },
                                )
                            })
                            .collect();
                        for g in getters {
                            assert_eq!(g.await.unwrap().unwrap(), "ok");
                        }
                    }
                    t.elapsed()
                })
            })
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    targets = round_trip, reqwest_calls
}
criterion_main!(benches);
