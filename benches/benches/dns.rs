//! DNS lookups against a local dnsmasq: `coro::net::dns::Resolver`,
//! hickory-resolver 0.26 on tokio's current-thread runtime, and getaddrinfo on
//! coro's blocking pool (`coro::net::lookup_host`). Queries per second and
//! p99 latency, cached and uncached, one lookup at a time and 1 000 in
//! flight. Each lookup is an address lookup (A and AAAA).
//!
//! Not a criterion bench: it prints one table. Run with
//! `cargo bench -p coro-benches --bench dns` (needs dnsmasq, from Debian's
//! dnsmasq-base). getaddrinfo only asks port 53 of the servers in
//! /etc/resolv.conf: run as root, the bench moves itself into a private
//! mount namespace, bind-mounts a resolv.conf naming 127.0.0.53 there, and
//! serves the zone with dnsmasq on 127.0.0.53:53 for all three; otherwise
//! the getaddrinfo rows are left out.

use std::net::{IpAddr, SocketAddr};
use std::process::{Child, Command, Stdio};
use std::rc::Rc;
use std::time::{Duration, Instant};

use coro::net::dns::{Config, Resolver};
use coro_benches::percentile;
use hickory_resolver::config::{ConnectionConfig, NameServerConfig, ResolverConfig, ResolverOpts};
use hickory_resolver::net::runtime::TokioRuntimeProvider;

/// Lookups per case, one at a time.
const SERIAL: usize = 2_000;
/// Green threads / tasks in flight, and lookups each.
const FLIGHT: usize = 1_000;
const EACH: usize = 5;

/// Serves `*.bench.test` (A 127.0.0.9, AAAA ::9, TTL 300) until dropped.
struct Dnsmasq(Child);

impl Drop for Dnsmasq {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn dnsmasq(ip: &str, port: u16) -> Dnsmasq {
    let child = Command::new("dnsmasq")
        .args([
            "--no-daemon",
            "--conf-file=/dev/null",
            "--pid-file=",
            "--no-resolv",
            "--no-hosts",
            "--bind-interfaces",
            "--cache-size=0",
            "--local-ttl=300",
            "--dns-forward-max=5000",
            "--address=/bench.test/127.0.0.9",
            "--address=/bench.test/::9",
        ])
        .arg(format!("--listen-address={ip}"))
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("dnsmasq (Debian's dnsmasq-base) is needed for this bench");
    let addr: SocketAddr = format!("{ip}:{port}").parse().unwrap();
    let t0 = Instant::now();
    while std::net::TcpStream::connect(addr).is_err() {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "dnsmasq did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    Dnsmasq(child)
}

/// Moves this (still single-threaded) process into a private mount
/// namespace where /etc/resolv.conf names 127.0.0.53 only. `false` when
/// that is not allowed (not root).
fn private_resolv_conf() -> bool {
    let conf = std::env::temp_dir().join(format!("coro-bench-resolv-{}.conf", std::process::id()));
    std::fs::write(
        &conf,
        "nameserver 127.0.0.53\noptions timeout:2 attempts:2\n",
    )
    .unwrap();
    let c = |s: &str| std::ffi::CString::new(s).unwrap();
    let (root, none, target, source) = (
        c("/"),
        c("none"),
        c("/etc/resolv.conf"),
        c(conf.to_str().unwrap()),
    );
    // SAFETY: called first thing in main, before any thread starts
    // (unshare(CLONE_NEWNS) needs an unshared fs context); the strings are
    // live NUL-terminated C strings; the mounts change only this new
    // namespace (made private first, so nothing propagates back).
    unsafe {
        libc::unshare(libc::CLONE_NEWNS) == 0
            && libc::mount(
                none.as_ptr(),
                root.as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ) == 0
            && libc::mount(
                source.as_ptr(),
                target.as_ptr(),
                std::ptr::null(),
                libc::MS_BIND,
                std::ptr::null(),
            ) == 0
    }
}

/// One case's figures.
fn report(case: &str, who: &str, total: Duration, mut lat: Vec<Duration>) {
    lat.sort();
    println!(
        "dns::{case:<22} {who:<12} {:>9.0} lookups/s   p50 {:>8.1} us   p99 {:>8.1} us",
        lat.len() as f64 / total.as_secs_f64(),
        percentile(&lat, 50.0).as_secs_f64() * 1e6,
        percentile(&lat, 99.0).as_secs_f64() * 1e6,
    );
}

/// Names: distinct per lookup (uncached) or one (cached).
fn name(cached: bool, round: usize, i: usize) -> String {
    if cached {
        "www.bench.test.".to_owned()
    } else {
        format!("r{round}n{i}.bench.test.")
    }
}

fn coro_case(
    server: SocketAddr,
    cached: bool,
    flight: usize,
    round: usize,
) -> (Duration, Vec<Duration>) {
    let mut rt = coro_benches::coro_rt();
    rt.block_on(move || {
        let mut cfg = Config::with_servers(vec![server]);
        cfg.timeout = Duration::from_secs(2);
        let r = Rc::new(Resolver::new(cfg).unwrap());
        if cached {
            r.lookup_ip("www.bench.test.").unwrap();
        }
        let t0 = Instant::now();
        let lat = if flight == 1 {
            (0..SERIAL)
                .map(|i| {
                    let t = Instant::now();
                    r.lookup_ip(&name(cached, round, i)).unwrap();
                    t.elapsed()
                })
                .collect()
        } else {
            let hs: Vec<_> = (0..flight)
                .map(|k| {
                    let r = r.clone();
                    coro::spawn(move || {
                        (0..EACH)
                            .map(|j| {
                                let t = Instant::now();
                                r.lookup_ip(&name(cached, round, k * EACH + j)).unwrap();
                                t.elapsed()
                            })
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            hs.into_iter().flat_map(|h| h.join().unwrap()).collect()
        };
        (t0.elapsed(), lat)
    })
}

fn hickory_case(
    server: SocketAddr,
    cached: bool,
    flight: usize,
    round: usize,
) -> (Duration, Vec<Duration>) {
    let rt = coro_benches::tokio_rt();
    rt.block_on(async move {
        let (mut udp, mut tcp) = (ConnectionConfig::udp(), ConnectionConfig::tcp());
        udp.port = server.port();
        tcp.port = server.port();
        let ns = NameServerConfig::new(server.ip(), true, vec![udp, tcp]);
        let mut opts = ResolverOpts::default();
        opts.cache_size = 10_000;
        opts.timeout = Duration::from_secs(2);
        let r = hickory_resolver::Resolver::builder_with_config(
            ResolverConfig::from_parts(None, vec![], vec![ns]),
            TokioRuntimeProvider::default(),
        )
        .with_options(opts)
        .build()
        .expect("hickory resolver");
        let r = Rc::new(r);
        if cached {
            r.lookup_ip("www.bench.test.").await.unwrap();
        }
        let t0 = Instant::now();
        let lat = if flight == 1 {
            let mut v = Vec::new();
            for i in 0..SERIAL {
                let t = Instant::now();
                r.lookup_ip(name(cached, round, i)).await.unwrap();
                v.push(t.elapsed());
            }
            v
        } else {
            let local = tokio::task::LocalSet::new();
            local
                .run_until(async {
                    let hs: Vec<_> = (0..flight)
                        .map(|k| {
                            let r = r.clone();
                            tokio::task::spawn_local(async move {
                                let mut v = Vec::new();
                                for j in 0..EACH {
                                    let t = Instant::now();
                                    r.lookup_ip(name(cached, round, k * EACH + j))
                                        .await
                                        .unwrap();
                                    v.push(t.elapsed());
                                }
                                v
                            })
                        })
                        .collect();
                    let mut all = Vec::new();
                    for h in hs {
                        all.extend(h.await.unwrap());
                    }
                    all
                })
                .await
        };
        (t0.elapsed(), lat)
    })
}

fn gai_case(flight: usize, round: usize) -> (Duration, Vec<Duration>) {
    let mut rt = coro::Runtime::builder()
        .latency_warning(None)
        .blocking_threads(64)
        .build()
        .unwrap();
    rt.block_on(move || {
        let one = |n: String| {
            let t = Instant::now();
            let addrs: Vec<SocketAddr> =
                coro::net::lookup_host((n.as_str(), 25)).unwrap().collect();
            assert!(
                addrs.iter().any(|a| a.ip() == IpAddr::from([127, 0, 0, 9])),
                "{addrs:?}"
            );
            t.elapsed()
        };
        let t0 = Instant::now();
        let lat = if flight == 1 {
            (0..SERIAL / 4)
                .map(|i| one(name(false, round, i)))
                .collect()
        } else {
            let hs: Vec<_> = (0..flight)
                .map(|k| {
                    coro::spawn(move || {
                        (0..EACH)
                            .map(|j| one(name(false, round, k * EACH + j)))
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            hs.into_iter().flat_map(|h| h.join().unwrap()).collect()
        };
        (t0.elapsed(), lat)
    })
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let gai = private_resolv_conf();
    let (_dns, server) = if gai {
        (dnsmasq("127.0.0.53", 53), "127.0.0.53:53".parse().unwrap())
    } else {
        println!("(not root: no private resolv.conf, the getaddrinfo rows are left out)");
        let port = std::net::UdpSocket::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        (
            dnsmasq("127.0.0.1", port),
            SocketAddr::from(([127, 0, 0, 1], port)),
        )
    };
    // Three rounds, alternating the resolvers within each.
    for round in 0..3 {
        println!("-- round {}", round + 1);
        for (case, cached, flight) in [
            ("uncached/1_in_flight", false, 1),
            ("uncached/1000_in_flight", false, FLIGHT),
            ("cached/1_in_flight", true, 1),
            ("cached/1000_in_flight", true, FLIGHT),
        ] {
            let (t, l) = coro_case(server, cached, flight, round);
            report(case, "coro", t, l);
            let (t, l) = hickory_case(server, cached, flight, round + 10);
            report(case, "hickory", t, l);
            if gai && !cached {
                let (t, l) = gai_case(flight, round + 20);
                report(case, "getaddrinfo", t, l);
            }
        }
    }
}
