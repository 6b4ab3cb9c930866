//! The servers the bridge's tests talk to, each started by the test on a
//! free loopback port and stopped when dropped: a small HTTP/1.1 server
//! (coro on an OS thread of its own) that answers after a delay or never,
//! and a real `redis-server` in a temporary directory.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream as StdTcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use coro::net::{TcpListener, TcpStream};
use coro::sync::remote;

/// What the HTTP server does with a request.
#[derive(Clone, Copy, Debug)]
pub enum Answer {
    /// `200 OK` with the body `ok`, after this delay (keep-alive).
    After(Duration),
    /// Nothing, ever: the connection stays open until the client closes it.
    Never,
}

/// Connection counts of an [`HttpServer`], updated as they happen.
#[derive(Default, Debug)]
pub struct Counts {
    /// Connections accepted.
    pub accepted: AtomicUsize,
    /// Requests read (whole headers).
    pub requests: AtomicUsize,
    /// Connections the client closed (end of stream or reset).
    pub closed: AtomicUsize,
}

/// An HTTP/1.1 server on its own OS thread and coro runtime, one green
/// thread per connection.
pub struct HttpServer {
    pub addr: SocketAddr,
    pub counts: Arc<Counts>,
    stop: Option<remote::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl HttpServer {
    pub fn start(answer: Answer) -> HttpServer {
        let counts = Arc::new(Counts::default());
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let (stop, stop_rx) = remote::channel::<()>();
        let c = counts.clone();
        let thread = std::thread::Builder::new()
            .name("http-server".into())
            .spawn(move || {
                coro::run(move || {
                    let listener = Rc::new(TcpListener::bind("127.0.0.1:0").unwrap());
                    addr_tx.send(listener.local_addr().unwrap()).unwrap();
                    let l = listener.clone();
                    coro::spawn(move || {
                        for stream in l.incoming() {
                            let Ok(stream) = stream else { continue };
                            c.accepted.fetch_add(1, Ordering::SeqCst);
                            let c = c.clone();
                            coro::spawn(move || serve(stream, answer, &c));
                        }
                    });
                    // Returning ends the runtime, which stops every
                    // connection's green thread.
                    let _ = stop_rx.recv();
                    listener.close();
                })
            })
            .unwrap();
        let addr = addr_rx.recv_timeout(Duration::from_secs(30)).unwrap();
        HttpServer {
            addr,
            counts,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub fn closed(&self) -> usize {
        self.counts.closed.load(Ordering::SeqCst)
    }

    pub fn requests(&self) -> usize {
        self.counts.requests.load(Ordering::SeqCst)
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Serves one connection: reads each request's headers, answers as told.
fn serve(mut stream: TcpStream, answer: Answer, counts: &Counts) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = match stream.read(&mut chunk) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => 0,
            Err(_) => return, // stopped with the server
        };
        if n == 0 {
            counts.closed.fetch_add(1, Ordering::SeqCst);
            return;
        }
        buf.extend_from_slice(&chunk[..n]);
        while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            buf.drain(..end + 4);
            counts.requests.fetch_add(1, Ordering::SeqCst);
            if let Answer::After(delay) = answer {
                if coro::sleep(delay).is_err() {
                    return;
                }
                let reply = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
                if stream.write_all(reply).is_err() {
                    return;
                }
            }
        }
    }
}

/// A `redis-server` of the test (Debian's `redis-server` package, which
/// scripts/test.sh installs) on a free loopback port, in a temporary
/// directory with persistence off; killed and removed when dropped.
pub struct RedisServer {
    child: Child,
    dir: PathBuf,
    pub addr: SocketAddr,
}

impl RedisServer {
    pub fn start() -> RedisServer {
        // A port picked free can be taken by another process before the
        // server binds it: then the server exits, and another is tried.
        for attempt in 0..5 {
            let dir = std::env::temp_dir().join(format!(
                "coro-redis-{}-{attempt}-{:?}",
                std::process::id(),
                std::thread::current().id()
            ));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .unwrap()
                .port();
            let child = Command::new("redis-server")
                .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
                .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
                .arg("--dir")
                .arg(&dir)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap_or_else(|e| {
                    panic!(
                        "cannot start redis-server ({e}): this test needs Debian's \
                         redis-server package (scripts/test.sh installs it)"
                    )
                });
            let mut server = RedisServer {
                child,
                dir,
                addr: SocketAddr::from(([127, 0, 0, 1], port)),
            };
            if server.wait_ready() {
                return server;
            }
        }
        panic!("redis-server did not start on a free loopback port in 5 attempts");
    }

    /// Waits until the server answers PING; `false` if it exited.
    fn wait_ready(&mut self) -> bool {
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return false;
            }
            if self.command("PING").is_ok_and(|r| r.starts_with("+PONG")) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("redis-server on {} not ready within 30 s", self.addr);
    }

    pub fn url(&self) -> String {
        format!("redis://{}/", self.addr)
    }

    /// Sends one inline command over a fresh plain connection and returns
    /// the first reply, raw (`+PONG\r\n`, `$123\r\n...`).
    pub fn command(&self, cmd: &str) -> io::Result<String> {
        let mut s = StdTcpStream::connect(self.addr)?;
        s.set_read_timeout(Some(Duration::from_secs(10)))?;
        s.write_all(format!("{cmd}\r\n").as_bytes())?;
        let mut reply = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            let n = s.read(&mut chunk)?;
            reply.extend_from_slice(&chunk[..n]);
            if n == 0 || complete(&reply) {
                break;
            }
        }
        Ok(String::from_utf8_lossy(&reply).into_owned())
    }

    /// The value of `field` in `INFO section` (`blocked_clients` in
    /// `clients`, ...).
    pub fn info(&self, section: &str, field: &str) -> Option<String> {
        let reply = self.command(&format!("INFO {section}")).ok()?;
        reply.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k == field).then(|| v.trim().to_owned())
        })
    }
}

/// Whether a raw reply is whole: a simple line, or a bulk string with all
/// its announced bytes.
fn complete(reply: &[u8]) -> bool {
    let Some(eol) = reply.windows(2).position(|w| w == b"\r\n") else {
        return false;
    };
    if reply[0] != b'$' {
        return true;
    }
    let len: i64 = String::from_utf8_lossy(&reply[1..eol]).parse().unwrap_or(0);
    len < 0 || reply.len() >= eol + 2 + len as usize + 2
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
