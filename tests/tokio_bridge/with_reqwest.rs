//! reqwest (rustls on ring, no OpenSSL) through the bridge, against the
//! test's own HTTP server.

use std::time::{Duration, Instant};

use crate::calls::Ticker;
use crate::servers::{Answer, HttpServer};
use crate::util;

/// A reqwest client that ignores proxy settings of the environment.
pub fn client() -> reqwest::Client {
    // rustls' provider: ring (the `rustls-no-provider` feature leaves the
    // choice to the program). Once per process; later calls find it set.
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder().no_proxy().build().unwrap()
}

/// `GET url` through the bridge: the body.
fn get(client: &reqwest::Client, url: String) -> Result<String, coro::tokio::JoinError> {
    let client = client.clone();
    coro::tokio::run(async move {
        let resp = client.get(url).send().await.unwrap();
        assert_eq!(resp.status(), 200);
        resp.text().await.unwrap()
    })
}

#[test]
fn two_hundred_green_threads_get_together_while_another_keeps_ticking() {
    const N: usize = 200;
    let server = HttpServer::start(Answer::After(Duration::from_millis(300)));
    util::run(move || {
        let client = client();
        // Warm-up: the bridge's runtime, the client's pool.
        assert_eq!(get(&client, server.url("/warm")).unwrap(), "ok");
        let ticker = Ticker::start(Duration::from_millis(10));
        let t = Instant::now();
        let getters: Vec<_> = (0..N)
            .map(|i| {
                let (client, url) = (client.clone(), server.url(&format!("/{i}")));
                coro::spawn(move || get(&client, url))
            })
            .collect();
        let ticks_at_start = ticker.ticks();
        for g in getters {
            assert_eq!(g.join().unwrap().unwrap(), "ok");
        }
        let took = t.elapsed();
        let ticks = ticker.stop() - ticks_at_start;
        assert_eq!(server.requests(), N + 1);
        // Each answer takes 300 ms: together, not one after another
        // (200 x 300 ms = 60 s). Bounded loosely, for a loaded machine;
        // the bridge's benchmark has the figure.
        assert!(took >= Duration::from_millis(300), "{took:?}");
        assert!(took < Duration::from_secs(20), "{N} GETs took {took:?}");
        // The runtime ran the ticker all along: a call that held the OS
        // thread would have stopped it for 300 ms each.
        assert!(ticks >= 5, "the ticker ticked {ticks} times in {took:?}");
    });
}

#[test]
fn a_get_under_a_timeout_returns_at_once_and_the_server_sees_the_connection_closed() {
    let server = HttpServer::start(Answer::Never);
    util::run(move || {
        let client = client();
        coro::tokio::run(async {}).unwrap(); // started
        let url = server.url("/never");
        let t = Instant::now();
        let r = coro::with_timeout(Duration::from_millis(50), || {
            let client = client.clone();
            coro::tokio::run(async move { client.get(url).send().await.map(|r| r.status()) })
        });
        let waited = t.elapsed();
        assert!(matches!(r, Err(coro::Timeout)), "{r:?}");
        assert!(waited >= Duration::from_millis(50), "{waited:?}");
        assert!(waited < crate::AT_ONCE, "{waited:?}");
        // The request was abandoned on the tokio side: its connection is
        // closed, not kept for the client's pool.
        util::wait_until("the server to see the connection closed", || {
            server.closed() == 1
        });
        assert_eq!(server.requests(), 1);
        drop(client);
    });
}
