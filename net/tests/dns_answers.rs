//! Which replies coro::net::dns takes as answers, and for how long: every
//! reply passes the same judgement whatever path fetched it (UDP, TCP,
//! the retry without EDNS0), and an answer lasts no longer than the
//! shortest-lived record it rests on. Against the scripted server of
//! `dns_peer` (UDP and TCP on one loopback port).

mod dns_peer;
mod util;

use std::cell::Cell;
use std::io;
use std::net::IpAddr;
use std::rc::Rc;
use std::time::Duration;

use coro::net::dns::{Config, DnsError, Resolver};
use hickory_proto::op::{Message, MessageType, ResponseCode};
use hickory_proto::rr::rdata::{MX, NS, TXT};
use hickory_proto::rr::{RData, Record, RecordType};

use dns_peer::{
    a, answer, cname, cname_ttl, dns_err, framed, name, peer, peer_with_tcp, qname, resolver,
    response, soa, Act,
};
use util::run;

/// FORMERR to `q`, without its question, as a server that does not know
/// EDNS0 may send.
fn formerr(q: &Message) -> Vec<u8> {
    let mut m = Message::new();
    m.set_id(q.id())
        .set_message_type(MessageType::Response)
        .set_response_code(ResponseCode::FormErr);
    m.to_vec().unwrap()
}

/// A NOERROR response to `q` with no records and the truncation bit set.
fn truncated(q: &Message) -> Vec<u8> {
    let mut m = response(q, ResponseCode::NoError);
    m.set_truncated(true);
    m.to_vec().unwrap()
}

/// Two MX records for the question's name, with this TTL.
fn mx_records(q: &Message, ttl: u32) -> Vec<Record> {
    let owner = q.queries()[0].name().clone();
    [(10, "mx1.mail.test."), (20, "mx2.mail.test.")]
        .into_iter()
        .map(|(pref, host)| {
            Record::from_rdata(owner.clone(), ttl, RData::MX(MX::new(pref, name(host))))
        })
        .collect()
}

/// A NODATA response to `q`: no records, the zone's SOA with these TTLs.
fn nodata(q: &Message, soa_ttl: u32, minimum: u32) -> Vec<u8> {
    let mut m = response(q, ResponseCode::NoError);
    m.add_name_server(soa("test.", soa_ttl, minimum));
    m.to_vec().unwrap()
}

/// An NXDOMAIN response to `q`, with the zone's SOA if `soa_ttls` says so.
fn nxdomain(q: &Message, soa_ttls: Option<(u32, u32)>) -> Vec<u8> {
    let mut m = response(q, ResponseCode::NXDomain);
    if let Some((ttl, minimum)) = soa_ttls {
        m.add_name_server(soa("test.", ttl, minimum));
    }
    m.to_vec().unwrap()
}

/// The number of MX records a lookup found, or its error.
#[track_caller]
fn mx_count(r: &Resolver, domain: &str) -> io::Result<usize> {
    r.lookup_mx(domain).map(|mxs| mxs.len())
}

#[test]
fn truncated_answer_after_formerr_is_asked_again_over_tcp() -> io::Result<()> {
    run(|| {
        // No EDNS0 here: FORMERR to a query with it, and a truncated reply
        // with no records to the one without. Only TCP holds the records.
        let p = peer_with_tcp(
            |q| match q.extensions() {
                Some(_) => vec![Act::Send(formerr(q))],
                None => vec![Act::Send(truncated(q))],
            },
            Some(|q: &Message| framed(answer(q, mx_records(q, 300)))),
        )?;
        let r = resolver(&[&p], 1)?;
        assert_eq!(
            mx_count(&r, "mail.test")?,
            2,
            "the truncated reply is not \"no MX records\""
        );
        assert_eq!((p.queries(), p.tcp_seen.get()), (2, 1));
        Ok(())
    })
}

#[test]
fn formerr_over_tcp_is_asked_again_without_edns() -> io::Result<()> {
    run(|| {
        let p = peer_with_tcp(
            |q| vec![Act::Send(truncated(q))],
            Some(|q: &Message| match q.extensions() {
                Some(_) => framed(formerr(q)),
                None => framed(answer(q, mx_records(q, 300))),
            }),
        )?;
        let r = resolver(&[&p], 1)?;
        assert_eq!(mx_count(&r, "mail.test")?, 2);
        assert_eq!((p.queries(), p.tcp_seen.get()), (1, 2));
        Ok(())
    })
}

#[test]
fn answer_without_edns_is_held_to_512_bytes() -> io::Result<()> {
    run(|| {
        // FORMERR to EDNS0, then ~700 bytes over UDP without the
        // truncation bit to a query that allowed 512 (RFC 1035 §4.2.1).
        let p = peer(|q| match q.extensions() {
            Some(_) => vec![Act::Send(formerr(q))],
            None => {
                let owner = q.queries()[0].name().clone();
                let big = (0..10)
                    .map(|i| {
                        let text = format!("{i}{}", "x".repeat(59));
                        Record::from_rdata(owner.clone(), 300, RData::TXT(TXT::new(vec![text])))
                    })
                    .collect();
                vec![Act::Send(answer(q, big))]
            }
        })?;
        let r = resolver(&[&p], 1)?;
        let e = dns_err(r.lookup_txt("big.test"));
        assert!(matches!(e, DnsError::Oversized { limit: 512, .. }), "{e}");
        Ok(())
    })
}

#[test]
fn tcp_answers_are_checked_as_udp_ones_are() -> io::Result<()> {
    run(|| {
        let p = peer_with_tcp(
            |q| vec![Act::Send(truncated(q))],
            Some(|q: &Message| {
                let mut m = response(q, ResponseCode::NoError);
                m.add_answers(mx_records(q, 300));
                match qname(q).as_str() {
                    "tc.test" => {
                        m.set_truncated(true);
                    }
                    "question.test" => {
                        m.queries_mut()[0].set_name(name("other.test."));
                    }
                    _ => {
                        m.set_id(q.id() ^ 1);
                    }
                }
                framed(m.to_vec().unwrap())
            }),
        )?;
        let r = resolver(&[&p], 1)?;
        let e = dns_err(r.lookup_mx("tc.test"));
        assert!(matches!(e, DnsError::Truncated { .. }), "{e}");
        let e = dns_err(r.lookup_mx("question.test"));
        assert!(matches!(e, DnsError::Mismatched { .. }), "{e}");
        let e = dns_err(r.lookup_mx("id.test"));
        assert!(matches!(e, DnsError::Mismatched { .. }), "{e}");
        Ok(())
    })
}

#[test]
fn referral_is_not_an_answer() -> io::Result<()> {
    run(|| {
        // A server that does not recurse: no records, not authoritative,
        // the zone's name servers in the authority section.
        let referral = peer(|q| {
            let mut m = response(q, ResponseCode::NoError);
            m.set_recursion_available(false);
            m.add_name_server(Record::from_rdata(
                name("test."),
                300,
                RData::NS(NS(name("ns.test."))),
            ));
            vec![Act::Send(m.to_vec().unwrap())]
        })?;
        let good = peer(|q| vec![Act::Send(answer(q, mx_records(q, 300)))])?;
        let r = resolver(&[&referral, &good], 1)?;
        assert_eq!(
            mx_count(&r, "mail.test")?,
            2,
            "the referral is not \"no MX records\": the next server is asked"
        );
        assert_eq!((referral.queries(), good.queries()), (1, 1));
        let r = resolver(&[&referral], 1)?;
        let e = dns_err(r.lookup_mx("mail.test"));
        assert!(
            e.is_temporary() && e.to_string().contains("referral"),
            "{e}"
        );
        // An authoritative server's NODATA is an answer, recursion or not.
        let authoritative = peer(|q| {
            let mut m = response(q, ResponseCode::NoError);
            m.set_recursion_available(false).set_authoritative(true);
            m.add_name_server(soa("test.", 300, 300));
            vec![Act::Send(m.to_vec().unwrap())]
        })?;
        let r = resolver(&[&authoritative], 1)?;
        assert_eq!(mx_count(&r, "mail.test")?, 0);
        Ok(())
    })
}

#[test]
fn failures_are_not_cached() -> io::Result<()> {
    run(|| {
        // SERVFAIL for the name, and for an alias's target.
        let p = peer(|q| match qname(q).as_str() {
            "alias.test" => vec![Act::Send(answer(
                q,
                vec![cname("alias.test.", "sick.test.")],
            ))],
            _ => vec![Act::Send(
                response(q, ResponseCode::ServFail).to_vec().unwrap(),
            )],
        })?;
        let r = resolver(&[&p], 1)?;
        for _ in 0..2 {
            for n in ["sick.test", "alias.test"] {
                assert!(matches!(dns_err(r.lookup_mx(n)), DnsError::ServFail { .. }));
            }
        }
        assert_eq!(p.asked("sick.test", RecordType::MX), 4);
        assert_eq!(p.asked("alias.test", RecordType::MX), 2);
        assert_eq!(r.cache_len(), 0);
        Ok(())
    })
}

#[test]
fn alias_lasts_no_longer_than_its_target() -> io::Result<()> {
    run(|| {
        // The alias's reply holds only the CNAME (300 s): its target is
        // asked separately, and its address lasts 1 s.
        let p = peer(|q| {
            let reply = match (qname(q).as_str(), q.queries()[0].query_type()) {
                ("alias.test", _) => answer(q, vec![cname("alias.test.", "target.test.")]),
                ("target.test", RecordType::A) => {
                    answer(q, vec![a("target.test.", 1, [192, 0, 2, 1])])
                }
                _ => nodata(q, 300, 300),
            };
            vec![Act::Send(reply)]
        })?;
        let r = resolver(&[&p], 1)?;
        let ip = [IpAddr::from([192, 0, 2, 1])];
        assert_eq!(r.lookup_ip("alias.test.")?, ip);
        assert_eq!(r.lookup_ip("alias.test.")?, ip);
        assert_eq!(p.asked("alias.test", RecordType::A), 1, "from the cache");
        coro::sleep(Duration::from_millis(1100))?;
        assert_eq!(r.lookup_ip("alias.test.")?, ip);
        assert_eq!(
            p.asked("alias.test", RecordType::A),
            2,
            "the target's 1 s TTL bounds the alias's answer"
        );
        assert_eq!(
            p.asked("alias.test", RecordType::AAAA),
            1,
            "the AAAA answer rests on 300 s TTLs only"
        );
        Ok(())
    })
}

#[test]
fn negative_answer_through_an_alias_lasts_no_longer_than_its_soa() -> io::Result<()> {
    run(|| {
        // Aliases (CNAME TTL 300) whose targets, asked separately, do not
        // exist or have no MX records, with SOAs that allow 1 s; one whose
        // target's NXDOMAIN has no SOA; one whose reply holds the CNAME
        // and the NXDOMAIN together.
        let p = peer(|q| {
            let reply = match qname(q).as_str() {
                "gone-alias.test" => answer(q, vec![cname("gone-alias.test.", "gone.test.")]),
                "gone.test" => nxdomain(q, Some((300, 1))),
                "bare-alias.test" => answer(q, vec![cname("bare-alias.test.", "bare.test.")]),
                "bare.test" => nodata(q, 1, 300),
                "nosoa-alias.test" => answer(q, vec![cname("nosoa-alias.test.", "nosoa.test.")]),
                "nosoa.test" => nxdomain(q, None),
                "inline-alias.test" => {
                    let mut m = response(q, ResponseCode::NXDomain);
                    m.add_answer(cname("inline-alias.test.", "inline.test."));
                    m.add_name_server(soa("test.", 300, 1));
                    m.to_vec().unwrap()
                }
                _ => nxdomain(q, None),
            };
            vec![Act::Send(reply)]
        })?;
        let r = resolver(&[&p], 1)?;
        let look = || -> io::Result<()> {
            for n in ["gone-alias.test", "nosoa-alias.test", "inline-alias.test"] {
                let e = dns_err(r.lookup_mx(n));
                assert!(matches!(e, DnsError::NxDomain { .. }), "{n}: {e}");
            }
            assert_eq!(mx_count(&r, "bare-alias.test")?, 0);
            Ok(())
        };
        let asked = |n: &str| p.asked(n, RecordType::MX);
        look()?;
        look()?;
        assert_eq!(
            asked("nosoa-alias.test"),
            2,
            "a target's NXDOMAIN without an SOA is not cached, nor is its alias's"
        );
        for n in ["gone-alias.test", "bare-alias.test", "inline-alias.test"] {
            assert_eq!(asked(n), 1, "{n}: from the cache");
        }
        coro::sleep(Duration::from_millis(1100))?;
        look()?;
        for n in ["gone-alias.test", "bare-alias.test", "inline-alias.test"] {
            assert_eq!(asked(n), 2, "{n}: the SOA's 1 s bounds the alias's answer");
        }
        Ok(())
    })
}

#[test]
fn alias_expiry_counts_from_its_arrival() -> io::Result<()> {
    run(|| {
        // The CNAME lasts 1 s; the first answer about its target comes
        // 1.5 s later. The composite answer had expired by then.
        let first = Rc::new(Cell::new(true));
        let p = peer(move |q| match qname(q).as_str() {
            "alias.test" => vec![Act::Send(answer(
                q,
                vec![cname_ttl("alias.test.", "target.test.", 1)],
            ))],
            _ => {
                let mut acts = Vec::new();
                if first.replace(false) {
                    acts.push(Act::Sleep(Duration::from_millis(1500)));
                }
                acts.push(Act::Send(answer(q, mx_records(q, 300))));
                acts
            }
        })?;
        let mut c = Config::with_servers(vec![p.addr]);
        c.timeout = Duration::from_secs(10);
        c.attempts = 1;
        let r = Resolver::new(c)?;
        assert_eq!(mx_count(&r, "alias.test")?, 2);
        assert_eq!(mx_count(&r, "alias.test")?, 2);
        assert_eq!(
            p.asked("alias.test", RecordType::MX),
            2,
            "the CNAME's 1 s ran out while its target was being asked"
        );
        Ok(())
    })
}

#[test]
fn ttl_with_its_top_bit_set_counts_as_zero() -> io::Result<()> {
    run(|| {
        // RFC 2181 §8.
        let p = peer(|q| vec![Act::Send(answer(q, mx_records(q, 0x8000_0000)))])?;
        let r = resolver(&[&p], 1)?;
        assert_eq!(mx_count(&r, "mail.test")?, 2);
        assert_eq!(mx_count(&r, "mail.test")?, 2);
        assert_eq!(p.asked("mail.test", RecordType::MX), 2, "not cached");
        Ok(())
    })
}
