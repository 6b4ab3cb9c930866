//! A front server that routes requests to worker processes through a
//! [`GroupPool`]: Passenger's ApplicationPool with real processes.
//!
//! The front server (coro TCP) reads one request line per connection,
//! `GET <app>`, and forwards it over a Unix socket to a worker process of
//! that application. Workers are this same binary started with
//! `--worker <socket>`; the pool spawns them on demand (up to `--max`),
//! recycles a worker after `--max-requests` requests, reaps workers idle for
//! `--max-idle-ms`, and restarts an application's workers when its
//! `<root>/apps/<app>/tmp/restart.txt` is touched. A reply names the worker
//! that served it: `app=<app> pid=<pid> served=<n>`. `STATUS` returns the
//! pool's counts, `QUIT` stops the server (workers are shut down first).
//!
//! Run it with
//!
//! ```text
//! cargo run --example app_pool -- --listen 127.0.0.1:7100 --root /tmp/apps
//! ```
//!
//! and in another terminal
//!
//! ```text
//! echo 'GET blog' | socat - TCP:127.0.0.1:7100   # a worker is spawned
//! echo 'GET blog' | socat - TCP:127.0.0.1:7100   # the same pid again
//! touch /tmp/apps/apps/blog/tmp/restart.txt   # the directory exists once blog has a worker
//! echo 'GET blog' | socat - TCP:127.0.0.1:7100   # a new pid
//! echo STATUS | socat - TCP:127.0.0.1:7100
//! ```

use std::io::{self, BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::rc::Rc;
use std::time::Duration;

use coro::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use coro::sync::{GroupOptions, GroupPool, Spawner};

/// How long a worker may take to come up.
const START_TIMEOUT: Duration = Duration::from_secs(10);

fn main() -> io::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--worker") {
        let path = args
            .get(1)
            .ok_or_else(|| bad("--worker needs a socket path"))?;
        return coro::run({
            let path = PathBuf::from(path);
            move || worker(&path)
        });
    }
    let cfg = Config::parse(&args)?;
    coro::run(move || front(cfg))
}

fn bad(msg: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg.to_owned())
}

/// The front server's settings, from its flags.
struct Config {
    listen: String,
    root: PathBuf,
    max: usize,
    max_requests: u64,
    max_idle: Duration,
}

impl Config {
    fn parse(args: &[String]) -> io::Result<Config> {
        let mut c = Config {
            listen: "127.0.0.1:7100".into(),
            root: std::env::temp_dir().join("coro-app-pool"),
            max: 4,
            max_requests: 0,
            max_idle: Duration::from_secs(300),
        };
        let mut it = args.iter();
        while let Some(flag) = it.next() {
            let value = it
                .next()
                .ok_or_else(|| bad(&format!("{flag} needs a value")))?;
            let num = |v: &str| {
                v.parse::<u64>()
                    .map_err(|_| bad(&format!("{flag} needs a number, not {v:?}")))
            };
            match flag.as_str() {
                "--listen" => c.listen = value.clone(),
                "--root" => c.root = PathBuf::from(value),
                "--max" => c.max = num(value)? as usize,
                "--max-requests" => c.max_requests = num(value)?,
                "--max-idle-ms" => c.max_idle = Duration::from_millis(num(value)?),
                _ => return Err(bad(&format!("unknown flag {flag}"))),
            }
        }
        Ok(c)
    }
}

/// A worker process and its socket.
struct Worker {
    child: Option<Child>,
    socket: PathBuf,
}

impl Drop for Worker {
    /// Never leaves a process behind, even if `shutdown` did not run.
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.try_wait();
        }
        let _ = std::fs::remove_file(&self.socket);
    }
}

/// Starts workers of this binary, one Unix socket each.
struct Processes {
    root: PathBuf,
    exe: PathBuf,
    started: std::cell::Cell<u64>,
}

impl Spawner for Processes {
    type Key = String;
    type Worker = Worker;
    type Conn = UnixStream;
    type Error = io::Error;

    fn spawn(&self, app: &String) -> io::Result<Worker> {
        // The name becomes a path component (its socket, its directory).
        if app.is_empty() || app.contains(['/', '\0']) || app == "." || app == ".." {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("app_pool: invalid app name {app:?}"),
            ));
        }
        let n = self.started.get() + 1;
        self.started.set(n);
        let dir = self.root.join("run");
        std::fs::create_dir_all(&dir)?;
        // The app's restart directory, so that `touch
        // <root>/apps/<app>/tmp/restart.txt` works as written.
        std::fs::create_dir_all(self.restart_dir(app).expect("every app has one"))?;
        let socket = dir.join(format!("{app}-{n}.sock"));
        let _ = std::fs::remove_file(&socket);
        let child = Command::new(&self.exe)
            .arg("--worker")
            .arg(&socket)
            .spawn()?;
        let worker = Worker {
            child: Some(child),
            socket,
        };
        // Up when its socket accepts; a spawn interrupted (the group was
        // detached) drops the worker, which kills the process.
        coro::with_timeout(START_TIMEOUT, || loop {
            if UnixStream::connect(&worker.socket).is_ok() {
                return Ok(());
            }
            coro::sleep(Duration::from_millis(2))?;
        })
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "worker did not start"))?
        .map_err(|e: coro::WaitError| io::Error::from(e))?;
        Ok(worker)
    }

    fn connect(&self, _: &String, w: &Worker) -> io::Result<UnixStream> {
        UnixStream::connect(&w.socket)
    }

    fn shutdown(&self, mut w: Worker) {
        if let Some(mut child) = w.child.take() {
            let _ = child.kill();
            // Reaping blocks: off the runtime's thread.
            let _ = coro::blocking(move || child.wait());
        }
    }

    fn restart_dir(&self, app: &String) -> Option<PathBuf> {
        Some(self.root.join("apps").join(app).join("tmp"))
    }
}

fn front(cfg: Config) -> io::Result<()> {
    let listener = TcpListener::bind(&cfg.listen)?;
    println!("listening on {}", listener.local_addr()?);
    io::stdout().flush()?;
    let spawner = Processes {
        root: cfg.root.clone(),
        exe: std::env::current_exe()?,
        started: Default::default(),
    };
    let pool = GroupPool::builder()
        .name("app_pool")
        .max(cfg.max)
        .max_idle_time(cfg.max_idle)
        .options(GroupOptions {
            max_requests: cfg.max_requests,
            min_processes: 0,
        })
        .build(spawner)?;
    let stop = Rc::new(coro::sync::Event::new());
    let l = Rc::new(listener);
    let accept = {
        let (l, pool, stop) = (l.clone(), pool.clone(), stop.clone());
        coro::spawn(move || loop {
            let Ok((conn, _)) = l.accept() else { return };
            let (pool, stop) = (pool.clone(), stop.clone());
            coro::spawn(move || {
                if let Err(e) = handle(conn, &pool, &stop) {
                    eprintln!("app_pool: {e}");
                }
            });
        })
    };
    stop.wait()?;
    l.close();
    let _ = accept.join();
    // Stop every worker before leaving.
    for app in pool.groups() {
        pool.detach_group(&app);
    }
    while coro::sleep(Duration::from_millis(5)).is_ok() && any_worker_left(&cfg.root) {}
    Ok(())
}

/// Whether a worker socket is still there (a worker still running).
fn any_worker_left(root: &Path) -> bool {
    std::fs::read_dir(root.join("run"))
        .map(|mut d| d.next().is_some())
        .unwrap_or(false)
}

/// One client connection: one request line, one reply line.
fn handle(
    conn: TcpStream,
    pool: &GroupPool<Processes>,
    stop: &coro::sync::Event,
) -> io::Result<()> {
    let mut line = String::new();
    BufReader::new(&conn).read_line(&mut line)?;
    let mut out = &conn;
    match line.split_whitespace().collect::<Vec<_>>()[..] {
        ["GET", app] if !app.contains('/') && !app.starts_with('.') => {
            let mut session = pool
                .get(&app.to_owned())
                .map_err(|e| io::Error::other(e.to_string()))?;
            let reply = forward(&mut session, app);
            if reply.is_err() {
                session.mark_broken();
            }
            out.write_all(reply?.as_bytes())
        }
        ["STATUS"] => out.write_all(
            format!(
                "count={} active={} groups={}\n",
                pool.count(),
                pool.active(),
                pool.groups().len()
            )
            .as_bytes(),
        ),
        ["QUIT"] => {
            out.write_all(b"bye\n")?;
            stop.set();
            Ok(())
        }
        _ => out.write_all(b"error: expected GET <app>, STATUS or QUIT\n"),
    }
}

/// Sends the request to the worker and returns its reply line.
fn forward(session: &mut UnixStream, app: &str) -> io::Result<String> {
    session.write_all(format!("{app}\n").as_bytes())?;
    let mut reply = String::new();
    BufReader::new(&*session).read_line(&mut reply)?;
    if reply.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the worker hung up",
        ));
    }
    Ok(reply)
}

/// A worker process: answers each connection's request line with its pid
/// and how many requests it has served.
fn worker(path: &Path) -> io::Result<()> {
    #[cfg(target_os = "linux")]
    // SAFETY: prctl with PR_SET_PDEATHSIG takes a signal number and changes
    // only this process's own settings; no memory is passed.
    unsafe {
        // Die with the front server, even if it is killed.
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
    }
    let listener = UnixListener::bind(path)?;
    let served = Rc::new(std::cell::Cell::new(0u64));
    loop {
        let (conn, _) = listener.accept()?;
        let served = served.clone();
        coro::spawn(move || {
            let mut line = String::new();
            if BufReader::new(&conn).read_line(&mut line).is_ok() && !line.is_empty() {
                served.set(served.get() + 1);
                let reply = format!(
                    "app={} pid={} served={}\n",
                    line.trim(),
                    std::process::id(),
                    served.get()
                );
                let _ = (&conn).write_all(reply.as_bytes());
            }
        });
    }
}
