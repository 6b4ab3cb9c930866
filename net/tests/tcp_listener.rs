//! TcpListener: incoming, accept_many batches, SO_REUSEADDR/SO_REUSEPORT,
//! argument checks, the flags of its socket and of the ones it accepts.

mod util;

use std::io;
use std::time::Duration;

use coro::net::{TcpListener, TcpStream};
use util::{assert_kind, run};

#[test]
fn incoming_yields_connections() -> io::Result<()> {
    run(|| {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let clients = coro::spawn(move || -> io::Result<Vec<TcpStream>> {
            (0..3).map(|_| TcpStream::connect(addr)).collect()
        });
        let got: Vec<TcpStream> = listener.incoming().take(3).collect::<io::Result<_>>()?;
        let clients = clients.join().unwrap()?;
        for (s, c) in got.iter().zip(&clients) {
            assert_eq!(s.peer_addr()?, c.local_addr()?);
        }
        Ok(())
    })
}

/// Whether `fd` has `O_NONBLOCK` and `FD_CLOEXEC`.
fn flags(fd: &impl std::os::fd::AsRawFd) -> (bool, bool) {
    let fd = fd.as_raw_fd();
    // SAFETY: fcntl's get commands on an open descriptor read flags only.
    let (fl, fdfl) = unsafe {
        (
            libc::fcntl(fd, libc::F_GETFL),
            libc::fcntl(fd, libc::F_GETFD),
        )
    };
    assert!(fl >= 0 && fdfl >= 0, "{}", io::Error::last_os_error());
    (fl & libc::O_NONBLOCK != 0, fdfl & libc::FD_CLOEXEC != 0)
}

/// A listener's socket, made where `SOCK_NONBLOCK` may not exist, is
/// non-blocking and close-on-exec, with or without the builder's options;
/// so are the sockets it accepts.
#[test]
fn sockets_are_non_blocking_and_close_on_exec() -> io::Result<()> {
    run(|| {
        let plain = TcpListener::bind("127.0.0.1:0")?;
        assert_eq!(flags(&plain), (true, true), "bind");
        let built = TcpListener::builder()
            .reuse_port(true)
            .backlog(4)
            .bind("[::1]:0")
            .or_else(|_| TcpListener::builder().reuse_port(true).bind("127.0.0.1:0"))?;
        assert_eq!(flags(&built), (true, true), "builder");
        let addr = plain.local_addr()?;
        let client = coro::spawn(move || TcpStream::connect(addr));
        let (accepted, _) = plain.accept()?;
        assert_eq!(flags(&accepted), (true, true), "accepted");
        assert_eq!(flags(&client.join().unwrap()?), (true, true), "connected");
        Ok(())
    })
}

#[test]
fn accept_many_takes_a_batch() -> io::Result<()> {
    run(|| {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        assert_kind(listener.accept_many(0), io::ErrorKind::InvalidInput);
        // Ten connections queued before the first accept_many.
        let mut clients = Vec::new();
        for _ in 0..10 {
            clients.push(TcpStream::connect(addr)?);
        }
        coro::sleep(Duration::from_millis(10)).unwrap();
        let first = listener.accept_many(4)?;
        assert_eq!(first.len(), 4);
        let mut total = first.len();
        while total < 10 {
            let batch = listener.accept_many(100)?;
            assert!(!batch.is_empty());
            total += batch.len();
        }
        assert_eq!(total, 10);
        // Nothing queued now: the next batch waits (and times out here).
        let r = coro::with_timeout(Duration::from_millis(20), || listener.accept_many(8));
        assert!(r.is_err());
        Ok(())
    })
}

#[test]
fn reuse_address_and_port() -> io::Result<()> {
    run(|| {
        // SO_REUSEADDR by default: rebinding right after a connection was
        // served and closed works.
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let c = TcpStream::connect(addr)?;
        let (s, _) = listener.accept()?;
        drop(s); // server side closes first: TIME_WAIT on the port
        drop(c);
        drop(listener);
        let again = TcpListener::bind(addr)?;
        assert_eq!(again.local_addr()?, addr);

        // SO_REUSEPORT: two listeners on one port.
        let a = TcpListener::builder()
            .reuse_port(true)
            .bind("127.0.0.1:0")?;
        let b = TcpListener::builder()
            .reuse_port(true)
            .bind(a.local_addr()?)?;
        assert_eq!(a.local_addr()?, b.local_addr()?);
        // Without it the second bind fails.
        assert_kind(TcpListener::bind(a.local_addr()?), io::ErrorKind::AddrInUse);
        assert_kind(
            TcpListener::builder().backlog(0).bind("127.0.0.1:0"),
            io::ErrorKind::InvalidInput,
        );
        assert_kind(
            TcpListener::bind("not an address"),
            io::ErrorKind::InvalidInput,
        );
        Ok(())
    })
}

#[test]
fn close_stops_an_accept_loop() -> io::Result<()> {
    run(|| {
        let listener = std::rc::Rc::new(TcpListener::bind("127.0.0.1:0")?);
        let addr = listener.local_addr()?;
        let l = listener.clone();
        let server = coro::spawn(move || {
            let mut served = 0;
            for s in l.incoming() {
                s.expect("no error before close");
                served += 1;
            }
            // The loop ends at close(); accept itself says why.
            (served, l.accept().unwrap_err())
        });
        TcpStream::connect(addr)?;
        coro::sleep(Duration::from_millis(10)).unwrap();
        listener.close();
        let (served, e) = server.join().unwrap();
        assert_eq!(served, 1);
        assert_eq!(e.kind(), io::ErrorKind::NotConnected);
        // Stopped listening: new connections are refused.
        assert_kind(TcpStream::connect(addr), io::ErrorKind::ConnectionRefused);
        Ok(())
    })
}
