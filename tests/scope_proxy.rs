//! Structured concurrency in a real program: a TCP proxy built on
//! `coro::scope`. The accept loop and the connection handlers share one
//! scope (they borrow the listener); each handler runs its two copy
//! directions in a nested scope that borrows both sockets (no `Rc`, no
//! `try_clone`), so the two end together: EOF on one side is passed on and
//! the handler ends when both are done; an error on one side cancels the
//! other; cancelling the proxy ends every connection and returns only once
//! all are gone.

mod util;

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr};

use coro::net::{TcpListener, TcpStream};
use coro::{CancelScope, ThreadState, WaitError};
use util::{run, yield_until};

/// Copies `from` to `to` until EOF, then passes the EOF on.
fn copy(from: &TcpStream, to: &TcpStream) -> io::Result<u64> {
    let n = io::copy(&mut &*from, &mut &*to)?;
    to.shutdown(Shutdown::Write)?;
    Ok(n)
}

/// One proxied connection: both directions in a scope of their own; they
/// borrow both sockets and write their byte counts into locals.
fn handle(client: TcpStream, upstream: SocketAddr) -> io::Result<(u64, u64)> {
    let server = TcpStream::connect(upstream)?;
    let (mut up, mut down) = (0, 0);
    coro::scope(|s| {
        s.try_spawn(|| copy(&client, &server).map(|n| up = n));
        s.try_spawn(|| copy(&server, &client).map(|n| down = n));
    })?;
    Ok((up, down))
}

/// Accepts until the listener is closed or the proxy's scope is cancelled;
/// returns the result of every connection, once every one has ended.
fn proxy(listener: &TcpListener, upstream: SocketAddr) -> io::Result<Vec<io::Result<(u64, u64)>>> {
    let results = std::cell::RefCell::new(Vec::new());
    coro::scope(|s| {
        let results = &results;
        loop {
            match listener.accept() {
                Ok((client, _)) => {
                    s.spawn(move || {
                        let r = handle(client, upstream);
                        results.borrow_mut().push(r);
                    });
                }
                Err(_) if listener.is_closed() => return,
                Err(e) if WaitError::from_io(&e).is_some() => return,
                Err(e) => panic!("accept: {e}"),
            }
        }
    })?;
    Ok(results.into_inner())
}

/// An upstream that echoes every connection until EOF.
fn echo_upstream() -> io::Result<(TcpListener, SocketAddr)> {
    let l = TcpListener::bind("127.0.0.1:0")?;
    let addr = l.local_addr()?;
    Ok((l, addr))
}

fn serve_echo(l: &TcpListener) {
    coro::scope(|s| {
        while let Ok((c, _)) = l.accept() {
            s.spawn(move || {
                let _ = io::copy(&mut &c, &mut &c);
                let _ = c.shutdown(Shutdown::Write);
            });
        }
    })
    .unwrap();
}

#[test]
fn bytes_flow_both_ways_and_eof_ends_the_handler() -> io::Result<()> {
    run(|| {
        let (up, up_addr) = echo_upstream()?;
        let front = TcpListener::bind("127.0.0.1:0")?;
        let front_addr = front.local_addr()?;
        coro::scope(|s| -> io::Result<()> {
            s.spawn(|| serve_echo(&up));
            let proxied = s.spawn(|| proxy(&front, up_addr));
            for round in 0..3u8 {
                let c = TcpStream::connect(front_addr)?;
                let msg = vec![round; 100_000];
                (&c).write_all(&msg)?;
                c.shutdown(Shutdown::Write)?; // EOF through the proxy and back
                let mut back = Vec::new();
                (&c).read_to_end(&mut back)?;
                assert_eq!(back, msg);
            }
            front.close();
            let results = proxied.join().unwrap()?;
            assert_eq!(results.len(), 3);
            for r in results {
                assert_eq!(r?, (100_000, 100_000));
            }
            up.close();
            Ok(())
        })??;
        Ok(())
    })
}

#[test]
fn an_error_on_one_side_cancels_the_other() -> io::Result<()> {
    run(|| {
        // An upstream that resets every connection: it drops the socket
        // with unread data, which makes the kernel send RST.
        let up = TcpListener::bind("127.0.0.1:0")?;
        let up_addr = up.local_addr()?;
        let front = TcpListener::bind("127.0.0.1:0")?;
        let front_addr = front.local_addr()?;
        coro::scope(|s| -> io::Result<()> {
            s.spawn(|| {
                let (c, _) = up.accept().unwrap();
                c.wait_readable().unwrap();
                drop(c);
            });
            let proxied = s.spawn(|| proxy(&front, up_addr));
            let c = TcpStream::connect(front_addr)?;
            (&c).write_all(b"to be reset")?;
            // The client sends nothing more: the upstream-to-client copy
            // fails on the reset, which cancels the client-to-upstream copy
            // blocked reading from the client, and the handler ends.
            let mut rest = Vec::new();
            let _ = (&c).read_to_end(&mut rest);
            front.close();
            let results = proxied.join().unwrap()?;
            let e = results.into_iter().next().unwrap().unwrap_err();
            assert!(
                matches!(
                    e.kind(),
                    io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe
                ),
                "{e}"
            );
            assert!(e.to_string().contains("coro::scope failed"), "{e}");
            Ok(())
        })??;
        Ok(())
    })
}

#[test]
fn cancelling_the_proxy_ends_every_connection() -> io::Result<()> {
    run(|| {
        let (up, up_addr) = echo_upstream()?;
        let front = TcpListener::bind("127.0.0.1:0")?;
        let front_addr = front.local_addr()?;
        let stop = CancelScope::new();
        coro::scope(|s| -> io::Result<()> {
            s.spawn(|| serve_echo(&up));
            let proxied = s.spawn(|| stop.run(|| proxy(&front, up_addr)));
            let clients: Vec<TcpStream> = (0..5)
                .map(|_| TcpStream::connect(front_addr))
                .collect::<io::Result<_>>()?;
            for c in &clients {
                (&*c).write_all(b"ping")?;
                let mut buf = [0; 4];
                (&*c).read_exact(&mut buf)?;
                assert_eq!(&buf, b"ping");
            }
            // Every handler is blocked reading from its client (idle).
            yield_until("the connections to be idle", || {
                coro::threads()
                    .iter()
                    .filter(|t| t.parent.is_some())
                    .all(|t| t.state == ThreadState::Parked)
            });
            stop.cancel();
            // The proxy returns only once every connection has ended; the
            // cancellation was its own, so it caught it.
            let r = proxied.join().unwrap();
            assert!(r.is_err() && stop.cancelled_caught());
            for c in &clients {
                let mut rest = Vec::new();
                assert_eq!((&*c).read_to_end(&mut rest)?, 0, "closed by the proxy");
            }
            up.close();
            Ok(())
        })??;
        Ok(())
    })
}
