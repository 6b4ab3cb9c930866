//! `coro::net::dns`: a stub DNS resolver on green threads — A, AAAA, MX,
//! TXT and PTR lookups against recursive servers, with a cache.
//!
//! # When to use it, and when [`lookup_host`](crate::lookup_host)
//!
//! [`lookup_host`](crate::lookup_host) (and the socket constructors that
//! take names) asks the system resolver, `getaddrinfo`, on the runtime's
//! blocking-offload pool: it knows `/etc/hosts`, NSS modules, the system's
//! own cache, and it costs an OS thread per lookup in progress. Use it to
//! connect to a configured host name.
//!
//! Use a [`Resolver`] for what `getaddrinfo` cannot do or does not do at
//! scale: MX, TXT and PTR records; the difference between "no such domain"
//! and "try again later" (a mail relay bounces on one and defers on the
//! other); servers other than the system's; many lookups at once (each
//! is one green thread and one UDP socket, not an OS thread). It reads
//! DNS only, never `/etc/hosts`.
//!
//! # What it does
//!
//! * **Configuration** ([`Config`]): `/etc/resolv.conf` (`nameserver`,
//!   `search`, `ndots`, `timeout`, `attempts`, `rotate`) or an explicit
//!   list of servers with their ports.
//! * **Transport**: UDP with an EDNS0 record (1232 bytes), TCP when an
//!   answer is truncated, without EDNS0 when a server answers FORMERR
//!   to it (then 512 bytes). Each query has a random id (the OS CSPRNG) and a
//!   socket of its own on a random port. An answer must come from the
//!   server's address, carry the query's id and its question; datagrams
//!   that do not are dropped, answers that do but are malformed or larger
//!   than the query allowed are errors. A per-server timeout, `attempts`
//!   rounds over the servers, the next server when one fails (SERVFAIL,
//!   REFUSED, a referral from a server that does not recurse).
//! * **Cache**: TTLs honoured, negative answers cached (RFC 2308), an
//!   answer through CNAMEs no longer than its shortest link, a bound on
//!   its size; identical questions in flight share one query.
//! * **Records**: CNAME chains followed to a limit; every failure is a
//!   [`DnsError`] inside the `io::Error` (NXDOMAIN, SERVFAIL, timeout,
//!   malformed answer, ...), never a panic.
//!
//! # Implementation
//!
//! Messages are encoded and decoded by hickory-proto; the I/O (coro's
//! [`UdpSocket`](crate::UdpSocket) and [`TcpStream`](crate::TcpStream)),
//! the timeouts (`with_timeout`), the cache and the policy are this
//! module's. Everything runs on the calling green thread (no background
//! thread, no OS thread), except that `lookup_ip` asks its AAAA question
//! on a second green thread, scoped to the call, while the caller asks A.
//!
//! * `config.rs`: [`Config`] and `resolv.conf`;
//! * `transport.rs`: one exchange with one server, and the wire's checks;
//! * `reply.rs`: what a reply means (an answer, a retry, a failure), the
//!   one judgement every reply passes, whatever path fetched it;
//! * `resolver.rs`: [`Resolver`]: servers, retries, coalescing, CNAMEs;
//! * `cache.rs`: the bounded TTL cache;
//! * `lookup.rs`: the typed lookups and [`Mx`];
//! * `error.rs`: [`DnsError`].
//!
//! # Examples
//!
//! ```no_run
//! use coro::net::dns::{Config, DnsError, Resolver};
//!
//! coro::run(|| -> std::io::Result<()> {
//!     let r = Resolver::new(Config::with_servers(vec!["127.0.0.1:53".parse().unwrap()]))?;
//!     match r.lookup_mx("example.org") {
//!         Ok(mxs) => println!("{mxs:?}"),
//!         Err(e) => match DnsError::from_io(&e) {
//!             Some(DnsError::NxDomain { .. }) => println!("no such domain"),
//!             Some(d) if d.is_temporary() => println!("try again later: {d}"),
//!             _ => return Err(e),
//!         },
//!     }
//!     Ok(())
//! })
//! .unwrap();
//! ```

mod cache;
mod config;
mod error;
mod lookup;
mod reply;
mod resolver;
mod transport;

pub use config::Config;
pub use error::DnsError;
pub use lookup::Mx;
pub use resolver::Resolver;
