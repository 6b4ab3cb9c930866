//! UdpSocket: a round trip, connected send/recv, peek.

mod util;

use std::io;

use coro::net::UdpSocket;
use util::run;

#[test]
fn round_trip() -> io::Result<()> {
    run(|| {
        let server = UdpSocket::bind("127.0.0.1:0")?;
        let addr = server.local_addr()?;
        let echo = coro::spawn(move || -> io::Result<()> {
            let mut buf = [0; 1500];
            for _ in 0..3 {
                let (n, from) = server.recv_from(&mut buf)?;
                server.send_to(&buf[..n], from)?;
            }
            Ok(())
        });
        let client = UdpSocket::bind("127.0.0.1:0")?;
        client.connect(addr)?;
        assert_eq!(client.peer_addr()?, addr);
        let mut buf = [0; 1500];
        for msg in [&b"one"[..], b"two", &[9u8; 1400]] {
            assert_eq!(client.send(msg)?, msg.len());
            let mut peeked = [0; 3];
            assert_eq!(client.peek(&mut peeked)?, 3);
            let n = client.recv(&mut buf)?;
            assert_eq!(&buf[..n], msg);
            assert_eq!(&peeked, &msg[..3]);
        }
        echo.join().unwrap()
    })
}

#[test]
fn options_and_peek_from() -> io::Result<()> {
    run(|| {
        let a = UdpSocket::bind("127.0.0.1:0")?;
        let b = UdpSocket::bind(("127.0.0.1", 0))?;
        a.set_broadcast(true)?;
        assert!(a.broadcast()?);
        a.set_ttl(9)?;
        assert_eq!(a.ttl()?, 9);
        a.send_to(b"hello", b.local_addr()?)?;
        let mut buf = [0; 8];
        assert_eq!(b.peek_from(&mut buf)?, (5, a.local_addr()?));
        assert_eq!(b.recv_from(&mut buf)?, (5, a.local_addr()?));
        assert_eq!(&buf[..5], b"hello");
        Ok(())
    })
}
