//! TcpStream: data both ways, vectored I/O, peek, shutdown, options,
//! addresses, connect errors and connect under `with_timeout`.

mod util;

use std::io::{self, IoSlice, IoSliceMut, Read, Write};
use std::net::Shutdown;
use std::time::Duration;

use coro::net::{TcpListener, TcpStream};
use util::{assert_kind, pattern, run};

/// A client and a server in one runtime exchange 1 MiB each way at once.
#[test]
fn one_mib_both_ways() -> io::Result<()> {
    const N: usize = 1 << 20;
    run(|| {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let server = coro::spawn(move || -> io::Result<Vec<u8>> {
            let (s, _) = listener.accept()?;
            let writer = s.try_clone()?;
            let w = coro::spawn(move || (&writer).write_all(&pattern(N, 7)));
            let mut got = Vec::new();
            (&s).read_to_end(&mut got)?;
            w.join().unwrap()?;
            Ok(got)
        });
        let c = TcpStream::connect(addr)?;
        let writer = c.try_clone()?;
        let w = coro::spawn(move || -> io::Result<()> {
            (&writer).write_all(&pattern(N, 3))?;
            writer.shutdown(Shutdown::Write)
        });
        let mut got = vec![0; N];
        (&c).read_exact(&mut got)?;
        assert!(got == pattern(N, 7), "client received corrupted data");
        w.join().unwrap()?;
        let server_got = server.join().unwrap()?;
        assert_eq!(server_got.len(), N);
        assert!(
            server_got == pattern(N, 3),
            "server received corrupted data"
        );
        Ok(())
    })
}

/// Vectored reads and writes with odd segment sizes keep bytes in order.
#[test]
fn vectored_odd_segments() -> io::Result<()> {
    run(|| {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let mut c = TcpStream::connect(listener.local_addr()?)?;
        let (mut s, _) = listener.accept()?;
        let data = pattern(1 + 3 + 7 + 1000 + 13, 1);
        let sizes = [1, 3, 7, 1000, 13];
        let mut segs = Vec::new();
        let mut off = 0;
        for n in sizes {
            segs.push(&data[off..off + n]);
            off += n;
        }
        let mut sent = 0;
        while sent < data.len() {
            // Rebuild the slices past what was sent (a short write is legal).
            let mut skip = sent;
            let slices: Vec<IoSlice<'_>> = segs
                .iter()
                .filter_map(|s| {
                    if skip >= s.len() {
                        skip -= s.len();
                        None
                    } else {
                        let r = IoSlice::new(&s[skip..]);
                        skip = 0;
                        Some(r)
                    }
                })
                .collect();
            sent += c.write_vectored(&slices)?;
        }
        c.shutdown(Shutdown::Write)?;

        let mut got = Vec::new();
        let (mut a, mut b, mut d) = ([0u8; 5], [0u8; 11], [0u8; 997]);
        loop {
            let mut bufs = [
                IoSliceMut::new(&mut a),
                IoSliceMut::new(&mut b),
                IoSliceMut::new(&mut d),
            ];
            let n = s.read_vectored(&mut bufs)?;
            if n == 0 {
                break;
            }
            let all: Vec<u8> = a.iter().chain(b.iter()).chain(d.iter()).copied().collect();
            got.extend_from_slice(&all[..n]);
        }
        assert_eq!(got, data);
        Ok(())
    })
}

/// peek leaves data queued; shutdown gives the peer EOF; options and
/// addresses match what std reports.
#[test]
fn peek_shutdown_options_addresses() -> io::Result<()> {
    run(|| {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let mut c = TcpStream::connect(addr)?;
        let (mut s, peer) = listener.accept()?;
        assert_eq!(c.peer_addr()?, addr);
        assert_eq!(c.local_addr()?, peer);
        assert_eq!(s.peer_addr()?, c.local_addr()?);

        c.set_nodelay(true)?;
        assert!(c.nodelay()?);
        c.set_nodelay(false)?;
        assert!(!c.nodelay()?);
        c.set_ttl(42)?;
        assert_eq!(c.ttl()?, 42);
        assert!(c.take_error()?.is_none());

        c.write_all(b"peekaboo")?;
        let mut buf = [0; 4];
        assert_eq!(s.peek(&mut buf)?, 4);
        assert_eq!(&buf, b"peek");
        let mut all = [0; 8];
        s.read_exact(&mut all)?;
        assert_eq!(&all, b"peekaboo");

        c.shutdown(Shutdown::Write)?;
        assert_eq!(s.read(&mut all)?, 0, "EOF after the peer's shutdown");
        s.write_all(b"still open the other way")?;
        drop(s);
        let mut back = String::new();
        c.read_to_string(&mut back)?;
        assert_eq!(back, "still open the other way");
        Ok(())
    })
}

/// A refused connect is an error from connect, with std's kind.
#[test]
fn connect_refused() -> io::Result<()> {
    run(|| {
        let addr = TcpListener::bind("127.0.0.1:0")?.local_addr()?; // dropped: port free
        assert_kind(TcpStream::connect(addr), io::ErrorKind::ConnectionRefused);
        assert_kind(TcpStream::connect("127.0.0.1"), io::ErrorKind::InvalidInput);
        assert_kind(
            TcpStream::connect("127.0.0.1:notaport"),
            io::ErrorKind::InvalidInput,
        );
        Ok(())
    })
}

/// A connect that cannot complete (the listener's accept queue is full, so
/// SYNs are dropped) is cut short by an enclosing `with_timeout`.
#[test]
fn connect_honours_with_timeout() -> io::Result<()> {
    run(|| {
        let listener = TcpListener::builder().backlog(1).bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let mut held = Vec::new();
        let mut timed_out = false;
        // A connect the queue has room for completes at once; one it has no
        // room for never does (its SYNs are dropped). The limit only has to
        // be longer than the first on a slow machine or an emulator.
        for _ in 0..64 {
            match coro::with_timeout(Duration::from_secs(2), || TcpStream::connect(addr)) {
                Ok(Ok(s)) => held.push(s),
                Ok(Err(e)) => panic!("connect failed instead of waiting: {e}"),
                Err(coro::Timeout) => {
                    timed_out = true;
                    break;
                }
            }
        }
        assert!(timed_out, "{} connects completed, none waited", held.len());
        // connect_timeout is the same thing.
        let e = assert_kind(
            TcpStream::connect_timeout(&addr, Duration::from_millis(50)),
            io::ErrorKind::TimedOut,
        );
        assert!(e.to_string().contains("timed out") || e.to_string().contains("deadline"));
        assert_kind(
            TcpStream::connect_timeout(&addr, Duration::ZERO),
            io::ErrorKind::InvalidInput,
        );
        // The listener still works once it accepts.
        drop(held);
        Ok(())
    })
}

/// `set_read_timeout` bounds each read with `TimedOut`, std-style.
#[test]
fn read_timeout_option() -> io::Result<()> {
    run(|| {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let mut c = TcpStream::connect(listener.local_addr()?)?;
        let (mut s, _) = listener.accept()?;
        assert_kind(
            s.set_read_timeout(Some(Duration::ZERO)),
            io::ErrorKind::InvalidInput,
        );
        s.set_read_timeout(Some(Duration::from_millis(20)))?;
        assert_eq!(s.read_timeout()?, Some(Duration::from_millis(20)));
        let mut buf = [0; 4];
        let t = coro::clock::now();
        assert_kind(s.read(&mut buf), io::ErrorKind::TimedOut);
        assert!(t.elapsed() >= Duration::from_millis(20));
        c.write_all(b"late")?;
        s.read_exact(&mut buf)?;
        assert_eq!(&buf, b"late");
        Ok(())
    })
}

/// A connection to "localhost" resolves through the blocking pool.
#[test]
fn connect_by_name() -> io::Result<()> {
    run(|| {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let port = listener.local_addr()?.port();
        let c = TcpStream::connect(("localhost", port))?;
        let (s, _) = listener.accept()?;
        assert_eq!(s.peer_addr()?, c.local_addr()?);
        Ok(())
    })
}
