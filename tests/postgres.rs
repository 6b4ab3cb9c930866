//! tokio-postgres on coro's reactor against a real PostgreSQL server: no
//! tokio runtime; the connection future runs on a green thread, queries
//! run in `block_on` on others, and `with_timeout` cancels a query (the
//! connection goes on working).
//!
//! The test starts its own server: Debian's `postgresql` (installed by
//! scripts/test.sh), `initdb` and `postgres` run as the `postgres` user in
//! a temporary directory, on a free loopback port with trust
//! authentication, stopped (and the directory removed) at the end. If it
//! cannot be started, the test fails saying so.

mod util;

use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::rc::Rc;
use std::time::{Duration, Instant};

use coro::future::block_on;
use coro::net::TcpStream;
use tokio_postgres::{Client, Config, NoTls};

/// A PostgreSQL server of this test: stopped and removed on drop.
struct Server {
    child: Child,
    dir: PathBuf,
    addr: SocketAddr,
}

/// The directory with `initdb` and `postgres`: Debian keeps them out of
/// `PATH`, in `/usr/lib/postgresql/VERSION/bin`.
fn pg_bin() -> PathBuf {
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("bin"))
        .filter(|p| p.join("initdb").exists() && p.join("postgres").exists())
        .collect();
    found.sort();
    found.pop().unwrap_or_else(|| {
        panic!(
            "PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb): this test \
             starts a PostgreSQL server; install Debian's postgresql package (scripts/test.sh does)"
        )
    })
}

fn as_postgres(bin: &Path) -> Command {
    let mut c = Command::new("setpriv");
    c.args([
        "--reuid=postgres",
        "--regid=postgres",
        "--clear-groups",
        "--",
    ])
    .arg(bin);
    c
}

#[track_caller]
fn fail(what: &str, detail: impl std::fmt::Display) -> ! {
    panic!("PostgreSQL could not be started ({what}): {detail}")
}

impl Server {
    fn start() -> Server {
        let bin = pg_bin();
        let dir = std::env::temp_dir().join(format!("coro-pg-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| fail("temp dir", e));
        let uid = |name: &str| {
            let out = Command::new("id").args(["-u", name]).output();
            let out = out.unwrap_or_else(|e| fail("id -u postgres", e));
            if !out.status.success() {
                fail("no `postgres` user", String::from_utf8_lossy(&out.stderr));
            }
            String::from_utf8_lossy(&out.stdout)
                .trim()
                .parse::<u32>()
                .unwrap()
        };
        let pg = uid("postgres");
        std::os::unix::fs::chown(&dir, Some(pg), None).unwrap_or_else(|e| fail("chown", e));
        let data = dir.join("data");
        let out = as_postgres(&bin.join("initdb"))
            .args([
                "-A",
                "trust",
                "-U",
                "postgres",
                "--no-sync",
                "-E",
                "UTF8",
                "-D",
            ])
            .arg(&data)
            .output()
            .unwrap_or_else(|e| fail("setpriv/initdb", e));
        if !out.status.success() {
            fail("initdb", String::from_utf8_lossy(&out.stderr));
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .unwrap()
            .port();
        let child = as_postgres(&bin.join("postgres"))
            .arg("-D")
            .arg(&data)
            .args(["-p", &port.to_string(), "-c", "listen_addresses=127.0.0.1"])
            .args(["-c", "fsync=off", "-c", "max_connections=20", "-k"])
            .arg(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| fail("postgres", e));
        let mut server = Server {
            child,
            dir,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
        };
        server.wait_ready();
        server
    }

    /// Waits until the server accepts a query (startup takes a moment).
    fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        let psql = pg_bin().join("psql");
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                let mut err = String::new();
                if let Some(mut e) = self.child.stderr.take() {
                    let _ = io::Read::read_to_string(&mut e, &mut err);
                }
                fail("the server exited", format!("{status}: {err}"));
            }
            let ok = Command::new(&psql)
                .args(["-h", "127.0.0.1", "-U", "postgres", "-p"])
                .arg(self.addr.port().to_string())
                .args(["-Atc", "SELECT 1", "postgres"])
                .stderr(Stdio::null())
                .output()
                .is_ok_and(|o| o.status.success());
            if ok {
                return;
            }
            if Instant::now() > deadline {
                fail("not ready within 30 s", self.addr);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn config(&self) -> Config {
        let mut c = Config::new();
        c.host("127.0.0.1")
            .port(self.addr.port())
            .user("postgres")
            .dbname("postgres");
        c
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // SIGINT: PostgreSQL's fast shutdown (sessions are ended).
        // SAFETY: kill(2) on our own child's pid, not yet reaped (we wait
        // below), so the pid cannot name another process.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGINT) };
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The green thread that runs a connection future.
type ConnThread = coro::JoinHandle<Result<Result<(), tokio_postgres::Error>, coro::WaitError>>;

/// Connects over a coro socket; the connection future runs on a green
/// thread, whose handle is returned.
fn connect(server: &Server) -> (Rc<Client>, ConnThread) {
    let stream = TcpStream::connect(server.addr).unwrap();
    stream.set_nodelay(true).unwrap();
    let (client, conn) = block_on(server.config().connect_raw(stream, NoTls))
        .unwrap()
        .unwrap();
    let conn = coro::Builder::new()
        .name("pg-connection".into())
        .spawn(move || block_on(conn))
        .unwrap();
    (Rc::new(client), conn)
}

#[test]
fn tokio_postgres_on_coro_runs_50_green_threads_of_200_queries_and_survives_a_timeout() {
    let server = Server::start();
    util::run(move || {
        let (client, conn) = connect(&server);

        let workers: Vec<_> = (0..50i32)
            .map(|w| {
                let client = client.clone();
                coro::spawn(move || {
                    let stmt =
                        block_on(client.prepare("SELECT $1::INT4 * 1000 + $2::INT4, $3::TEXT"))
                            .unwrap()
                            .unwrap();
                    for q in 0..200i32 {
                        let tag = format!("w{w}q{q}");
                        let row = block_on(client.query_one(&stmt, &[&w, &q, &tag]))
                            .unwrap()
                            .unwrap();
                        assert_eq!(row.get::<_, i32>(0), w * 1000 + q);
                        assert_eq!(row.get::<_, &str>(1), tag);
                    }
                })
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }

        // A query cut short by with_timeout: it fails with a timeout...
        let t = coro::clock::now();
        let r = coro::with_timeout(Duration::from_millis(200), || {
            block_on(client.query("SELECT pg_sleep(10)", &[]))
        });
        assert!(matches!(r, Err(coro::Timeout)), "{r:?}");
        let waited = t.elapsed();
        assert!(
            waited >= Duration::from_millis(200) && waited < Duration::from_secs(5),
            "{waited:?}"
        );
        // ... the server stops it (PostgreSQL's cancel request, on a new
        // coro socket) and the connection works on.
        let cancel = TcpStream::connect(server.addr).unwrap();
        block_on(client.cancel_token().cancel_query_raw(cancel, NoTls))
            .unwrap()
            .unwrap();
        let row = block_on(client.query_one("SELECT 41 + 1", &[]))
            .unwrap()
            .unwrap();
        assert_eq!(row.get::<_, i32>(0), 42);

        // Dropping the client ends the connection future.
        drop(client);
        conn.join().unwrap().unwrap().unwrap();
        assert_eq!(coro::stats().io_sources, 0);
        drop(server);
    });
}
