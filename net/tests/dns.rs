//! coro::net::dns against a scripted DNS server: a real UDP (and TCP)
//! socket on loopback that the test programs to answer well, badly, late,
//! or not at all. The hostile answers must end in errors, never panics.

mod dns_peer;
mod util;

use std::io;
use std::net::{IpAddr, Ipv4Addr};
use std::rc::Rc;
use std::time::Duration;

use coro::net::dns::{Config, DnsError, Mx, Resolver};
use coro::net::UdpSocket;
use hickory_proto::op::{Edns, Message, MessageType, ResponseCode};
use hickory_proto::rr::rdata::{A, AAAA, MX, PTR, TXT};
use hickory_proto::rr::{Name, RData, Record, RecordType};

use dns_peer::{
    a, answer, cname, dns_err, framed, name, peer, peer_with_tcp, qname, resolver, response, soa,
    Act,
};
use util::run;

/// A well-behaved server for a small zone.
fn zone(q: &Message) -> Vec<Act> {
    let query = &q.queries()[0];
    let owner = query.name().to_ascii();
    let rec = |data| Record::from_rdata(query.name().clone(), 300, data);
    let records = match (qname(q).as_str(), query.query_type()) {
        ("host.test", RecordType::A) => vec![rec(RData::A(A(Ipv4Addr::new(192, 0, 2, 1))))],
        ("host.test", RecordType::AAAA) => {
            vec![rec(RData::AAAA(AAAA("2001:db8::1".parse().unwrap())))]
        }
        ("mail.test", RecordType::MX) => vec![
            rec(RData::MX(MX::new(20, name("mx2.mail.test.")))),
            rec(RData::MX(MX::new(10, name("mx1.mail.test.")))),
        ],
        ("null.test", RecordType::MX) => vec![rec(RData::MX(MX::new(0, Name::root())))],
        ("txt.test", RecordType::TXT) => {
            vec![rec(RData::TXT(TXT::new(vec![
                "v=spf1 ".into(),
                "-all".into(),
            ])))]
        }
        ("1.2.0.192.in-addr.arpa", RecordType::PTR) => {
            vec![rec(RData::PTR(PTR(name("host.test."))))]
        }
        ("alias.test", RecordType::A) => {
            vec![
                cname(&owner, "b.test."),
                cname("b.test.", "host.test."),
                a("host.test.", 300, [192, 0, 2, 1]),
            ]
        }
        _ => {
            let mut m = response(q, ResponseCode::NXDomain);
            m.add_name_server(soa("test.", 300, 60));
            return vec![Act::Send(m.to_vec().unwrap())];
        }
    };
    vec![Act::Send(answer(q, records))]
}

#[test]
fn record_types() -> io::Result<()> {
    run(|| {
        let p = peer(zone)?;
        let r = resolver(&[&p], 1)?;
        let ips = r.lookup_ip("host.test")?;
        assert_eq!(
            ips,
            [IpAddr::from([192, 0, 2, 1]), "2001:db8::1".parse().unwrap()]
        );
        let mxs = r.lookup_mx("mail.test")?;
        let mx = |preference, exchange: &str| Mx {
            preference,
            exchange: exchange.into(),
        };
        assert_eq!(mxs, [mx(10, "mx1.mail.test"), mx(20, "mx2.mail.test")]);
        let null = r.lookup_mx("null.test")?;
        assert!(null.len() == 1 && null[0].is_null(), "{null:?}");
        assert_eq!(r.lookup_txt("txt.test")?, [b"v=spf1 -all".to_vec()]);
        assert_eq!(r.lookup_ptr(IpAddr::from([192, 0, 2, 1]))?, ["host.test"]);
        assert_eq!(r.lookup_ip("alias.test")?, [IpAddr::from([192, 0, 2, 1])]);
        assert!(matches!(
            dns_err(r.lookup_mx("nowhere.test")),
            DnsError::NxDomain { .. }
        ));
        assert_eq!(
            r.lookup_mx("nowhere.test").unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        // Every query asked for recursion and carried EDNS0 (1232 bytes).
        for (q, _) in p.seen.borrow().iter() {
            assert!(q.recursion_desired());
            let edns: &Edns = q.extensions().as_ref().expect("an EDNS0 record");
            assert_eq!(edns.max_payload(), 1232);
        }
        Ok(())
    })
}

#[test]
fn random_ids_and_source_ports() -> io::Result<()> {
    run(|| {
        let p = peer(zone)?;
        let r = resolver(&[&p], 1)?;
        for i in 0..20 {
            let _ = r.lookup_mx(&format!("n{i}.test"));
        }
        let seen = p.seen.borrow();
        let mut ids: Vec<u16> = seen.iter().map(|(q, _)| q.id()).collect();
        let mut ports: Vec<u16> = seen.iter().map(|(_, from)| from.port()).collect();
        ids.sort_unstable();
        ids.dedup();
        ports.sort_unstable();
        ports.dedup();
        // 20 draws from 65 536 ids and ~28 000 ports: a repeat or two at most.
        assert!(ids.len() >= 18, "ids repeat: {ids:?}");
        assert!(ports.len() >= 18, "source ports repeat: {ports:?}");
        Ok(())
    })
}

#[test]
fn spoofed_answers_are_dropped() -> io::Result<()> {
    run(|| {
        // Before the real answer: one with a wrong id, and one with the
        // right id from another address. Both carry a poisoned address.
        let p = peer(|q| {
            let poison = answer(
                q,
                vec![a(&q.queries()[0].name().to_ascii(), 300, [6, 6, 6, 6])],
            );
            let mut wrong_id = poison.clone();
            wrong_id[0] ^= 0xff;
            vec![
                Act::Send(wrong_id),
                Act::SendFromElsewhere(poison),
                Act::Sleep(Duration::from_millis(20)),
                Act::Send(answer(
                    q,
                    vec![a(&q.queries()[0].name().to_ascii(), 300, [192, 0, 2, 7])],
                )),
            ]
        })?;
        let r = resolver(&[&p], 1)?;
        assert_eq!(r.lookup_ip("x.test.")?, [IpAddr::from([192, 0, 2, 7])]);
        Ok(())
    })
}

#[test]
fn only_spoofed_answers_time_out() -> io::Result<()> {
    run(|| {
        let p = peer(|q| {
            let mut b = answer(q, vec![a("x.test.", 300, [6, 6, 6, 6])]);
            b[0] ^= 0xff;
            vec![Act::Send(b)]
        })?;
        let r = resolver(&[&p], 2)?;
        match dns_err(r.lookup_ip("x.test.")) {
            DnsError::Timeout {
                dropped, servers, ..
            } => {
                assert_eq!(servers, [p.addr]);
                assert!(dropped >= 2, "dropped {dropped}");
            }
            e => panic!("expected a timeout, got {e}"),
        }
        assert_eq!(p.queries(), 4); // A and AAAA, two attempts each
        Ok(())
    })
}

#[test]
fn hostile_answers_are_errors() -> io::Result<()> {
    // Each case: what the server sends back for a query, and the error.
    type Case = (&'static str, fn(&Message) -> Vec<u8>);
    let cases: Vec<Case> = vec![
        ("junk after the id", |q| {
            let mut b = q.id().to_be_bytes().to_vec();
            b.extend_from_slice(&[0xff; 40]);
            b
        }),
        ("header only, claims 5 answers", |q| {
            let mut b = response(q, ResponseCode::NoError).to_vec().unwrap();
            b[7] = 5; // ANCOUNT
            b
        }),
        ("compression pointer loop", |q| {
            let mut b = response(q, ResponseCode::NoError).to_vec().unwrap();
            b[7] = 1; // one answer, whose name points at itself
            let at = b.len() as u16;
            b.extend_from_slice(&(0xc000 | at).to_be_bytes());
            b.extend_from_slice(&[0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 1, 2, 3, 4]);
            b
        }),
        ("a query, not a response", |q| {
            let mut m = q.clone();
            m.set_message_type(MessageType::Query);
            m.to_vec().unwrap()
        }),
        ("record data overrunning its length", |q| {
            let mut b = answer(q, vec![a("x.test.", 60, [1, 2, 3, 4])]);
            let n = b.len();
            b[n - 6] = 0x40; // RDLENGTH of the A record: 16 384
            b
        }),
        ("too short for a header", |q| q.id().to_be_bytes().to_vec()),
    ];
    for (what, make) in cases {
        run(move || {
            let p = peer(move |q| vec![Act::Send(make(q))])?;
            let r = resolver(&[&p], 1)?;
            let e = r.lookup_mx("x.test").expect_err(what);
            assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{what}: {e}");
            assert!(
                matches!(DnsError::from_io(&e), Some(DnsError::Malformed { .. })),
                "{what}: {e}"
            );
            Ok(())
        })?;
    }
    Ok(())
}

#[test]
fn mismatched_question_is_an_error() -> io::Result<()> {
    run(|| {
        let p = peer(|q| {
            let mut m = response(q, ResponseCode::NoError);
            m.queries_mut()[0].set_name(name("other.test."));
            m.add_answer(a("other.test.", 60, [6, 6, 6, 6]));
            vec![Act::Send(m.to_vec().unwrap())]
        })?;
        let r = resolver(&[&p], 1)?;
        let e = dns_err(r.lookup_ip("x.test."));
        assert!(matches!(e, DnsError::Mismatched { .. }), "{e}");
        assert!(e.to_string().contains("other.test"), "{e}");
        Ok(())
    })
}

#[test]
fn oversized_answer_is_an_error() -> io::Result<()> {
    run(|| {
        let p = peer(|q| {
            let records = (0..200).map(|i| a("x.test.", 60, [10, 0, 0, i])).collect();
            vec![Act::Send(answer(q, records))] // ~3 KB, over the 1232 asked for
        })?;
        let r = resolver(&[&p], 1)?;
        let e = dns_err(r.lookup_mx("x.test"));
        assert!(matches!(e, DnsError::Oversized { limit: 1232, .. }), "{e}");
        Ok(())
    })
}

#[test]
fn truncated_answer_is_asked_again_over_tcp() -> io::Result<()> {
    run(|| {
        let records = |q: &Message| -> Vec<Record> {
            (0..100)
                .map(|i| a(&q.queries()[0].name().to_ascii(), 60, [10, 0, 0, i]))
                .collect()
        };
        let p = peer_with_tcp(
            |q| {
                let mut m = response(q, ResponseCode::NoError);
                m.set_truncated(true);
                vec![Act::Send(m.to_vec().unwrap())]
            },
            Some(move |q: &Message| framed(answer(q, records(q)))),
        )?;
        let r = resolver(&[&p], 1)?;
        let ips = r.lookup_ip("big.test.")?;
        assert_eq!(ips.len(), 100);
        assert_eq!(p.tcp_seen.get(), 2); // A and AAAA
        Ok(())
    })
}

#[test]
fn tcp_answer_cut_short_is_truncated() -> io::Result<()> {
    run(|| {
        let p = peer_with_tcp(
            |q| {
                let mut m = response(q, ResponseCode::NoError);
                m.set_truncated(true);
                vec![Act::Send(m.to_vec().unwrap())]
            },
            Some(|q: &Message| {
                let b = answer(q, vec![a("x.test.", 60, [1, 2, 3, 4])]);
                let mut out = ((b.len() + 100) as u16).to_be_bytes().to_vec();
                out.extend_from_slice(&b); // 100 bytes short, then EOF
                out
            }),
        )?;
        let r = resolver(&[&p], 1)?;
        let e = dns_err(r.lookup_mx("x.test"));
        assert!(matches!(e, DnsError::Truncated { .. }), "{e}");
        Ok(())
    })
}

#[test]
fn servfail_moves_to_the_next_server() -> io::Result<()> {
    run(|| {
        let bad = peer(|q| {
            vec![Act::Send(
                response(q, ResponseCode::ServFail).to_vec().unwrap(),
            )]
        })?;
        let good = peer(zone)?;
        let r = resolver(&[&bad, &good], 1)?;
        assert_eq!(r.lookup_mx("mail.test")?.len(), 2);
        assert_eq!((bad.queries(), good.queries()), (1, 1));
        let r = resolver(&[&bad], 2)?;
        let e = r.lookup_mx("mail.test").unwrap_err();
        assert!(
            matches!(DnsError::from_io(&e), Some(DnsError::ServFail { .. })),
            "{e}"
        );
        assert!(DnsError::from_io(&e).unwrap().is_temporary());
        assert_eq!(bad.queries(), 3);
        Ok(())
    })
}

#[test]
fn silent_server_times_out_then_the_next_answers() -> io::Result<()> {
    run(|| {
        let silent = peer(|_| Vec::new())?;
        let good = peer(zone)?;
        let r = resolver(&[&silent, &good], 2)?;
        assert_eq!(r.lookup_mx("mail.test")?.len(), 2);
        assert_eq!((silent.queries(), good.queries()), (1, 1));
        // Alone, it is asked `attempts` times, then the lookup times out.
        let r = resolver(&[&silent], 2)?;
        let e = r.lookup_mx("mail.test").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut, "{e}");
        assert!(matches!(
            DnsError::from_io(&e),
            Some(DnsError::Timeout { .. })
        ));
        assert_eq!(silent.queries(), 3);
        Ok(())
    })
}

#[test]
fn rotate_spreads_queries() -> io::Result<()> {
    run(|| {
        let (p1, p2) = (peer(zone)?, peer(zone)?);
        let mut c = Config::with_servers(vec![p1.addr, p2.addr]);
        c.rotate = true;
        let r = Resolver::new(c)?;
        for i in 0..6 {
            let _ = r.lookup_mx(&format!("r{i}.test"));
        }
        assert_eq!((p1.queries(), p2.queries()), (3, 3));
        Ok(())
    })
}

#[test]
fn unreachable_server_moves_on() -> io::Result<()> {
    run(|| {
        // A port nobody listens on: ICMP port unreachable, at once.
        let closed = UdpSocket::bind("127.0.0.1:0")?.local_addr()?;
        let good = peer(zone)?;
        let mut c = Config::with_servers(vec![closed, good.addr]);
        c.timeout = Duration::from_secs(20); // not waited for
        let r = Resolver::new(c)?;
        assert_eq!(r.lookup_mx("mail.test")?.len(), 2);
        let r = Resolver::new(Config::with_servers(vec![closed]))?;
        let e = dns_err(r.lookup_mx("mail.test"));
        assert!(matches!(e, DnsError::Unreachable { .. }), "{e}");
        Ok(())
    })
}

#[test]
fn negative_answers_are_cached_by_the_soa() -> io::Result<()> {
    run(|| {
        let p = peer(|q| {
            let mut m = match qname(q).as_str() {
                "gone.test" => response(q, ResponseCode::NXDomain),
                "bare.test" => response(q, ResponseCode::NoError), // NODATA
                _ => {
                    return vec![Act::Send(
                        response(q, ResponseCode::NXDomain).to_vec().unwrap(),
                    )]
                }
            };
            m.add_name_server(soa("test.", 3600, 60));
            vec![Act::Send(m.to_vec().unwrap())]
        })?;
        let r = resolver(&[&p], 1)?;
        for _ in 0..3 {
            assert!(matches!(
                dns_err(r.lookup_mx("gone.test")),
                DnsError::NxDomain { .. }
            ));
            assert_eq!(r.lookup_mx("bare.test")?, []);
        }
        assert_eq!(p.queries(), 2);
        // Without an SOA, an NXDOMAIN is not cached (RFC 2308 §5).
        for _ in 0..2 {
            assert!(matches!(
                dns_err(r.lookup_mx("nosoa.test")),
                DnsError::NxDomain { .. }
            ));
        }
        assert_eq!(p.queries(), 4);
        // An address lookup of a name with no addresses says so.
        assert!(matches!(
            dns_err(r.lookup_ip("bare.test.")),
            DnsError::NoRecords { .. }
        ));
        Ok(())
    })
}

#[test]
fn ttls_are_honoured() -> io::Result<()> {
    run(|| {
        let p = peer(|q| {
            if q.queries()[0].query_type() == RecordType::A {
                return vec![Act::Send(answer(q, vec![a("x.test.", 1, [192, 0, 2, 9])]))];
            }
            let mut m = response(q, ResponseCode::NoError); // NODATA, 1 s
            m.add_name_server(soa("test.", 1, 3600));
            vec![Act::Send(m.to_vec().unwrap())]
        })?;
        let r = resolver(&[&p], 1)?;
        let ask = || r.lookup_ip("x.test.");
        ask()?;
        ask()?;
        assert_eq!(p.queries(), 2); // A and AAAA, then from the cache
        coro::sleep(Duration::from_millis(1100))?;
        ask()?;
        assert_eq!(p.queries(), 4, "the 1 s TTL ran out: asked again");
        Ok(())
    })
}

#[test]
fn cache_is_bounded() -> io::Result<()> {
    run(|| {
        let p = peer(|q| {
            vec![Act::Send(answer(
                q,
                vec![a(&q.queries()[0].name().to_ascii(), 300, [1, 2, 3, 4])],
            ))]
        })?;
        let mut c = Config::with_servers(vec![p.addr]);
        c.cache_size = 3;
        let r = Resolver::new(c)?;
        for i in 0..10 {
            r.lookup_ip(&format!("h{i}.test."))?;
            assert!(r.cache_len() <= 3, "{} entries", r.cache_len());
        }
        Ok(())
    })
}

#[test]
fn identical_questions_in_flight_share_one_query() -> io::Result<()> {
    run(|| {
        let p = peer(|q| {
            vec![
                Act::Sleep(Duration::from_millis(100)),
                Act::Send(answer(q, vec![a("x.test.", 300, [192, 0, 2, 3])])),
            ]
        })?;
        let r = Rc::new(resolver(&[&p], 1)?);
        let askers: Vec<_> = (0..10)
            .map(|_| {
                let r = r.clone();
                coro::spawn(move || r.lookup_ip("x.test."))
            })
            .collect();
        for a in askers {
            assert_eq!(a.join().unwrap()?, [IpAddr::from([192, 0, 2, 3])]);
        }
        assert_eq!(p.queries(), 2, "one A and one AAAA query for ten askers");
        assert_eq!(r.queries_sent(), 2);
        Ok(())
    })
}

#[test]
fn an_asker_that_gives_up_does_not_fail_the_others() -> io::Result<()> {
    run(|| {
        let p = peer(|q| {
            vec![
                Act::Sleep(Duration::from_millis(100)),
                Act::Send(answer(q, vec![a("x.test.", 300, [192, 0, 2, 3])])),
            ]
        })?;
        let r = Rc::new(resolver(&[&p], 1)?);
        let first = {
            let r = r.clone();
            coro::spawn(move || {
                coro::with_timeout(Duration::from_millis(30), || r.lookup_mx("x.test"))
            })
        };
        coro::yield_now();
        let second = r.lookup_mx("x.test");
        assert!(
            first.join().unwrap().is_err(),
            "the first asker's deadline passed"
        );
        assert_eq!(second?, []);
        Ok(())
    })
}

#[test]
fn cname_chains_are_followed_to_a_limit() -> io::Result<()> {
    run(|| {
        let p = peer(|q| {
            let n = qname(q);
            let records = match n.as_str() {
                // The whole chain in one answer.
                "alias.test" => vec![
                    cname("alias.test.", "b.test."),
                    cname("b.test.", "c.test."),
                    a("c.test.", 60, [192, 0, 2, 5]),
                ],
                // A chain the answer stops short of: asked again for d.
                "short.test" => vec![cname("short.test.", "d.test.")],
                "d.test" => vec![a("d.test.", 60, [192, 0, 2, 6])],
                "loop.test" => vec![
                    cname("loop.test.", "loop2.test."),
                    cname("loop2.test.", "loop.test."),
                ],
                n if n.starts_with("l") => {
                    // l0 -> l1 -> ... -> l20: longer than 8 links.
                    let i: u32 = n[1..n.len() - 5].parse().unwrap();
                    vec![cname(&format!("l{i}.test."), &format!("l{}.test.", i + 1))]
                }
                _ => vec![],
            };
            vec![Act::Send(answer(q, records))]
        })?;
        let r = resolver(&[&p], 1)?;
        assert_eq!(r.lookup_ip("alias.test.")?, [IpAddr::from([192, 0, 2, 5])]);
        assert_eq!(r.lookup_ip("short.test.")?, [IpAddr::from([192, 0, 2, 6])]);
        let e = dns_err(r.lookup_mx("loop.test"));
        assert!(
            matches!(e, DnsError::CnameChain { .. }) && e.to_string().contains("loops"),
            "{e}"
        );
        let before = p.queries();
        let e = dns_err(r.lookup_mx("l0.test"));
        assert!(
            matches!(e, DnsError::CnameChain { .. }) && e.to_string().contains("too long"),
            "{e}"
        );
        assert_eq!(
            p.queries() - before,
            9,
            "l0 .. l8 asked, then the chain is too long"
        );
        Ok(())
    })
}

#[test]
fn formerr_to_edns_is_asked_again_without() -> io::Result<()> {
    run(|| {
        let p = peer(|q| {
            if q.extensions().is_some() {
                let mut m = Message::new();
                m.set_id(q.id())
                    .set_message_type(MessageType::Response)
                    .set_response_code(ResponseCode::FormErr);
                vec![Act::Send(m.to_vec().unwrap())]
            } else {
                zone(q)
            }
        })?;
        let r = resolver(&[&p], 1)?;
        assert_eq!(r.lookup_mx("mail.test")?.len(), 2);
        assert_eq!(p.queries(), 2);
        Ok(())
    })
}

#[test]
fn callers_deadline_is_not_a_dns_error() -> io::Result<()> {
    run(|| {
        let silent = peer(|_| Vec::new())?;
        let r = resolver(&[&silent], 2)?;
        let mut inner = None;
        let outer = coro::with_timeout(Duration::from_millis(50), || {
            inner = Some(r.lookup_mx("x.test"))
        });
        assert!(outer.is_err());
        let e = inner.unwrap().unwrap_err();
        assert_eq!(
            coro::WaitError::from_io(&e),
            Some(coro::WaitError::TimedOut),
            "{e}"
        );
        assert!(DnsError::from_io(&e).is_none());
        assert_eq!(
            silent.queries(),
            1,
            "the lookup stopped at the caller's deadline"
        );
        Ok(())
    })
}

#[test]
fn bad_settings_and_names_are_refused() -> io::Result<()> {
    run(|| {
        let e = Resolver::new(Config::default()).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert!(e.to_string().contains("at least one server"), "{e}");
        let p = peer(zone)?;
        let r = resolver(&[&p], 1)?;
        for bad in ["", ".", "a..b", &"x".repeat(64)] {
            let e = r.lookup_mx(bad).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{bad:?}: {e}");
        }
        assert_eq!(p.queries(), 0);
        Ok(())
    })
}
