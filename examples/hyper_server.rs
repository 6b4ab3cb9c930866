//! A hyper 1.x HTTP/1.1 server on coro: one green thread per connection,
//! hyper's connection future run by `coro::future::block_on` on it, the
//! socket read and written through coro's reactor (the `hyper` feature), a
//! header-read timeout on coro's timers (`CoroTimer`). No tokio runtime.
//!
//! Run it with
//!
//! ```text
//! cargo run --release -p coro-examples --example hyper_server -- 127.0.0.1:3000
//! ```
//!
//! (the address is optional) and ask it from another terminal:
//!
//! ```text
//! curl http://127.0.0.1:3000/                        # hello
//! curl --data-binary @Cargo.lock http://127.0.0.1:3000/echo   # the body, streamed back
//! ```
//!
//! Ctrl-C stops it.

use std::convert::Infallible;
use std::time::Duration;

use bytes::Bytes;
use coro::net::{CoroTimer, TcpListener};
use http_body_util::{combinators::UnsyncBoxBody, BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};

type Body = UnsyncBoxBody<Bytes, hyper::Error>;

async fn handle(req: Request<Incoming>) -> Result<Response<Body>, Infallible> {
    Ok(match req.uri().path() {
        // The request body is streamed back as it arrives.
        "/echo" => Response::new(req.into_body().boxed_unsync()),
        _ => Response::new(
            Full::new(Bytes::from_static(b"Hello from hyper on coro\n"))
                .map_err(|e: Infallible| match e {})
                .boxed_unsync(),
        ),
    })
}

fn main() -> std::io::Result<()> {
    coro_examples::log_to_stderr();
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:3000".into());
    coro::run(move || {
        let listener = TcpListener::bind(&addr)?;
        eprintln!(
            "hyper_server: listening on http://{}",
            listener.local_addr()?
        );
        coro_examples::accept_loop(&listener, "hyper_server", |stream, _peer| {
            stream.set_nodelay(true)?;
            coro::Builder::new().spawn(move || {
                let conn = hyper::server::conn::http1::Builder::new()
                    .timer(CoroTimer)
                    .header_read_timeout(Duration::from_secs(30))
                    .serve_connection(stream, hyper::service::service_fn(handle));
                if let Ok(Err(e)) = coro::future::block_on(conn) {
                    log::debug!("hyper_server: connection: {e}");
                }
            })?;
            Ok(())
        })?;
        Ok(())
    })
}
