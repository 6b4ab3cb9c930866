//! Name lookup: [`lookup_host`] and the [`ToSocketAddrs`] trait that socket
//! constructors take, resolving host names on the runtime's blocking-offload
//! pool so that only the calling green thread waits for the resolver.
//!
//! # Design
//!
//! `std::net::ToSocketAddrs` calls `getaddrinfo` on the calling OS thread,
//! which would stall every green thread of the runtime. This module's trait
//! has the same implementors and the same meaning, but address literals are
//! parsed in place and only real names go to [`coro_runtime::blocking`]. The
//! resolver's own error text is kept in the error.
//!
//! For MX, TXT or PTR records, for telling "no such domain" from "try again
//! later", or for many lookups at once without an OS thread each, use the
//! DNS resolver of [`crate::dns`] instead (it reads DNS only, not
//! `/etc/hosts` or NSS).

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::vec;

/// Values that resolve to one or more socket addresses, like
/// [`std::net::ToSocketAddrs`], without blocking the runtime's OS thread.
///
/// Implemented for the same types as std's trait, so
/// `TcpStream::connect("example.com:80")` and
/// `TcpListener::bind("127.0.0.1:0")` read the same.
///
/// # Errors
///
/// `InvalidInput` for a malformed address (say, a missing port); the
/// resolver's error for a name that does not resolve; a timeout or
/// interruption of the wait for the resolver.
pub trait ToSocketAddrs {
    /// Resolves `self`. Host names are looked up on the blocking-offload pool.
    fn to_socket_addrs(&self) -> io::Result<vec::IntoIter<SocketAddr>>;
}

impl ToSocketAddrs for SocketAddr {
    fn to_socket_addrs(&self) -> io::Result<vec::IntoIter<SocketAddr>> {
        Ok(vec![*self].into_iter())
    }
}

impl ToSocketAddrs for SocketAddrV4 {
    fn to_socket_addrs(&self) -> io::Result<vec::IntoIter<SocketAddr>> {
        SocketAddr::V4(*self).to_socket_addrs()
    }
}

impl ToSocketAddrs for SocketAddrV6 {
    fn to_socket_addrs(&self) -> io::Result<vec::IntoIter<SocketAddr>> {
        SocketAddr::V6(*self).to_socket_addrs()
    }
}

impl ToSocketAddrs for (IpAddr, u16) {
    fn to_socket_addrs(&self) -> io::Result<vec::IntoIter<SocketAddr>> {
        SocketAddr::from(*self).to_socket_addrs()
    }
}

impl ToSocketAddrs for (Ipv4Addr, u16) {
    fn to_socket_addrs(&self) -> io::Result<vec::IntoIter<SocketAddr>> {
        SocketAddr::from(*self).to_socket_addrs()
    }
}

impl ToSocketAddrs for (Ipv6Addr, u16) {
    fn to_socket_addrs(&self) -> io::Result<vec::IntoIter<SocketAddr>> {
        SocketAddr::from(*self).to_socket_addrs()
    }
}

impl ToSocketAddrs for (&str, u16) {
    fn to_socket_addrs(&self) -> io::Result<vec::IntoIter<SocketAddr>> {
        let (host, port) = *self;
        if let Ok(ip) = host.parse::<IpAddr>() {
            return (ip, port).to_socket_addrs();
        }
        resolve(host.to_owned(), port)
    }
}

impl ToSocketAddrs for (String, u16) {
    fn to_socket_addrs(&self) -> io::Result<vec::IntoIter<SocketAddr>> {
        (self.0.as_str(), self.1).to_socket_addrs()
    }
}

impl ToSocketAddrs for str {
    fn to_socket_addrs(&self) -> io::Result<vec::IntoIter<SocketAddr>> {
        if let Ok(addr) = self.parse::<SocketAddr>() {
            return addr.to_socket_addrs();
        }
        let (host, port) = self.rsplit_once(':').ok_or_else(|| {
            invalid(format!(
                "coro-net: invalid socket address {self:?}: expected host:port"
            ))
        })?;
        let port: u16 = port.parse().map_err(|_| {
            invalid(format!(
                "coro-net: invalid socket address {self:?}: bad port {port:?}"
            ))
        })?;
        (host, port).to_socket_addrs()
    }
}

impl ToSocketAddrs for String {
    fn to_socket_addrs(&self) -> io::Result<vec::IntoIter<SocketAddr>> {
        self.as_str().to_socket_addrs()
    }
}

impl ToSocketAddrs for [SocketAddr] {
    fn to_socket_addrs(&self) -> io::Result<vec::IntoIter<SocketAddr>> {
        let v: Vec<SocketAddr> = self.into();
        Ok(v.into_iter())
    }
}

impl<T: ToSocketAddrs + ?Sized> ToSocketAddrs for &T {
    fn to_socket_addrs(&self) -> io::Result<vec::IntoIter<SocketAddr>> {
        (**self).to_socket_addrs()
    }
}

/// Resolves `addr` (a `"host:port"` string, a `(host, port)` pair, an
/// address) to socket addresses. Names go through the system resolver on the
/// runtime's blocking-offload pool; only this green thread waits.
///
/// # Errors
///
/// `InvalidInput` for a malformed address; the resolver's error (its text
/// kept, with the name) when the name does not resolve; `TimedOut` or an
/// interruption if the wait is cut short (the lookup itself finishes on its
/// OS thread and is dropped).
///
/// # Panics
///
/// Outside a green thread, when `addr` needs a lookup.
///
/// # Examples
///
/// ```
/// coro::run(|| -> std::io::Result<()> {
///     let addrs: Vec<_> = coro::net::lookup_host("localhost:80")?.collect();
///     assert!(addrs.iter().all(|a| a.port() == 80 && a.ip().is_loopback()));
///     let err = coro::net::lookup_host("localhost").unwrap_err(); // no port
///     assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
///     Ok(())
/// })
/// .unwrap();
/// ```
pub fn lookup_host<A: ToSocketAddrs>(addr: A) -> io::Result<vec::IntoIter<SocketAddr>> {
    addr.to_socket_addrs()
}

fn resolve(host: String, port: u16) -> io::Result<vec::IntoIter<SocketAddr>> {
    if host.is_empty() {
        return Err(invalid(
            "coro-net: invalid socket address: empty host name".to_owned(),
        ));
    }
    crate::source::need_runtime("coro::net::lookup_host");
    let name = host.clone();
    let r = coro_runtime::blocking(move || {
        std::net::ToSocketAddrs::to_socket_addrs(&(host.as_str(), port))
            .map(|it| it.collect::<Vec<_>>())
    })?;
    match r {
        Ok(v) if v.is_empty() => Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("coro-net: lookup of {name:?} returned no addresses"),
        )),
        Ok(v) => Ok(v.into_iter()),
        Err(e) => Err(io::Error::new(
            e.kind(),
            format!("coro-net: lookup of {name:?} failed: {e}"),
        )),
    }
}

pub(crate) fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

/// Resolves `addr` and calls `f` with each address in turn until one
/// succeeds, returning the last error otherwise (std's rule).
pub(crate) fn each_addr<A: ToSocketAddrs, T>(
    addr: A,
    mut f: impl FnMut(SocketAddr) -> io::Result<T>,
) -> io::Result<T> {
    let mut last = None;
    for a in addr.to_socket_addrs()? {
        match f(a) {
            Ok(v) => return Ok(v),
            Err(e) => {
                // A timeout or interruption ends the whole attempt.
                if coro_runtime::WaitError::from_io(&e).is_some()
                    || e.kind() == io::ErrorKind::TimedOut
                {
                    return Err(e);
                }
                last = Some(e);
            }
        }
    }
    Err(last.unwrap_or_else(|| {
        invalid("coro-net: the address resolved to no socket addresses".to_owned())
    }))
}
