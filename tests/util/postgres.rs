//! A PostgreSQL server a test starts itself: Debian's `postgresql`
//! (installed by scripts/test.sh), `initdb` and `postgres` run as the
//! `postgres` user in a temporary directory, on a free loopback port with
//! trust authentication (user `postgres`, database `postgres`), stopped
//! (and the directory removed) when dropped. If it cannot be started, the
//! test fails saying so.

use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A PostgreSQL server of the test: stopped and removed on drop.
pub struct Server {
    child: Child,
    dir: PathBuf,
    /// Where it listens (loopback).
    pub addr: SocketAddr,
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
    pub fn start() -> Server {
        let bin = pg_bin();
        let dir = std::env::temp_dir().join(format!(
            "coro-pg-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
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
            .args(["-c", "fsync=off", "-c", "max_connections=20"])
            // A backend whose client went away stops its query within
            // this interval instead of when it next writes.
            .args(["-c", "client_connection_check_interval=100ms", "-k"])
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

    /// Runs `sql` with `psql` over a fresh connection; its unaligned,
    /// tuples-only output. It blocks its OS thread: on a green thread, run
    /// [`psql_at`](Server::psql_at) on coro's blocking pool.
    pub fn psql(&self, sql: &str) -> io::Result<String> {
        Server::psql_at(self.addr, sql)
    }

    /// [`psql`](Server::psql) against the server at `addr`.
    pub fn psql_at(addr: SocketAddr, sql: &str) -> io::Result<String> {
        let out = Command::new(pg_bin().join("psql"))
            .args(["-h", "127.0.0.1", "-U", "postgres", "-p"])
            .arg(addr.port().to_string())
            .args(["-Atc", sql, "postgres"])
            .stderr(Stdio::piped())
            .output()?;
        if !out.status.success() {
            return Err(io::Error::other(
                String::from_utf8_lossy(&out.stderr).into_owned(),
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
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
