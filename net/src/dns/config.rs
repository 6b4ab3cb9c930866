//! [`Config`]: which servers the resolver asks and how patiently, from
//! `/etc/resolv.conf` or given explicitly.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::time::Duration;

/// The resolver's settings.
///
/// [`Config::from_resolv_conf`] reads the system's (`nameserver`, `search`,
/// `domain`, `options ndots: timeout: attempts: rotate`), with glibc's
/// defaults and bounds; [`Config::with_servers`] names the servers (each
/// with its port) and keeps the rest at the defaults.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use coro::net::dns::Config;
///
/// let c = Config::parse_resolv_conf(
///     "nameserver 127.0.0.1\nsearch example.test\noptions timeout:1 attempts:3 rotate\n",
/// )
/// .unwrap();
/// assert_eq!(c.servers, ["127.0.0.1:53".parse().unwrap()]);
/// assert_eq!(c.search, ["example.test"]);
/// assert_eq!((c.timeout, c.attempts, c.rotate), (Duration::from_secs(1), 3, true));
///
/// let c = Config::with_servers(vec!["127.0.0.1:5353".parse().unwrap()]);
/// assert_eq!(c.attempts, 2);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Config {
    /// The servers, asked in order (or round robin with `rotate`).
    pub servers: Vec<SocketAddr>,
    /// Domains appended to names with fewer than `ndots` dots, for address
    /// lookups ([`Resolver::lookup_ip`](super::Resolver::lookup_ip)).
    pub search: Vec<String>,
    /// See `search` (default 1).
    pub ndots: usize,
    /// How long to wait for one server's answer to one query (default
    /// 5 s); a retry over TCP or without EDNS0 waits as long again.
    pub timeout: Duration,
    /// Rounds over the server list (default 2).
    pub attempts: usize,
    /// Start each query at the next server, spreading the load.
    pub rotate: bool,
    /// The EDNS0 payload size advertised (default 1232, the DNS flag day
    /// 2020 value); a UDP answer larger than this is an error. 0 sends no
    /// EDNS0 record and allows 512 bytes, as does a query asked again
    /// without EDNS0 after a server answered FORMERR.
    pub edns_payload: u16,
    /// Answers the cache holds at most (default 10 000); 0 turns it off.
    pub cache_size: usize,
    /// The longest a record is cached, whatever its TTL (default 1 day).
    pub max_ttl: Duration,
    /// CNAMEs followed from the name asked for at most (default 8).
    pub max_cnames: usize,
}

impl Default for Config {
    /// The defaults with no servers (set `servers` before use).
    fn default() -> Config {
        Config {
            servers: Vec::new(),
            search: Vec::new(),
            ndots: 1,
            timeout: Duration::from_secs(5),
            attempts: 2,
            rotate: false,
            edns_payload: 1232,
            cache_size: 10_000,
            max_ttl: Duration::from_secs(86_400),
            max_cnames: 8,
        }
    }
}

impl Config {
    /// The defaults with these servers.
    pub fn with_servers(servers: Vec<SocketAddr>) -> Config {
        Config {
            servers,
            ..Config::default()
        }
    }

    /// Reads `/etc/resolv.conf`.
    ///
    /// # Errors
    ///
    /// The file's read error; `InvalidData` for a line that does not parse
    /// or a file without `nameserver` lines.
    pub fn from_system() -> io::Result<Config> {
        Config::from_resolv_conf("/etc/resolv.conf")
    }

    /// Reads a file in `resolv.conf(5)` format. Done with a plain read:
    /// call it at startup, not on a busy green thread.
    ///
    /// # Errors
    ///
    /// As [`from_system`](Config::from_system), the path named.
    pub fn from_resolv_conf(path: impl AsRef<Path>) -> io::Result<Config> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("dns: cannot read {}: {e}", path.display()),
            )
        })?;
        Config::parse_resolv_conf(&text)
            .map_err(|e| io::Error::new(e.kind(), format!("dns: {}: {}", path.display(), e)))
    }

    /// Parses `resolv.conf(5)` text. Unknown keywords and options are
    /// ignored (as glibc does); numbers are clamped to glibc's bounds
    /// (`ndots` ≤ 15, `timeout` ≤ 30 s, `attempts` 1..=5).
    ///
    /// # Errors
    ///
    /// `InvalidData` naming the line for a `nameserver` that is not an IP
    /// address, and when there is no `nameserver` at all.
    pub fn parse_resolv_conf(text: &str) -> io::Result<Config> {
        let mut c = Config::default();
        for (no, line) in text.lines().enumerate() {
            let line = line.split(['#', ';']).next().unwrap_or("");
            let mut words = line.split_whitespace();
            match words.next() {
                Some("nameserver") => {
                    let w = words.next().unwrap_or("");
                    // A link-local IPv6 server may carry %scope; std's
                    // parser takes it only as a socket address.
                    let ip = w.split('%').next().unwrap_or("");
                    let ip: IpAddr = ip.parse().map_err(|_| {
                        io::Error::new(
                            io::ErrorKind::InvalidData,
                            format!("line {}: nameserver {w:?} is not an IP address", no + 1),
                        )
                    })?;
                    c.servers.push(SocketAddr::new(ip, 53));
                }
                // The last of `search` and `domain` wins, as in glibc.
                Some("search") => c.search = words.map(|d| d.to_owned()).collect(),
                Some("domain") => {
                    c.search = words.next().map(|d| vec![d.to_owned()]).unwrap_or_default()
                }
                Some("options") => {
                    for opt in words {
                        let (k, v) = opt.split_once(':').unwrap_or((opt, ""));
                        let n = v.parse::<u64>().ok();
                        match (k, n) {
                            ("ndots", Some(n)) => c.ndots = n.min(15) as usize,
                            ("timeout", Some(n)) => c.timeout = Duration::from_secs(n.clamp(1, 30)),
                            ("attempts", Some(n)) => c.attempts = n.clamp(1, 5) as usize,
                            ("rotate", _) => c.rotate = true,
                            _ => {}
                        }
                    }
                }
                _ => {}
            }
        }
        if c.servers.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "no nameserver line",
            ));
        }
        Ok(c)
    }

    /// Checks the settings a resolver needs.
    pub(crate) fn validate(&self) -> io::Result<()> {
        let bad = |why: &str| {
            Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("dns: {why}"),
            ))
        };
        if self.servers.is_empty() {
            return bad("the resolver needs at least one server");
        }
        if self.attempts == 0 {
            return bad("attempts must be at least 1");
        }
        if self.timeout.is_zero() {
            return bad("the per-server timeout must not be zero");
        }
        if self.edns_payload != 0 && self.edns_payload < 512 {
            return bad("the EDNS0 payload size must be 0 (off) or at least 512");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolv_conf() {
        let c = Config::parse_resolv_conf(
            "# comment\nnameserver 10.0.0.1\nnameserver fe80::1%eth0 ; x\n\
             domain a.test\nsearch b.test c.test\noptions ndots:3 timeout:0 attempts:9 junk\n",
        )
        .unwrap();
        assert_eq!(
            c.servers,
            [
                "10.0.0.1:53".parse().unwrap(),
                "[fe80::1]:53".parse().unwrap()
            ]
        );
        assert_eq!(c.search, ["b.test", "c.test"]);
        assert_eq!(
            (c.ndots, c.timeout, c.attempts, c.rotate),
            (3, Duration::from_secs(1), 5, false)
        );
        let e = Config::parse_resolv_conf("nameserver ns.test\n").unwrap_err();
        assert!(e.to_string().contains("line 1"), "{e}");
        assert!(Config::parse_resolv_conf("search x\n").is_err());
        assert!(Config::default().validate().is_err());
    }
}
