//! Name lookup through the blocking-offload pool: names resolve, literals
//! need no lookup, malformed addresses are InvalidInput, and a failed
//! lookup keeps the resolver's error text.

mod util;

use std::io;
use std::net::SocketAddr;

use coro::net::lookup_host;
use util::{assert_kind, run};

#[test]
fn localhost_resolves() -> io::Result<()> {
    run(|| {
        let addrs: Vec<SocketAddr> = lookup_host("localhost:8080")?.collect();
        assert!(!addrs.is_empty());
        assert!(addrs
            .iter()
            .all(|a| a.ip().is_loopback() && a.port() == 8080));
        let pair: Vec<SocketAddr> = lookup_host(("localhost", 1))?.collect();
        assert!(!pair.is_empty());
        Ok(())
    })
}

#[test]
fn literals_and_bad_input() -> io::Result<()> {
    run(|| {
        let before = coro::stats().spawned;
        let v: Vec<_> = lookup_host("127.0.0.1:80")?.collect();
        assert_eq!(v, ["127.0.0.1:80".parse::<SocketAddr>().unwrap()]);
        let v: Vec<_> = lookup_host("[::1]:443")?.collect();
        assert_eq!(v[0].port(), 443);
        assert_eq!(coro::stats().blocking_in_flight, 0);
        assert_eq!(coro::stats().spawned, before);
        let e = assert_kind(lookup_host("localhost"), io::ErrorKind::InvalidInput);
        assert!(e.to_string().contains("host:port"), "{e}");
        assert_kind(lookup_host("localhost:99999"), io::ErrorKind::InvalidInput);
        assert_kind(lookup_host(":80"), io::ErrorKind::InvalidInput);
        Ok(())
    })
}

#[test]
fn failed_lookup_keeps_resolver_text() -> io::Result<()> {
    run(|| {
        // A name the resolver rejects without asking a server.
        let name = "no such host..invalid";
        let e = lookup_host((name, 80)).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains(name), "{msg}");
        assert!(msg.contains("failed"), "{msg}");
        Ok(())
    })
}
