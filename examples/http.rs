//! An HTTP/1.1 server in coro's blocking style: the two TechEmpower
//! endpoints (`/plaintext` and `/json`), keep-alive and pipelining, one
//! runtime per core, each with its own `SO_REUSEPORT` listener on the same
//! port. It is the coro side of the HTTP benchmark (`benches/http/run.sh`),
//! beside may_minihttp and hyper on tokio.
//!
//! Run it with
//!
//! ```text
//! cargo run --release --example http -- 127.0.0.1:8080
//! ```
//!
//! (`CORO_HTTP_THREADS` sets the number of runtimes, one per core by
//! default) and ask it with `curl -i http://127.0.0.1:8080/plaintext`. It
//! serves until it is killed.
//!
//! # Design
//!
//! One green thread per connection reads into a buffer, parses every
//! complete request in it with `httparse`, appends each response to one
//! output buffer, and writes that buffer once: a pipelined batch costs one
//! `read` and one `write`. A request that cannot be parsed gets `400 Bad
//! Request`; a request head larger than [`MAX_HEAD`] (or with more than
//! [`MAX_HEADERS`] header lines) gets `431`; both close the connection. A
//! request with a body (`Content-Length`) has the body skipped; one with
//! `Transfer-Encoding` gets `501` and a close, since the endpoints take no
//! body and an unread chunked body would desynchronise the connection.
//!
//! A connection silent for [`IDLE`] (`CORO_HTTP_IDLE_SECS` seconds, if
//! set) is closed. There is no timer per read for that: each read stamps
//! the connection with the runtime's sweep count, and the green thread
//! that refreshes the `Date` header once a second also interrupts the
//! threads of connections whose stamp is too old (see [`Idle`]); their
//! blocked read fails and the connection closes.
//!
//! The responses carry the headers TechEmpower asks for: `Server`, `Date`
//! (formatted once per second per runtime), `Content-Type` and
//! `Content-Length`. The JSON body is serialized per request with
//! `serde_json`, as the benchmark's rules require.

use std::cell::{Cell, RefCell};
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::sync::mpsc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use coro::net::{TcpListener, TcpStream};
use slab::Slab;

/// The largest request head (request line and headers) accepted; a larger
/// one gets `431 Request Header Fields Too Large`.
const MAX_HEAD: usize = 8 * 1024;
/// The most header lines a request may have (else `431`).
const MAX_HEADERS: usize = 32;
/// The read buffer: room for a full head plus pipelined requests.
const BUF: usize = 16 * 1024;
/// How long a connection may stay silent before it is closed (give or
/// take the second of the sweep); `CORO_HTTP_IDLE_SECS` overrides it.
const IDLE: Duration = Duration::from_secs(60);
/// How long a connection the server closes (after an error response or
/// `Connection: close`) is drained of the client's input.
const LINGER: Duration = Duration::from_secs(2);
/// The most input drained from a connection the server closes.
const LINGER_BYTES: usize = 1 << 20;

fn main() -> io::Result<()> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:8080".to_owned());
    let threads = match std::env::var("CORO_HTTP_THREADS") {
        Ok(s) => s.parse().map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("CORO_HTTP_THREADS must be a number, not {s:?}"),
            )
        })?,
        Err(_) => std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    let idle_secs = match std::env::var("CORO_HTTP_IDLE_SECS") {
        Ok(s) => match s.parse::<u64>() {
            Ok(n) if n > 0 => n,
            _ => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "CORO_HTTP_IDLE_SECS must be a whole number of seconds above 0, not {s:?}"
                    ),
                ))
            }
        },
        Err(_) => IDLE.as_secs(),
    };
    if threads == 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "CORO_HTTP_THREADS must be at least 1",
        ));
    }
    // Runtime 0 binds first (the address may ask for any free port); the
    // others bind the port it got.
    let (ready, started) = mpsc::channel();
    let mut os_threads = Vec::new();
    let mut bound: Option<SocketAddr> = None;
    for core in 0..threads {
        let at = bound.map_or_else(|| addr.clone(), |a| a.to_string());
        let ready = ready.clone();
        os_threads.push(
            std::thread::Builder::new()
                .name(format!("http-{core}"))
                .spawn(move || serve_core(core, &at, idle_secs, &ready))?,
        );
        match started.recv() {
            Ok(Ok(local)) => bound = Some(local),
            Ok(Err(e)) => return Err(e),
            Err(_) => return Err(io::Error::other("a runtime thread died while starting")),
        }
    }
    let local = bound.expect("at least one runtime");
    eprintln!("http: listening on {local} with {threads} runtimes");
    for t in os_threads {
        t.join()
            .map_err(|_| io::Error::other("a runtime thread panicked"))??;
    }
    Ok(())
}

/// One core: a runtime with its own `SO_REUSEPORT` listener and its accept
/// loop, a green thread per connection.
fn serve_core(
    core: usize,
    addr: &str,
    idle_secs: u64,
    ready: &mpsc::Sender<io::Result<SocketAddr>>,
) -> io::Result<()> {
    coro::run(|| {
        let listener = match TcpListener::builder().reuse_port(true).bind(addr) {
            Ok(l) => l,
            Err(e) => {
                let _ = ready.send(Err(io::Error::new(e.kind(), format!("{addr}: {e}"))));
                return Ok(());
            }
        };
        let _ = ready.send(Ok(listener.local_addr()?));
        coro::Builder::new()
            .name("http clock".into())
            .spawn(move || loop {
                DATE.with_borrow_mut(DateCache::refresh);
                Idle::sweep(idle_secs);
                let into = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.subsec_nanos());
                // Wake just after the next second starts.
                let left = 1_000_000_000 - u64::from(into) + 1_000_000;
                if coro::sleep(Duration::from_nanos(left)).is_err() {
                    return;
                }
            })?;
        let tag = format!("http[{core}]");
        coro_examples::accept_loop(&listener, &tag, |stream, _peer| {
            coro::Builder::new()
                .spawn(move || {
                    // A connection ends with an error when the client goes
                    // away mid-request or stays idle: nothing to report.
                    let _ = serve(stream);
                })
                .map(drop)
        })?;
        Ok(())
    })
}

/// What a parsed request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Route {
    Plaintext,
    Json,
    NotFound,
    /// A method other than GET or HEAD on a known path.
    MethodNotAllowed,
}

/// Serves one connection until the client closes it, asks to close it, or
/// sends something that cannot be served.
fn serve(mut stream: TcpStream) -> io::Result<()> {
    stream.set_nodelay(true)?;
    let watched = Watched::new();
    let mut buf = vec![0u8; BUF];
    let mut out = Vec::with_capacity(BUF);
    // Bytes in `buf[..filled]`; `skip` of them (a body still to come)
    // are thrown away as they arrive.
    let mut filled = 0;
    let mut skip = 0usize;
    loop {
        let n = stream.read(&mut buf[filled..])?;
        if n == 0 {
            return Ok(());
        }
        watched.touch();
        filled += n;
        let mut pos = 0;
        let mut close = false;
        // An error response: the client may still be sending.
        let mut rejected = false;
        while pos < filled && !close {
            if skip > 0 {
                let k = skip.min(filled - pos);
                skip -= k;
                pos += k;
                continue;
            }
            match parse(&buf[pos..filled]) {
                Parsed::Partial => break,
                Parsed::Request(req) => {
                    pos += req.head_len;
                    skip = req.body_len;
                    close = !req.keep_alive;
                    respond(&mut out, req.route, req.head_only, close);
                }
                Parsed::Bad(status) => {
                    error_response(&mut out, status);
                    close = true;
                    rejected = true;
                }
            }
        }
        if !out.is_empty() {
            stream.write_all(&out)?;
            out.clear();
        }
        if close {
            // A client that asked to close sends nothing more; one that got
            // an error, or sent more behind its close, may still be
            // sending, and closing on unread input would reset the
            // connection under the response.
            if rejected || pos < filled {
                return linger(&mut stream, &mut buf);
            }
            return Ok(());
        }
        buf.copy_within(pos..filled, 0);
        filled -= pos;
    }
}

/// Closes a connection the server ends: shuts down the sending side, then
/// reads (and drops) what the client still sends, for at most
/// [`LINGER`], so that closing with unread input does not reset the
/// connection and destroy the response before the client has read it.
fn linger(stream: &mut TcpStream, buf: &mut [u8]) -> io::Result<()> {
    stream.shutdown(std::net::Shutdown::Write)?;
    let mut left = LINGER_BYTES;
    let drained = coro::with_timeout(LINGER, || -> io::Result<()> {
        while left > 0 {
            match stream.read(buf)? {
                0 => return Ok(()),
                n => left = left.saturating_sub(n),
            }
        }
        Ok(())
    });
    match drained {
        Ok(r) => r,
        // The client kept the connection open: close it anyway.
        Err(_) => Ok(()),
    }
}

/// A complete request head, with what is needed to answer it.
#[derive(Debug)]
struct Request {
    route: Route,
    /// The bytes of the head.
    head_len: usize,
    /// `Content-Length`: body bytes that follow the head, to skip.
    body_len: usize,
    /// Whether the connection stays open after the response.
    keep_alive: bool,
    /// A `HEAD` request: headers only.
    head_only: bool,
}

/// The result of parsing the start of the buffer.
#[derive(Debug)]
enum Parsed {
    /// The head is not complete yet.
    Partial,
    Request(Request),
    /// The request cannot be served; answer with this status and close.
    Bad(Status),
}

/// The error statuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    BadRequest,
    HeadTooLarge,
    NotImplemented,
}

/// Parses the request at the start of `buf`.
fn parse(buf: &[u8]) -> Parsed {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    let head_len = match req.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => {
            return if buf.len() >= MAX_HEAD {
                Parsed::Bad(Status::HeadTooLarge)
            } else {
                Parsed::Partial
            }
        }
        Err(httparse::Error::TooManyHeaders) => return Parsed::Bad(Status::HeadTooLarge),
        Err(_) => return Parsed::Bad(Status::BadRequest),
    };
    if head_len > MAX_HEAD {
        return Parsed::Bad(Status::HeadTooLarge);
    }
    let (Some(method), Some(path), Some(version)) = (req.method, req.path, req.version) else {
        return Parsed::Bad(Status::BadRequest);
    };
    // HTTP/1.1 keeps the connection open unless told otherwise; 1.0 closes
    // it unless asked to keep it.
    let mut keep_alive = version == 1;
    let mut body_len = 0usize;
    let mut has_host = false;
    for h in req.headers.iter() {
        if h.name.eq_ignore_ascii_case("connection") {
            for token in h.value.split(|&b| b == b',') {
                let token = token.trim_ascii();
                if token.eq_ignore_ascii_case(b"close") {
                    keep_alive = false;
                } else if token.eq_ignore_ascii_case(b"keep-alive") {
                    keep_alive = true;
                }
            }
        } else if h.name.eq_ignore_ascii_case("content-length") {
            let len = std::str::from_utf8(h.value)
                .ok()
                .and_then(|v| v.trim().parse::<usize>().ok());
            match len {
                // Two different lengths are a smuggling attempt (RFC 9112 §6.3).
                Some(n) if body_len == 0 || body_len == n => body_len = n,
                _ => return Parsed::Bad(Status::BadRequest),
            }
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            return Parsed::Bad(Status::NotImplemented);
        } else if h.name.eq_ignore_ascii_case("host") {
            has_host = true;
        }
    }
    // RFC 9112 §3.2: a 1.1 request without Host is a 400.
    if version == 1 && !has_host {
        return Parsed::Bad(Status::BadRequest);
    }
    let path = path.split('?').next().unwrap_or(path);
    let known = match path {
        "/plaintext" => Some(Route::Plaintext),
        "/json" => Some(Route::Json),
        _ => None,
    };
    let head_only = method == "HEAD";
    let route = match known {
        None => Route::NotFound,
        Some(_) if method != "GET" && !head_only => Route::MethodNotAllowed,
        Some(r) => r,
    };
    Parsed::Request(Request {
        route,
        head_len,
        body_len,
        keep_alive,
        head_only,
    })
}

/// The body of `/json`, made for each request.
#[derive(serde::Serialize)]
struct Message {
    message: &'static str,
}

/// Appends the response to `route` to `out`; `close` says the server
/// closes the connection after it.
fn respond(out: &mut Vec<u8>, route: Route, head_only: bool, close: bool) {
    let close: &[&str] = if close { &["Connection: close"] } else { &[] };
    match route {
        Route::Plaintext => {
            let body = b"Hello, World!";
            head(out, "200 OK", "text/plain", body.len(), close);
            if !head_only {
                out.extend_from_slice(body);
            }
        }
        Route::Json => {
            let body = serde_json::to_vec(&Message {
                message: "Hello, World!",
            })
            .expect("a struct of one string serializes");
            head(out, "200 OK", "application/json", body.len(), close);
            if !head_only {
                out.extend_from_slice(&body);
            }
        }
        Route::NotFound => {
            let body = b"not found\n";
            head(out, "404 Not Found", "text/plain", body.len(), close);
            if !head_only {
                out.extend_from_slice(body);
            }
        }
        Route::MethodNotAllowed => {
            let body = b"method not allowed\n";
            head(
                out,
                "405 Method Not Allowed",
                "text/plain",
                body.len(),
                if close.is_empty() {
                    &["Allow: GET, HEAD"]
                } else {
                    &["Allow: GET, HEAD", "Connection: close"]
                },
            );
            if !head_only {
                out.extend_from_slice(body);
            }
        }
    }
}

/// Appends an error response that closes the connection.
fn error_response(out: &mut Vec<u8>, status: Status) {
    let (line, body): (&str, &[u8]) = match status {
        Status::BadRequest => ("400 Bad Request", b"bad request\n"),
        Status::HeadTooLarge => (
            "431 Request Header Fields Too Large",
            b"request head too large\n",
        ),
        Status::NotImplemented => ("501 Not Implemented", b"transfer-encoding not supported\n"),
    };
    head(out, line, "text/plain", body.len(), &["Connection: close"]);
    out.extend_from_slice(body);
}

/// Appends a status line and the headers.
fn head(out: &mut Vec<u8>, status: &str, content_type: &str, len: usize, extra: &[&str]) {
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(status.as_bytes());
    out.extend_from_slice(b"\r\nServer: coro\r\nDate: ");
    DATE.with_borrow(|d| out.extend_from_slice(&d.text));
    out.extend_from_slice(b"\r\nContent-Type: ");
    out.extend_from_slice(content_type.as_bytes());
    out.extend_from_slice(b"\r\nContent-Length: ");
    out.extend_from_slice(itoa::Buffer::new().format(len).as_bytes());
    for h in extra {
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(h.as_bytes());
    }
    out.extend_from_slice(b"\r\n\r\n");
}

/// The `Date` header's value, formatted by a green thread of each runtime
/// at the start of every second (so a response costs no clock read).
struct DateCache {
    /// An IMF-fixdate (RFC 9110 §5.6.7), always 29 bytes.
    text: Vec<u8>,
}

impl DateCache {
    fn refresh(&mut self) {
        self.text.clear();
        self.text
            .extend_from_slice(httpdate::fmt_http_date(SystemTime::now()).as_bytes());
    }
}

thread_local! {
    /// This runtime's date (one runtime per OS thread).
    static DATE: RefCell<DateCache> = const {
        RefCell::new(DateCache { text: Vec::new() })
    };
}

/// The connections of one runtime (one per OS thread) and the sweep count
/// at each one's last read: how idle connections are found without a
/// timer per read.
///
/// `with_timeout(IDLE, || stream.read(..))` would arm and give up a timer
/// on every request. Here a read costs one store; the runtime's clock
/// thread, awake once a second for the `Date` header anyway, counts a
/// sweep and interrupts the thread of every connection that has not read
/// for more than `idle_secs` sweeps and is parked. The interrupt fails the
/// read it waits in, so a silent connection closes between `idle_secs`
/// and `idle_secs + 1` seconds after its last read; one whose thread is
/// stuck writing to a client that reads nothing is closed the same way.
struct Idle {
    /// Sweeps so far: seconds since the runtime started, roughly.
    sweeps: Cell<u64>,
    conns: RefCell<Slab<Conn>>,
}

/// One connection in [`Idle`].
struct Conn {
    thread: coro::Coro,
    /// The sweep count at its last read.
    last: u64,
}

thread_local! {
    static IDLE_CONNS: Idle = const {
        Idle {
            sweeps: Cell::new(0),
            conns: RefCell::new(Slab::new()),
        }
    };
}

impl Idle {
    /// Counts a sweep and interrupts the connections silent for more than
    /// `idle_secs` sweeps.
    fn sweep(idle_secs: u64) {
        IDLE_CONNS.with(|idle| {
            let now = idle.sweeps.get() + 1;
            idle.sweeps.set(now);
            for (_, c) in idle.conns.borrow().iter() {
                // Only a parked thread: one that is ready has data to read
                // (or is running), and an interrupt left pending would fail
                // its next wait although it has just been served.
                if now - c.last > idle_secs && c.thread.state() == coro::ThreadState::Parked {
                    let _ = c.thread.interrupt();
                }
            }
        });
    }
}

/// The running connection's entry in [`Idle`], removed when dropped.
struct Watched(usize);

impl Watched {
    fn new() -> Watched {
        IDLE_CONNS.with(|idle| {
            let conn = Conn {
                thread: coro::current(),
                last: idle.sweeps.get(),
            };
            Watched(idle.conns.borrow_mut().insert(conn))
        })
    }

    /// The connection just read: it is not idle.
    #[inline]
    fn touch(&self) {
        IDLE_CONNS.with(|idle| {
            if let Some(c) = idle.conns.borrow_mut().get_mut(self.0) {
                c.last = idle.sweeps.get();
            }
        });
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        // While the OS thread exits the table may be gone already.
        let _ = IDLE_CONNS.try_with(|idle| idle.conns.borrow_mut().try_remove(self.0));
    }
}
