//! Where each recipient goes: the `routes` table, the local domains, the
//! `relayhost`, and the Maildir when nothing else applies.
//!
//! Looked up in this order, first match wins (no DNS, no MX: an upstream
//! is a host and a port, as Postfix's `relayhost = [host]:port`):
//!
//! 1. `routes`: the recipient's domain, then its parent domains written
//!    with a leading dot (`".example.test"` matches `a.example.test`);
//! 2. `local_domains` and the bare `postmaster`: the Maildir;
//! 3. `relayhost`, when set;
//! 4. MX delivery when `[mx] enabled` ([`Router::by_mx`]), else the
//!    Maildir.

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;

use serde::Deserialize;

/// An SMTP upstream: `host:port`, `[host]:port`, or `host` (port 25).
/// Its `Debug` is its `Display` (the pool's log lines show keys so).
#[derive(Clone, PartialEq, Eq, Hash, Deserialize)]
#[serde(try_from = "String")]
pub struct Upstream {
    /// A host name or an IP address (without brackets).
    pub host: String,
    /// The TCP port.
    pub port: u16,
}

impl FromStr for Upstream {
    type Err = String;

    fn from_str(s: &str) -> Result<Upstream, String> {
        let bad = |why: &str| {
            format!(
                "{s:?} is not an upstream: {why} (an upstream is HOST:PORT or [IPV6]:PORT, \
                 e.g. \"127.0.0.1:2601\", \"mail.example.org:25\", \"[2001:db8::1]:25\")"
            )
        };
        let s = s.trim();
        if let Some((scheme, _)) = s.split_once("://") {
            return Err(bad(&format!("no scheme: drop \"{scheme}://\"")));
        }
        let (host, port) = if let Some(rest) = s.strip_prefix('[') {
            let (host, after) = rest.split_once(']').ok_or_else(|| bad("no closing ]"))?;
            match after {
                "" => (host, None),
                p => (
                    host,
                    Some(p.strip_prefix(':').ok_or_else(|| bad("junk after ]"))?),
                ),
            }
        } else {
            match s.rsplit_once(':') {
                Some((h, _)) if h.contains(':') => {
                    return Err(bad("an IPv6 address goes in brackets"))
                }
                Some((h, p)) => (h, Some(p)),
                None => (s, None),
            }
        };
        if host.is_empty() || host.contains(|c: char| c.is_whitespace() || c == '/') {
            return Err(bad("not a host name or address"));
        }
        let port = match port {
            None => 25,
            Some(p) => p
                .parse::<u16>()
                .ok()
                .filter(|&p| p != 0)
                .ok_or_else(|| bad("bad port"))?,
        };
        Ok(Upstream {
            host: host.to_owned(),
            port,
        })
    }
}

impl TryFrom<String> for Upstream {
    type Error = String;

    fn try_from(s: String) -> Result<Upstream, String> {
        s.parse()
    }
}

impl fmt::Debug for Upstream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl serde::Serialize for Upstream {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// As the configuration writes it: `local`, `mx` or `host:port`.
impl serde::Serialize for Dest {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Dest::Local => s.serialize_str("local"),
            Dest::Mx => s.serialize_str("mx"),
            Dest::Smtp(u) => s.collect_str(u),
        }
    }
}

impl fmt::Display for Upstream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// A destination: where a route sends recipients.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Deserialize)]
#[serde(try_from = "String")]
pub enum Dest {
    /// The Maildir.
    Local,
    /// An SMTP upstream.
    Smtp(Upstream),
    /// The mail exchangers of the recipient's domain (its MX records).
    Mx,
}

impl FromStr for Dest {
    type Err = String;

    fn from_str(s: &str) -> Result<Dest, String> {
        if s.trim().eq_ignore_ascii_case("local") {
            Ok(Dest::Local)
        } else if s.trim().eq_ignore_ascii_case("mx") {
            Ok(Dest::Mx)
        } else {
            s.parse().map(Dest::Smtp)
        }
    }
}

impl TryFrom<String> for Dest {
    type Error = String;

    fn try_from(s: String) -> Result<Dest, String> {
        s.parse()
    }
}

impl fmt::Display for Dest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Dest::Local => f.write_str("local"),
            Dest::Smtp(u) => write!(f, "smtp:{u}"),
            Dest::Mx => f.write_str("mx"),
        }
    }
}

/// The routing table.
#[derive(Debug, Clone)]
pub struct Router {
    /// Lower-cased domain (or `.parent`) → destination.
    routes: HashMap<String, Dest>,
    /// Lower-cased local domains.
    local: Vec<String>,
    /// Where the rest goes.
    default: Dest,
}

impl Router {
    /// A table from the configuration's pieces.
    pub fn new<'a>(
        routes: impl IntoIterator<Item = (&'a String, &'a Dest)>,
        local_domains: &[String],
        relayhost: Option<&Upstream>,
    ) -> Router {
        Router {
            routes: routes
                .into_iter()
                .map(|(d, dest)| (d.to_lowercase(), dest.clone()))
                .collect(),
            local: local_domains.iter().map(|d| d.to_lowercase()).collect(),
            default: relayhost.map_or(Dest::Local, |u| Dest::Smtp(u.clone())),
        }
    }

    /// Mail that no route, local domain or `relayhost` covers goes by MX
    /// instead of into the Maildir.
    pub fn by_mx(mut self) -> Router {
        if self.default == Dest::Local {
            self.default = Dest::Mx;
        }
        self
    }

    /// Where `rcpt` goes.
    pub fn route(&self, rcpt: &str) -> &Dest {
        let Some(domain) = crate::protocol::domain(rcpt) else {
            return &Dest::Local; // <postmaster>
        };
        if let Some(d) = self.routes.get(&domain) {
            return d;
        }
        let mut rest = domain.as_str();
        while let Some(i) = rest.find('.') {
            if let Some(d) = self.routes.get(&rest[i..]) {
                return d;
            }
            rest = &rest[i + 1..];
        }
        if self.local.contains(&domain) {
            return &Dest::Local;
        }
        &self.default
    }

    /// Every destination a recipient can be routed to.
    pub fn destinations(&self) -> Vec<Dest> {
        let mut all: Vec<Dest> = vec![Dest::Local, self.default.clone()];
        all.extend(self.routes.values().cloned());
        let mut seen = Vec::new();
        all.retain(|d| {
            let new = !seen.contains(d);
            seen.push(d.clone());
            new
        });
        all
    }

    /// Whether any domain is delivered locally (`local_domains`, or a
    /// route to `local`), besides the bare `postmaster`.
    pub fn has_local_domains(&self) -> bool {
        !self.local.is_empty() || self.routes.values().any(|d| *d == Dest::Local)
    }

    /// The `relayhost`, if any.
    pub fn relayhost(&self) -> Option<&Upstream> {
        match &self.default {
            Dest::Smtp(u) => Some(u),
            Dest::Local | Dest::Mx => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_syntax() {
        let u = |s: &str| s.parse::<Upstream>();
        assert_eq!(u("127.0.0.1:2601").unwrap().to_string(), "127.0.0.1:2601");
        assert_eq!(u("[mx.example.test]:26").unwrap().host, "mx.example.test");
        assert_eq!(u("mx.example.test").unwrap().port, 25);
        assert_eq!(u("[::1]:2601").unwrap().to_string(), "[::1]:2601");
        assert!(u("::1:25").unwrap_err().contains("in brackets"));
        let e = u("http://x:25").unwrap_err();
        assert!(
            e.contains("no scheme: drop \"http://\"") && e.contains("HOST:PORT"),
            "{e}"
        );
        assert!(!e.contains("IPv6 address"), "{e}");
        assert!(u("x/y:25").is_err());
        assert!(u("host:0").is_err());
        assert!(u("host:x").is_err());
        assert!(u(":25").is_err());
        assert_eq!("LOCAL".parse::<Dest>(), Ok(Dest::Local));
        assert_eq!("mx".parse::<Dest>(), Ok(Dest::Mx));
    }

    #[test]
    fn first_match_wins() {
        let up = |s: &str| Dest::Smtp(s.parse().unwrap());
        let routes: Vec<(String, Dest)> = vec![
            ("special.test".into(), up("10.0.0.1:25")),
            (".sub.test".into(), up("10.0.0.2:25")),
            ("mine.test".into(), Dest::Local),
        ];
        let relay: Upstream = "10.0.0.9:2601".parse().unwrap();
        let r = Router::new(
            routes.iter().map(|(a, b)| (a, b)),
            &["Local.Test".into()],
            Some(&relay),
        );
        assert_eq!(r.route("a@Special.test"), &up("10.0.0.1:25"));
        assert_eq!(r.route("a@x.y.sub.test"), &up("10.0.0.2:25"));
        assert_eq!(r.route("a@sub.test"), &up("10.0.0.9:2601"));
        assert_eq!(r.route("a@mine.test"), &Dest::Local);
        assert_eq!(r.route("a@local.test"), &Dest::Local);
        assert_eq!(r.route("postmaster"), &Dest::Local);
        assert_eq!(r.route("a@elsewhere.test"), &up("10.0.0.9:2601"));
        assert_eq!(r.destinations().len(), 4);
        let none = Router::new(std::iter::empty(), &[], None);
        assert_eq!(none.route("a@elsewhere.test"), &Dest::Local);
        // By MX: what the relayhost would have taken, unless there is one.
        let mx = Router::new(
            routes.iter().map(|(a, b)| (a, b)),
            &["local.test".into()],
            None,
        )
        .by_mx();
        assert_eq!(mx.route("a@elsewhere.test"), &Dest::Mx);
        assert_eq!(mx.route("a@special.test"), &up("10.0.0.1:25"));
        assert_eq!(mx.route("a@local.test"), &Dest::Local);
        let r = Router::new(std::iter::empty(), &[], Some(&relay)).by_mx();
        assert_eq!(r.route("a@elsewhere.test"), &up("10.0.0.9:2601"));
    }
}
