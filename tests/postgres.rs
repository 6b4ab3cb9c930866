//! tokio-postgres on coro's reactor against a real PostgreSQL server: no
//! tokio runtime; the connection future runs on a green thread, queries
//! run in `block_on` on others, and `with_timeout` cancels a query (the
//! connection goes on working).
//!
//! The test starts its own server (`util::postgres`): Debian's
//! `postgresql`, in a temporary directory on a free loopback port, stopped
//! at the end. If it cannot be started, the test fails saying so.

mod util;

use std::rc::Rc;
use std::time::Duration;

use coro::future::block_on;
use coro::net::TcpStream;
use tokio_postgres::{Client, Config, NoTls};
use util::postgres::Server;

/// The server's connection settings for tokio-postgres.
fn config(server: &Server) -> Config {
    let mut c = Config::new();
    c.host("127.0.0.1")
        .port(server.addr.port())
        .user("postgres")
        .dbname("postgres");
    c
}

/// The green thread that runs a connection future.
type ConnThread = coro::JoinHandle<Result<Result<(), tokio_postgres::Error>, coro::WaitError>>;

/// Connects over a coro socket; the connection future runs on a green
/// thread, whose handle is returned.
fn connect(server: &Server) -> (Rc<Client>, ConnThread) {
    let stream = TcpStream::connect(server.addr).unwrap();
    stream.set_nodelay(true).unwrap();
    let (client, conn) = block_on(config(server).connect_raw(stream, NoTls))
        .unwrap()
        .unwrap();
    let conn = coro::Builder::new()
        .name("pg-connection".into())
        .spawn(move || block_on(conn))
        .unwrap();
    (Rc::new(client), conn)
}

#[test]
fn tokio_postgres_on_coro_runs_50_green_threads_of_200_queries_and_survives_a_timeout() {
    let server = Server::start();
    util::run(move || {
        let (client, conn) = connect(&server);

        let workers: Vec<_> = (0..50i32)
            .map(|w| {
                let client = client.clone();
                coro::spawn(move || {
                    let stmt =
                        block_on(client.prepare("SELECT $1::INT4 * 1000 + $2::INT4, $3::TEXT"))
                            .unwrap()
                            .unwrap();
                    for q in 0..200i32 {
                        let tag = format!("w{w}q{q}");
                        let row = block_on(client.query_one(&stmt, &[&w, &q, &tag]))
                            .unwrap()
                            .unwrap();
                        assert_eq!(row.get::<_, i32>(0), w * 1000 + q);
                        assert_eq!(row.get::<_, &str>(1), tag);
                    }
                })
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }

        // A query cut short by with_timeout: it fails with a timeout...
        let t = coro::clock::now();
        let r = coro::with_timeout(Duration::from_millis(200), || {
            block_on(client.query("SELECT pg_sleep(10)", &[]))
        });
        assert!(matches!(r, Err(coro::Timeout)), "{r:?}");
        let waited = t.elapsed();
        assert!(
            waited >= Duration::from_millis(200) && waited < Duration::from_secs(5),
            "{waited:?}"
        );
        // ... the server stops it (PostgreSQL's cancel request, on a new
        // coro socket) and the connection works on.
        let cancel = TcpStream::connect(server.addr).unwrap();
        block_on(client.cancel_token().cancel_query_raw(cancel, NoTls))
            .unwrap()
            .unwrap();
        let row = block_on(client.query_one("SELECT 41 + 1", &[]))
            .unwrap()
            .unwrap();
        assert_eq!(row.get::<_, i32>(0), 42);

        // Dropping the client ends the connection future.
        drop(client);
        conn.join().unwrap().unwrap().unwrap();
        assert_eq!(coro::stats().io_sources, 0);
        drop(server);
    });
}
