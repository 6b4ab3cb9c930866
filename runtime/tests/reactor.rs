//! The reactor's readiness rules, on real loopback sockets. On a plain
//! registration a short stream read keeps readiness (only `EWOULDBLOCK`
//! proves a socket empty), a short write clears it (no syscall spent to
//! hear `EWOULDBLOCK`), and a peer's close stays visible after a clear.
//! A TCP stream registered with [`Registration::new_tcp_stream`] takes a
//! short read as proof it is drained (no `recvfrom` spent to hear
//! `EWOULDBLOCK`), until it sees urgent data; after that, only
//! `EWOULDBLOCK` clears readiness, so the data behind an urgent mark is
//! never stranded. A future's stored waker is replaced with no borrow
//! held: the old one's drop may close the very source.

use coro_test_support as util;

use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::time::Duration;

use coro_runtime::{self as coro, Direction, Interest, Registration};

#[test]
fn short_read_keeps_readiness_and_eof_stays_visible() {
    coro::run(|| {
        let (mut a, mut b) = mio::net::UnixStream::pair().unwrap();
        let reg = Registration::new(&mut a, Interest::READABLE | Interest::WRITABLE).unwrap();
        (&b).write_all(b"0123456789").unwrap();
        reg.wait(Direction::Read).unwrap();
        assert!(reg.is_ready(Direction::Read));
        let mut buf = [0u8; 64];
        let n = reg
            .io_stream(Direction::Read, buf.len(), || (&a).read(&mut buf))
            .unwrap();
        assert_eq!(n, 10);
        assert!(
            reg.is_ready(Direction::Read),
            "a short read is no proof the socket is empty"
        );
        // The next read hears EWOULDBLOCK, which clears it; then it waits.
        let r = coro::with_timeout(std::time::Duration::from_millis(20), || {
            reg.io_stream(Direction::Read, buf.len(), || (&a).read(&mut buf))
        });
        assert!(r.is_err(), "nothing to read: the read waits");
        assert!(!reg.is_ready(Direction::Read));
        (&b).write_all(&[7u8; 100]).unwrap();
        let n = reg
            .io_stream(Direction::Read, 64, || (&a).read(&mut buf))
            .unwrap();
        assert_eq!(n, 64);
        assert!(reg.is_ready(Direction::Read));
        let n = reg
            .io_stream(Direction::Read, 64, || (&a).read(&mut buf))
            .unwrap();
        assert_eq!(n, 36);
        // The peer closes: EOF is a final state that clear() does not undo.
        drop(std::mem::replace(
            &mut b,
            mio::net::UnixStream::pair().unwrap().0,
        ));
        reg.clear(Direction::Read);
        reg.wait(Direction::Read).unwrap();
        reg.clear(Direction::Read);
        assert!(reg.is_ready(Direction::Read));
        let n = reg
            .io_stream(Direction::Read, 64, || (&a).read(&mut buf))
            .unwrap();
        assert_eq!(n, 0);
        drop(reg);
        assert_eq!(coro::stats().io_sources, 0);
    });
}

#[test]
fn short_write_clears_write_readiness() {
    coro::run(|| {
        let (mut a, _b) = mio::net::UnixStream::pair().unwrap();
        let reg = Registration::new(&mut a, Interest::READABLE | Interest::WRITABLE).unwrap();
        reg.wait(Direction::Write).unwrap();
        let big = vec![1u8; 8 << 20];
        let n = reg
            .io_stream(Direction::Write, big.len(), || (&a).write(&big))
            .unwrap();
        assert!(n < big.len(), "the socket buffer holds less than 8 MiB");
        assert!(
            !reg.is_ready(Direction::Write),
            "a short write fills the buffer"
        );
    });
}

#[test]
fn close_wakes_a_waiter_with_not_connected() {
    coro::run(|| {
        let (mut a, _b) = mio::net::UnixStream::pair().unwrap();
        let reg = std::rc::Rc::new(Registration::new(&mut a, Interest::READABLE).unwrap());
        let r = reg.clone();
        let h = coro::spawn(move || r.wait(Direction::Read));
        coro::yield_now();
        reg.close();
        let e = h.join().unwrap().unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::NotConnected);
    });
}

/// A connected pair: a std client and the accepted server side as a mio
/// stream registered the TCP way.
fn pair() -> (std::net::TcpStream, mio::net::TcpStream, Registration) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (server, _) = listener.accept().unwrap();
    server.set_nonblocking(true).unwrap();
    let mut server = mio::net::TcpStream::from_std(server);
    let reg =
        Registration::new_tcp_stream(&mut server, Interest::READABLE | Interest::WRITABLE).unwrap();
    (client, server, reg)
}

#[test]
fn a_short_tcp_read_clears_readiness() {
    util::run(|| {
        let (mut client, server, reg) = pair();
        assert!(reg.short_read_drains());
        client.write_all(b"hello").unwrap();
        reg.wait(Direction::Read).unwrap();
        let mut buf = [0u8; 64];
        let mut calls = 0;
        let n = reg
            .io_stream(Direction::Read, buf.len(), || {
                calls += 1;
                (&server).read(&mut buf)
            })
            .unwrap();
        assert_eq!((n, calls), (5, 1));
        assert!(
            !reg.is_ready(Direction::Read),
            "a short TCP read with no urgent data drained the socket: readiness is cleared"
        );
        // The next message sets it again through the reactor.
        client.write_all(b"world").unwrap();
        let mut calls = 0;
        let n = coro::with_timeout(util::LIMIT, || {
            reg.io_stream(Direction::Read, buf.len(), || {
                calls += 1;
                (&server).read(&mut buf)
            })
        })
        .expect("the next message's event came")
        .unwrap();
        // Not tried before the event: no EWOULDBLOCK read either.
        assert_eq!((n, calls), (5, 1));
        assert_eq!(&buf[..5], b"world");
    });
}

/// Sends one urgent byte.
fn send_oob(s: &std::net::TcpStream) {
    // SAFETY: sends one byte from a valid static buffer on an open socket.
    let n = unsafe { libc::send(s.as_raw_fd(), b"!".as_ptr().cast(), 1, libc::MSG_OOB) };
    assert_eq!(n, 1, "{}", io::Error::last_os_error());
}

#[test]
fn after_urgent_data_a_short_read_keeps_readiness() {
    util::run(|| {
        let (mut client, server, reg) = pair();
        // Everything is queued (loopback delivers during the send) before
        // the reactor looks, so no event can come after the first read.
        client.write_all(b"hello").unwrap();
        send_oob(&client);
        client.write_all(b"world").unwrap();
        reg.wait(Direction::Read).unwrap();
        assert!(
            !reg.short_read_drains(),
            "the urgent-data event turned the short-read rule off"
        );
        let mut buf = [0u8; 64];
        let n = reg
            .io_stream(Direction::Read, buf.len(), || (&server).read(&mut buf))
            .unwrap();
        assert_eq!(&buf[..n], b"hello", "Linux stops a read at the urgent mark");
        assert!(reg.is_ready(Direction::Read));
        let n = coro::with_timeout(Duration::from_secs(20), || {
            reg.io_stream(Direction::Read, buf.len(), || (&server).read(&mut buf))
        })
        .expect("the data behind the urgent mark was read, not waited for")
        .unwrap();
        assert_eq!(&buf[..n], b"world");
        // For good: later short reads keep readiness too.
        client.write_all(b"more").unwrap();
        let n = coro::with_timeout(util::LIMIT, || {
            reg.io_stream(Direction::Read, buf.len(), || (&server).read(&mut buf))
        })
        .unwrap()
        .unwrap();
        assert_eq!(&buf[..n], b"more");
        assert!(reg.is_ready(Direction::Read));
    });
}

#[test]
fn other_registrations_keep_the_safe_rule() {
    util::run(|| {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        server.set_nonblocking(true).unwrap();
        let mut server = mio::net::TcpStream::from_std(server);
        let reg = Registration::new(&mut server, Interest::READABLE).unwrap();
        assert!(!reg.short_read_drains());
        client.write_all(b"hello").unwrap();
        reg.wait(Direction::Read).unwrap();
        let mut buf = [0u8; 64];
        let n = reg
            .io_stream(Direction::Read, buf.len(), || (&server).read(&mut buf))
            .unwrap();
        assert_eq!(n, 5);
        assert!(reg.is_ready(Direction::Read));
    });
}

thread_local! {
    /// The registration a [`ClosesOnDrop`] waker closes.
    static CLOSED_BY_WAKER: std::cell::RefCell<Option<std::rc::Rc<Registration>>> =
        const { std::cell::RefCell::new(None) };
}

/// A waker whose drop closes a registration (as a task that owns a socket
/// is freed with its last waker).
struct ClosesOnDrop;

impl std::task::Wake for ClosesOnDrop {
    fn wake(self: std::sync::Arc<Self>) {}
}

impl Drop for ClosesOnDrop {
    fn drop(&mut self) {
        CLOSED_BY_WAKER.with(|r| {
            if let Some(r) = r.borrow().as_ref() {
                r.close();
            }
        });
    }
}

/// `poll_ready` replaces the stored waker with no borrow of its slot held:
/// the old waker's drop may close this very source (it used to panic with
/// `BorrowMutError`), and the poll then reports the close.
#[test]
fn a_stored_waker_whose_drop_closes_the_source_can_be_replaced() {
    use std::task::{Context, Poll, Waker};
    coro::run(|| {
        let (mut a, _b) = mio::net::UnixStream::pair().unwrap();
        let reg = std::rc::Rc::new(Registration::new(&mut a, Interest::READABLE).unwrap());
        CLOSED_BY_WAKER.with(|r| *r.borrow_mut() = Some(reg.clone()));
        let closes = Waker::from(std::sync::Arc::new(ClosesOnDrop));
        let first = reg.poll_ready(Direction::Read, &mut Context::from_waker(&closes));
        assert!(first.is_pending());
        drop(closes); // the stored clone is the last one
        let second = reg.poll_ready(Direction::Read, &mut Context::from_waker(Waker::noop()));
        match second {
            Poll::Ready(Err(e)) => assert_eq!(e.kind(), std::io::ErrorKind::NotConnected),
            other => panic!("the close is reported: {other:?}"),
        }
        assert!(reg.is_closed());
        CLOSED_BY_WAKER.with(|r| r.borrow_mut().take());
    });
}
