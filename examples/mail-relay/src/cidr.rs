//! Networks written as CIDR (`127.0.0.0/8`, `::1/128`, or a bare address):
//! `mynetworks`, the clients allowed to relay.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use serde::Deserialize;

/// An IPv4 or IPv6 network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct Cidr {
    /// The network address (host bits zero).
    addr: IpAddr,
    /// Prefix length in bits.
    len: u8,
}

impl Cidr {
    /// Whether `ip` is inside the network. An IPv4-mapped IPv6 address
    /// (`::ffff:127.0.0.1`) counts as its IPv4 address.
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(ip),
            v4 => v4,
        };
        match (self.addr, ip) {
            (IpAddr::V4(net), IpAddr::V4(a)) => {
                mask(u32::from(a).into(), 32, self.len) == u32::from(net) as u128
            }
            (IpAddr::V6(net), IpAddr::V6(a)) => mask(a.into(), 128, self.len) == net.into(),
            _ => false,
        }
    }
}

/// `bits` with all but the first `len` of its `width` bits cleared.
fn mask(bits: u128, width: u8, len: u8) -> u128 {
    if len == 0 {
        0
    } else {
        let host = width - len;
        (bits >> host) << host
    }
}

impl FromStr for Cidr {
    type Err = String;

    fn from_str(s: &str) -> Result<Cidr, String> {
        let bad = |why: &str| format!("{s:?} is not a network ({why}; e.g. 127.0.0.0/8)");
        let (addr, len) = match s.split_once('/') {
            Some((a, l)) => (a, Some(l)),
            None => (s, None),
        };
        let addr: IpAddr = addr.trim().parse().map_err(|_| bad("bad address"))?;
        let width = if addr.is_ipv4() { 32 } else { 128 };
        let len = match len {
            Some(l) => l
                .trim()
                .parse::<u8>()
                .ok()
                .filter(|&l| l <= width)
                .ok_or_else(|| bad(&format!("prefix length must be 0..={width}")))?,
            None => width,
        };
        let addr = match addr {
            IpAddr::V4(a) => IpAddr::V4((mask(u32::from(a).into(), 32, len) as u32).into()),
            IpAddr::V6(a) => IpAddr::V6(mask(a.into(), 128, len).into()),
        };
        Ok(Cidr { addr, len })
    }
}

impl TryFrom<String> for Cidr {
    type Error = String;

    fn try_from(s: String) -> Result<Cidr, String> {
        s.parse()
    }
}

impl serde::Serialize for Cidr {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn membership() {
        let lo: Cidr = "127.0.0.0/8".parse().unwrap();
        assert!(lo.contains("127.1.2.3".parse().unwrap()));
        assert!(lo.contains("::ffff:127.0.0.1".parse().unwrap()));
        assert!(!lo.contains("128.0.0.1".parse().unwrap()));
        let one: Cidr = "127.0.0.1".parse().unwrap();
        assert!(one.contains("127.0.0.1".parse().unwrap()));
        assert!(!one.contains("127.0.0.2".parse().unwrap()));
        let v6: Cidr = "::1/128".parse().unwrap();
        assert!(v6.contains("::1".parse().unwrap()));
        assert!(!v6.contains("127.0.0.1".parse().unwrap()));
        let all: Cidr = "0.0.0.0/0".parse().unwrap();
        assert!(all.contains("8.8.8.8".parse().unwrap()));
        assert_eq!(
            "10.1.2.3/8".parse::<Cidr>().unwrap().to_string(),
            "10.0.0.0/8"
        );
    }

    #[test]
    fn bad_networks() {
        assert!("10.0.0.0/33"
            .parse::<Cidr>()
            .unwrap_err()
            .contains("0..=32"));
        assert!("example".parse::<Cidr>().is_err());
    }
}
