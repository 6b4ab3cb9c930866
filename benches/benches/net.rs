//! Sockets: a coro echo server beside a tokio current-thread one, driven by
//! the same client (a mio event loop on the bench thread) with 64-byte
//! messages over loopback, at 1, 100 and 1 000 connections; the rate of
//! accept+close; and resident memory with 10 000 idle connections open.
//!
//! A third echo server, `floor`, is a bare mio loop with no runtime at all
//! (one buffer, no tasks, no wakers): the least any epoll-based server can
//! spend per message, so the gap between it and a runtime is that runtime's
//! own cost. `floor` stops reading at a short read, as tokio does;
//! `floor-eagain` reads until `EWOULDBLOCK`, as coro does (one more
//! `recvfrom` per message; see `floor_server`).
//!
//! After criterion's runs the servers take turns in rounds (ratios within a
//! round), then the same at 10 000 connections with each server in a child
//! process (`wide_report`), then resident memory with 10 000 idle
//! connections (`idle_report`). `-- wide` or `-- idle_rss` runs only those;
//! `-- rounds` runs the rounds and the 10 000-connection runs, and
//! `CORO_NET_CONNS=1000` (a comma-separated list) picks which of them.
//!
//! Each server runs on its own OS thread; its CPU time (the thread's CPU
//! clock, split into user and kernel time from `/proc`) is read around every
//! timed run, so the summary gives server CPU per message beside throughput:
//! on a 2-core machine the client may saturate its core first. Run with
//!
//! ```text
//! cargo bench -p coro-benches --bench net
//! ```

use std::collections::BTreeMap;
use std::io::{self, BufRead, BufReader, ErrorKind, Read, Write};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};

const MSG: usize = 64;
const CONNS: [usize; 3] = [1, 100, 1000];
const SERVERS: [&str; 4] = ["coro", "tokio", "floor", "floor-eagain"];
/// Alternating rounds after criterion's runs, and messages per round.
const ROUNDS: usize = 5;
const ROUND_MSGS: [u64; 3] = [20_000, 200_000, 200_000];
const IDLE_CONNS: usize = 10_000;
const IDLE_ENV: &str = "CORO_NET_BENCH_IDLE_SERVER";
/// The 10 000-connection runs: connections, rounds, messages per round.
/// Each server runs in a child process (this machine's hard limit of open
/// files per process, 20 000, does not fit a server's and a client's 10 000
/// sockets each in one process), and the client reconnects in every round.
const WIDE_CONNS: usize = 10_000;
const WIDE_ROUNDS: usize = 3;
const WIDE_MSGS: u64 = 200_000;
const ECHO_ENV: &str = "CORO_NET_BENCH_ECHO_SERVER";

/// What a server does with a connection.
#[derive(Clone, Copy)]
enum Mode {
    /// Echo until EOF.
    Echo,
    /// Close at once.
    Close,
    /// Read until EOF (idle connections).
    Idle,
}

/// A server thread: its address, and its process and kernel thread ids
/// (for its CPU time and user/system split in `/proc`). The process is this
/// one, or a child (the 10 000-connection runs).
#[derive(Clone, Copy)]
struct Server {
    addr: SocketAddr,
    pid: u32,
    tid: libc::pid_t,
}

impl Server {
    /// CPU time the server thread has used (`schedstat`'s run time, in
    /// nanoseconds: the thread's CPU clock).
    fn cpu(&self) -> Duration {
        let s = std::fs::read_to_string(format!("/proc/{}/task/{}/schedstat", self.pid, self.tid))
            .unwrap_or_default();
        let ns = s
            .split_whitespace()
            .next()
            .and_then(|x| x.parse().ok())
            .unwrap_or(0);
        Duration::from_nanos(ns)
    }

    /// User and system CPU time of the server thread, in clock ticks
    /// (`utime` and `stime` of `/proc/<pid>/task/<tid>/stat`).
    fn user_sys_ticks(&self) -> (u64, u64) {
        let stat = std::fs::read_to_string(format!("/proc/{}/task/{}/stat", self.pid, self.tid))
            .unwrap_or_default();
        // The fields after the parenthesised command name; utime and stime
        // are fields 14 and 15 of the whole line.
        let rest = stat.rsplit(')').next().unwrap_or("");
        let mut f = rest.split_whitespace().skip(11);
        let mut next = || f.next().and_then(|x| x.parse().ok()).unwrap_or(0);
        (next(), next())
    }
}

/// The kernel thread id of the calling thread.
fn gettid() -> libc::pid_t {
    // SAFETY: gettid has no preconditions and cannot fail.
    unsafe { libc::gettid() }
}

/// Clock ticks per second, the unit of `/proc`'s CPU times.
fn ticks_per_sec() -> f64 {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_CLK_TCK) as f64 }
}

fn start(name: &str, mode: Mode) -> Server {
    let (tx, rx) = std::sync::mpsc::channel();
    let name = name.to_owned();
    let h = std::thread::spawn(move || {
        let tid = gettid();
        let ready = move |addr| tx.send((addr, tid)).expect("bench waits");
        match name.as_str() {
            "coro" => coro_server(mode, ready),
            "tokio" => tokio_server(mode, ready),
            "floor" => floor_server(ready, false),
            _ => floor_server(ready, true),
        }
    });
    drop(h); // runs until the process exits
    let (addr, tid) = rx.recv().expect("server started");
    Server {
        addr,
        pid: std::process::id(),
        tid,
    }
}

/// coro's echo server. `CORO_GUARD=BYTES` in the environment sets its
/// stacks' guard gap (`RuntimeBuilder::stack_guard_size`), to compare the
/// default 1 MiB gap with a one-page guard at scale.
fn coro_server(mode: Mode, ready: impl FnOnce(SocketAddr) + Send + 'static) {
    let mut b = coro::Runtime::builder().latency_warning(None);
    if let Some(g) = std::env::var("CORO_GUARD")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        b = b.stack_guard_size(g);
    }
    let mut rt = b.build().expect("coro runtime");
    rt.block_on(move || {
        let listener = coro::net::TcpListener::bind("127.0.0.1:0").unwrap();
        ready(listener.local_addr().unwrap());
        loop {
            let (mut s, _) = match listener.accept() {
                Ok(c) => c,
                Err(_) => {
                    let _ = coro::sleep(Duration::from_millis(10));
                    continue;
                }
            };
            match mode {
                Mode::Close => drop(s),
                Mode::Echo | Mode::Idle => {
                    let _ = s.set_nodelay(true);
                    coro::spawn(move || {
                        let mut buf = [0u8; 1024];
                        while let Ok(n @ 1..) = s.read(&mut buf) {
                            if s.write_all(&buf[..n]).is_err() {
                                break;
                            }
                        }
                    });
                }
            }
        }
    })
}

/// `CORO_NET_BENCH_TOKIO_STRIDE=BYTES`: tokio's echo tasks keep their
/// buffers where a stackful server's threads would, as an experiment of
/// BENCHMARKS.md's echo section: what the pages a green thread's stack
/// adds per connection cost tokio.
///
/// Each connection gets a slot of one sparse mapping, `BYTES` apart (a
/// stack slot's spacing: guard gap plus stack size). At the slot's top are
/// the task's buffer and lines standing for a thread's frames: one written
/// after every socket call (the socket call's frame), and seven written
/// each time the task is polled (what a switch into the thread and the
/// frames it returns through touch: coro prefetches eight lines around a
/// stack top). On a real stack some frames sit below the buffer; all are
/// in the top page either way, which is what is measured. A slot is
/// reused once its connection ends, most recently freed first, as coro's
/// stacks are (coro also gives a freed stack's pages back past its pool's
/// size or after two idle seconds; these slots keep theirs).
#[derive(Clone)]
struct StackSlots {
    free: std::sync::Arc<std::sync::Mutex<Vec<StackSlot>>>,
}

/// One connection's slot (see [`StackSlots`]).
struct StackSlot {
    buf: &'static mut [u8],
    after_call: &'static mut [u8],
    on_poll: &'static mut [u8],
}

/// Lines of a [`StackSlot`] written on every poll.
const ON_POLL_LINES: usize = 7;

/// Writes one byte in each cache line of `lines`.
fn touch_lines(lines: &mut [u8]) {
    for i in (0..lines.len()).step_by(64) {
        lines[i] = lines[i].wrapping_add(1);
    }
}

impl StackSlots {
    /// Slots for this many connections open at once.
    const SLOTS: usize = 12_000;

    /// The slots `CORO_NET_BENCH_TOKIO_STRIDE` asks for, if it is set.
    fn from_env() -> Option<StackSlots> {
        let stride: usize = match std::env::var("CORO_NET_BENCH_TOKIO_STRIDE") {
            Ok(v) => v
                .parse()
                .unwrap_or_else(|_| panic!("CORO_NET_BENCH_TOKIO_STRIDE: not a byte count: {v}")),
            Err(_) => return None,
        };
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
        let top = 1024 + 64 + ON_POLL_LINES * 64;
        assert!(
            stride >= top && stride.is_multiple_of(page),
            "CORO_NET_BENCH_TOKIO_STRIDE: whole pages, at least {top} bytes"
        );
        let len = stride
            .checked_mul(Self::SLOTS)
            .expect("slots overflow usize");
        // SAFETY: no address hint and no MAP_FIXED, so the new mapping
        // overlaps nothing; the result is checked below.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE | libc::MAP_STACK,
                -1,
                0,
            )
        };
        assert!(
            p != libc::MAP_FAILED,
            "mmap: {}",
            io::Error::last_os_error()
        );
        // As coro's stack slots: no huge page may back a slot's top. A
        // failure changes nothing but the page size, so it is ignored.
        // SAFETY: advice on the mapping just made; it changes no contents.
        unsafe { libc::madvise(p, len, libc::MADV_NOHUGEPAGE) };
        // SAFETY: `len` bytes at `p` are mapped read-write and zeroed (and
        // `len` ≤ isize::MAX, or the mapping would have failed), and
        // nothing ever unmaps them, so the slice lives as long as the
        // process; this is the one reference made to them.
        let all: &'static mut [u8] = unsafe { std::slice::from_raw_parts_mut(p.cast(), len) };
        let mut free: Vec<StackSlot> = all
            .chunks_exact_mut(stride)
            .map(|slot| {
                let at = slot.len() - top;
                let (buf, frames) = slot[at..].split_at_mut(1024);
                let (after_call, on_poll) = frames.split_at_mut(64);
                StackSlot {
                    buf,
                    after_call,
                    on_poll,
                }
            })
            .collect();
        free.reverse();
        Some(StackSlots {
            free: std::sync::Arc::new(std::sync::Mutex::new(free)),
        })
    }

    /// An echo task for `s` in the most recently freed slot.
    fn echo(&self, mut s: tokio::net::TcpStream) -> impl std::future::Future<Output = ()> + Send {
        use std::future::Future;
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let StackSlot {
            buf,
            after_call,
            on_poll,
        } = self
            .free
            .lock()
            .unwrap()
            .pop()
            .expect("more connections open at once than slots");
        let slots = self.clone();
        async move {
            let mut echo = std::pin::pin!(async move {
                while let Ok(n @ 1..) = s.read(buf).await {
                    touch_lines(after_call);
                    if s.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                    touch_lines(after_call);
                }
                (buf, after_call)
            });
            let (buf, after_call) = std::future::poll_fn(|cx| {
                touch_lines(on_poll);
                echo.as_mut().poll(cx)
            })
            .await;
            slots.free.lock().unwrap().push(StackSlot {
                buf,
                after_call,
                on_poll,
            });
        }
    }
}

fn tokio_server(mode: Mode, ready: impl FnOnce(SocketAddr) + Send + 'static) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let slots = match mode {
        Mode::Echo => StackSlots::from_env(),
        Mode::Close | Mode::Idle => None,
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        ready(listener.local_addr().unwrap());
        loop {
            let (mut s, _) = match listener.accept().await {
                Ok(c) => c,
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            };
            match mode {
                Mode::Close => drop(s),
                Mode::Echo | Mode::Idle => {
                    let _ = s.set_nodelay(true);
                    match &slots {
                        None => tokio::spawn(async move {
                            let mut buf = [0u8; 1024];
                            while let Ok(n @ 1..) = s.read(&mut buf).await {
                                if s.write_all(&buf[..n]).await.is_err() {
                                    break;
                                }
                            }
                        }),
                        Some(slots) => tokio::spawn(slots.echo(s)),
                    };
                }
            }
        }
    })
}

/// The floor: an echo server that is one mio loop and one buffer, with no
/// runtime. Replies are 64 bytes, so a write never finds the socket buffer
/// full; a connection that fails or ends is dropped.
///
/// `floor` stops reading at a short read, as tokio does (one `recvfrom` per
/// message); `floor-eagain` (`until_eagain`) reads until `EWOULDBLOCK`, as
/// coro does on sockets other than TCP streams (a short read does not
/// prove them empty), so it spends the syscalls per message that rule
/// costs.
fn floor_server(ready: impl FnOnce(SocketAddr), until_eagain: bool) {
    const LISTENER: mio::Token = mio::Token(usize::MAX);
    let mut poll = mio::Poll::new().unwrap();
    let mut listener = mio::net::TcpListener::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    poll.registry()
        .register(&mut listener, LISTENER, mio::Interest::READABLE)
        .unwrap();
    ready(listener.local_addr().unwrap());
    let mut conns: slab::Slab<mio::net::TcpStream> = slab::Slab::new();
    let mut events = mio::Events::with_capacity(1024);
    let mut buf = [0u8; 1024];
    loop {
        poll.poll(&mut events, None).unwrap();
        for ev in events.iter() {
            if ev.token() == LISTENER {
                while let Ok((mut s, _)) = listener.accept() {
                    let _ = s.set_nodelay(true);
                    let entry = conns.vacant_entry();
                    let token = mio::Token(entry.key());
                    poll.registry()
                        .register(&mut s, token, mio::Interest::READABLE)
                        .unwrap();
                    entry.insert(s);
                }
                continue;
            }
            let key = ev.token().0;
            let Some(c) = conns.get(key) else { continue };
            let alive = loop {
                match (&*c).read(&mut buf) {
                    Ok(0) => break false,
                    Ok(n) => {
                        if (&*c).write_all(&buf[..n]).is_err() {
                            break false;
                        }
                        if n < buf.len() && !until_eagain {
                            break true; // drained, as tokio assumes
                        }
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break true,
                    Err(_) => break false,
                }
            };
            if !alive {
                let mut s = conns.remove(key);
                let _ = poll.registry().deregister(&mut s);
            }
        }
    }
}

/// The shared client: `n` connections, each sending a 64-byte message and
/// waiting for its echo before the next, in one mio loop.
struct Client {
    poll: mio::Poll,
    events: mio::Events,
    conns: Vec<mio::net::TcpStream>,
}

impl Client {
    fn new(addr: SocketAddr, n: usize) -> Client {
        let poll = mio::Poll::new().unwrap();
        let mut conns = Vec::with_capacity(n);
        for i in 0..n {
            let s = std::net::TcpStream::connect(addr).unwrap();
            s.set_nodelay(true).unwrap();
            s.set_nonblocking(true).unwrap();
            let mut s = mio::net::TcpStream::from_std(s);
            poll.registry()
                .register(&mut s, mio::Token(i), mio::Interest::READABLE)
                .unwrap();
            conns.push(s);
        }
        Client {
            poll,
            events: mio::Events::with_capacity(1024),
            conns,
        }
    }

    /// Exchanges `msgs` messages in all; returns the elapsed time.
    fn run(&mut self, msgs: u64) -> Duration {
        let msg = [0x5au8; MSG];
        let mut got = vec![0usize; self.conns.len()];
        let mut sent = 0u64;
        let mut done = 0u64;
        let start = Instant::now();
        for c in &self.conns {
            if sent == msgs {
                break;
            }
            (&*c).write_all(&msg).unwrap();
            sent += 1;
        }
        let mut buf = [0u8; 4096];
        while done < msgs {
            self.poll.poll(&mut self.events, None).unwrap();
            for ev in self.events.iter() {
                let i = ev.token().0;
                let c = &self.conns[i];
                loop {
                    match (&*c).read(&mut buf) {
                        Ok(0) => panic!("server closed a connection"),
                        Ok(n) => {
                            got[i] += n;
                            while got[i] >= MSG {
                                got[i] -= MSG;
                                done += 1;
                                if sent < msgs {
                                    (&*c).write_all(&msg).unwrap();
                                    sent += 1;
                                }
                            }
                        }
                        Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                        Err(e) => panic!("client read: {e}"),
                    }
                }
            }
        }
        start.elapsed()
    }
}

/// An echo server and the client connected to it.
struct Rig {
    server: Server,
    client: Client,
}

impl Rig {
    fn new(name: &str, conns: usize) -> Rig {
        let server = start(name, Mode::Echo);
        let client = Client::new(server.addr, conns);
        Rig { server, client }
    }

    /// Exchanges `msgs` messages and adds what it cost to `t`.
    fn measure(&mut self, msgs: u64, t: &mut Totals) -> Duration {
        let (user0, sys0) = self.server.user_sys_ticks();
        let cpu0 = self.server.cpu();
        let el = self.client.run(msgs);
        t.cpu += self.server.cpu() - cpu0;
        let (user1, sys1) = self.server.user_sys_ticks();
        t.user_ticks += user1 - user0;
        t.sys_ticks += sys1 - sys0;
        t.msgs += msgs;
        t.elapsed += el;
        el
    }
}

/// The median of `v` (which must not be empty).
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Connects, waits for the server's close, repeats `n` times.
fn accept_close(addr: SocketAddr, n: u64) -> Duration {
    let start = Instant::now();
    let mut buf = [0u8; 16];
    for _ in 0..n {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        while let Ok(1..) = s.read(&mut buf) {}
    }
    start.elapsed()
}

/// Totals of one configuration across all of criterion's runs.
#[derive(Default)]
struct Totals {
    msgs: u64,
    elapsed: Duration,
    cpu: Duration,
    user_ticks: u64,
    sys_ticks: u64,
}

impl Totals {
    fn rate(&self) -> f64 {
        self.msgs as f64 / self.elapsed.as_secs_f64()
    }

    /// Server CPU nanoseconds per message.
    fn cpu_ns(&self) -> f64 {
        self.cpu.as_nanos() as f64 / self.msgs as f64
    }

    /// Server user and system nanoseconds per message (tick resolution).
    fn user_sys_ns(&self) -> (f64, f64) {
        let per = 1e9 / ticks_per_sec() / self.msgs as f64;
        (self.user_ticks as f64 * per, self.sys_ticks as f64 * per)
    }
}

fn raise_fd_limit() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit read and write the live local struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}

fn rss_bytes() -> u64 {
    let s = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = s
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    pages * unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as u64
}

/// Child mode: a server that reports its RSS before and after `IDLE_CONNS`
/// idle connections arrive.
fn idle_server(name: &str) {
    raise_fd_limit();
    let base = rss_bytes();
    let server = start(name, Mode::Idle);
    println!("PORT={}", server.addr.port());
    let mut line = String::new();
    io::stdin().read_line(&mut line).unwrap(); // the parent has connected
    std::thread::sleep(Duration::from_millis(300));
    let soon = rss_bytes();
    // Long enough for coro's idle stacks to be copied out (two sweeps of
    // its default 2 s `idle_stack_release`).
    std::thread::sleep(Duration::from_millis(5_000));
    println!("RSS={base} {soon} {}", rss_bytes());
    io::stdin().read_line(&mut line).unwrap();
}

/// Resident memory of a server process with `IDLE_CONNS` idle connections:
/// before they connect, 300 ms after, and 5.3 s after. With `filled`, each
/// connection first exchanges one 1 KiB message, so every handler's read
/// buffer holds data (not zeros) while it idles.
fn idle_rss(name: &str, filled: bool) -> io::Result<(u64, u64, u64)> {
    let mut child = Command::new(std::env::current_exe()?)
        .env(IDLE_ENV, name)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()?;
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut stdin = child.stdin.take().unwrap();
    let mut line = String::new();
    out.read_line(&mut line)?;
    let port: u16 = line.trim().trim_start_matches("PORT=").parse().unwrap();
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let conns: Vec<_> = (0..IDLE_CONNS)
        .map(|_| std::net::TcpStream::connect(addr))
        .collect::<io::Result<_>>()?;
    if filled {
        let msg = [0x5au8; 1024];
        let mut back = [0u8; 1024];
        for mut c in &conns {
            c.write_all(&msg)?;
            c.read_exact(&mut back)?;
        }
    }
    // One round trip on the last one: the server has accepted them all.
    let mut last = &conns[IDLE_CONNS - 1];
    last.write_all(b"x")?;
    last.read_exact(&mut [0u8; 1])?;
    writeln!(stdin, "measure")?;
    line.clear();
    out.read_line(&mut line)?;
    let v: Vec<u64> = line
        .trim()
        .trim_start_matches("RSS=")
        .split(' ')
        .map(|x| x.parse().unwrap())
        .collect();
    let _ = child.kill();
    let _ = child.wait();
    Ok((v[0], v[1], v[2]))
}

fn main() {
    if let Ok(name) = std::env::var(IDLE_ENV) {
        return idle_server(&name);
    }
    if let Ok(name) = std::env::var(ECHO_ENV) {
        return echo_server_child(&name);
    }
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    raise_fd_limit();
    if std::env::args().any(|a| a == "idle_rss") {
        // `cargo bench -p coro-benches --bench net -- idle_rss`: only that.
        return idle_report();
    }
    if std::env::args().any(|a| a == "wide") {
        // `cargo bench -p coro-benches --bench net -- wide`: only that.
        return wide_report();
    }
    if std::env::args().any(|a| a == "rounds") {
        // `cargo bench -p coro-benches --bench net -- rounds`: the
        // alternating rounds at 1, 100 and 1 000 connections, then 10 000
        // (no criterion runs, no memory report).
        let mut rigs = BTreeMap::new();
        alternating_report(&mut rigs);
        drop(rigs);
        return wide_report();
    }
    let mut c = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(2))
        .configure_from_args();
    let mut totals: BTreeMap<(usize, &str), Totals> = BTreeMap::new();

    let mut g = c.benchmark_group("net::echo_64b");
    g.throughput(Throughput::Elements(1));
    let mut rigs: BTreeMap<(usize, &str), Rig> = BTreeMap::new();
    for conns in CONNS {
        for name in SERVERS {
            let rig = rigs
                .entry((conns, name))
                .or_insert_with(|| Rig::new(name, conns));
            let t = totals.entry((conns, name)).or_default();
            g.bench_function(format!("{name}/conns={conns}"), |b| {
                b.iter_custom(|iters| {
                    let msgs = iters.max(conns as u64);
                    let el = rig.measure(msgs, t);
                    el.mul_f64(iters as f64 / msgs as f64)
                })
            });
        }
    }
    g.finish();

    let mut ac: BTreeMap<&str, Totals> = BTreeMap::new();
    let mut g = c.benchmark_group("net::accept_close");
    g.throughput(Throughput::Elements(1));
    for name in ["coro", "tokio"] {
        let server = start(name, Mode::Close);
        let t = ac.entry(name).or_default();
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let cpu0 = server.cpu();
                let el = accept_close(server.addr, iters);
                t.cpu += server.cpu() - cpu0;
                t.msgs += iters;
                t.elapsed += el;
                el
            })
        });
    }
    g.finish();

    println!(
        "\nnet summary (all timed runs; server CPU from its thread's CPU clock, \
         user/sys split from /proc at tick resolution; ratios against tokio)"
    );
    println!(
        "{:<28} {:>10} {:>10} {:>9} {:>9} {:>7} {:>7}",
        "bench", "msg/s", "cpu ns/msg", "user ns", "sys ns", "tput x", "cpu x"
    );
    for conns in CONNS {
        let to = &totals[&(conns, "tokio")];
        for name in SERVERS {
            let t = &totals[&(conns, name)];
            let (user, sys) = t.user_sys_ns();
            println!(
                "{:<28} {:>10.0} {:>10.0} {:>9.0} {:>9.0} {:>7.2} {:>7.2}",
                format!("net::echo_64b/{name}/conns={conns}"),
                t.rate(),
                t.cpu_ns(),
                user,
                sys,
                t.rate() / to.rate(),
                t.cpu_ns() / to.cpu_ns(),
            );
        }
    }
    let to = &ac["tokio"];
    for name in ["coro", "tokio"] {
        let t = &ac[name];
        println!(
            "{:<28} {:>10.0} {:>10.0} {:>9} {:>9} {:>7.2} {:>7.2}",
            format!("net::accept_close/{name}"),
            t.rate(),
            t.cpu_ns(),
            "",
            "",
            t.rate() / to.rate(),
            t.cpu_ns() / to.cpu_ns(),
        );
    }

    alternating_report(&mut rigs);
    drop(rigs);
    wide_report();
    idle_report();
}

/// Whether the rounds at `conns` connections run: all of them, or those
/// listed in `CORO_NET_CONNS` (say `CORO_NET_CONNS=1000,10000`).
fn conns_selected(conns: usize) -> bool {
    match std::env::var("CORO_NET_CONNS") {
        Ok(list) => list.split(',').any(|c| c.trim().parse() == Ok(conns)),
        Err(_) => true,
    }
}

/// The servers take turns at 1, 100 and 1 000 connections (building any
/// rig `rigs` lacks).
fn alternating_report(rigs: &mut BTreeMap<(usize, &'static str), Rig>) {
    // The VM's noise (which core the kernel runs the loopback softirq on,
    // steal time) moves CPU per message by ±25% between criterion's
    // back-to-back runs, so the servers also take turns: each round runs
    // every server once, and the ratio is taken within a round.
    println!(
        "\nnet alternating: {ROUNDS} rounds, servers in turn within a round; \
         medians of server CPU per message and of the per-round ratio to tokio; \
         user CPU above the floor (runtime - floor) against tokio's, summed over the rounds \
         (user time is sampled at the 10 ms tick, so each round's is rough)"
    );
    for (conns, msgs) in CONNS.into_iter().zip(ROUND_MSGS) {
        if !conns_selected(conns) {
            continue;
        }
        let mut per_round: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
        let mut sums: BTreeMap<&str, Totals> = BTreeMap::new();
        for _ in 0..ROUNDS {
            for name in SERVERS {
                let mut t = Totals::default();
                rigs.entry((conns, name))
                    .or_insert_with(|| Rig::new(name, conns))
                    .measure(msgs, &mut t);
                per_round.entry(name).or_default().push(t.cpu_ns());
                let sum = sums.entry(name).or_default();
                sum.msgs += t.msgs;
                sum.cpu += t.cpu;
                sum.elapsed += t.elapsed;
                sum.user_ticks += t.user_ticks;
                sum.sys_ticks += t.sys_ticks;
            }
        }
        let tokio = &per_round["tokio"];
        let user = |name: &str| sums[name].user_sys_ns().0;
        let floor = user("floor");
        for name in SERVERS {
            let cpu = &per_round[name];
            let ratios: Vec<f64> = cpu.iter().zip(tokio).map(|(c, t)| c / t).collect();
            let above = if name.starts_with("floor") {
                format!("   user {:.0} ns/msg", user(name))
            } else {
                let sound = user("floor-eagain");
                format!(
                    "   user {:.0} ns/msg, above the floor {:.0} (x {:.2} tokio's), above floor-eagain {:.0}",
                    user(name),
                    user(name) - floor,
                    (user(name) - floor) / (user("tokio") - floor),
                    user(name) - sound,
                )
            };
            println!(
                "{:<28} {:>10.0} ns/msg   {:>8.0} msg/s (x {:.2})   cpu x {:.2} (rounds {:.2}..{:.2}){above}",
                format!("net::echo_64b/{name}/conns={conns}"),
                median(cpu.clone()),
                sums[name].rate(),
                sums[name].rate() / sums["tokio"].rate(),
                median(ratios.clone()),
                ratios.iter().copied().fold(f64::INFINITY, f64::min),
                ratios.iter().copied().fold(0.0, f64::max),
            );
        }
    }
}

/// Child mode: an echo server (its name in `ECHO_ENV`) that prints its
/// port and thread id and runs until its standard input closes.
fn echo_server_child(name: &str) {
    raise_fd_limit();
    let server = start(name, Mode::Echo);
    println!("PORT={} TID={}", server.addr.port(), server.tid);
    let mut line = String::new();
    while io::stdin()
        .read_line(&mut line)
        .map(|n| n > 0)
        .unwrap_or(false)
    {}
}

/// Echo at `WIDE_CONNS` connections, each server in a child process; the
/// servers take turns within a round (the client reconnects each time).
fn wide_report() {
    if !conns_selected(WIDE_CONNS) {
        return;
    }
    let mut children = Vec::new();
    for name in SERVERS {
        let mut child = Command::new(std::env::current_exe().expect("bench binary"))
            .env(ECHO_ENV, name)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("child server");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let mut f = line.split_whitespace();
        let port: u16 = f
            .next()
            .unwrap()
            .trim_start_matches("PORT=")
            .parse()
            .unwrap();
        let tid: libc::pid_t = f
            .next()
            .unwrap()
            .trim_start_matches("TID=")
            .parse()
            .unwrap();
        let server = Server {
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            pid: child.id(),
            tid,
        };
        children.push((name, child, server));
    }
    let mut sums: BTreeMap<&str, Totals> = BTreeMap::new();
    let mut per_round: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for _ in 0..WIDE_ROUNDS {
        for (name, _, server) in &children {
            let mut client = Client::new(server.addr, WIDE_CONNS);
            client.run(WIDE_CONNS as u64); // every handler has run once
            let mut rig = Rig {
                server: *server,
                client,
            };
            let mut t = Totals::default();
            rig.measure(WIDE_MSGS, &mut t);
            per_round.entry(name).or_default().push(t.cpu_ns());
            let sum = sums.entry(name).or_default();
            sum.msgs += t.msgs;
            sum.cpu += t.cpu;
            sum.elapsed += t.elapsed;
            sum.user_ticks += t.user_ticks;
            sum.sys_ticks += t.sys_ticks;
        }
    }
    println!(
        "\nnet wide: {WIDE_CONNS} connections, servers in child processes, {WIDE_ROUNDS} rounds of {WIDE_MSGS} messages"
    );
    let user = |name: &str| sums[name].user_sys_ns().0;
    let tokio = &per_round["tokio"];
    for name in SERVERS {
        let cpu = &per_round[name];
        let ratios: Vec<f64> = cpu.iter().zip(tokio).map(|(c, t)| c / t).collect();
        let t = &sums[name];
        let above = if name.starts_with("floor") {
            format!("user {:.0} ns/msg", user(name))
        } else {
            format!(
                "user {:.0} ns/msg, above the floor {:.0} (x {:.2} tokio's), above floor-eagain {:.0}",
                user(name),
                user(name) - user("floor"),
                (user(name) - user("floor")) / (user("tokio") - user("floor")),
                user(name) - user("floor-eagain"),
            )
        };
        println!(
            "{:<34} {:>8.0} ns/msg   cpu x {:.2}   {:>8.0} msg/s (x {:.2})   {above}",
            format!("net::echo_64b/{name}/conns={WIDE_CONNS}"),
            median(cpu.clone()),
            median(ratios),
            t.rate(),
            t.rate() / sums["tokio"].rate(),
        );
    }
    for (_, mut child, _) in children {
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// Prints the resident memory of each server with idle connections.
fn idle_report() {
    for filled in [false, true] {
        for name in ["coro", "tokio"] {
            let what = if filled {
                "idle_rss_after_1k_echo"
            } else {
                "idle_rss"
            };
            match idle_rss(name, filled) {
                Ok((base, soon, idle)) => println!(
                    "net::{what}/{name}: {:.1} MiB resident with {IDLE_CONNS} idle connections ({:.0} bytes each over a {:.1} MiB base); \
                     after 5 s idle {:.1} MiB ({:.0} bytes each)",
                    soon as f64 / (1 << 20) as f64,
                    soon.saturating_sub(base) as f64 / IDLE_CONNS as f64,
                    base as f64 / (1 << 20) as f64,
                    idle as f64 / (1 << 20) as f64,
                    idle.saturating_sub(base) as f64 / IDLE_CONNS as f64,
                ),
                Err(e) => println!("net::{what}/{name}: failed: {e}"),
            }
        }
    }
}
