//! Helpers shared by the bench files: peer runtimes built the same way in
//! every bench, resident-memory readings, and the echo benches' client.

use std::io::{ErrorKind, Read, Write};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// Bytes of one echo message.
pub const ECHO_MSG: usize = 64;

/// tokio's current-thread runtime, with timers enabled.
pub fn tokio_rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// Configures `may` to run one worker thread (call once, before using may).
pub fn may_one_worker() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        may::config().set_workers(1);
    });
}

/// A coro runtime without latency warnings (benches measure the bare loop).
pub fn coro_rt() -> coro::Runtime {
    coro::Runtime::builder()
        .latency_warning(None)
        .build()
        .expect("coro runtime")
}

/// Resident set size of this process in bytes (Linux `/proc/self/statm`).
pub fn rss_bytes() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = s.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as u64;
    Some(pages * page)
}

/// CPU time the calling OS thread has used (`CLOCK_THREAD_CPUTIME_ID`):
/// the cost of a runtime's work without the time it waited for timers or
/// lost to other processes on this shared machine.
pub fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a live, writable timespec; the clock always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Percentile `p` (0..=100) of sorted durations.
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() - 1) as f64 * p / 100.0).round() as usize;
    sorted[i]
}

/// The echo benches' client (the net bench's, and `echo-ab`'s): `n`
/// connections, each sending a 64-byte message and waiting for its echo
/// before the next, in one mio loop.
#[derive(Debug)]
pub struct EchoClient {
    poll: mio::Poll,
    events: mio::Events,
    conns: Vec<mio::net::TcpStream>,
}

impl EchoClient {
    /// Connects `n` times to `addr`.
    pub fn new(addr: SocketAddr, n: usize) -> EchoClient {
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
        EchoClient {
            poll,
            events: mio::Events::with_capacity(1024),
            conns,
        }
    }

    /// Exchanges `msgs` messages in all; returns the elapsed time.
    pub fn run(&mut self, msgs: u64) -> Duration {
        let msg = [0x5au8; ECHO_MSG];
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
                            while got[i] >= ECHO_MSG {
                                got[i] -= ECHO_MSG;
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

/// Raises this process's soft limit of open files to its hard limit (the
/// echo benches open thousands of connections).
pub fn raise_fd_limit() {
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
