//! A dnsmasq process serving a test zone on a loopback port, for the tests
//! (and benches) that need a real DNS server. std only, so other crates'
//! tests include it with `#[path]`.
//!
//! Debian's `dnsmasq-base` provides it (scripts/test.sh installs it); when
//! it is missing, [`Dnsmasq::start`] panics naming it: the test fails,
//! never skips.

#![allow(dead_code)]

use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running dnsmasq, killed on drop.
pub struct Dnsmasq {
    child: Child,
    /// Its messages (shown when it fails to start), removed on drop.
    log: std::path::PathBuf,
    /// Where it answers (UDP and TCP).
    pub addr: SocketAddr,
}

impl Dnsmasq {
    /// Starts dnsmasq on a free loopback port with these zone options
    /// (`--mx-host=...`, `--host-record=...`), authoritative for `test`
    /// (unknown names there are NXDOMAIN) and with no upstream. Records
    /// get `ttl` seconds.
    ///
    /// # Panics
    ///
    /// When dnsmasq is not installed or does not start within 10 s.
    pub fn start(zone: &[String], ttl: u32) -> Dnsmasq {
        Dnsmasq::start_on(free_port(), zone, ttl)
    }

    /// As [`start`](Dnsmasq::start), on `port`. A port another socket
    /// holds at that moment (a short-lived client socket of a test running
    /// beside this one) is tried again, for up to 10 s.
    pub fn start_on(port: u16, zone: &[String], ttl: u32) -> Dnsmasq {
        let t0 = Instant::now();
        loop {
            match Dnsmasq::try_start_on(port, zone, ttl) {
                Ok(d) => return d,
                Err(text)
                    if text.contains("Address already in use")
                        && t0.elapsed() < Duration::from_secs(10) =>
                {
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(text) => panic!("{text}"),
            }
        }
    }

    /// One start on `port`: the running dnsmasq, or why it stopped.
    fn try_start_on(port: u16, zone: &[String], ttl: u32) -> Result<Dnsmasq, String> {
        let log =
            std::env::temp_dir().join(format!("coro-dnsmasq-{}-{port}.log", std::process::id()));
        let mut cmd = Command::new("dnsmasq");
        cmd.args([
            "--no-daemon",
            "--conf-file=/dev/null",
            "--pid-file=",
            "--no-resolv",
            "--no-hosts",
            "--bind-interfaces",
            "--listen-address=127.0.0.1",
            "--local=/test/",
            "--cache-size=0",
        ])
        .arg(format!("--port={port}"))
        .arg(format!("--local-ttl={ttl}"))
        .args(zone)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("create dnsmasq's log"));
        let child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!(
                "dnsmasq is not installed: this test needs it (Debian's dnsmasq-base; \
                 scripts/test.sh installs it)"
            ),
            Err(e) => panic!("cannot start dnsmasq: {e}"),
        };
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        let mut d = Dnsmasq { child, log, addr };
        let t0 = Instant::now();
        while TcpStream::connect(addr).is_err() {
            if let Ok(Some(status)) = d.child.try_wait() {
                let text = std::fs::read_to_string(&d.log).unwrap_or_default();
                return Err(format!("dnsmasq exited at start ({status}):\n{text}"));
            }
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "dnsmasq did not start in 10 s"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(d)
    }

    /// The port it answers on.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }
}

impl Drop for Dnsmasq {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.log);
    }
}

/// A loopback port free for both UDP and TCP just now, and never handed
/// out before in this process: tests of one binary run in parallel, and
/// two dnsmasqs given one port would answer for each other's zones (one
/// fails to bind, and its test talks to the other's until that stops).
pub fn free_port() -> u16 {
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    loop {
        let u = UdpSocket::bind("127.0.0.1:0").expect("bind a UDP socket");
        let port = u.local_addr().unwrap().port();
        let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
        if !given.contains(&port) && std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            given.push(port);
            return port;
        }
    }
}

/// The zone the mail tests use:
///
/// * `mail.test`: MX 10 `mx1.mail.test` (127.0.0.2), MX 20 `mx2.mail.test`
///   (127.0.0.3);
/// * `plain.test`: no MX, A 127.0.0.4;
/// * `null.test`: a null MX (`MX 0 .`, RFC 7505), and an A record that
///   must not be used;
/// * anything else under `test`: NXDOMAIN.
pub fn mail_zone() -> Vec<String> {
    [
        "--mx-host=mail.test,mx1.mail.test,10",
        "--mx-host=mail.test,mx2.mail.test,20",
        "--host-record=mx1.mail.test,127.0.0.2",
        "--host-record=mx2.mail.test,127.0.0.3",
        "--host-record=plain.test,127.0.0.4",
        "--mx-host=null.test,.,0",
        "--host-record=null.test,127.0.0.5",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}
