//! Unix-domain sockets: stream (listener, connect, pair, echo) and
//! datagram (bound, unbound, pair), with paths in a temp dir this test
//! creates and removes.

mod util;

use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::time::Duration;

use coro::net::{UnixDatagram, UnixListener, UnixStream};
use util::{assert_kind, pattern, run, TempDir};

#[test]
fn stream_echo_over_a_path() -> io::Result<()> {
    let dir = TempDir::new("unix-stream");
    let path = dir.path("echo.sock");
    run(move || {
        let listener = UnixListener::bind(&path)?;
        assert_eq!(listener.local_addr()?.as_pathname(), Some(path.as_path()));
        let server = coro::spawn(move || -> io::Result<()> {
            let (mut s, _) = listener.accept()?;
            let mut buf = vec![0; 4096];
            loop {
                let n = s.read(&mut buf)?;
                if n == 0 {
                    return Ok(());
                }
                s.write_all(&buf[..n])?;
            }
        });
        let mut c = UnixStream::connect(&path)?;
        let data = pattern(300_000, 5);
        let w = c.try_clone()?;
        let d = data.clone();
        let writer = coro::spawn(move || -> io::Result<()> {
            (&w).write_all(&d)?;
            w.shutdown(Shutdown::Write)
        });
        let mut back = Vec::new();
        c.read_to_end(&mut back)?;
        assert!(back == data, "echo corrupted");
        writer.join().unwrap()?;
        server.join().unwrap()?;
        assert_kind(
            UnixStream::connect(dir_missing(&path)),
            io::ErrorKind::NotFound,
        );
        Ok(())
    })
}

fn dir_missing(p: &std::path::Path) -> std::path::PathBuf {
    p.with_file_name("missing.sock")
}

#[test]
fn stream_pair_timeout_and_close() -> io::Result<()> {
    run(|| {
        let (a, mut b) = UnixStream::pair()?;
        let r = coro::with_timeout(Duration::from_millis(10), || (&a).read(&mut [0; 4]));
        assert!(r.is_err());
        b.write_all(b"ping")?;
        let mut buf = [0; 4];
        (&a).read_exact(&mut buf)?;
        assert_eq!(&buf, b"ping");
        let a2 = a.try_clone()?;
        let reader = coro::spawn(move || (&a2).read(&mut [0; 4]));
        coro::sleep(Duration::from_millis(5)).unwrap();
        a.close();
        assert_kind(reader.join().unwrap(), io::ErrorKind::NotConnected);
        Ok(())
    })
}

#[test]
fn datagrams() -> io::Result<()> {
    let dir = TempDir::new("unix-dgram");
    let (pa, pb) = (dir.path("a.sock"), dir.path("b.sock"));
    run(move || {
        let a = UnixDatagram::bind(&pa)?;
        let b = UnixDatagram::bind(&pb)?;
        let echo = coro::spawn(move || -> io::Result<()> {
            let mut buf = [0; 64];
            let (n, from) = b.recv_from(&mut buf)?;
            b.send_to(&buf[..n], from.as_pathname().expect("bound sender"))?;
            Ok(())
        });
        a.send_to(b"over a path", &pb)?;
        let mut buf = [0; 64];
        let (n, from) = a.recv_from(&mut buf)?;
        assert_eq!(&buf[..n], b"over a path");
        assert_eq!(from.as_pathname(), Some(pb.as_path()));
        echo.join().unwrap()?;

        let (x, y) = UnixDatagram::pair()?;
        x.send(b"paired")?;
        let n = y.recv(&mut buf)?;
        assert_eq!(&buf[..n], b"paired");
        let u = UnixDatagram::unbound()?;
        u.connect(&pa)?;
        u.send(b"unbound")?;
        let n = a.recv(&mut buf)?;
        assert_eq!(&buf[..n], b"unbound");
        Ok(())
    })?;
    assert!(dir.0.exists());
    Ok(())
}
