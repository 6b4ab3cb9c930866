//! tokio-postgres on coro: the connection future on a green thread of its
//! own, queries from several green threads through one client (pipelined on
//! the one connection), a query bounded by `with_timeout` and then cancelled
//! on the server. The socket is a coro `TcpStream` (the `tokio-io` feature:
//! tokio's io traits, no tokio runtime).
//!
//! Run it against a PostgreSQL server that accepts `user=postgres` (trust
//! or a password in the connection string):
//!
//! ```text
//! cargo run -p coro-examples --example postgres -- 'host=127.0.0.1 port=5432 user=postgres'
//! ```

use std::rc::Rc;
use std::time::Duration;

use coro::future::block_on;
use coro::net::TcpStream;
use tokio_postgres::{Config, NoTls};

type Error = Box<dyn std::error::Error>;

fn main() -> Result<(), Error> {
    let conninfo = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "host=127.0.0.1 user=postgres".into());
    let config: Config = conninfo.parse()?;
    coro::run(move || -> Result<(), Error> {
        let (host, port) = match (config.get_hosts().first(), config.get_ports().first()) {
            (Some(tokio_postgres::config::Host::Tcp(h)), p) => (h.clone(), *p.unwrap_or(&5432)),
            _ => return Err("give a TCP host (host=127.0.0.1)".into()),
        };
        let stream = TcpStream::connect((host.as_str(), port))?;
        stream.set_nodelay(true)?;
        let (client, conn) = block_on(config.connect_raw(stream, NoTls))??;
        let conn = coro::spawn(move || block_on(conn));
        let client = Rc::new(client);

        // Four green threads share the client; their queries are pipelined.
        let workers: Vec<_> = (0..4)
            .map(|w| {
                let client = client.clone();
                coro::spawn(move || -> Result<i64, Error> {
                    let row = block_on(client.query_one("SELECT $1::INT8 * 2", &[&(w as i64)]))??;
                    Ok(row.get(0))
                })
            })
            .collect();
        for w in workers {
            println!("worker result: {}", w.join().map_err(|e| e.to_string())??);
        }

        // A slow query bounded by a timeout, then cancelled on the server.
        let r = coro::with_timeout(Duration::from_millis(200), || {
            block_on(client.query("SELECT pg_sleep(5)", &[]))
        });
        println!(
            "pg_sleep(5) under a 200 ms timeout: {}",
            if r.is_err() { "timed out" } else { "finished?" }
        );
        let cancel = TcpStream::connect((host.as_str(), port))?;
        block_on(client.cancel_token().cancel_query_raw(cancel, NoTls))??;
        let row = block_on(client.query_one("SELECT version()", &[]))??;
        println!("still connected: {}", row.get::<_, &str>(0));

        drop(client);
        conn.join().map_err(|e| e.to_string())???;
        Ok(())
    })
}
