//! Helpers shared by the relay's integration tests: the real binary in a
//! temporary directory, a plain SMTP client for exact replies, and the
//! system tools (swaks, python3) the other tests drive.

#![allow(dead_code, unused_imports)]

pub mod tls;
pub mod users;

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

pub use coro_test_support::{TempDir, LIMIT};

/// `run_as_root = true` when the tests run as root (as they do in CI) and
/// `extra` says nothing of who the relay runs as, so that the relay runs as
/// the tests' user; else nothing.
pub fn root_setting(extra: &str) -> &'static str {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if root && !extra.contains("user =") && !extra.contains("run_as_root") {
        "run_as_root = true\n"
    } else {
        ""
    }
}

/// Writes a private key file: mode 0600, as the relay requires
/// (`require_safe_keys`).
pub fn write_private(path: &Path, bytes: &[u8]) {
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .unwrap();
    f.write_all(bytes).unwrap();
}

/// Fails the test, naming the tool and its package, if `cmd` is missing.
#[track_caller]
pub fn require(cmd: &str, package: &str) {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {cmd}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        found,
        "this test needs `{cmd}` (Debian package {package}); `bash scripts/test.sh` installs it"
    );
}

/// The relay binary running in a temporary directory.
pub struct Relay {
    pub child: Child,
    pub addr: SocketAddr,
    /// The line the relay printed on stdout when it started.
    pub banner: String,
    pub dir: PathBuf,
    /// Keeps the directory alive (None when borrowed from another relay).
    _tmp: Option<TempDir>,
}

impl Relay {
    /// Starts the relay with `extra` TOML after the test defaults (listen
    /// on a free loopback port, spool and Maildir in a fresh directory).
    pub fn start(tag: &str, extra: &str) -> Relay {
        let tmp = TempDir::new(tag);
        let dir = tmp.0.clone();
        let mut r = Relay::start_in(&dir, extra);
        r._tmp = Some(tmp);
        r
    }

    /// Starts the relay on the spool and Maildir of `dir` (kept).
    pub fn start_in(dir: &Path, extra: &str) -> Relay {
        Relay::start_with_args(dir, extra, &[])
    }

    /// As `start_in`, with extra command-line arguments.
    pub fn start_with_args(dir: &Path, extra: &str, args: &[&str]) -> Relay {
        Relay::spawn(dir, extra, args, None, None, &[])
    }

    /// As `start_in`, with the file mode creation mask (`umask`) at `mask`.
    pub fn start_with_umask(dir: &Path, extra: &str, mask: u32) -> Relay {
        Relay::spawn(dir, extra, &[], None, Some(mask), &[])
    }

    /// As `start_in`, with these variables in the relay's environment (an
    /// `LD_PRELOAD` shim's).
    pub fn start_with_env(dir: &Path, extra: &str, env: &[(String, String)]) -> Relay {
        Relay::spawn(dir, extra, &[], None, None, env)
    }

    /// As [`start`](Relay::start), with the open-file limit (soft and hard,
    /// as `prlimit --nofile` sets them) at `nofile`.
    pub fn start_with_fd_limit(tag: &str, extra: &str, nofile: u32) -> Relay {
        let tmp = TempDir::new(tag);
        let mut r = Relay::spawn(&tmp.0.clone(), extra, &[], Some(nofile), None, &[]);
        r._tmp = Some(tmp);
        r
    }

    fn spawn(
        dir: &Path,
        extra: &str,
        args: &[&str],
        nofile: Option<u32>,
        umask: Option<u32>,
        env: &[(String, String)],
    ) -> Relay {
        let config = dir.join("relay.toml");
        // Tests compare contents byte for byte: no Date:/Message-ID: added
        // to their (trusted, loopback) submissions unless they ask.
        let headers = if extra.contains("add_missing_headers") {
            ""
        } else {
            "add_missing_headers = false\n"
        };
        let root = root_setting(extra);
        std::fs::write(
            &config,
            format!(
                "listen = \"127.0.0.1:0\"\nhostname = \"relay.test\"\nspool_dir = \"{}\"\nmaildir = \"{}\"\nlog_level = \"debug\"\n{headers}{root}{extra}\n",
                dir.join("spool").display(),
                dir.join("maildir").display()
            ),
        )
        .unwrap();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("relay.log"))
            .unwrap();
        let bin = env!("CARGO_BIN_EXE_mail-relay");
        let mut cmd = match nofile {
            None => Command::new(bin),
            Some(n) => {
                require("prlimit", "util-linux");
                let mut c = Command::new("prlimit");
                c.arg(format!("--nofile={n}:{n}")).arg("--").arg(bin);
                c
            }
        };
        if let Some(mask) = umask {
            use std::os::unix::process::CommandExt;
            // SAFETY: the closure runs in the child between fork and exec;
            // umask is async-signal-safe and touches no memory.
            unsafe {
                cmd.pre_exec(move || {
                    libc::umask(mask as libc::mode_t);
                    Ok(())
                })
            };
        }
        let mut child = cmd
            .arg("--config")
            .arg(&config)
            .args(args)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .expect("start mail-relay");
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        let addr = line
            .split("listening on ")
            .nth(1)
            .and_then(|s| s.split(';').next())
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                let _ = child.kill();
                panic!(
                    "no listening line from mail-relay: {line:?}; log:\n{}",
                    std::fs::read_to_string(dir.join("relay.log")).unwrap_or_default()
                )
            });
        Relay {
            child,
            addr,
            banner: line,
            dir: dir.to_owned(),
            _tmp: None,
        }
    }

    /// The relay's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("relay.log")).unwrap_or_default()
    }

    pub fn maildir_new(&self) -> PathBuf {
        self.dir.join("maildir/new")
    }

    pub fn spool_queue(&self) -> PathBuf {
        self.dir.join("spool/queue")
    }

    /// Waits until the spool's journal holds the deferral of message `id`
    /// (and so what it recorded before: recipients done). A deferral is
    /// logged before the journal writes it: a test that kills the relay
    /// after the log line waits for this first.
    #[track_caller]
    pub fn wait_deferral_journaled(&self, id: &str) {
        let line = format!("defer {id} ");
        let t0 = Instant::now();
        while !std::fs::read_dir(self.spool_queue())
            .unwrap()
            .flatten()
            .any(|f| std::fs::read_to_string(f.path()).is_ok_and(|t| t.contains(&line)))
        {
            assert!(
                t0.elapsed() < LIMIT,
                "the deferral of {id} is not in the journal after {LIMIT:?}; log:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The delivered messages (file contents), sorted by file name.
    pub fn delivered(&self) -> Vec<String> {
        delivered_in(&self.maildir_new())
    }

    /// Waits until `n` messages are delivered and the spool is empty.
    #[track_caller]
    pub fn wait_delivered(&self, n: usize) -> Vec<String> {
        let t0 = Instant::now();
        loop {
            let got = count(&self.maildir_new());
            if got >= n && count(&self.spool_queue()) == 0 {
                return self.delivered();
            }
            assert!(
                t0.elapsed() < LIMIT,
                "{got} of {n} messages delivered after {LIMIT:?}; log:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Sends SIGTERM.
    pub fn terminate(&self) {
        self.signal("TERM");
    }

    /// Sends SIGHUP: the relay reads its files again.
    pub fn hangup(&self) {
        self.signal("HUP");
    }

    /// Sends the signal named `name` (`TERM`, `HUP`) with kill(1).
    #[track_caller]
    fn signal(&self, name: &str) {
        let ok = Command::new("kill")
            .args([&format!("-{name}"), &self.child.id().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill -{name} failed");
    }

    /// Waits (bounded) for the process to exit.
    #[track_caller]
    pub fn wait_exit(&mut self) -> ExitStatus {
        let t0 = Instant::now();
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s;
            }
            assert!(
                t0.elapsed() < LIMIT,
                "mail-relay did not exit; log:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// SIGKILL and reap.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// A plain SMTP client connected to the relay, greeting read.
    pub fn client(&self) -> Client {
        let mut c = Client::connect(self.addr);
        c.expect(220);
        c
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Files in `dir`.
pub fn count(dir: &Path) -> usize {
    std::fs::read_dir(dir).map(|d| d.count()).unwrap_or(0)
}

/// Contents of the files in `dir`, sorted by name.
pub fn delivered_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| d.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default();
    names.sort();
    names
        .iter()
        .map(|p| String::from_utf8_lossy(&std::fs::read(p).unwrap()).into_owned())
        .collect()
}

/// A line-at-a-time SMTP client on a std socket, for exact replies.
pub struct Client {
    pub r: BufReader<TcpStream>,
    pub w: TcpStream,
}

impl Client {
    pub fn connect(addr: SocketAddr) -> Client {
        Client::from_stream(TcpStream::connect(addr).expect("connect to the relay"))
    }

    pub fn from_stream(s: TcpStream) -> Client {
        s.set_read_timeout(Some(LIMIT)).unwrap();
        Client {
            w: s.try_clone().unwrap(),
            r: BufReader::new(s),
        }
    }

    /// Sends raw bytes.
    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.w.write_all(bytes).unwrap();
    }

    /// Sends a line with CRLF.
    pub fn send(&mut self, line: &str) {
        self.send_raw(format!("{line}\r\n").as_bytes());
    }

    /// Reads one (possibly multi-line) reply: its code and its lines' text.
    pub fn reply(&mut self) -> io::Result<(u16, String)> {
        let mut text = String::new();
        loop {
            let mut line = String::new();
            if self.r.read_line(&mut line)? == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            assert!(line.ends_with("\r\n"), "reply line without CRLF: {line:?}");
            let code: u16 = line[..3].parse().expect("a reply code");
            text.push_str(&line[4..line.len() - 2]);
            if line.as_bytes()[3] == b' ' {
                return Ok((code, text));
            }
            text.push('\n');
        }
    }

    /// Reads a reply and asserts its code; returns its text.
    #[track_caller]
    pub fn expect(&mut self, code: u16) -> String {
        let (got, text) = self.reply().expect("a reply");
        assert_eq!(got, code, "unexpected reply {got} {text}");
        text
    }

    /// Sends `line` and expects `code`.
    #[track_caller]
    pub fn cmd(&mut self, line: &str, code: u16) -> String {
        self.send(line);
        self.expect(code)
    }

    /// EHLO, MAIL, each RCPT and DATA, expecting success up to the 354.
    #[track_caller]
    pub fn open_data(&mut self, from: &str, to: &[&str]) {
        self.cmd("EHLO client.test", 250);
        self.cmd(&format!("MAIL FROM:<{from}>"), 250);
        for t in to {
            self.cmd(&format!("RCPT TO:<{t}>"), 250);
        }
        self.cmd("DATA", 354);
    }

    /// A whole message: [`open_data`](Self::open_data), the body (CRLF lines,
    /// dot-stuffed by the caller), the final dot; returns the final reply's
    /// text.
    #[track_caller]
    pub fn message(&mut self, from: &str, to: &[&str], body: &str) -> String {
        self.open_data(from, to);
        self.send_raw(body.as_bytes());
        self.cmd(".", 250)
    }
}

/// A finished command's output as text: its stdout, then its stderr.
pub fn stdout_and_stderr(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Runs a Python 3 script with arguments; returns its stdout, failing the
/// test with its stderr if it fails.
#[track_caller]
pub fn python(script: &str, args: &[&str]) -> String {
    require("python3", "python3");
    let out = Command::new("python3")
        .arg("-c")
        .arg(script)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "python failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs swaks against `addr` with `args`; returns its output, failing the
/// test if it fails.
#[track_caller]
pub fn swaks(addr: SocketAddr, args: &[&str]) -> String {
    let (ok, text) = swaks_output(addr, args);
    assert!(ok, "swaks failed:\n{text}");
    text
}

/// Runs swaks against `addr` with `args`; returns whether it succeeded
/// and its output (stdout, then stderr).
#[track_caller]
pub fn swaks_output(addr: SocketAddr, args: &[&str]) -> (bool, String) {
    require("swaks", "swaks");
    let out = Command::new("swaks")
        .arg("--server")
        .arg(addr.to_string())
        .args(args)
        .output()
        .unwrap();
    (out.status.success(), stdout_and_stderr(&out))
}

/// Asserts that `text` contains each of `wants`.
#[track_caller]
pub fn assert_contains_all(text: &str, wants: &[&str]) {
    for want in wants {
        assert!(text.contains(want), "{want:?} not in:\n{text}");
    }
}

/// Runs `relay` (the relay binary with its arguments), expecting it not to
/// start: it must exit, failing, within the tests' limit. Returns its
/// stderr. `what` says what it was started with, for the failure message.
#[track_caller]
pub fn fails_to_start(relay: &mut Command, what: &str) -> String {
    let mut child = relay
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if t0.elapsed() > LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the relay started with {what}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = child.wait_with_output().unwrap();
    assert!(!out.status.success(), "the relay started with {what}");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Sends `cmd` to the relay's back door (the Unix socket at `door`);
/// returns its whole answer.
pub fn backdoor(door: &Path, cmd: &str) -> String {
    let mut s = std::os::unix::net::UnixStream::connect(door).unwrap();
    s.set_read_timeout(Some(LIMIT)).unwrap();
    s.write_all(format!("{cmd}\nquit\n").as_bytes()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

/// Reads everything the peer sends until it closes (bounded by the read
/// timeout); returns it.
pub fn read_rest(c: &mut Client) -> String {
    let mut rest = Vec::new();
    let _ = c.r.read_to_end(&mut rest);
    String::from_utf8_lossy(&rest).into_owned()
}

impl Relay {
    /// The relay's configuration file.
    pub fn config_path(&self) -> PathBuf {
        self.dir.join("relay.toml")
    }

    /// Runs `mail-relay --config <ours> ARGS` (e.g. `mailq`); returns its
    /// exit success and its stdout and stderr.
    pub fn command(&self, args: &[&str]) -> (bool, String) {
        let out = Command::new(env!("CARGO_BIN_EXE_mail-relay"))
            .arg("--config")
            .arg(self.config_path())
            .args(args)
            .output()
            .unwrap();
        (out.status.success(), stdout_and_stderr(&out))
    }

    /// `mail-relay mailq`, which must succeed.
    #[track_caller]
    pub fn mailq(&self) -> String {
        let (ok, out) = self.command(&["mailq"]);
        assert!(ok, "mailq failed: {out}");
        out
    }

    /// Waits until the log contains `needle` `n` times; returns the log.
    #[track_caller]
    pub fn wait_log(&self, needle: &str, n: usize) -> String {
        let t0 = Instant::now();
        loop {
            let log = self.log();
            if log.matches(needle).count() >= n {
                return log;
            }
            assert!(
                t0.elapsed() < LIMIT,
                "{needle:?} not {n} times in the log after {LIMIT:?}:\n{log}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Waits until the spool's queue holds no batch file.
    #[track_caller]
    pub fn wait_spool_empty(&self) {
        let t0 = Instant::now();
        while count(&self.spool_queue()) > 0 {
            assert!(
                t0.elapsed() < LIMIT,
                "spool not empty after {LIMIT:?}:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// A free loopback TCP port (bound, then released).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Whether something listens on 127.0.0.1:`port` (from /proc/net/tcp, so
/// that looking does not open a session the sink would count).
pub fn listening(port: u16) -> bool {
    listening_at([127, 0, 0, 1], port)
}

/// Whether something listens on `ip`:`port` (as [`listening`]).
pub fn listening_at(ip: [u8; 4], port: u16) -> bool {
    let hex = u32::from_le_bytes(ip);
    let want = format!("{hex:08X}:{port:04X} 00000000:0000 0A");
    std::fs::read_to_string("/proc/net/tcp").is_ok_and(|t| t.contains(&want))
}

/// Postfix's `smtp-sink` on a loopback port: the upstream of the delivery
/// tests. It dumps each message into its own file (`-d`) and counts
/// sessions, QUITs and messages (`-c`).
pub struct Sink {
    child: Child,
    pub port: u16,
    /// Where the dumps go.
    pub dumps: PathBuf,
    /// Its stdout (the counters).
    out: PathBuf,
}

impl Sink {
    /// Starts a sink with `flags` (fault injection: `-r RCPT`, ...) on a
    /// free port, dumping under `dir`.
    pub fn start(dir: &Path, flags: &[&str]) -> Sink {
        Sink::start_on(free_port(), dir, flags)
    }

    /// The same on `port`.
    pub fn start_on(port: u16, dir: &Path, flags: &[&str]) -> Sink {
        Sink::start_at([127, 0, 0, 1], port, dir, flags)
    }

    /// The same on another loopback address (127.0.0.2, ...: Linux
    /// answers on all of 127/8 without setup), for several sinks on one
    /// port (the mail exchangers of the MX tests).
    pub fn start_at(ip: [u8; 4], port: u16, dir: &Path, flags: &[&str]) -> Sink {
        require("smtp-sink", "postfix");
        use std::sync::atomic::{AtomicUsize, Ordering};
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let dumps = dir.join(format!("sink-{}-{port}-{n}", ip[3]));
        std::fs::create_dir_all(&dumps).unwrap();
        // The sink drops privileges to nobody, who must write the dumps.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&dumps, std::fs::Permissions::from_mode(0o777)).unwrap();
        let out = dir.join(format!("sink-{}-{port}-{n}.out", ip[3]));
        let mut cmd = Command::new("smtp-sink");
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            cmd.args(["-u", "nobody"]);
        }
        let child = cmd
            .arg("-c")
            .arg("-d")
            .arg(format!("{}/m.", dumps.display()))
            .args(flags)
            .arg(format!("{}:{port}", std::net::Ipv4Addr::from(ip)))
            .arg("100")
            .stdout(std::fs::File::create(&out).unwrap())
            .stderr(Stdio::null())
            .spawn()
            .expect("start smtp-sink");
        let t0 = Instant::now();
        while !listening_at(ip, port) {
            assert!(t0.elapsed() < LIMIT, "smtp-sink did not listen on {port}");
            std::thread::sleep(Duration::from_millis(5));
        }
        Sink {
            child,
            port,
            dumps,
            out,
        }
    }

    /// `127.0.0.1:port`, for `relayhost`.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The last counters: (sessions ended, QUITs, messages).
    pub fn counters(&self) -> (u64, u64, u64) {
        let text = std::fs::read_to_string(&self.out).unwrap_or_default();
        let Some(last) = text.split(['\r', '\n']).rfind(|l| l.starts_with("sess=")) else {
            return (0, 0, 0);
        };
        let n = |key: &str| {
            last.split(' ')
                .find_map(|f| f.strip_prefix(key))
                .and_then(|v| v.parse().ok())
                .unwrap_or(0)
        };
        (n("sess="), n("quit="), n("mesg="))
    }

    /// The dumped messages, each as the sink wrote it.
    pub fn messages(&self) -> Vec<String> {
        delivered_in(&self.dumps)
    }

    /// Waits until `n` messages are dumped; returns them.
    #[track_caller]
    pub fn wait_messages(&self, n: usize) -> Vec<String> {
        let t0 = Instant::now();
        loop {
            // A dump is written as the data comes; the message counter
            // moves when the final dot is in.
            let got = count(&self.dumps);
            if got >= n && self.counters().2 >= n as u64 {
                return self.messages();
            }
            assert!(
                t0.elapsed() < LIMIT,
                "{got} of {n} messages at the sink after {LIMIT:?}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Kills the sink (its port is then refused).
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The text of a dump after the sink's own headers (its `X-*` lines and
/// its three-line `Received:`): what the relay sent, LF-terminated.
pub fn sent_content(dump: &str) -> &str {
    let i = dump
        .find("Received: from ")
        .expect("the sink's Received: header");
    let mut rest = &dump[i..];
    for _ in 0..3 {
        rest = &rest[rest.find('\n').unwrap() + 1..];
    }
    rest
}

/// A relay configuration that delivers everything to `upstream`, with
/// short retry and SMTP timeouts for tests, then `extra`.
pub fn relay_to(upstream: &str, extra: &str) -> String {
    format!("relayhost = \"{upstream}\"\n{extra}\n")
}
