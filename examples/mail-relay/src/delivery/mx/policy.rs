//! Which exchanger addresses the relay will connect to. Whoever writes a
//! domain's DNS chooses its MX addresses, so two are refused:
//!
//! * one of the relay's own addresses: the mail would come back to it
//!   (Postfix's "mail for X loops back to myself"): its `listen` address,
//!   or with a wildcard `listen` every address of its interfaces;
//! * a loopback, private (RFC 1918, RFC 4193), link-local, shared (RFC
//!   6598) or unspecified address, which would point the relay at the
//!   inside of its own network, unless `[mx] allow_private_addresses` says
//!   so (a relay that delivers inside a private network, and the tests).
//!   Multicast and broadcast addresses are never used.

use std::cell::RefCell;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use coro::clock::{self, Instant};

/// How long the interfaces' addresses are taken as they were read.
const INTERFACES_TTL: Duration = Duration::from_secs(60);

/// The relay's own addresses.
#[derive(Debug)]
pub struct Own {
    /// The SMTP listener's address.
    listen: IpAddr,
    /// With a wildcard `listen`: the interfaces' addresses, and when they
    /// were read.
    interfaces: RefCell<Option<(Instant, Vec<IpAddr>)>>,
}

impl Own {
    /// The addresses of a relay listening on `listen`.
    pub fn new(listen: IpAddr) -> Own {
        Own {
            listen,
            interfaces: RefCell::new(None),
        }
    }

    /// Whether `ip` is one of the relay's addresses.
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = canonical(ip);
        if !self.listen.is_unspecified() {
            return ip == canonical(self.listen);
        }
        if ip.is_unspecified() {
            return true; // a connection to it reaches this host
        }
        let mut cache = self.interfaces.borrow_mut();
        let now = clock::now();
        let fresh = cache
            .as_ref()
            .is_some_and(|(at, _)| now.duration_since(*at) < INTERFACES_TTL);
        if !fresh {
            match interface_addresses() {
                Ok(a) => *cache = Some((now, a)),
                Err(e) => log::warn!("reading the interfaces' addresses: {e}"),
            }
        }
        cache
            .as_ref()
            .is_some_and(|(_, addrs)| addrs.iter().any(|a| canonical(*a) == ip))
    }
}

/// An IPv4-mapped IPv6 address as the IPv4 one.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// Why `ip` is not a public unicast address, if it is not: the kind of
/// address, for the log and the bounce.
pub fn non_public(ip: IpAddr) -> Option<&'static str> {
    match canonical(ip) {
        IpAddr::V4(v4) => v4_kind(v4),
        IpAddr::V6(v6) => v6_kind(v6),
    }
}

/// Whether `ip` can never take a connection (multicast, broadcast).
pub fn unusable(ip: IpAddr) -> bool {
    match canonical(ip) {
        IpAddr::V4(v4) => v4.is_multicast() || v4.is_broadcast(),
        IpAddr::V6(v6) => v6.is_multicast(),
    }
}

fn v4_kind(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, ..] = ip.octets();
    if ip.is_loopback() {
        Some("a loopback address")
    } else if ip.is_private() {
        Some("a private address")
    } else if ip.is_link_local() {
        Some("a link-local address")
    } else if a == 100 && (64..128).contains(&b) {
        Some("a shared (carrier-grade NAT) address")
    } else if a == 0 {
        Some("an unspecified address")
    } else if ip.is_multicast() || ip.is_broadcast() {
        Some("a multicast or broadcast address")
    } else if a >= 240 {
        Some("a reserved address")
    } else {
        None
    }
}

fn v6_kind(ip: Ipv6Addr) -> Option<&'static str> {
    let first = ip.segments()[0];
    if ip.is_loopback() {
        Some("a loopback address")
    } else if ip.is_unspecified() {
        Some("an unspecified address")
    } else if first & 0xfe00 == 0xfc00 {
        Some("a private (unique local) address")
    } else if first & 0xffc0 == 0xfe80 {
        Some("a link-local address")
    } else if ip.is_multicast() {
        Some("a multicast address")
    } else {
        None
    }
}

/// The addresses of the host's interfaces.
fn interface_addresses() -> io::Result<Vec<IpAddr>> {
    /// Frees the list on every path out.
    struct List(*mut libc::ifaddrs);
    impl Drop for List {
        fn drop(&mut self) {
            // SAFETY: the pointer came from a successful getifaddrs and is
            // freed here once; the walk below made copies of what it
            // needed, and no reference into the list outlives `List`.
            unsafe { libc::freeifaddrs(self.0) };
        }
    }
    let mut head = std::ptr::null_mut();
    // SAFETY: getifaddrs stores a pointer to a list it allocates in `head`
    // (a valid place for one); on failure it stores nothing we use.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let list = List(head);
    let mut out = Vec::new();
    let mut p = list.0;
    while !p.is_null() {
        // SAFETY: `p` is a node of the list getifaddrs returned, alive until
        // `list` is dropped after the walk. `ifa_addr`, when not null,
        // points to a socket address whose `sa_family` names its real
        // type: `sockaddr_in` for AF_INET, `sockaddr_in6` for AF_INET6,
        // which is what each arm reads it as (copies of plain integers).
        let (next, addr) = unsafe {
            let ifa = &*p;
            let addr = if ifa.ifa_addr.is_null() {
                None
            } else {
                match i32::from((*ifa.ifa_addr).sa_family) {
                    libc::AF_INET => {
                        let sin = &*(ifa.ifa_addr as *const libc::sockaddr_in);
                        Some(IpAddr::V4(Ipv4Addr::from(u32::from_be(
                            sin.sin_addr.s_addr,
                        ))))
                    }
                    libc::AF_INET6 => {
                        let sin6 = &*(ifa.ifa_addr as *const libc::sockaddr_in6);
                        Some(IpAddr::V6(Ipv6Addr::from(sin6.sin6_addr.s6_addr)))
                    }
                    _ => None,
                }
            };
            (ifa.ifa_next, addr)
        };
        out.extend(addr);
        p = next;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_of_addresses() {
        let kind = |s: &str| non_public(s.parse().unwrap());
        for inside in [
            "127.0.0.1",
            "127.3.2.1",
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.1.1",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "::",
            "fd00::1",
            "fe80::1",
            "::ffff:10.0.0.1",
            "::ffff:127.0.0.1",
        ] {
            assert!(kind(inside).is_some(), "{inside}");
        }
        for public in [
            "192.0.2.1",
            "8.8.8.8",
            "172.32.0.1",
            "100.128.0.1",
            "2001:db8::1",
        ] {
            assert_eq!(kind(public), None, "{public}");
        }
        assert!(unusable("224.0.0.1".parse().unwrap()));
        assert!(unusable("255.255.255.255".parse().unwrap()));
        assert!(!unusable("10.0.0.1".parse().unwrap()));
    }

    #[test]
    fn own_addresses() {
        coro::run(|| {
            let own = Own::new("127.0.0.1".parse().unwrap());
            assert!(own.contains("127.0.0.1".parse().unwrap()));
            assert!(own.contains("::ffff:127.0.0.1".parse().unwrap()));
            assert!(!own.contains("127.0.0.2".parse().unwrap()));
            // A wildcard listener: every interface's address is ours.
            let any = Own::new("0.0.0.0".parse().unwrap());
            assert!(any.contains("127.0.0.1".parse().unwrap()));
            assert!(any.contains("0.0.0.0".parse().unwrap()));
            assert!(!any.contains("192.0.2.1".parse().unwrap()));
        });
    }
}
