//! [`DnsError`]: what went wrong with a lookup, carried inside the
//! `io::Error` every resolver call returns.

use std::error::Error;
use std::fmt;
use std::io;
use std::net::SocketAddr;

/// Why a lookup failed.
///
/// Resolver calls return `io::Result` (the rule for all of `coro::net`);
/// the `io::Error` has a kind that fits the failure and this enum inside,
/// which [`DnsError::from_io`] gets back:
///
/// | variant | `io::ErrorKind` |
/// |---|---|
/// | `NxDomain`, `NoRecords` | `NotFound` |
/// | `ServFail`, `Refused`, `NotRecursive` | `Other` |
/// | `Timeout` | `TimedOut` |
/// | `Unreachable` | `ConnectionRefused` |
/// | `Malformed`, `Mismatched`, `Oversized`, `Truncated`, `CnameChain` | `InvalidData` |
/// | `InvalidName` | `InvalidInput` |
///
/// A timeout or an interruption of the *caller* (an enclosing
/// `with_timeout`, `Coro::interrupt`) is not a `DnsError`: it comes back
/// as the runtime's [`WaitError`](coro_runtime::WaitError), as from any
/// socket call.
///
/// # Examples
///
/// ```
/// use coro::net::dns::DnsError;
///
/// let e: std::io::Error = DnsError::NxDomain { name: "nowhere.test.".into() }.into();
/// assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
/// assert!(matches!(DnsError::from_io(&e), Some(DnsError::NxDomain { .. })));
/// assert_eq!(e.to_string(), "dns: nowhere.test. does not exist (NXDOMAIN)");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DnsError {
    /// The name does not exist (NXDOMAIN).
    NxDomain {
        /// The name asked for.
        name: String,
    },
    /// The name exists but has no records of the type asked for (NODATA),
    /// where the call needs some (an address lookup).
    NoRecords {
        /// The name asked for.
        name: String,
        /// The record types asked for (`A/AAAA`).
        rtype: String,
    },
    /// Every server that answered said SERVFAIL: the name's servers are
    /// unreachable or broken from where the recursive server stands. A
    /// temporary failure.
    ServFail {
        /// The name asked for.
        name: String,
        /// The last server that said so.
        server: SocketAddr,
    },
    /// A server refused the query or did not implement it (REFUSED,
    /// NOTIMP, FORMERR or another response code).
    Refused {
        /// The name asked for.
        name: String,
        /// The server.
        server: SocketAddr,
        /// The response code, as hickory-proto names it.
        rcode: String,
    },
    /// A server answered with no records while it neither offers
    /// recursion nor holds the zone (a referral): it cannot say whether
    /// the name has records. A temporary failure, as for a server that
    /// refuses.
    NotRecursive {
        /// The name asked for.
        name: String,
        /// The server.
        server: SocketAddr,
    },
    /// No server answered within its timeout, on any attempt.
    Timeout {
        /// The name asked for.
        name: String,
        /// The servers tried.
        servers: Vec<SocketAddr>,
        /// Datagrams that arrived but did not match the query (wrong id,
        /// question or source) and were dropped meanwhile.
        dropped: usize,
    },
    /// A server could not be reached (ICMP port unreachable, TCP refused).
    Unreachable {
        /// The server.
        server: SocketAddr,
        /// The socket error.
        why: String,
    },
    /// An answer that does not parse as a DNS message, or is not a
    /// response to a query.
    Malformed {
        /// The server.
        server: SocketAddr,
        /// What is wrong with it.
        why: String,
    },
    /// An answer with the right id whose question is not the one asked.
    Mismatched {
        /// The server.
        server: SocketAddr,
        /// What differs.
        why: String,
    },
    /// A UDP answer larger than the payload size the query advertised.
    Oversized {
        /// The server.
        server: SocketAddr,
        /// Its length in bytes.
        len: usize,
        /// The advertised limit.
        limit: usize,
    },
    /// An answer over TCP with the truncation bit set, or a TCP answer cut
    /// short.
    Truncated {
        /// The server.
        server: SocketAddr,
    },
    /// A CNAME chain that loops or is longer than the resolver follows.
    CnameChain {
        /// The name asked for.
        name: String,
        /// What is wrong (a loop, too long).
        why: String,
    },
    /// The name given is not a valid domain name.
    InvalidName {
        /// The name given.
        name: String,
        /// Why.
        why: String,
    },
}

impl DnsError {
    /// The `DnsError` inside `err`, if it came from the resolver.
    pub fn from_io(err: &io::Error) -> Option<&DnsError> {
        err.get_ref()?.downcast_ref::<DnsError>()
    }

    /// The `io::ErrorKind` this error is given (see the table above).
    pub fn kind(&self) -> io::ErrorKind {
        match self {
            DnsError::NxDomain { .. } | DnsError::NoRecords { .. } => io::ErrorKind::NotFound,
            DnsError::ServFail { .. }
            | DnsError::Refused { .. }
            | DnsError::NotRecursive { .. } => io::ErrorKind::Other,
            DnsError::Timeout { .. } => io::ErrorKind::TimedOut,
            DnsError::Unreachable { .. } => io::ErrorKind::ConnectionRefused,
            DnsError::Malformed { .. }
            | DnsError::Mismatched { .. }
            | DnsError::Oversized { .. }
            | DnsError::Truncated { .. }
            | DnsError::CnameChain { .. } => io::ErrorKind::InvalidData,
            DnsError::InvalidName { .. } => io::ErrorKind::InvalidInput,
        }
    }

    /// Whether asking again later may succeed (SERVFAIL, timeouts,
    /// unreachable or misbehaving servers), as opposed to an answer that
    /// settles it (NXDOMAIN, no records, an invalid name).
    pub fn is_temporary(&self) -> bool {
        !matches!(
            self,
            DnsError::NxDomain { .. } | DnsError::NoRecords { .. } | DnsError::InvalidName { .. }
        )
    }
}

impl fmt::Display for DnsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DnsError::NxDomain { name } => write!(f, "dns: {name} does not exist (NXDOMAIN)"),
            DnsError::NoRecords { name, rtype } => {
                write!(f, "dns: {name} has no {rtype} records")
            }
            DnsError::ServFail { name, server } => {
                write!(f, "dns: server failure (SERVFAIL) for {name} from {server}")
            }
            DnsError::Refused {
                name,
                server,
                rcode,
            } => write!(f, "dns: {server} answered {rcode} for {name}"),
            DnsError::NotRecursive { name, server } => write!(
                f,
                "dns: {server} gave no answer for {name} (a referral: it does not recurse)"
            ),
            DnsError::Timeout {
                name,
                servers,
                dropped,
            } => {
                write!(f, "dns: no answer for {name} from ")?;
                for (i, s) in servers.iter().enumerate() {
                    write!(f, "{}{s}", if i > 0 { ", " } else { "" })?;
                }
                f.write_str(" (timed out")?;
                if *dropped > 0 {
                    write!(f, "; {dropped} mismatched datagrams dropped")?;
                }
                f.write_str(")")
            }
            DnsError::Unreachable { server, why } => {
                write!(f, "dns: server {server} unreachable: {why}")
            }
            DnsError::Malformed { server, why } => {
                write!(f, "dns: malformed answer from {server}: {why}")
            }
            DnsError::Mismatched { server, why } => {
                write!(
                    f,
                    "dns: answer from {server} does not match the query: {why}"
                )
            }
            DnsError::Oversized { server, len, limit } => write!(
                f,
                "dns: answer from {server} is {len} bytes, over the {limit} the query allowed"
            ),
            DnsError::Truncated { server } => {
                write!(f, "dns: answer from {server} over TCP is truncated")
            }
            DnsError::CnameChain { name, why } => {
                write!(f, "dns: CNAME chain from {name}: {why}")
            }
            DnsError::InvalidName { name, why } => {
                write!(f, "dns: {name:?} is not a valid domain name: {why}")
            }
        }
    }
}

impl Error for DnsError {}

impl From<DnsError> for io::Error {
    fn from(e: DnsError) -> io::Error {
        io::Error::new(e.kind(), e)
    }
}
