//! [`UdpSocket`]: a UDP socket whose blocking calls suspend only the calling
//! green thread.

use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::rc::Rc;

use crate::lookup::{each_addr, invalid, ToSocketAddrs};
use crate::source::Source;

/// A UDP socket, with the API of [`std::net::UdpSocket`].
///
/// `recv`/`recv_from` suspend only the calling green thread until a datagram
/// arrives; `send`/`send_to` wait only if the socket buffer is full. Calls
/// that succeed at once spend selfishness, and every call honours
/// `with_timeout` and interrupts, as for [`TcpStream`](crate::TcpStream).
/// [`close`](UdpSocket::close) wakes waiting green threads with a
/// `NotConnected` error; several green threads waiting on one direction
/// queue in order.
///
/// # Examples
///
/// ```
/// use coro::net::UdpSocket;
///
/// coro::run(|| -> std::io::Result<()> {
///     let a = UdpSocket::bind("127.0.0.1:0")?;
///     let b = UdpSocket::bind("127.0.0.1:0")?;
///     a.send_to(b"ping", b.local_addr()?)?;
///     let mut buf = [0; 16];
///     let (n, from) = b.recv_from(&mut buf)?;
///     assert_eq!((&buf[..n], from), (&b"ping"[..], a.local_addr()?));
///     Ok(())
/// })
/// .unwrap();
/// ```
pub struct UdpSocket {
    /// The shared socket; `try_clone` handles point at the same one.
    inner: Rc<Source<mio::net::UdpSocket>>,
}

impl UdpSocket {
    /// Creates a socket bound to `addr` (each resolved address in turn).
    ///
    /// # Errors
    ///
    /// `InvalidInput` for a malformed address; the `bind` error of the last
    /// address tried.
    ///
    /// # Panics
    ///
    /// Outside a green thread.
    #[track_caller]
    pub fn bind<A: ToSocketAddrs>(addr: A) -> io::Result<UdpSocket> {
        crate::source::need_runtime("UdpSocket::bind");
        each_addr(addr, |a| UdpSocket::from_mio(mio::net::UdpSocket::bind(a)?))
    }

    /// Sets the default peer for `send`/`recv` (the first resolved address
    /// that works) and filters incoming datagrams to it.
    ///
    /// # Errors
    ///
    /// `InvalidInput` for a malformed address; the `connect` error.
    pub fn connect<A: ToSocketAddrs>(&self, addr: A) -> io::Result<()> {
        each_addr(addr, |a| self.inner.get().connect(a))
    }

    /// Sends `buf` to `target` (the first resolved address); returns the
    /// bytes sent.
    ///
    /// # Errors
    ///
    /// `InvalidInput` for a malformed or empty address; the `sendto` error;
    /// a timeout or an interruption.
    #[track_caller]
    pub fn send_to<A: ToSocketAddrs>(&self, buf: &[u8], target: A) -> io::Result<usize> {
        let to = target.to_socket_addrs()?.next().ok_or_else(|| {
            invalid("coro-net: send_to: the address resolved to nothing".to_owned())
        })?;
        self.inner
            .write("UdpSocket::send_to", |s| s.send_to(buf, to))
    }

    /// As [`recv_from`](UdpSocket::recv_from) but leaves the datagram queued.
    ///
    /// # Errors
    ///
    /// As `recv_from`.
    #[track_caller]
    pub fn peek_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        self.inner
            .read("UdpSocket::peek_from", |s| s.peek_from(buf))
    }

    /// As [`recv`](UdpSocket::recv) but leaves the datagram queued.
    ///
    /// # Errors
    ///
    /// As `recv`.
    #[track_caller]
    pub fn peek(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.inner.read("UdpSocket::peek", |s| s.peek(buf))
    }

    /// Sets `SO_BROADCAST`.
    ///
    /// # Errors
    ///
    /// As `setsockopt`.
    pub fn set_broadcast(&self, on: bool) -> io::Result<()> {
        self.inner.get().set_broadcast(on)
    }

    /// Whether `SO_BROADCAST` is set.
    ///
    /// # Errors
    ///
    /// As `getsockopt`.
    pub fn broadcast(&self) -> io::Result<bool> {
        self.inner.get().broadcast()
    }

    /// Joins an IPv4 multicast group on `interface`.
    ///
    /// # Errors
    ///
    /// As `setsockopt`.
    pub fn join_multicast_v4(&self, group: &Ipv4Addr, interface: &Ipv4Addr) -> io::Result<()> {
        self.inner.get().join_multicast_v4(group, interface)
    }

    /// Leaves an IPv4 multicast group.
    ///
    /// # Errors
    ///
    /// As `setsockopt`.
    pub fn leave_multicast_v4(&self, group: &Ipv4Addr, interface: &Ipv4Addr) -> io::Result<()> {
        self.inner.get().leave_multicast_v4(group, interface)
    }

    /// Joins an IPv6 multicast group on interface index `interface`.
    ///
    /// # Errors
    ///
    /// As `setsockopt`.
    pub fn join_multicast_v6(&self, group: &Ipv6Addr, interface: u32) -> io::Result<()> {
        self.inner.get().join_multicast_v6(group, interface)
    }

    /// Leaves an IPv6 multicast group.
    ///
    /// # Errors
    ///
    /// As `setsockopt`.
    pub fn leave_multicast_v6(&self, group: &Ipv6Addr, interface: u32) -> io::Result<()> {
        self.inner.get().leave_multicast_v6(group, interface)
    }

    /// Wakes every green thread waiting on the socket with a `NotConnected`
    /// error and fails later calls. Idempotent; the fd is released when the
    /// last handle drops.
    pub fn close(&self) {
        self.inner.close();
    }
}

// The methods and impls every socket type shares: see `handle.rs`.
crate::handle::handle!(UdpSocket, std::net);
crate::handle::addrs!(UdpSocket, SocketAddr);
crate::handle::datagram_io!(UdpSocket, SocketAddr);
crate::handle::timeouts!(UdpSocket);
crate::handle::ttl!(UdpSocket, "the packets this socket sends");
