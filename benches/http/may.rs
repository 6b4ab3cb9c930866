//! The may_minihttp peer of the HTTP benchmark (`benches/http/run.sh`):
//! `/plaintext` and `/json` as in TechEmpower, configured as may_minihttp's
//! own TechEmpower entry configures it (4 KiB coroutine stacks), with
//! `HTTP_THREADS` may workers (1 by default).
//!
//! may_minihttp keeps every connection open; so that the short-lived rows
//! (a client `Connection: close` every N requests) measure the same thing
//! for every server, a request that asks to close gets `Connection: close`
//! back, and the client (wrk) then closes the connection.
//!
//! `cargo build --release -p coro-benches --bin http-may`, then
//! `target/release/http-may 127.0.0.1:8081`.

use std::io;

use may_minihttp::{HttpService, HttpServiceFactory, Request, Response};

#[derive(serde::Serialize)]
struct Message {
    message: &'static str,
}

struct Techempower;

impl HttpService for Techempower {
    fn call(&mut self, req: Request<'_, '_, '_>, rsp: &mut Response<'_>) -> io::Result<()> {
        let close = req.headers().iter().any(|h| {
            h.name.eq_ignore_ascii_case("connection") && h.value.eq_ignore_ascii_case(b"close")
        });
        match req.path() {
            "/plaintext" => {
                rsp.header("Content-Type: text/plain").body("Hello, World!");
            }
            "/json" => {
                rsp.header("Content-Type: application/json");
                let body = serde_json::to_vec(&Message {
                    message: "Hello, World!",
                })?;
                rsp.body_vec(body);
            }
            _ => {
                rsp.status_code(404, "Not Found");
            }
        }
        if close {
            rsp.header("Connection: close");
        }
        Ok(())
    }
}

struct Factory;

impl HttpServiceFactory for Factory {
    type Service = Techempower;

    fn new_service(&self, _: usize) -> Techempower {
        Techempower
    }
}

fn main() -> io::Result<()> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:8081".to_owned());
    let threads: usize = std::env::var("HTTP_THREADS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    may::config()
        .set_workers(threads)
        .set_pool_capacity(1000)
        .set_stack_size(0x1000);
    let server = Factory.start(&addr)?;
    eprintln!("http-may: listening on {addr} with {threads} workers");
    server
        .join()
        .map_err(|_| io::Error::other("the server coroutine panicked"))
}
