//! The `[mx]` table: delivery to the Internet by MX records (RFC 5321
//! §5.1) for the recipients no route, local domain or `relayhost` covers,
//! and the DNS servers it asks.

use std::net::SocketAddr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{duration, ConfigError};

/// MX delivery (`[mx]`).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Mx {
    /// Deliver by MX when nothing else applies (false: the Maildir takes
    /// such mail, as before). `routes` and `relayhost` still take
    /// precedence, as in Postfix.
    pub enabled: bool,
    /// The recursive DNS servers (`"127.0.0.1:53"`); empty: those of
    /// `/etc/resolv.conf`.
    pub dns_servers: Vec<SocketAddr>,
    /// How long to wait for one DNS server (5 s, as resolv.conf's
    /// default).
    #[serde(with = "duration")]
    pub dns_timeout: Duration,
    /// Rounds over the DNS servers (2).
    pub dns_attempts: usize,
    /// The TCP port of the mail exchangers (25; tests set another).
    pub port: u16,
    /// Deliveries to one recipient domain at once (Postfix's
    /// `default_destination_concurrency_limit`, 20).
    pub destination_concurrency_limit: usize,
    /// The pause between two deliveries to one recipient domain (Postfix's
    /// `default_destination_rate_delay`; 0: none).
    #[serde(with = "duration")]
    pub destination_rate_delay: Duration,
    /// A domain none of whose mail exchangers could be connected to is
    /// suspended this long: its mail is deferred without a connection
    /// attempt (Postfix's dead destination; 60 s). `mail-relay flush`
    /// lifts it.
    #[serde(with = "duration")]
    pub dead_destination_time: Duration,
    /// Addresses tried in one delivery attempt, over all the exchangers
    /// (Postfix's `smtp_mx_address_limit`, 5): names are resolved in
    /// preference order only until this many addresses are found.
    pub address_limit: usize,
    /// Use exchangers whose address is loopback, private (RFC 1918, RFC
    /// 4193), link-local, shared (RFC 6598) or unspecified (false: such an
    /// address is never connected to, since DNS, which anyone can write
    /// for their own domain, would point the relay at the inside of its
    /// network). Tests on loopback set it.
    pub allow_private_addresses: bool,
}

impl Default for Mx {
    fn default() -> Mx {
        Mx {
            enabled: false,
            dns_servers: Vec::new(),
            dns_timeout: Duration::from_secs(5),
            dns_attempts: 2,
            port: 25,
            destination_concurrency_limit: 20,
            destination_rate_delay: Duration::ZERO,
            dead_destination_time: Duration::from_secs(60),
            address_limit: 5,
            allow_private_addresses: false,
        }
    }
}

impl Mx {
    pub(super) fn check(&self) -> Result<(), ConfigError> {
        let bad = |key: &str, why: &str| Err(ConfigError(format!("mx.{key}: {why}")));
        if self.port == 0 {
            return bad("port", "must not be 0");
        }
        if self.dns_timeout.is_zero() {
            return bad("dns_timeout", "must be longer than 0");
        }
        if self.dns_attempts == 0 {
            return bad("dns_attempts", "must be at least 1");
        }
        if self.destination_concurrency_limit == 0 {
            return bad("destination_concurrency_limit", "must be at least 1");
        }
        if self.dead_destination_time.is_zero() {
            return bad("dead_destination_time", "must be longer than 0");
        }
        if self.address_limit == 0 {
            return bad("address_limit", "must be at least 1");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::Config;

    #[test]
    fn mx_table() {
        let c = Config::from_toml(
            "[mx]\nenabled = true\ndns_servers = [\"127.0.0.1:5353\"]\nport = 2525\n\
             destination_rate_delay = \"1s\"\n",
        )
        .unwrap();
        assert!(c.mx.enabled);
        assert_eq!(c.mx.dns_servers, ["127.0.0.1:5353".parse().unwrap()]);
        assert_eq!((c.mx.port, c.mx.destination_concurrency_limit), (2525, 20));
        assert_eq!(Config::default().mx.port, 25);
        let e = Config::from_toml("[mx]\nport = 0\n")
            .unwrap()
            .check()
            .unwrap_err();
        assert!(e.0.contains("mx.port"), "{e}");
        let e = Config::from_toml("[mx]\ndns_servers = [\"ns.test\"]\n").unwrap_err();
        assert!(e.0.contains("dns_servers"), "{e}");
    }
}
