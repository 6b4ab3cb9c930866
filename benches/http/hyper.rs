//! The hyper peer of the HTTP benchmark (`benches/http/run.sh`): hyper 1.x
//! HTTP/1.1 on tokio's current-thread runtime, one runtime per core
//! (`HTTP_THREADS`, 1 by default), each with its own `SO_REUSEPORT`
//! listener, serving `/plaintext` and `/json` as in TechEmpower (hyper adds
//! `Date` and `Content-Length`; pipelined responses are flushed together,
//! as in hyper's TechEmpower entry).
//!
//! `cargo build --release -p coro-benches --bin http-hyper`, then
//! `target/release/http-hyper 127.0.0.1:8082`.

use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_TYPE, SERVER};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;

#[derive(serde::Serialize)]
struct Message {
    message: &'static str,
}

async fn serve(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let (body, content_type, status) = match req.uri().path() {
        "/plaintext" => (
            Bytes::from_static(b"Hello, World!"),
            "text/plain",
            StatusCode::OK,
        ),
        "/json" => {
            let body = serde_json::to_vec(&Message {
                message: "Hello, World!",
            })
            .expect("a struct of one string serializes");
            (Bytes::from(body), "application/json", StatusCode::OK)
        }
        _ => (Bytes::new(), "text/plain", StatusCode::NOT_FOUND),
    };
    let mut rsp = Response::new(Full::new(body));
    *rsp.status_mut() = status;
    let h = rsp.headers_mut();
    h.insert(SERVER, HeaderValue::from_static("hyper"));
    h.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    Ok(rsp)
}

fn listener(addr: SocketAddr) -> io::Result<tokio::net::TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.set_reuseport(true)?;
    socket.bind(addr)?;
    socket.listen(1024)
}

fn run_core(addr: SocketAddr) -> io::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let listener = listener(addr)?;
        loop {
            let (stream, _) = listener.accept().await?;
            stream.set_nodelay(true)?;
            tokio::spawn(async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .pipeline_flush(true)
                    .serve_connection(TokioIo::new(stream), hyper::service::service_fn(serve))
                    .await;
            });
        }
    })
}

fn main() -> io::Result<()> {
    let addr: SocketAddr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:8082".to_owned())
        .parse()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("address: {e}")))?;
    let threads: usize = std::env::var("HTTP_THREADS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let cores: Vec<_> = (0..threads)
        .map(|i| {
            std::thread::Builder::new()
                .name(format!("hyper-{i}"))
                .spawn(move || run_core(addr))
        })
        .collect::<io::Result<_>>()?;
    eprintln!("http-hyper: listening on {addr} with {threads} runtimes");
    for c in cores {
        c.join()
            .map_err(|_| io::Error::other("a runtime thread panicked"))??;
    }
    Ok(())
}
