//! coro::net::dns against a real DNS server: dnsmasq on a loopback port,
//! serving the mail zone of `util/dnsmasq.rs` (MX records of two
//! preferences, a domain with only an A record, a null MX, NXDOMAIN).

mod util;

use std::io;
use std::net::IpAddr;

use coro::net::dns::{Config, DnsError, Mx, Resolver};

use util::dnsmasq::{mail_zone, Dnsmasq};
use util::run;

fn resolver(d: &Dnsmasq) -> io::Result<Resolver> {
    Resolver::new(Config::with_servers(vec![d.addr]))
}

#[test]
fn mail_zone_as_dnsmasq_serves_it() -> io::Result<()> {
    let d = Dnsmasq::start(&mail_zone(), 60);
    run(move || {
        let r = resolver(&d)?;
        let mx = |preference, exchange: &str| Mx {
            preference,
            exchange: exchange.into(),
        };
        assert_eq!(
            r.lookup_mx("mail.test")?,
            [mx(10, "mx1.mail.test"), mx(20, "mx2.mail.test")]
        );
        assert_eq!(
            r.lookup_ip("mx2.mail.test")?,
            [IpAddr::from([127, 0, 0, 3])]
        );
        // No MX, an address: mail goes to the address (implicit MX).
        assert_eq!(r.lookup_mx("plain.test")?, []);
        assert_eq!(r.lookup_ip("plain.test.")?, [IpAddr::from([127, 0, 0, 4])]);
        // The null MX.
        let null = r.lookup_mx("null.test")?;
        assert!(null.len() == 1 && null[0].is_null(), "{null:?}");
        // NXDOMAIN, for MX and for addresses.
        for e in [
            r.lookup_mx("gone.test").unwrap_err(),
            r.lookup_ip("gone.test.").unwrap_err(),
        ] {
            assert_eq!(e.kind(), io::ErrorKind::NotFound, "{e}");
            assert!(
                matches!(DnsError::from_io(&e), Some(DnsError::NxDomain { .. })),
                "{e}"
            );
        }
        // Cached for the 60 s TTL: asking again sends nothing. (dnsmasq
        // sends no SOA with NODATA for its own records, so those are not
        // cached: RFC 2308 §5.)
        let sent = r.queries_sent();
        r.lookup_mx("mail.test")?;
        r.lookup_mx("null.test")?;
        assert_eq!(r.queries_sent(), sent);
        Ok(())
    })
}

#[test]
fn search_list_applies_to_short_names() -> io::Result<()> {
    let d = Dnsmasq::start(&mail_zone(), 60);
    run(move || {
        let mut c = Config::with_servers(vec![d.addr]);
        c.search = vec!["mail.test".into()];
        let r = Resolver::new(c)?;
        assert_eq!(r.lookup_ip("mx1")?, [IpAddr::from([127, 0, 0, 2])]);
        Ok(())
    })
}
