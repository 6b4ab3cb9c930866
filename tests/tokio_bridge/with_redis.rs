//! redis (its tokio `MultiplexedConnection`) through the bridge, against a
//! real `redis-server` the test starts.

use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, AsyncTypedCommands as _, Client, RedisResult};

use crate::servers::RedisServer;
use crate::util;

/// A multiplexed connection, made on the bridge; `response_timeout` as
/// redis' own bound on each reply (`None`: none).
fn connect(server: &RedisServer, response_timeout: Option<Duration>) -> MultiplexedConnection {
    let client = Client::open(server.url()).unwrap();
    let config = AsyncConnectionConfig::new().set_response_timeout(response_timeout);
    coro::tokio::run(async move {
        client
            .get_multiplexed_async_connection_with_config(&config)
            .await
    })
    .unwrap()
    .unwrap()
}

#[test]
fn a_hundred_green_threads_share_one_multiplexed_connection() {
    const N: usize = 100;
    let server = RedisServer::start();
    util::run(move || {
        let conn = connect(&server, Some(Duration::from_secs(10)));
        let workers: Vec<_> = (0..N)
            .map(|i| {
                let mut c = conn.clone();
                coro::spawn(move || {
                    coro::tokio::run(async move {
                        let key = format!("key-{i}");
                        c.set(&key, format!("value-{i}")).await?;
                        c.get(&key).await
                    })
                })
            })
            .collect();
        for (i, w) in workers.into_iter().enumerate() {
            let got: RedisResult<Option<String>> = w.join().unwrap().unwrap();
            assert_eq!(got.unwrap(), Some(format!("value-{i}")));
        }
        // Every value is in the server, over one connection.
        let mut c = conn.clone();
        let n = coro::tokio::run(
            async move { redis::cmd("DBSIZE").query_async::<usize>(&mut c).await },
        );
        assert_eq!(n.unwrap().unwrap(), N);
        assert_eq!(
            server.info("clients", "connected_clients").as_deref(),
            Some("2")
        );
        drop(server);
    });
}

#[test]
fn a_blpop_under_a_timeout_returns_at_once_and_the_server_stops_blocking() {
    let server = RedisServer::start();
    util::run(move || {
        let shared = connect(&server, Some(Duration::from_secs(10)));
        // BLPOP blocks the connection it is sent on, in the server: a
        // connection of its own (no bound of redis' own either), moved
        // into the call, so that the abort drops it.
        let mut blocking = connect(&server, None);
        let t = Instant::now();
        let r = coro::with_timeout(Duration::from_millis(100), || {
            coro::tokio::run(async move { blocking.blpop("nothing-here", 0.0).await })
        });
        let waited = t.elapsed();
        assert!(matches!(r, Err(coro::Timeout)), "{r:?}");
        assert!(waited >= Duration::from_millis(100), "{waited:?}");
        assert!(waited < crate::AT_ONCE, "{waited:?}");
        util::wait_until("redis-server to have no client blocked", || {
            server.info("clients", "blocked_clients").as_deref() == Some("0")
        });
        // The shared connection goes on working.
        let mut c = shared.clone();
        let r = coro::tokio::run(async move {
            c.rpush("list", "item").await?;
            c.blpop("list", 0.0).await
        });
        let popped = r.unwrap().unwrap();
        assert_eq!(popped, Some(["list".to_owned(), "item".to_owned()]));
        drop(server);
    });
}

#[test]
fn a_blpop_abandoned_by_a_cancelled_scope_stops_blocking_in_the_server() {
    let server = RedisServer::start();
    util::run(move || {
        let mut blocking = connect(&server, None);
        let scope = coro::CancelScope::new();
        let s = scope.clone();
        let caller = coro::spawn(move || {
            s.run(|| coro::tokio::run(async move { blocking.blpop("nothing-here", 0.0).await }))
        });
        util::wait_until("redis-server to block the BLPOP", || {
            server.info("clients", "blocked_clients").as_deref() == Some("1")
        });
        let t = Instant::now();
        scope.cancel();
        let r = caller.join().unwrap();
        assert!(r.is_err(), "{r:?}");
        assert!(t.elapsed() < crate::AT_ONCE, "{:?}", t.elapsed());
        // The task was dropped on the tokio side with its connection: the
        // server sees the client gone and blocks nothing any more.
        util::wait_until("redis-server to see the BLPOP abandoned", || {
            server.info("clients", "blocked_clients").as_deref() == Some("0")
        });
        drop(server);
    });
}
