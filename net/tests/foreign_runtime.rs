//! Regression tests for issue #13 that need sockets: a short read is no
//! proof a socket is empty (item 3), and a socket used in a runtime other
//! than the one it was created in fails with a clear error instead of
//! waiting forever (item 12).

use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::time::Duration;

use coro::net::{TcpListener, UnixStream};

/// A peer sends `hello`, one urgent (`MSG_OOB`) byte, `world`. Linux stops
/// the first read at the urgent mark; the second must still get `world`
/// (it used to wait forever: the short read had cleared readiness and no new
/// event would come).
#[test]
fn issue_13_3_data_after_the_urgent_mark_is_read() -> io::Result<()> {
    coro::run(|| {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let (sent, all_sent) = std::sync::mpsc::channel();
        let (done, read_all) = std::sync::mpsc::channel::<()>();
        let peer = std::thread::spawn(move || -> io::Result<()> {
            let mut s = std::net::TcpStream::connect(addr)?;
            s.write_all(b"hello")?;
            // SAFETY: sending one byte from a valid buffer on an open socket.
            let n = unsafe { libc::send(s.as_raw_fd(), b"!".as_ptr().cast(), 1, libc::MSG_OOB) };
            assert_eq!(n, 1);
            s.write_all(b"world")?;
            // Loopback queues the bytes at the receiver during the send.
            sent.send(()).unwrap();
            // Open until the reader is done: its close would be an event
            // that sets readiness again and hides the bug.
            let _ = read_all.recv();
            Ok(())
        });
        let (mut conn, _) = listener.accept()?;
        // Everything is queued before the first read: no event can arrive
        // after it to set readiness again.
        coro::blocking(move || all_sent.recv()).unwrap().unwrap();
        let mut got = Vec::new();
        let r = coro::with_timeout(Duration::from_secs(20), || -> io::Result<()> {
            let mut buf = [0u8; 64];
            while got.len() < 10 {
                let n = conn.read(&mut buf)?;
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&buf[..n]);
            }
            Ok(())
        });
        drop(done);
        assert!(r.is_ok(), "the read after the urgent mark waited forever");
        r.unwrap()?;
        assert_eq!(got, b"helloworld");
        peer.join().unwrap()
    })
}

/// A socket created in one runtime and waited on in another fails at once
/// with an error that names the mix-up.
#[test]
fn issue_13_12_a_socket_from_another_runtime_fails_fast() -> io::Result<()> {
    let (a, _b) = std::os::unix::net::UnixStream::pair()?;
    let mut first = coro::Runtime::new()?;
    let s = first.block_on(move || UnixStream::from_std(a))?;
    let mut second = coro::Runtime::new()?;
    second.block_on(move || {
        let r = coro::with_timeout(Duration::from_secs(20), || (&s).read(&mut [0u8; 8]));
        let e = r
            .expect("failed at once, not timed out")
            .expect_err("nothing to read");
        assert!(e.to_string().contains("registered with runtime"), "{e}");
        assert_ne!(e.kind(), io::ErrorKind::TimedOut);
        Ok(())
    })
}
