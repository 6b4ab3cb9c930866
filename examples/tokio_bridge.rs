//! Clients that need a tokio runtime (reqwest, redis) called from green
//! threads through the tokio bridge (`coro::tokio`, the `tokio-bridge`
//! feature): each client is built once and cloned into each call's
//! `async move` block; only the calling green thread waits for a call, and
//! a call under `with_timeout` is abandoned (its tokio task dropped) when
//! the deadline passes.
//!
//! The HTTP part needs nothing: the example serves itself, on a green
//! thread, an HTTP/1.1 answer that takes 100 ms (and one that never
//! comes). The redis part runs when a server's URL is given:
//!
//! ```text
//! cargo run -p coro-examples --features tokio-bridge --example tokio_bridge
//! cargo run -p coro-examples --features tokio-bridge --example tokio_bridge -- redis://127.0.0.1:6379/
//! ```

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use coro::net::{TcpListener, TcpStream};
use redis::AsyncTypedCommands as _;

type Error = Box<dyn std::error::Error>;

/// How many green threads make a request at once.
const CALLERS: usize = 100;

fn main() -> Result<(), Error> {
    let redis_url = std::env::args().nth(1);
    // rustls' crypto provider: reqwest is built here without one of its
    // own (`rustls-no-provider`), so the program picks ring.
    let _ = rustls::crypto::ring::default_provider().install_default();
    coro::run(move || -> Result<(), Error> {
        let addr = serve_slowly()?;
        let client = reqwest::Client::builder().no_proxy().build()?;

        // CALLERS green threads each GET a page that takes 100 ms: together
        // they take about 100 ms, not CALLERS x 100 ms.
        let t = Instant::now();
        let callers: Vec<_> = (0..CALLERS)
            .map(|i| {
                let client = client.clone();
                let url = format!("http://{addr}/slow/{i}");
                coro::spawn(move || {
                    coro::tokio::run(async move { client.get(url).send().await?.text().await })
                })
            })
            .collect();
        for c in callers {
            let body = c.join().map_err(|e| e.to_string())???;
            assert_eq!(body, "ok");
        }
        println!("{CALLERS} GETs of a 100 ms page: {:?}", t.elapsed());

        // A request that never gets an answer, bounded by with_timeout: the
        // deadline ends the wait, and the tokio task (with its connection)
        // is dropped.
        let url = format!("http://{addr}/never");
        let t = Instant::now();
        let r = coro::with_timeout(Duration::from_millis(50), || {
            coro::tokio::run(async move { client.get(url).send().await.map(|r| r.status()) })
        });
        println!(
            "a GET that never gets an answer: {r:?} after {:?}",
            t.elapsed()
        );

        if let Some(url) = redis_url {
            with_redis(&url)?;
        }
        Ok(())
    })
}

/// SET and GET from many green threads over one multiplexed connection,
/// and a BLPOP bounded by `with_timeout`.
fn with_redis(url: &str) -> Result<(), Error> {
    let client = redis::Client::open(url)?;
    // The connection is made on the bridge: its driver task lives there.
    let connect = || {
        let client = client.clone();
        coro::tokio::run(async move { client.get_multiplexed_async_connection().await })
    };
    let conn = connect()??;
    let t = Instant::now();
    let callers: Vec<_> = (0..CALLERS)
        .map(|i| {
            let mut conn = conn.clone();
            coro::spawn(move || {
                coro::tokio::run(async move {
                    let key = format!("coro-example-{i}");
                    conn.set(&key, i).await?;
                    let got = conn.get(&key).await?;
                    conn.del(&key).await?;
                    Ok::<_, redis::RedisError>(got)
                })
            })
        })
        .collect();
    for (i, c) in callers.into_iter().enumerate() {
        let got = c.join().map_err(|e| e.to_string())???;
        assert_eq!(got, Some(i.to_string()));
    }
    println!(
        "{CALLERS} SET+GET+DEL over one connection: {:?}",
        t.elapsed()
    );

    // BLPOP blocks the connection it is sent on: it gets its own, which
    // the abandoned call drops (the server stops blocking for it).
    let mut blocking = connect()??;
    let t = Instant::now();
    let r = coro::with_timeout(Duration::from_millis(100), || {
        coro::tokio::run(async move { blocking.blpop("coro-example-empty", 0.0).await })
    });
    println!("a BLPOP on an empty list: {r:?} after {:?}", t.elapsed());
    Ok(())
}

/// Serves HTTP/1.1 on a loopback port on green threads of this runtime:
/// `/never` gets no answer, anything else `ok` after 100 ms.
fn serve_slowly() -> std::io::Result<std::net::SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    coro::spawn(move || {
        for stream in listener.incoming().flatten() {
            coro::spawn(move || answer(stream));
        }
    });
    Ok(addr)
}

fn answer(mut stream: TcpStream) -> std::io::Result<()> {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        let n = stream.read(&mut buf)?;
        if n == 0 {
            return Ok(());
        }
        head.extend_from_slice(&buf[..n]);
        while let Some(end) = head.windows(4).position(|w| w == b"\r\n\r\n") {
            let never = head.starts_with(b"GET /never ");
            head.drain(..end + 4);
            if never {
                continue; // the client gives up and closes
            }
            coro::sleep(Duration::from_millis(100))?;
            stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")?;
        }
    }
}
