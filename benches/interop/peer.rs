//! The servers and clients of the interop benchmark, one binary
//! so that both sides are built the same way:
//!
//! ```text
//! interop-peer hyper-coro ADDR        # hyper HTTP/1.1 on coro (as examples/hyper_server)
//! interop-peer hyper-tokio ADDR       # the same service on tokio's current-thread runtime
//! interop-peer pg-coro CONNINFO N Q   # N green threads x Q queries on one tokio-postgres connection
//! interop-peer pg-tokio CONNINFO N Q  # N tokio tasks x Q queries, current-thread runtime
//! ```
//!
//! The pg modes print `queries/s` and the CPU seconds the process used.
//! `benches/interop/run.sh` drives them (wrk for hyper) and alternates.

use std::convert::Infallible;
use std::rc::Rc;
use std::time::Instant;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Request, Response};

type Error = Box<dyn std::error::Error>;

async fn hello(_: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    Ok(Response::new(Full::new(Bytes::from_static(
        b"Hello, World!",
    ))))
}

fn hyper_coro(addr: String) -> Result<(), Error> {
    coro::Runtime::builder()
        .latency_warning(None)
        .build()?
        .block_on(move || -> Result<(), Error> {
            let listener = coro::net::TcpListener::bind(&addr)?;
            loop {
                let (stream, _) = listener.accept()?;
                stream.set_nodelay(true)?;
                coro::spawn(move || {
                    let conn = hyper::server::conn::http1::Builder::new()
                        .serve_connection(stream, hyper::service::service_fn(hello));
                    let _ = coro::future::block_on(conn);
                });
            }
        })
}

fn hyper_tokio(addr: String) -> Result<(), Error> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async move {
        let listener = tokio::net::TcpListener::bind(&addr).await?;
        loop {
            let (stream, _) = listener.accept().await?;
            stream.set_nodelay(true)?;
            tokio::task::spawn_local(async move {
                let conn = hyper::server::conn::http1::Builder::new().serve_connection(
                    hyper_util::rt::TokioIo::new(stream),
                    hyper::service::service_fn(hello),
                );
                let _ = conn.await;
            });
        }
    })
}

fn pg_addr(conninfo: &str) -> Result<(tokio_postgres::Config, String), Error> {
    let config: tokio_postgres::Config = conninfo.parse()?;
    let host = match config.get_hosts().first() {
        Some(tokio_postgres::config::Host::Tcp(h)) => h.clone(),
        _ => return Err("a TCP host is needed".into()),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    Ok((config, format!("{host}:{port}")))
}

const QUERY: &str = "SELECT $1::INT4 + 1";

fn pg_coro(conninfo: &str, n: i32, q: i32) -> Result<f64, Error> {
    let (config, addr) = pg_addr(conninfo)?;
    coro::Runtime::builder()
        .latency_warning(None)
        .build()?
        .block_on(move || -> Result<f64, Error> {
            use coro::future::block_on;
            let stream = coro::net::TcpStream::connect(addr.as_str())?;
            stream.set_nodelay(true)?;
            let (client, conn) = block_on(config.connect_raw(stream, tokio_postgres::NoTls))??;
            let conn = coro::spawn(move || block_on(conn));
            let client = Rc::new(client);
            let stmt = block_on(client.prepare(QUERY))??;
            let t = Instant::now();
            let workers: Vec<_> = (0..n)
                .map(|w| {
                    let (client, stmt) = (client.clone(), stmt.clone());
                    coro::spawn(move || {
                        for i in 0..q {
                            let row = block_on(client.query_one(&stmt, &[&(w + i)]))
                                .unwrap()
                                .unwrap();
                            assert_eq!(row.get::<_, i32>(0), w + i + 1);
                        }
                    })
                })
                .collect();
            for w in workers {
                w.join().map_err(|e| e.to_string())?;
            }
            let qps = f64::from(n * q) / t.elapsed().as_secs_f64();
            drop((client, stmt));
            conn.join().map_err(|e| e.to_string())???;
            Ok(qps)
        })
}

fn pg_tokio(conninfo: &str, n: i32, q: i32) -> Result<f64, Error> {
    let (config, addr) = pg_addr(conninfo)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async move {
        let stream = tokio::net::TcpStream::connect(addr.as_str()).await?;
        stream.set_nodelay(true)?;
        let (client, conn) = config.connect_raw(stream, tokio_postgres::NoTls).await?;
        let conn = tokio::task::spawn_local(conn);
        let client = Rc::new(client);
        let stmt = client.prepare(QUERY).await?;
        let t = Instant::now();
        let workers: Vec<_> = (0..n)
            .map(|w| {
                let (client, stmt) = (client.clone(), stmt.clone());
                tokio::task::spawn_local(async move {
                    for i in 0..q {
                        let row = client.query_one(&stmt, &[&(w + i)]).await.unwrap();
                        assert_eq!(row.get::<_, i32>(0), w + i + 1);
                    }
                })
            })
            .collect();
        for w in workers {
            w.await?;
        }
        let qps = f64::from(n * q) / t.elapsed().as_secs_f64();
        drop((client, stmt));
        conn.await??;
        Ok(qps)
    })
}

fn cpu_seconds() -> f64 {
    let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes a `rusage` into the pointer it is given,
    // which points at one (zeroed, so initialized either way).
    let ru = unsafe {
        libc::getrusage(libc::RUSAGE_SELF, ru.as_mut_ptr());
        ru.assume_init()
    };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    t(ru.ru_utime) + t(ru.ru_stime)
}

fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize| args.get(i).cloned().ok_or("missing argument (see --help)");
    match args.first().map(String::as_str) {
        Some("hyper-coro") => hyper_coro(arg(1)?),
        Some("hyper-tokio") => hyper_tokio(arg(1)?),
        Some(m @ ("pg-coro" | "pg-tokio")) => {
            let (n, q) = (arg(2)?.parse()?, arg(3)?.parse()?);
            let qps = if m == "pg-coro" {
                pg_coro(&arg(1)?, n, q)?
            } else {
                pg_tokio(&arg(1)?, n, q)?
            };
            let cpu = cpu_seconds();
            println!(
                "{m} queries/s {qps:.0} cpu_us_per_query {:.2}",
                cpu * 1e6 / f64::from(n * q)
            );
            Ok(())
        }
        _ => Err(
            "usage: interop-peer hyper-coro|hyper-tokio ADDR | pg-coro|pg-tokio CONNINFO N Q"
                .into(),
        ),
    }
}
