//! hyper 1.x on coro's reactor, with no tokio runtime anywhere:
//! an HTTP/1.1 server answered by curl (keep-alive, streaming request and
//! response bodies), a hyper client echoing 100 concurrent 1 MB bodies, and
//! a request to a stalling server cut short by `with_timeout`, leaving
//! nothing behind.

mod util;

use std::cell::Cell;
use std::convert::Infallible;
use std::future::Future;
use std::io::{self, Read};
use std::pin::Pin;
use std::process::Command;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use coro::future::block_on;
use coro::net::{CoroTimer, TcpListener, TcpStream};
use http_body_util::{combinators::UnsyncBoxBody, BodyExt, Full};
use hyper::body::{Body, Frame, Incoming};
use hyper::{Request, Response};

type BoxBody = UnsyncBoxBody<Bytes, hyper::Error>;

/// A response body of `left` chunks, one every 2 ms (coro timers as
/// futures): it is streamed, chunk by chunk, as they come.
struct Ticks {
    left: u32,
    sleep: Option<coro::future::Sleep>,
}

impl Body for Ticks {
    type Data = Bytes;
    type Error = hyper::Error;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        if self.left == 0 {
            return Poll::Ready(None);
        }
        let sleep = self
            .sleep
            .get_or_insert_with(|| coro::future::sleep(Duration::from_millis(2)));
        std::task::ready!(Pin::new(sleep).poll(cx));
        self.sleep = None;
        self.left -= 1;
        let line = format!("tick {}\n", self.left);
        Poll::Ready(Some(Ok(Frame::data(Bytes::from(line)))))
    }
}

async fn handle(req: Request<Incoming>) -> Result<Response<BoxBody>, Infallible> {
    let body: BoxBody = match req.uri().path() {
        // The request body streams straight back.
        "/echo" => req.into_body().boxed_unsync(),
        "/ticks" => Ticks {
            left: 5,
            sleep: None,
        }
        .boxed_unsync(),
        _ => Full::new(Bytes::from_static(b"hello from coro\n"))
            .map_err(|e: Infallible| match e {})
            .boxed_unsync(),
    };
    Ok(Response::new(body))
}

/// Serves HTTP/1.1 on `listener`, one green thread per connection;
/// `accepted` counts connections.
fn serve(listener: TcpListener, accepted: Rc<Cell<u32>>) {
    for stream in listener.incoming() {
        let Ok(stream) = stream else { break };
        accepted.set(accepted.get() + 1);
        coro::spawn(move || {
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(CoroTimer)
                .serve_connection(stream, hyper::service::service_fn(handle));
            let _ = block_on(conn);
        });
    }
}

fn curl(args: Vec<String>) -> io::Result<std::process::Output> {
    coro::blocking(move || Command::new("curl").args(&args).output())
        .unwrap()
        .map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("this test runs curl, which could not be started ({e}): install it (Debian package curl; scripts/test.sh does)"),
            )
        })
}

#[test]
fn a_hyper_server_on_coro_answers_curl_with_keep_alive_and_streamed_bodies() -> io::Result<()> {
    util::run(|| {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let accepted = Rc::new(Cell::new(0));
        let a = accepted.clone();
        let l2 = listener.try_clone()?;
        let server = coro::spawn(move || serve(l2, a));

        // Keep-alive: three requests on one connection.
        let url = format!("http://{addr}/");
        let out = curl(vec![
            "-sS".into(),
            "-w".into(),
            "[%{num_connects}]".into(),
            url.clone(),
            url.clone(),
            url,
        ])?;
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8(out.stdout).unwrap();
        assert_eq!(
            text, "hello from coro\n[1]hello from coro\n[0]hello from coro\n[0]",
            "curl reused the connection"
        );
        assert_eq!(accepted.get(), 1);

        // A streamed request body (chunked, 3 MB) echoed as a stream.
        let dir = std::env::temp_dir().join(format!("coro-hyper-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let file = dir.join("body");
        let body: Vec<u8> = (0..3 << 20).map(|i: u32| (i * 7 % 251) as u8).collect();
        std::fs::write(&file, &body)?;
        let out = curl(vec![
            "-sS".into(),
            "-H".into(),
            "Transfer-Encoding: chunked".into(),
            "--data-binary".into(),
            format!("@{}", file.display()),
            format!("http://{addr}/echo"),
        ])?;
        std::fs::remove_dir_all(&dir)?;
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            out.stdout == body,
            "the echoed body differs ({} bytes)",
            out.stdout.len()
        );

        // A streamed response body: chunked, produced by coro timers.
        let out = curl(vec![
            "-sS".into(),
            "-i".into(),
            format!("http://{addr}/ticks"),
        ])?;
        assert!(out.status.success());
        let text = String::from_utf8(out.stdout).unwrap().to_lowercase();
        assert!(text.contains("transfer-encoding: chunked"), "{text}");
        assert!(
            text.ends_with("tick 4\ntick 3\ntick 2\ntick 1\ntick 0\n"),
            "{text}"
        );

        listener.close();
        server.join().unwrap();
        Ok(())
    })
}

/// Sends `body` to `/echo` on a new connection and returns the echo.
fn echo(addr: std::net::SocketAddr, body: Bytes) -> Result<Bytes, Box<dyn std::error::Error>> {
    let stream = TcpStream::connect(addr)?;
    let (mut sender, conn) = block_on(hyper::client::conn::http1::handshake(stream))??;
    let conn = coro::spawn(move || block_on(conn));
    let req = Request::post("/echo").body(Full::new(body))?;
    let resp = block_on(sender.send_request(req))??;
    assert!(resp.status().is_success());
    let got = block_on(resp.into_body().collect())??.to_bytes();
    drop(sender);
    conn.join().unwrap()??;
    Ok(got)
}

#[test]
fn a_hyper_client_on_coro_echoes_100_concurrent_1mb_bodies() -> io::Result<()> {
    util::run(|| {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let l2 = listener.try_clone()?;
        let server = coro::spawn(move || serve(l2, Rc::default()));
        let clients: Vec<_> = (0..100u32)
            .map(|c| {
                coro::spawn(move || {
                    let body: Vec<u8> = (0..1u32 << 20)
                        .map(|i| (i.wrapping_mul(31).wrapping_add(c * 17) % 253) as u8)
                        .collect();
                    let body = Bytes::from(body);
                    let got = echo(addr, body.clone()).unwrap();
                    assert!(got == body, "client {c}: the echo differs");
                })
            })
            .collect();
        for c in clients {
            c.join().unwrap();
        }
        listener.close();
        server.join().unwrap();
        Ok(())
    })
}

#[test]
fn a_request_to_a_stalling_server_is_bounded_by_with_timeout_and_leaves_nothing() -> io::Result<()>
{
    util::run(|| {
        // The server reads the request and never answers.
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let stall = coro::spawn(move || -> io::Result<usize> {
            let (mut s, _) = listener.accept()?;
            let mut seen = 0;
            let mut buf = [0u8; 4096];
            loop {
                match s.read(&mut buf)? {
                    0 => return Ok(seen), // the client went away
                    n => seen += n,
                }
            }
        });
        let before = coro::stats();
        let start = coro::clock::now();
        let r = coro::with_timeout(Duration::from_millis(200), || {
            coro::scope(|s| -> Result<(), Box<dyn std::error::Error>> {
                let stream = TcpStream::connect(addr)?;
                let (mut sender, conn) = block_on(hyper::client::conn::http1::handshake(stream))??;
                s.spawn(move || block_on(conn));
                let req = Request::get("/slow").body(Full::new(Bytes::new()))?;
                block_on(sender.send_request(req))??;
                Ok(())
            })
        });
        assert!(r.is_err(), "the request did not time out: {r:?}");
        assert!(start.elapsed() >= Duration::from_millis(200));
        // Nothing left: the connection's green thread, its socket and its
        // timers are gone, and the server sees the connection close.
        let after = coro::stats();
        assert_eq!(after.live, before.live);
        assert_eq!(after.pending_timers, before.pending_timers);
        let seen = stall.join().unwrap()?;
        assert!(seen > 0, "the request reached the server");
        assert_eq!(coro::stats().io_sources, 0, "a socket was left registered");
        Ok(())
    })
}

#[test]
fn coro_executor_runs_each_future_as_a_green_thread() {
    use hyper::rt::Executor;
    util::run(|| {
        let me = coro::current().id();
        let ran = Rc::new(Cell::new(None));
        let r = ran.clone();
        coro::net::CoroExecutor.execute(async move {
            coro::future::sleep(Duration::from_millis(2)).await;
            r.set(Some(coro::current_id().unwrap()));
        });
        util::wait_until("the executed future to finish", || ran.get().is_some());
        assert_ne!(ran.get(), Some(me), "it ran on a green thread of its own");
    });
}

/// hyper's header-read timeout runs on `CoroTimer`: a client that sends
/// half a request head is disconnected when it expires.
#[test]
fn coro_timer_drives_hypers_header_read_timeout() -> io::Result<()> {
    use std::io::Write;
    util::run(|| {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let server = coro::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(CoroTimer)
                .header_read_timeout(Duration::from_millis(100))
                .serve_connection(stream, hyper::service::service_fn(handle));
            block_on(conn).unwrap()
        });
        // Before the connection exists, so before hyper's timer starts.
        let t = coro::clock::now();
        let mut c = TcpStream::connect(addr)?;
        c.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n")?; // never finished
        let mut rest = Vec::new();
        c.read_to_end(&mut rest)?; // the server hangs up
        assert!(t.elapsed() >= Duration::from_millis(100));
        let r = server.join().unwrap();
        assert!(r.is_err(), "hyper reports the timeout: {r:?}");
        Ok(())
    })
}
