//! sqlx (its PostgreSQL pool on tokio) through the bridge, against a real
//! PostgreSQL server the test starts (`util::postgres`).

use std::time::{Duration, Instant};

use sqlx::postgres::{PgConnectOptions, PgConnection, PgPool, PgPoolOptions};
use sqlx::Connection as _;

use crate::util;
use crate::util::postgres::Server;

/// How to connect to `server`.
fn options(server: &Server) -> PgConnectOptions {
    PgConnectOptions::new()
        .host("127.0.0.1")
        .port(server.addr.port())
        .username("postgres")
        .database("postgres")
}

/// A pool of at most `max` connections to `server`, made on the bridge
/// (its maintenance tasks live there).
fn pool(server: &Server, max: u32) -> PgPool {
    let options = options(server);
    coro::tokio::run(async move {
        PgPoolOptions::new()
            .max_connections(max)
            .connect_with(options)
            .await
    })
    .unwrap()
    .unwrap()
}

/// How many backends of the server are running `query` now (asked with
/// psql, on coro's blocking pool).
fn running(server: &Server, query: &str) -> usize {
    let sql = format!(
        "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query = '{query}'"
    );
    let addr = server.addr;
    let out = coro::blocking(move || Server::psql_at(addr, &sql)).unwrap();
    out.unwrap().parse().unwrap()
}

#[test]
fn fifty_green_threads_share_a_pool_of_five_connections() {
    const N: i32 = 50;
    let server = Server::start();
    util::run(move || {
        let pool = pool(&server, 5);
        let workers: Vec<_> = (0..N)
            .map(|i| {
                let pool = pool.clone();
                coro::spawn(move || {
                    coro::tokio::run(async move {
                        let mut sum = 0;
                        for q in 0..20 {
                            sum += sqlx::query_scalar::<_, i32>("SELECT $1::INT4 * 1000 + $2")
                                .bind(i)
                                .bind(q)
                                .fetch_one(&pool)
                                .await?;
                        }
                        Ok::<_, sqlx::Error>(sum)
                    })
                })
            })
            .collect();
        for (i, w) in (0..N).zip(workers) {
            let sum = w.join().unwrap().unwrap().unwrap();
            assert_eq!(sum, (0..20).map(|q| i * 1000 + q).sum::<i32>());
        }
        let p = pool.clone();
        coro::tokio::run(async move { p.close().await }).unwrap();
        drop(server);
    });
}

#[test]
fn a_query_under_a_timeout_returns_at_once_and_the_server_stops_it() {
    const SLEEP: &str = "SELECT pg_sleep(60)";
    let server = Server::start();
    util::run(move || {
        // A connection of its own, moved into the call, so that the abort
        // drops it (a pool would keep a connection dropped mid-query and
        // wait for the query to end before reusing it).
        let options = options(&server);
        let mut conn = coro::tokio::run(async move { PgConnection::connect_with(&options).await })
            .unwrap()
            .unwrap();
        let t = Instant::now();
        let r = coro::with_timeout(Duration::from_millis(100), || {
            coro::tokio::run(async move { sqlx::query(SLEEP).execute(&mut conn).await })
        });
        let waited = t.elapsed();
        assert!(matches!(r, Err(coro::Timeout)), "{r:?}");
        assert!(waited >= Duration::from_millis(100), "{waited:?}");
        assert!(waited < crate::AT_ONCE, "{waited:?}");
        // The query's future was dropped on the tokio side with its
        // connection: the server sees the client gone and stops the query
        // (long before its minute).
        util::wait_until("PostgreSQL to stop the abandoned query", || {
            running(&server, SLEEP) == 0
        });
        // The bridge goes on serving.
        let pool = pool(&server, 1);
        let n = coro::tokio::run(async move {
            sqlx::query_scalar::<_, i32>("SELECT 41 + 1")
                .fetch_one(&pool)
                .await
        });
        assert_eq!(n.unwrap().unwrap(), 42);
        drop(server);
    });
}
