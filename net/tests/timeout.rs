//! Timeouts and interrupts on socket calls: `accept` and `read` time out
//! twice in a row on the same socket and then still work (no stale
//! registration or timer), and an interrupt is not `ErrorKind::Interrupted`.

mod util;

use std::io::{self, Read, Write};
use std::time::Duration;

use coro::net::{TcpListener, TcpStream, UdpSocket};
use coro::WaitError;
use util::run;

const SHORT: Duration = Duration::from_millis(20);

#[track_caller]
fn timed_out<T: std::fmt::Debug>(r: Result<io::Result<T>, coro::Timeout>) {
    assert_eq!(r.err(), Some(coro::Timeout), "expected the scope's timeout");
}

#[test]
fn accept_times_out_twice_then_accepts() -> io::Result<()> {
    run(|| {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        for _ in 0..2 {
            let t = coro::clock::now();
            timed_out(coro::with_timeout(SHORT, || listener.accept()));
            assert!(t.elapsed() >= SHORT, "timer fired early");
        }
        let addr = listener.local_addr()?;
        let c = coro::spawn(move || TcpStream::connect(addr));
        let (s, _) = listener.accept()?;
        assert_eq!(s.peer_addr()?, c.join().unwrap()?.local_addr()?);
        let st = coro::stats();
        assert_eq!(st.pending_timers, 0, "no timer left behind: {st:?}");
        Ok(())
    })
}

#[test]
fn read_times_out_twice_then_reads() -> io::Result<()> {
    run(|| {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let mut c = TcpStream::connect(listener.local_addr()?)?;
        let (mut s, _) = listener.accept()?;
        let mut buf = [0; 3];
        for _ in 0..2 {
            timed_out(coro::with_timeout(SHORT, || s.read(&mut buf)));
            // The error seen inside the scope is TimedOut.
            let inner = coro::with_timeout(SHORT, || s.read(&mut buf).unwrap_err().kind());
            assert!(inner.is_err() || inner == Ok(io::ErrorKind::TimedOut));
        }
        c.write_all(b"abc")?;
        s.read_exact(&mut buf)?;
        assert_eq!(&buf, b"abc");
        // write, then a read that must see the new data, not stale state.
        c.write_all(b"def")?;
        let n = coro::with_timeout(SHORT * 50, || s.read(&mut buf)).expect("no data")?;
        assert_eq!(n, 3);
        assert_eq!(&buf, b"def");
        Ok(())
    })
}

#[test]
fn udp_recv_times_out_twice_then_receives() -> io::Result<()> {
    run(|| {
        let a = UdpSocket::bind("127.0.0.1:0")?;
        let b = UdpSocket::bind("127.0.0.1:0")?;
        let mut buf = [0; 8];
        for _ in 0..2 {
            timed_out(coro::with_timeout(SHORT, || b.recv_from(&mut buf)));
        }
        a.send_to(b"x", b.local_addr()?)?;
        assert_eq!(b.recv_from(&mut buf)?, (1, a.local_addr()?));
        Ok(())
    })
}

/// A green thread blocked in `read` is interrupted: its error carries
/// `WaitError::Interrupted` and is not `ErrorKind::Interrupted` (which
/// `read_exact` would retry forever).
#[test]
fn interrupt_stops_a_blocked_read() -> io::Result<()> {
    run(|| {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let mut c = TcpStream::connect(listener.local_addr()?)?;
        let (s, _) = listener.accept()?;
        let reader = coro::spawn(move || -> (io::Error, TcpStream) {
            let mut buf = [0; 8];
            let e = (&s).read_exact(&mut buf).unwrap_err();
            (e, s)
        });
        coro::sleep(SHORT).unwrap();
        reader.thread().interrupt().unwrap();
        let (e, mut s) = reader.join().unwrap();
        assert_ne!(e.kind(), io::ErrorKind::Interrupted);
        assert_eq!(WaitError::from_io(&e), Some(WaitError::Interrupted));
        // The socket is still usable afterwards.
        c.write_all(b"after")?;
        let mut buf = [0; 5];
        s.read_exact(&mut buf)?;
        assert_eq!(&buf, b"after");
        Ok(())
    })
}
