//! `echo-ab`: two builds of one echo server, in alternating rounds.
//!
//! ```text
//! cargo bench -p coro-benches --bench net --no-run   # the server, as before
//! cp target/release/deps/net-<hash> /tmp/net-old      # ... change, build again
//! cargo run --release -p coro-benches --bin echo-ab -- /tmp/net-old target/release/deps/net-<hash> 8 1000 300000
//! ```
//!
//! Each argument A and B is a net bench binary (or a script that `exec`s
//! one, to set its environment): it runs as a child echo server
//! (`CORO_NET_BENCH_ECHO_SERVER`, `coro` unless `SERVER` names another)
//! pinned to CPU 0, and this process drives it from CPU 1 with CONNS
//! connections, one 64-byte message in flight on each, MSGS messages a
//! round. Rounds alternate the order (A B, B A, ...), so neither build
//! always runs second on a machine that drifts.
//!
//! Per round and build it prints the server thread's CPU per message (its
//! CPU clock, `/proc/.../schedstat`), its user time per message and the
//! message rate. User time comes from `perf record -e cpu-clock:u` samples
//! at `FREQ` per second (default 4 000; 20 000 slowed the server threefold),
//! the kernel's own split being tick-sampled, too coarse for differences of
//! a few percent; without `perf` it is left out. The last line gives the
//! median over rounds of B / A, the figure to quote: the machine's drift
//! from round to round is larger than most changes.

use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};

const MSG: usize = 64;

/// One round's figures for one build.
#[derive(Clone, Copy)]
struct Figures {
    cpu_ns: f64,
    user_ns: Option<f64>,
    rate: f64,
}

/// A child echo server pinned to CPU 0.
struct Server {
    child: Child,
    port: u16,
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
        let mut f = line.split_whitespace();
        let mut field = |name: &str| {
            f.next()
                .and_then(|x| x.strip_prefix(name))
                .unwrap_or_else(|| panic!("{program} printed {line:?}, not PORT=.. TID=.."))
                .to_string()
        };
        let port = field("PORT=").parse().expect("a port");
        let tid = field("TID=");
        Server { child, port, tid }
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
        drop(self.child.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The client: a mio loop over `conns` connections.
struct Client {
    poll: Poll,
    conns: Vec<TcpStream>,
}

impl Client {
    fn connect(port: u16, n: usize) -> Client {
        let poll = Poll::new().expect("poll");
        let conns = (0..n)
            .map(|i| {
                let s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
                s.set_nodelay(true).expect("nodelay");
                s.set_nonblocking(true).expect("nonblocking");
                let mut s = TcpStream::from_std(s);
                poll.registry()
                    .register(&mut s, Token(i), Interest::READABLE)
                    .expect("register");
                s
            })
            .collect();
        Client { poll, conns }
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

/// `perf record` of one thread's user-mode CPU clock, if perf runs here.
struct UserSamples {
    perf: Child,
    file: String,
    freq: f64,
}

impl UserSamples {
    fn start(tid: &str, file: String, freq: f64) -> Option<UserSamples> {
        let perf = Command::new("perf")
            .args(["record", "-q", "-e", "cpu-clock:u", "-F"])
            .arg(format!("{freq}"))
            .args(["-t", tid, "-o", &file])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        // perf attaches before the measured messages start.
        std::thread::sleep(Duration::from_millis(300));
        Some(UserSamples { perf, file, freq })
    }

    /// Stops recording; the user time sampled, in nanoseconds.
    fn stop(mut self) -> Option<f64> {
        // SAFETY: kill(2) on perf's pid, a child not yet waited for.
        unsafe { libc::kill(self.perf.id() as libc::pid_t, libc::SIGINT) };
        self.perf.wait().ok()?;
        let out = Command::new("perf")
            .args(["script", "-F", "ip", "-i", &self.file])
            .stderr(Stdio::null())
            .output()
            .ok()?;
        let samples = out
            .stdout
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .count();
        Some(samples as f64 * 1e9 / self.freq)
    }
}

fn pin_to_cpu_1() {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET and
    // sched_setaffinity only read and write it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(1, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set);
    }
}

fn round(program: &str, k: usize, conns: usize, msgs: u64, freq: f64) -> Figures {
    let server = Server::start(program);
    let mut client = Client::connect(server.port, conns);
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

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [a, b, rounds, conns, msgs] = &args[..] else {
        eprintln!("usage: echo-ab SERVER_A SERVER_B ROUNDS CONNS MSGS (see the source's docs)");
        std::process::exit(2);
    };
    let programs = [a.as_str(), b.as_str()];
    let rounds: usize = rounds.parse().expect("ROUNDS: a number");
    let conns: usize = conns.parse().expect("CONNS: a number");
    let msgs: u64 = msgs.parse().expect("MSGS: a number");
    let freq: f64 = std::env::var("FREQ").map_or(4000.0, |f| f.parse().expect("FREQ: a number"));
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
        let v: Option<Vec<f64>> = (0..rounds)
            .map(|i| Some(f(&figures[1][i])? / f(&figures[0][i])?))
            .collect();
        v.map_or("-".into(), |v| format!("{:.3}", median(v)))
    };
    println!(
        "B / A, median over {rounds} rounds: cpu {}, user {}, rate {}",
        ratio(|f| Some(f.cpu_ns)),
        ratio(|f| f.user_ns),
        ratio(|f| Some(f.rate))
    );
}
