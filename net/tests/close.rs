//! Closing a socket while another green thread waits on it (both orders),
//! a listener's `incoming()` ending after `close()`, and a new socket that
//! reuses the fd number of a closed one.

mod util;

use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::rc::Rc;
use std::time::Duration;

use coro::net::{Fd, TcpListener, TcpStream, UdpSocket, UnixListener};
use coro_test_support::child::{child_ok, is_child};
use util::{assert_kind, run, TempDir};

fn pair() -> io::Result<(TcpStream, TcpStream)> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let c = TcpStream::connect(listener.local_addr()?)?;
    let (s, _) = listener.accept()?;
    Ok((c, s))
}

/// Order 1: a green thread is parked in `read`, another closes the socket:
/// the reader wakes at once with a `NotConnected` error saying so.
#[test]
fn close_while_reading_wakes_reader() -> io::Result<()> {
    run(|| {
        let (c, _s) = pair()?;
        let c = Rc::new(c);
        let r = c.clone();
        let reader = coro::spawn(move || (&*r).read(&mut [0; 16]));
        coro::sleep(Duration::from_millis(10)).unwrap();
        assert!(!reader.is_finished(), "reader should be parked");
        c.close();
        // No timer involved: the close itself wakes the reader.
        let e = assert_kind(reader.join().unwrap(), io::ErrorKind::NotConnected);
        assert!(e.to_string().contains("closed"), "unclear error: {e}");
        Ok(())
    })
}

/// Order 2: the socket is closed first, then a read is attempted: it fails
/// at once (even with data queued) instead of blocking.
#[test]
fn read_after_close_fails_at_once() -> io::Result<()> {
    run(|| {
        let (mut c, s) = pair()?;
        c.write_all(b"queued")?;
        s.close();
        let mut buf = [0; 16];
        assert_kind((&s).read(&mut buf), io::ErrorKind::NotConnected);
        assert_kind((&s).write(b"x"), io::ErrorKind::NotConnected);
        // The peer sees the shutdown as EOF (or a reset, since data was
        // left unread).
        let r = c.read(&mut buf);
        assert!(matches!(r, Ok(0)) || r.is_err(), "{r:?}");
        Ok(())
    })
}

/// A writer blocked on a full socket and an acceptor blocked in `accept`
/// wake too; so does a UDP receiver.
#[test]
fn close_wakes_writer_acceptor_and_receiver() -> io::Result<()> {
    run(|| {
        let (c, _s) = pair()?;
        let c = Rc::new(c);
        let w = c.clone();
        let writer = coro::spawn(move || -> io::Result<()> {
            let chunk = vec![0u8; 1 << 16];
            loop {
                (&*w).write_all(&chunk)?;
            }
        });
        let listener = Rc::new(TcpListener::bind("127.0.0.1:0")?);
        let l = listener.clone();
        let acceptor = coro::spawn(move || l.accept().map(|_| ()));
        let udp = Rc::new(UdpSocket::bind("127.0.0.1:0")?);
        let u = udp.clone();
        let receiver = coro::spawn(move || u.recv(&mut [0; 8]));
        coro::sleep(Duration::from_millis(20)).unwrap();
        c.close();
        listener.close();
        udp.close();
        assert_kind(writer.join().unwrap(), io::ErrorKind::NotConnected);
        assert_kind(acceptor.join().unwrap(), io::ErrorKind::NotConnected);
        assert_kind(receiver.join().unwrap(), io::ErrorKind::NotConnected);
        Ok(())
    })
}

/// A socket whose fd number was used by a closed socket that had unread
/// readiness does not inherit that readiness: its read waits (and times
/// out) until its own data comes.
#[test]
fn fd_reuse_gets_no_stale_readiness() -> io::Result<()> {
    // In a process of its own: the tests running beside it in this binary
    // open and hold fds, and may keep the old number from coming back.
    const NAME: &str = "fd_reuse_gets_no_stale_readiness";
    if !is_child(NAME) {
        child_ok(NAME);
        return Ok(());
    }
    run(|| {
        let (mut c1, s1) = pair()?;
        c1.write_all(b"old")?;
        // Let the reactor see s1 readable, then drop it unread.
        s1.wait_readable()?;
        let old_fd = s1.as_raw_fd();
        let waiter = {
            let s1 = Rc::new(s1);
            let r = s1.clone();
            // Make it close with a parked reader queued on it too.
            let h = coro::spawn(move || -> io::Result<()> {
                let mut b = [0; 1];
                loop {
                    (&*r).read_exact(&mut b)?;
                }
            });
            coro::sleep(Duration::from_millis(5)).unwrap();
            s1.close();
            h
        };
        assert_kind(waiter.join().unwrap(), io::ErrorKind::NotConnected);
        drop(c1);

        // New connections until one reuses the old number (the kernel hands
        // out the lowest free fd; the runtime may have freed lower ones
        // meanwhile: those are taken up and held until the old number comes).
        let mut spare = Vec::new();
        let (mut c2, s2) = loop {
            let (c, s) = pair()?;
            if s.as_raw_fd() == old_fd || c.as_raw_fd() == old_fd {
                break (c, s);
            }
            assert!(spare.len() < 64, "fd {old_fd} was never reused");
            spare.push((c, s));
        };
        let (reuser, other) = if s2.as_raw_fd() == old_fd {
            (s2, &mut c2)
        } else {
            let (a, b) = (c2, s2);
            c2 = b;
            (a, &mut c2)
        };
        let r = coro::with_timeout(Duration::from_millis(30), || (&reuser).read(&mut [0; 8]));
        assert_eq!(
            r.err(),
            Some(coro::Timeout),
            "read saw the old socket's data"
        );
        other.write_all(b"new")?;
        let mut buf = [0; 3];
        (&reuser).read_exact(&mut buf)?;
        assert_eq!(&buf, b"new");
        Ok(())
    })
}

/// The same for an `Fd` around a pipe: the old pipe was readable when
/// dropped, the new one (same fd number) is empty and must wait.
#[test]
fn fd_reuse_pipe() -> io::Result<()> {
    // In a process of its own, as above.
    const NAME: &str = "fd_reuse_pipe";
    if !is_child(NAME) {
        child_ok(NAME);
        return Ok(());
    }
    run(|| {
        let (r1, mut w1) = io::pipe()?;
        let r1 = Fd::new(r1)?;
        w1.write_all(b"x")?;
        r1.wait_readable()?;
        let old = r1.as_raw_fd();
        drop(r1);
        // New pipes until a read end reuses the old number (as above: lower
        // fds freed meanwhile are taken up and held).
        let mut spare = Vec::new();
        let (r2, mut w2) = loop {
            let (r, w) = io::pipe()?;
            if r.as_raw_fd() == old {
                break (r, w);
            }
            assert!(spare.len() < 64, "fd {old} was never reused");
            if w.as_raw_fd() == old {
                // The write end took it: hold the read end (a lower
                // number), give the old one back.
                drop(w);
                spare.push((r, None));
            } else {
                spare.push((r, Some(w)));
            }
        };
        let r2 = Fd::new(r2)?;
        let waited = coro::with_timeout(Duration::from_millis(30), || r2.wait_readable());
        assert_eq!(
            waited.err(),
            Some(coro::Timeout),
            "new pipe inherited readiness"
        );
        w2.write_all(b"y")?;
        let mut b = [0; 1];
        (&r2).read_exact(&mut b)?;
        assert_eq!(&b, b"y");
        drop(w1);
        Ok(())
    })
}

/// `for s in listener.incoming()` ends after `close()` (it does not go on
/// forever, one `NotConnected` error after another).
#[test]
fn incoming_ends_after_close() -> io::Result<()> {
    run(|| {
        let listener = Rc::new(TcpListener::bind("127.0.0.1:0")?);
        let addr = listener.local_addr()?;
        let acceptor = {
            let listener = listener.clone();
            coro::spawn(move || {
                let mut accepted = 0;
                let mut errors = 0;
                for s in listener.incoming() {
                    match s {
                        Ok(_) => accepted += 1,
                        Err(_) => errors += 1,
                    }
                    assert!(errors < 100, "incoming() did not end after close()");
                }
                (accepted, errors)
            })
        };
        let _c = coro::net::TcpStream::connect(addr)?;
        coro::yield_now();
        // The acceptor waits in incoming() again; close it from here.
        listener.close();
        assert_eq!(acceptor.join().unwrap(), (1, 0));
        assert!(listener.incoming().next().is_none());

        let dir = TempDir::new("incoming-close");
        let unix = UnixListener::bind(dir.path("sock"))?;
        unix.close();
        assert!(unix.incoming().next().is_none());
        Ok(())
    })
}
