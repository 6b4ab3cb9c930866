//! `echo-ab`: two builds of one echo server, in alternating rounds.
//!
//! ```text
//! cargo bench -p coro-benches --bench net --no-run    # build A (before the change)
//! cp target/release/deps/net-<hash> /tmp/net-a
//! # ... make the change, build again (B), then:
//! cargo run --release -p coro-benches --bin echo-ab -- /tmp/net-a target/release/deps/net-<hash> 8 1000 300000
//! ```
//!
//! BIN_A and BIN_B are net bench binaries (or scripts that `exec` one, to
//! set its environment, e.g. `CORO_GUARD`). Each runs as a child echo
//! server (`CORO_NET_BENCH_ECHO_SERVER`: `coro`, unless the `SERVER`
//! variable names another of the net bench's servers) pinned to CPU 0,
//! which this process drives from CPU 1 with CONNS connections, one 64-byte
//! message in flight on each, MSGS messages a round. Rounds alternate the
//! order (A B, B A, ...), so neither build always runs second on a machine
//! that drifts.
//!
//! Per round and build it prints the server thread's CPU per message (its
//! CPU clock, `/proc/.../schedstat`), its user time per message, and the
//! message rate. User time comes from `perf record -e cpu-clock:u` samples
//! at `FREQ` per second (default 4 000; 20 000 slowed the server threefold):
//! the kernel's own user/system split is tick-sampled, too coarse for
//! differences of a few percent. Where perf cannot record, user time is
//! left out. perf's reader runs beside the client on CPU 1: it may slow
//! the client (the rate), not the server's figures. The last line gives
//! the median over rounds of B / A, the figure to quote: the machine's
//! drift from round to round is larger than most changes.

use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};

const MSG: usize = 64;

/// One round's figures for one build.
struct Figures {
    cpu_ns: f64,
    user_ns: Option<f64>,
    rate: f64,
}

/// A child echo server pinned to CPU 0.
struct Server {
    child: Child,
    addr: SocketAddr,
    tid: String,
}

impl Server {
    fn start(program: &str) -> Server {
        let server = std::env::var("SERVER").unwrap_or_else(|_| "coro".into());
        let mut child = Command::new("taskset")
            .args(["-c", "0", program])
            .env("CORO_NET_BENCH_ECHO_SERVER", server)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {program} under taskset: {e}"));
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("piped"))
            .read_line(&mut line)
            .expect("the server's first line");
        let mut fields = line.split_whitespace();
        let mut field = |name: &str| {
            fields
                .next()
                .and_then(|x| x.strip_prefix(name))
                .unwrap_or_else(|| panic!("{program} printed {line:?}, not PORT=.. TID=.."))
                .to_string()
        };
        let port: u16 = field("PORT=").parse().expect("a port");
        let tid = field("TID=");
        Server {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            tid,
        }
    }

    /// The server thread's CPU time so far, in nanoseconds.
    fn cpu_ns(&self) -> u64 {
        let path = format!("/proc/{}/task/{}/schedstat", self.child.id(), self.tid);
        let s = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        s.split_whitespace()
            .next()
            .and_then(|x| x.parse().ok())
            .expect("schedstat's first field")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The client, as the net bench's: `n` connections, each sending a 64-byte
/// message and waiting for its echo before the next, in one mio loop.
///
/// A copy, not shared with `benches/net.rs` through the bench library:
/// moving that file's client into the library changed how the net bench's
/// own coro handler compiled, and its server user time by about 10 %
/// (BENCHMARKS.md, sockets and echo), so the net bench keeps its own.
struct EchoClient {
    poll: Poll,
    conns: Vec<TcpStream>,
}

impl EchoClient {
    fn new(addr: SocketAddr, n: usize) -> EchoClient {
        let poll = Poll::new().expect("poll");
        let conns = (0..n)
            .map(|i| {
                let s = std::net::TcpStream::connect(addr).expect("connect");
                s.set_nodelay(true).expect("nodelay");
                s.set_nonblocking(true).expect("nonblocking");
                let mut s = TcpStream::from_std(s);
                poll.registry()
                    .register(&mut s, Token(i), Interest::READABLE)
                    .expect("register");
                s
            })
            .collect();
        EchoClient { poll, conns }
    }

    /// Echoes `msgs` messages; the time it took.
    fn run(&mut self, msgs: u64) -> Duration {
        let msg = [0x5au8; MSG];
        let mut buf = [0u8; 4096];
        let mut got = vec![0usize; self.conns.len()];
        let (mut sent, mut done) = (0u64, 0u64);
        let start = Instant::now();
        for c in &mut self.conns {
            if sent == msgs {
                break;
            }
            c.write_all(&msg).expect("send");
            sent += 1;
        }
        let mut events = Events::with_capacity(1024);
        while done < msgs {
            self.poll.poll(&mut events, None).expect("poll");
            for ev in events.iter() {
                let i = ev.token().0;
                loop {
                    match self.conns[i].read(&mut buf) {
                        Ok(0) => panic!("the server closed a connection"),
                        Ok(n) => got[i] += n,
                        Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                        Err(e) => panic!("client read: {e}"),
                    }
                }
                while got[i] >= MSG {
                    got[i] -= MSG;
                    done += 1;
                    if sent < msgs {
                        self.conns[i].write_all(&msg).expect("send");
                        sent += 1;
                    }
                }
            }
        }
        start.elapsed()
    }
}

/// Raises the soft limit of open files to the hard one (CONNS sockets).
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

/// `perf record` of one thread's user-mode CPU clock.
struct UserSamples {
    perf: Child,
    file: String,
    freq: u32,
}

impl UserSamples {
    /// Starts recording `tid`, or `None` where perf does not start.
    fn start(tid: &str, file: String, freq: u32) -> Option<UserSamples> {
        // A file left by an earlier round must not be read as this one's.
        let _ = std::fs::remove_file(&file);
        let perf = Command::new("perf")
            .args(["record", "-q", "-e", "cpu-clock:u", "-F"])
            .arg(freq.to_string())
            .args(["-t", tid, "-o", &file])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        // perf attaches before the measured messages start.
        std::thread::sleep(Duration::from_millis(300));
        Some(UserSamples { perf, file, freq })
    }

    /// Stops recording; the user time sampled, in nanoseconds, or `None`
    /// if perf recorded nothing (no permission, a bad `FREQ`, ...).
    fn stop(mut self) -> Option<f64> {
        // SAFETY: kill(2) on perf's pid, a child not yet waited for (so
        // the pid is still its own).
        unsafe { libc::kill(self.perf.id() as libc::pid_t, libc::SIGINT) };
        self.perf.wait().ok()?;
        let out = Command::new("perf")
            .args(["script", "-F", "ip", "-i", &self.file])
            .stderr(Stdio::null())
            .output()
            .ok()
            .filter(|o| o.status.success())?;
        let samples = out
            .stdout
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .count();
        (samples > 0).then(|| samples as f64 * 1e9 / f64::from(self.freq))
    }
}

fn pin_to_cpu_1() {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET and
    // sched_setaffinity only read and write the live local.
    let pinned = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(1, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) == 0
    };
    if !pinned {
        eprintln!(
            "echo-ab: could not pin the client to CPU 1 ({}): it shares the server's CPU",
            std::io::Error::last_os_error()
        );
    }
}

fn round(program: &str, k: usize, conns: usize, msgs: u64, freq: u32) -> Figures {
    let server = Server::start(program);
    let mut client = EchoClient::new(server.addr, conns);
    client.run(conns as u64 * 20); // every handler has run, and warmed up
    let perf = UserSamples::start(&server.tid, format!("/tmp/echo-ab.{k}.perf"), freq);
    let cpu0 = server.cpu_ns();
    let took = client.run(msgs);
    let cpu = server.cpu_ns() - cpu0;
    let user = perf.and_then(UserSamples::stop);
    Figures {
        cpu_ns: cpu as f64 / msgs as f64,
        user_ns: user.map(|u| u / msgs as f64),
        rate: msgs as f64 / took.as_secs_f64(),
    }
}

/// The median of a non-empty list.
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn usage(why: &str) -> ! {
    eprintln!(
        "echo-ab: {why}\nusage: echo-ab BIN_A BIN_B ROUNDS CONNS MSGS (see the source's docs)"
    );
    std::process::exit(2);
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [a, b, rounds, conns, msgs] = &args[..] else {
        usage("five arguments expected");
    };
    let number = |what: &str, s: &str| match s.parse::<u64>() {
        Ok(n) if n > 0 => n,
        _ => usage(&format!("{what} must be a positive number, not {s:?}")),
    };
    let rounds = number("ROUNDS", rounds) as usize;
    let conns = number("CONNS", conns) as usize;
    let msgs = number("MSGS", msgs);
    let freq = match std::env::var("FREQ") {
        Err(_) => 4000,
        Ok(f) => u32::try_from(number("FREQ", &f)).unwrap_or_else(|_| usage("FREQ is too large")),
    };
    let programs = [a.as_str(), b.as_str()];
    raise_fd_limit();
    pin_to_cpu_1();
    let mut figures: [Vec<Figures>; 2] = [Vec::new(), Vec::new()];
    for r in 0..rounds {
        let order = if r % 2 == 0 { [0, 1] } else { [1, 0] };
        for k in order {
            let f = round(programs[k], k, conns, msgs, freq);
            let user = f.user_ns.map_or("-".into(), |u| format!("{u:.0}"));
            println!(
                "round {r} {}: cpu {:.0} ns/msg, user {user} ns/msg, {:.0} msg/s",
                ["A", "B"][k],
                f.cpu_ns,
                f.rate
            );
            figures[k].push(f);
        }
    }
    let ratio = |f: fn(&Figures) -> Option<f64>| {
        let per_round: Option<Vec<f64>> = (0..rounds)
            .map(|i| Some(f(&figures[1][i])? / f(&figures[0][i])?))
            .collect();
        per_round.map_or("-".into(), |v| format!("{:.3}", median(v)))
    };
    println!(
        "B / A, median over {rounds} rounds: cpu {}, user {}, rate {}",
        ratio(|f| Some(f.cpu_ns)),
        ratio(|f| f.user_ns),
        ratio(|f| Some(f.rate))
    );
}
