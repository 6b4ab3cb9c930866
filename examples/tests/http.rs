//! The HTTP example, run as a real process and asked by real
//! `TcpStream` clients: the TechEmpower endpoints with their headers,
//! keep-alive, pipelining, bodies skipped, and the errors (400 for
//! malformed requests, 431 for oversized heads, 501 for chunked bodies)
//! after which the server still serves, and the idle sweep (a silent
//! connection is closed, a busy one is not).

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

/// A hang guard for every socket call, not a speed check.
const LIMIT: Duration = Duration::from_secs(30);

/// The example's binary, built if `cargo test` did not build it already.
fn example() -> PathBuf {
    let dir = std::env::current_exe()
        .unwrap()
        .parent() // deps
        .and_then(|d| d.parent())
        .unwrap()
        .join("examples");
    let bin = dir.join("http");
    if !bin.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let ok = Command::new(cargo)
            .args(["build", "-p", "coro-examples", "--example", "http"])
            .status()
            .unwrap()
            .success();
        assert!(ok, "building the http example failed");
    }
    bin
}

/// The server process, killed when the test ends (however it ends).
struct Server {
    child: Child,
    addr: String,
}

impl Server {
    fn start(threads: usize) -> Server {
        Server::start_idle(threads, None)
    }

    /// With `CORO_HTTP_IDLE_SECS` set to `idle_secs`, if given.
    fn start_idle(threads: usize, idle_secs: Option<u64>) -> Server {
        let mut cmd = Command::new(example());
        if let Some(s) = idle_secs {
            cmd.env("CORO_HTTP_IDLE_SECS", s.to_string());
        }
        let mut child = cmd
            .arg("127.0.0.1:0")
            .env("CORO_HTTP_THREADS", threads.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut log = BufReader::new(child.stderr.take().unwrap());
        let mut first = String::new();
        log.read_line(&mut first).unwrap();
        let addr = first
            .split_whitespace()
            .find(|w| w.starts_with("127.0.0.1:"))
            .unwrap_or_else(|| panic!("no address in {first:?}"))
            .to_owned();
        Server { child, addr }
    }

    fn connect(&self) -> Client {
        let s = TcpStream::connect(&self.addr).unwrap();
        s.set_read_timeout(Some(LIMIT)).unwrap();
        s.set_write_timeout(Some(LIMIT)).unwrap();
        Client {
            reader: BufReader::new(s.try_clone().unwrap()),
            stream: s,
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One client connection.
struct Client {
    stream: TcpStream,
    reader: BufReader<TcpStream>,
}

/// A response as read off the wire.
#[derive(Debug)]
struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Response {
    #[track_caller]
    fn header(&self, name: &str) -> &str {
        let mut found = self
            .headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name));
        let (_, v) = found
            .next()
            .unwrap_or_else(|| panic!("no {name} header in {self:?}"));
        assert!(found.next().is_none(), "two {name} headers in {self:?}");
        v
    }
}

impl Client {
    fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).unwrap();
    }

    /// Reads one response (head, then `Content-Length` bytes of body).
    fn response(&mut self) -> Response {
        let mut head = Vec::new();
        while !head.ends_with(b"\r\n\r\n") {
            let n = self.reader.read_until(b'\n', &mut head).unwrap();
            assert!(n > 0, "connection closed inside a response: {head:?}");
        }
        let mut headers = [httparse::EMPTY_HEADER; 16];
        let mut parsed = httparse::Response::new(&mut headers);
        let status = parsed.parse(&head).unwrap();
        assert!(status.is_complete());
        let headers: Vec<(String, String)> = parsed
            .headers
            .iter()
            .map(|h| {
                (
                    h.name.to_owned(),
                    String::from_utf8(h.value.to_vec()).unwrap(),
                )
            })
            .collect();
        let mut r = Response {
            status: parsed.code.unwrap(),
            headers,
            body: Vec::new(),
        };
        let len: usize = r.header("content-length").parse().unwrap();
        r.body = vec![0; len];
        self.reader.read_exact(&mut r.body).unwrap();
        r
    }

    /// Asserts the server closed the connection (after what was read).
    #[track_caller]
    fn assert_closed(&mut self) {
        let mut rest = Vec::new();
        match self.reader.read_to_end(&mut rest) {
            Ok(_) => assert!(rest.is_empty(), "more after the last response: {rest:?}"),
            // A reset also ends it, but only after the response was read.
            Err(e) => assert_eq!(e.kind(), io::ErrorKind::ConnectionReset, "{e}"),
        }
    }
}

const PLAINTEXT: &[u8] = b"GET /plaintext HTTP/1.1\r\nHost: localhost\r\n\r\n";
const JSON: &[u8] = b"GET /json HTTP/1.1\r\nHost: localhost\r\n\r\n";

#[track_caller]
fn assert_plaintext(r: &Response) {
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.body, b"Hello, World!");
    assert_eq!(r.header("content-type"), "text/plain");
    assert_eq!(r.header("content-length"), "13");
    assert_eq!(r.header("server"), "coro");
    assert_date(r.header("date"));
}

#[track_caller]
fn assert_json(r: &Response) {
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.body, br#"{"message":"Hello, World!"}"#);
    assert_eq!(r.header("content-type"), "application/json");
    assert_eq!(r.header("content-length"), "27");
    assert_eq!(r.header("server"), "coro");
    assert_date(r.header("date"));
}

/// An IMF-fixdate within a few seconds of now.
#[track_caller]
fn assert_date(v: &str) {
    assert_eq!(v.len(), 29, "{v:?}");
    assert!(v.ends_with(" GMT"), "{v:?}");
    let t = httpdate::parse_http_date(v).unwrap_or_else(|e| panic!("{v:?}: {e}"));
    let now = SystemTime::now();
    let off = now.duration_since(t).or_else(|e| Ok::<_, ()>(e.duration()));
    assert!(off.unwrap() < Duration::from_secs(5), "Date {v} is not now");
}

#[test]
fn plaintext_and_json_carry_techempowers_headers() {
    let server = Server::start(1);
    let mut c = server.connect();
    c.send(PLAINTEXT);
    assert_plaintext(&c.response());
    c.send(JSON);
    assert_json(&c.response());
}

#[test]
fn keep_alive_serves_many_requests_on_one_connection_until_close() {
    let server = Server::start(1);
    let mut c = server.connect();
    for i in 0..50 {
        if i % 2 == 0 {
            c.send(PLAINTEXT);
            assert_plaintext(&c.response());
        } else {
            c.send(JSON);
            assert_json(&c.response());
        }
    }
    c.send(b"GET /plaintext HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
    let r = c.response();
    assert_plaintext(&r);
    // The server says it closes (RFC 9112 §9.6), so a client such as wrk
    // closes too instead of sending the next request.
    assert_eq!(r.header("connection"), "close");
    c.assert_closed();

    // HTTP/1.0 closes unless asked to keep the connection.
    let mut c = server.connect();
    c.send(b"GET /json HTTP/1.0\r\n\r\n");
    let r = c.response();
    assert_json(&r);
    assert_eq!(r.header("connection"), "close");
    c.assert_closed();
    let mut c = server.connect();
    c.send(b"GET /json HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    assert_json(&c.response());
    c.send(b"GET /plaintext HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    assert_plaintext(&c.response());
}

#[test]
fn pipelined_requests_are_answered_in_order() {
    let server = Server::start(1);
    let mut c = server.connect();
    // 64 requests in one write, more than one read buffer's worth of them
    // split anywhere the kernel likes.
    let mut batch = Vec::new();
    for i in 0..64 {
        batch.extend_from_slice(if i % 3 == 0 { JSON } else { PLAINTEXT });
    }
    c.send(&batch);
    for i in 0..64 {
        let r = c.response();
        if i % 3 == 0 {
            assert_json(&r);
        } else {
            assert_plaintext(&r);
        }
    }
    // A request split into pieces is answered once it is whole.
    for piece in PLAINTEXT.chunks(5) {
        c.send(piece);
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_plaintext(&c.response());
}

#[test]
fn a_body_is_skipped_and_the_next_request_answered() {
    let server = Server::start(1);
    let mut c = server.connect();
    let mut req = b"POST /nowhere HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\n0123".to_vec();
    c.send(&req);
    req.clear();
    // The rest of the body comes later, with the next request behind it.
    req.extend_from_slice(b"456789");
    req.extend_from_slice(PLAINTEXT);
    c.send(&req);
    assert_eq!(c.response().status, 404);
    assert_plaintext(&c.response());
    c.send(b"POST /json HTTP/1.1\r\nHost: a\r\n\r\n");
    let r = c.response();
    assert_eq!(r.status, 405, "{r:?}");
    assert_eq!(r.header("allow"), "GET, HEAD");
    c.send(b"HEAD /plaintext HTTP/1.1\r\nHost: a\r\n\r\n");
    // A HEAD response announces the body's length but sends none: read
    // the head only, then check the next response follows at once.
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        c.reader.read_until(b'\n', &mut head).unwrap();
    }
    assert!(head.starts_with(b"HTTP/1.1 200 OK\r\n"), "{head:?}");
    c.send(JSON);
    assert_json(&c.response());
}

/// Sends `request` on a new connection and expects `status` and a close;
/// then checks the server still serves.
#[track_caller]
fn rejected(server: &Server, request: &[u8], status: u16) {
    let mut c = server.connect();
    c.send(request);
    let r = c.response();
    assert_eq!(
        r.status,
        status,
        "{:?} got {r:?}",
        String::from_utf8_lossy(request)
    );
    assert_eq!(r.header("connection"), "close");
    c.assert_closed();
    let mut c = server.connect();
    c.send(PLAINTEXT);
    assert_plaintext(&c.response());
}

#[test]
fn malformed_requests_get_400_and_the_server_lives_on() {
    let server = Server::start(1);
    for bad in [
        &b"GARBAGE\r\n\r\n"[..],
        b"GET /plaintext HTTP/1.1\r\nHost: a\r\nno colon here\r\n\r\n",
        b"GET /plaintext HTTP/9.9\r\nHost: a\r\n\r\n",
        b"GET /plaintext HTTP/1.1\r\n\r\n", // no Host
        b"GET /plaintext HTTP/1.1\r\nHost: a\r\nContent-Length: x\r\n\r\n",
        b"GET /plaintext HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
        b"\x00\x01\x02\x03\r\n\r\n",
        b"GET /pla intext HTTP/1.1\r\nHost: a\r\n\r\n",
    ] {
        rejected(&server, bad, 400);
    }
    // A malformed request behind a good one in the same batch: the good
    // one is answered first.
    let mut c = server.connect();
    let mut batch = PLAINTEXT.to_vec();
    batch.extend_from_slice(b"BROKEN\r\n\r\n");
    c.send(&batch);
    assert_plaintext(&c.response());
    assert_eq!(c.response().status, 400);
    c.assert_closed();
}

#[test]
fn oversized_heads_get_431_and_chunked_bodies_501() {
    let server = Server::start(1);
    // One header of 9 KiB: more than the 8 KiB a head may have.
    let mut big = b"GET /plaintext HTTP/1.1\r\nHost: a\r\nX-Big: ".to_vec();
    big.extend(std::iter::repeat_n(b'a', 9 * 1024));
    big.extend_from_slice(b"\r\n\r\n");
    rejected(&server, &big, 431);
    // The same, never finished: the server does not wait for the end.
    let unfinished = &big[..big.len() - 4];
    rejected(&server, unfinished, 431);
    // More header lines than the parser takes.
    let mut many = b"GET /plaintext HTTP/1.1\r\nHost: a\r\n".to_vec();
    for i in 0..100 {
        many.extend_from_slice(format!("X-{i}: v\r\n").as_bytes());
    }
    many.extend_from_slice(b"\r\n");
    rejected(&server, &many, 431);
    rejected(
        &server,
        b"POST /plaintext HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        501,
    );
}

#[test]
fn two_runtimes_share_the_port() {
    let server = Server::start(2);
    // One OS thread per runtime, named after it.
    let pid = server.child.id();
    let mut names = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let comm = std::fs::read_to_string(task.unwrap().path().join("comm")).unwrap();
        names.push(comm.trim().to_owned());
    }
    assert!(names.iter().any(|n| n == "http-0"), "{names:?}");
    assert!(names.iter().any(|n| n == "http-1"), "{names:?}");
    // Many connections, spread by the kernel; every one is served.
    let mut clients: Vec<Client> = (0..32).map(|_| server.connect()).collect();
    for c in &mut clients {
        c.send(JSON);
    }
    for c in &mut clients {
        assert_json(&c.response());
    }
}

#[test]
fn an_idle_connection_is_closed_by_the_sweep() {
    let server = Server::start_idle(1, Some(1));
    let mut c = server.connect();
    c.send(PLAINTEXT);
    assert_plaintext(&c.response());
    let served = Instant::now();
    // Silent from here: the sweep closes it more than one second after its
    // last read (a read timeout of `LIMIT` guards the wait).
    c.assert_closed();
    assert!(
        served.elapsed() >= Duration::from_secs(1),
        "closed {:?} after its last request, before the idle time",
        served.elapsed()
    );
    // The runtime goes on serving.
    let mut c = server.connect();
    c.send(JSON);
    assert_json(&c.response());
}

#[test]
fn a_connection_in_use_is_not_closed_as_idle() {
    // Requests every 250 ms for about seven seconds, more than twice the
    // idle time of 3 s: each read refreshes the connection's stamp.
    let server = Server::start_idle(1, Some(3));
    let mut c = server.connect();
    let start = Instant::now();
    let mut sent = 0;
    while start.elapsed() < Duration::from_secs(7) {
        c.send(PLAINTEXT);
        assert_plaintext(&c.response());
        sent += 1;
        std::thread::sleep(Duration::from_millis(250));
    }
    assert!(sent >= 2);
}

#[test]
fn a_bad_idle_setting_is_refused_with_its_name() {
    let mut child = Command::new(example())
        .arg("127.0.0.1:0")
        .env("CORO_HTTP_IDLE_SECS", "soon")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the server started despite CORO_HTTP_IDLE_SECS=soon");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(!status.success());
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(err.contains("CORO_HTTP_IDLE_SECS"), "{err}");
}
