//! Running out of file descriptors: in a child process (this test binary
//! re-run with an env var) with a low `RLIMIT_NOFILE`, a server whose accept
//! loop backs off on `EMFILE` survives a connection flood without spinning
//! (its CPU time during the flood stays small), and serves again once fds
//! are free. The child takes commands on stdin through `coro::net::Fd`.

mod util;

use std::cell::Cell;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream as StdStream};
use std::process::{Child, Stdio};
use std::rc::Rc;
use std::time::{Duration, Instant};

use coro::net::{is_fd_exhaustion, Fd, TcpListener};

const CHILD_ENV: &str = "CORO_NET_EMFILE_CHILD";
const FD_LIMIT: libc::rlim_t = 64;
const FLOOD: usize = 200;

#[test]
fn emfile_flood() -> io::Result<()> {
    if std::env::var_os(CHILD_ENV).is_some() {
        return child();
    }
    let mut child = Guard(
        util::this_binary()
            .args(["--exact", "emfile_flood", "--nocapture", "--test-threads=1"])
            .env(CHILD_ENV, "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()?,
    );
    let mut out = BufReader::new(child.0.stdout.take().unwrap());
    let mut stdin = child.0.stdin.take().unwrap();
    let port: u16 = expect_line(&mut out, "PORT=")?.parse().unwrap();
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let mut ask = |cmd: &str| -> io::Result<Report> {
        writeln!(stdin, "{cmd}")?;
        Ok(Report::parse(&expect_line(&mut out, "CPU=")?))
    };

    // The flood: far more connections than the child has fds.
    let before = ask("cpu")?;
    let mut flood = Vec::new();
    for _ in 0..FLOOD {
        flood.push(StdStream::connect_timeout(&addr, Duration::from_secs(5))?);
    }
    std::thread::sleep(Duration::from_secs(1));
    let during = ask("cpu")?;
    assert!(
        during.emfile > before.emfile,
        "the server never hit EMFILE: {during:?}"
    );
    assert!(during.accepted < FLOOD as u64, "{during:?}");
    let cpu = during.cpu_us - before.cpu_us;
    eprintln!("flood: {before:?} -> {during:?}: {cpu} us of server CPU");
    // A spinning accept loop would burn ~1 s of CPU here.
    assert!(
        cpu < 400_000,
        "server used {cpu} us of CPU during a 1 s flood"
    );
    assert!(
        during.emfile - before.emfile < 200,
        "accept retried too often: {during:?}"
    );

    // Free the fds: the server must serve again.
    drop(flood);
    let mut c = StdStream::connect_timeout(&addr, Duration::from_secs(5))?;
    c.set_read_timeout(Some(Duration::from_secs(10)))?;
    c.write_all(b"hello")?;
    let mut buf = [0; 5];
    c.read_exact(&mut buf)?;
    assert_eq!(&buf, b"hello");

    writeln!(stdin, "quit")?;
    expect_line(&mut out, "BYE")?;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(status) = child.0.try_wait()? {
            assert!(status.success(), "child failed: {status}");
            return Ok(());
        }
        assert!(Instant::now() < deadline, "child did not exit");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Kills the child if the test fails half-way.
struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[derive(Debug)]
struct Report {
    cpu_us: u64,
    emfile: u64,
    accepted: u64,
}

impl Report {
    fn parse(s: &str) -> Report {
        let v: Vec<u64> = s
            .split(' ')
            .map(|f| f.rsplit('=').next().unwrap().parse().unwrap())
            .collect();
        Report {
            cpu_us: v[0],
            emfile: v[1],
            accepted: v[2],
        }
    }
}

/// Reads the child's stdout until a line starting with `prefix`; returns
/// the rest of that line. Bounded by the child's own behaviour: EOF fails.
fn expect_line(out: &mut impl BufRead, prefix: &str) -> io::Result<String> {
    let mut line = String::new();
    loop {
        line.clear();
        if out.read_line(&mut line)? == 0 {
            return Err(io::Error::other(format!("child exited before {prefix}")));
        }
        // libtest's "test emfile_flood ... " may precede it on the line.
        if let Some(i) = line.find(prefix) {
            return Ok(line.trim_end()[i + prefix.len()..].to_owned());
        }
    }
}

fn cpu_us() -> u64 {
    // SAFETY: getrusage fills the zeroed struct it is given.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut ru);
        ru
    };
    let us = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    us(ru.ru_utime) + us(ru.ru_stime)
}

/// The server, in the child process.
fn child() -> io::Result<()> {
    let lim = libc::rlimit {
        rlim_cur: FD_LIMIT,
        rlim_max: FD_LIMIT,
    };
    // SAFETY: setrlimit reads the struct it is given.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) }, 0);
    coro::run(|| -> io::Result<()> {
        let listener = Rc::new(TcpListener::bind("127.0.0.1:0")?);
        println!("PORT={}", listener.local_addr()?.port());
        let emfile = Rc::new(Cell::new(0u64));
        let accepted = Rc::new(Cell::new(0u64));
        let (l, e, a) = (listener.clone(), emfile.clone(), accepted.clone());
        let acceptor = coro::spawn(move || -> io::Result<()> {
            let mut backoff = Duration::from_millis(5);
            loop {
                match l.accept() {
                    Ok((mut s, _)) => {
                        backoff = Duration::from_millis(5);
                        a.set(a.get() + 1);
                        coro::spawn(move || {
                            let mut buf = [0; 512];
                            while let Ok(n @ 1..) = s.read(&mut buf) {
                                if s.write_all(&buf[..n]).is_err() {
                                    break;
                                }
                            }
                        });
                    }
                    Err(err) if is_fd_exhaustion(&err) => {
                        e.set(e.get() + 1);
                        coro::sleep(backoff)?;
                        backoff = (backoff * 2).min(Duration::from_millis(100));
                    }
                    Err(_) if l.is_closed() => return Ok(()),
                    Err(err) => return Err(err),
                }
            }
        });
        let stdin = std::fs::File::from(io::stdin().lock().as_fd_owned()?);
        let stdin = Fd::new(stdin)?;
        for line in BufReader::new(&stdin).lines() {
            match line?.as_str() {
                "cpu" => println!(
                    "CPU={} EMFILE={} ACCEPTED={}",
                    cpu_us(),
                    emfile.get(),
                    accepted.get()
                ),
                "quit" => break,
                other => panic!("unknown command {other:?}"),
            }
        }
        listener.close();
        acceptor.join().unwrap()?;
        println!("BYE");
        Ok(())
    })
}

trait OwnedFdExt {
    fn as_fd_owned(&self) -> io::Result<std::os::fd::OwnedFd>;
}

impl<T: std::os::fd::AsFd> OwnedFdExt for T {
    fn as_fd_owned(&self) -> io::Result<std::os::fd::OwnedFd> {
        self.as_fd().try_clone_to_owned()
    }
}
