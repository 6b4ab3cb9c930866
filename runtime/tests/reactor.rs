//! The reactor's readiness rules, on a real socket pair: a short stream read
//! keeps readiness (only `EWOULDBLOCK` proves a socket empty: issue #13), a
//! short write clears it (no syscall spent to hear `EWOULDBLOCK`), and a
//! peer's close stays visible after a clear.

use std::io::{Read, Write};

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
