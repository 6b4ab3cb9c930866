//! The examples' accept loop: when no green thread can be started
//! (`Builder::spawn` fails with `OutOfMemory`), it closes the new
//! connection, logs once, and keeps accepting; once connections end it
//! serves again. (A panicking `coro::spawn` there would kill the acceptor,
//! leaving the server running and deaf.)
//!
//! The child process lowers its own address-space limit (`RLIMIT_AS`) so
//! that only a few more 64 MiB stacks fit: the same failure as reaching
//! `vm.max_map_count`, which is system-wide and cannot be lowered for one
//! process.

use std::io::{self, Read, Write};
use std::process::Command;
use std::time::Duration;

use coro::net::{TcpListener, TcpStream};

const CHILD: &str = "CORO_ACCEPT_LOOP_CHILD";
const STACK: usize = 64 << 20;
/// Handler stacks that fit under the lowered limit.
const FIT: usize = 4;
/// Connections opened while the limit holds.
const CLIENTS: usize = 10;

/// The process's address-space size now, from `/proc/self/status`.
fn vm_size() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmSize:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmSize in /proc/self/status");
    kb * 1024
}

fn limit_address_space(bytes: u64) {
    let lim = libc::rlimit {
        rlim_cur: bytes,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: `lim` is a valid rlimit; setrlimit only reads it.
    let rc = unsafe { libc::setrlimit(libc::RLIMIT_AS, &lim) };
    assert_eq!(rc, 0, "setrlimit: {}", io::Error::last_os_error());
}

/// Sends a line and waits for its echo: `true` if served, `false` if the
/// server closed the connection (shed).
fn ask(c: &mut TcpStream) -> io::Result<bool> {
    c.write_all(b"ping\n")?;
    let mut buf = [0u8; 5];
    match coro::with_timeout(Duration::from_secs(10), || c.read_exact(&mut buf)) {
        Ok(Ok(())) => Ok(&buf == b"ping\n"),
        Ok(Err(e)) if e.kind() == io::ErrorKind::UnexpectedEof => Ok(false),
        Ok(Err(e)) if e.kind() == io::ErrorKind::ConnectionReset => Ok(false),
        Ok(Err(e)) => Err(e),
        Err(_) => panic!("no answer and no close within 10 s: the acceptor is deaf"),
    }
}

fn child() {
    let mut rt = coro::Runtime::builder()
        .stack_size(STACK)
        .latency_warning(None)
        .build()
        .unwrap();
    let (served, shed, again) = rt.block_on(|| {
        let listener = std::rc::Rc::new(TcpListener::bind("127.0.0.1:0").unwrap());
        let addr = listener.local_addr().unwrap();
        let acceptor = {
            let listener = listener.clone();
            coro::spawn(move || {
                coro_examples::accept_loop(&listener, "test", |mut stream, _| {
                    let served = coro::Builder::new().spawn(move || {
                        let mut buf = [0u8; 64];
                        while let Ok(n @ 1..) = stream.read(&mut buf) {
                            if stream.write_all(&buf[..n]).is_err() {
                                break;
                            }
                        }
                    });
                    served.map(drop)
                })
            })
        };
        coro::yield_now(); // the acceptor waits in accept
                           // From here on, only FIT more stacks can be mapped.
        limit_address_space(vm_size() + (FIT as u64) * (STACK as u64 + 8192) + (32 << 20));

        let mut open = Vec::new();
        let (mut served, mut shed) = (0, 0);
        for _ in 0..CLIENTS {
            let mut c = TcpStream::connect(addr).unwrap();
            if ask(&mut c).unwrap() {
                served += 1;
                open.push(c);
            } else {
                shed += 1;
            }
        }
        // Connections end: their stacks go back to the pool, and the same
        // acceptor serves new connections.
        drop(open);
        let mut again = 0;
        for _ in 0..3 {
            let mut c = TcpStream::connect(addr).unwrap();
            if ask(&mut c).unwrap() {
                again += 1;
            }
        }
        listener.close();
        let done = acceptor.join().unwrap().unwrap();
        assert_eq!(done.shed, shed as u64);
        (served, shed, again)
    });
    println!("served={served} shed={shed} again={again}");
}

#[test]
fn an_accept_loop_survives_out_of_memory() {
    if std::env::var_os(CHILD).is_some() {
        child();
        return;
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "an_accept_loop_survives_out_of_memory",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let line = stdout
        .lines()
        .find_map(|l| l.find("served=").map(|i| &l[i..]))
        .unwrap_or_else(|| panic!("{stdout}\n{stderr}"));
    let num = |key: &str| -> usize {
        line.split_whitespace()
            .find_map(|kv| kv.strip_prefix(key))
            .and_then(|v| v.parse().ok())
            .unwrap()
    };
    let (served, shed, again) = (num("served="), num("shed="), num("again="));
    assert!((1..=FIT).contains(&served), "{line}\n{stderr}");
    assert_eq!(served + shed, CLIENTS, "{line}");
    assert_eq!(
        again, 3,
        "the acceptor serves again once connections end: {line}\n{stderr}"
    );
    assert_eq!(
        stderr.matches("shedding new connections").count(),
        1,
        "logged once per episode: {stderr}"
    );
    assert!(
        stderr.contains("cannot map"),
        "the spawn error is logged: {stderr}"
    );
    assert!(stderr.contains("serving again"), "{stderr}");
}
