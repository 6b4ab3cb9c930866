//! `Resolver::lookup_ip` asks for the A and the AAAA records at once: a
//! real UDP DNS server on loopback, on an OS thread of its own, answers the
//! two questions in an order that only a concurrent asker survives, and the
//! error rules for one family failing are held.

mod util;

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use coro::net::dns::{Config, DnsError, Resolver};
use hickory_proto::op::{Message, MessageType, OpCode, ResponseCode};
use hickory_proto::rr::rdata::{A, AAAA};
use hickory_proto::rr::{RData, Record, RecordType};

use util::run;

const V4: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 7);
const V6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 7);

/// What the server does with the questions of one name.
#[derive(Clone, Copy)]
enum Script {
    /// Holds back every A answer until an AAAA question has come, then
    /// answers both. A resolver that waits for the A answer before asking
    /// for AAAA never gets it.
    AOnlyAfterAaaa,
    /// Answers A, and SERVFAIL to AAAA.
    AaaaServfail,
    /// NXDOMAIN to both.
    NxDomain,
    /// SERVFAIL to both.
    Servfail,
}

/// A DNS server on `127.0.0.1`, on an OS thread: std's blocking UDP socket,
/// messages encoded by hickory-proto. Stops when dropped.
struct Server {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<io::Result<()>>>,
}

impl Server {
    fn start(script: Script) -> io::Result<Server> {
        let sock = UdpSocket::bind("127.0.0.1:0")?;
        // The loop looks at `stop` this often.
        sock.set_read_timeout(Some(Duration::from_millis(50)))?;
        let addr = sock.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || serve(&sock, script, &flag));
        Ok(Server {
            addr,
            stop,
            thread: Some(thread),
        })
    }

    fn resolver(&self) -> io::Result<Resolver> {
        let mut c = Config::with_servers(vec![self.addr]);
        // Generous for the answers that come (a loaded machine); the one a
        // serial asker waits for never does, so it fails after 2 s.
        c.timeout = Duration::from_secs(2);
        c.attempts = 1;
        Resolver::new(c)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let r = t.join().expect("the DNS server thread panicked");
            if !std::thread::panicking() {
                r.expect("the DNS server failed");
            }
        }
    }
}

fn serve(sock: &UdpSocket, script: Script, stop: &AtomicBool) -> io::Result<()> {
    let mut buf = [0u8; 4096];
    let mut held: Vec<(Message, SocketAddr)> = Vec::new();
    let mut aaaa_seen = false;
    while !stop.load(Ordering::Relaxed) {
        let (n, from) = match sock.recv_from(&mut buf) {
            Ok(r) => r,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                continue
            }
            Err(e) => return Err(e),
        };
        let q = Message::from_vec(&buf[..n]).map_err(io::Error::other)?;
        let rtype = q.queries()[0].query_type();
        let reply =
            |q: &Message| -> io::Result<()> { sock.send_to(&respond(q, script)?, from).map(drop) };
        match (script, rtype) {
            (Script::AOnlyAfterAaaa, RecordType::A) if !aaaa_seen => held.push((q, from)),
            (Script::AOnlyAfterAaaa, RecordType::AAAA) => {
                aaaa_seen = true;
                reply(&q)?;
                for (q, to) in held.drain(..) {
                    sock.send_to(&respond(&q, script)?, to)?;
                }
            }
            _ => reply(&q)?,
        }
    }
    Ok(())
}

/// The answer to `q` under `script`.
fn respond(q: &Message, script: Script) -> io::Result<Vec<u8>> {
    let query = &q.queries()[0];
    let mut m = Message::new();
    m.set_id(q.id())
        .set_message_type(MessageType::Response)
        .set_op_code(OpCode::Query)
        .set_recursion_desired(true)
        .set_recursion_available(true)
        .add_queries(q.queries().to_vec());
    let record = |data| Record::from_rdata(query.name().clone(), 300, data);
    let a = record(RData::A(A(V4)));
    let aaaa = record(RData::AAAA(AAAA(V6)));
    match (script, query.query_type()) {
        (Script::NxDomain, _) => {
            m.set_response_code(ResponseCode::NXDomain);
        }
        (Script::Servfail, _) | (Script::AaaaServfail, RecordType::AAAA) => {
            m.set_response_code(ResponseCode::ServFail);
        }
        (_, RecordType::A) => {
            m.add_answer(a);
        }
        (_, RecordType::AAAA) => {
            m.add_answer(aaaa);
        }
        _ => {}
    }
    m.to_vec().map_err(io::Error::other)
}

#[test]
fn a_and_aaaa_are_asked_at_once() -> io::Result<()> {
    let server = Server::start(Script::AOnlyAfterAaaa)?;
    run(move || {
        let r = server.resolver()?;
        let mut ips = r.lookup_ip("both.test.")?;
        ips.sort();
        assert_eq!(
            ips,
            [IpAddr::V4(V4), IpAddr::V6(V6)],
            "the A answer comes only once the AAAA question was asked: \
             A and AAAA must be in flight together"
        );
        assert_eq!(r.queries_sent(), 2);
        // Both answers are cached: asked again, nothing is sent.
        assert_eq!(r.lookup_ip("both.test.")?.len(), 2);
        assert_eq!(r.queries_sent(), 2);
        drop(server);
        Ok(())
    })
}

#[test]
fn one_family_failing_leaves_the_other_answer() -> io::Result<()> {
    let server = Server::start(Script::AaaaServfail)?;
    run(move || {
        let r = server.resolver()?;
        assert_eq!(r.lookup_ip("v4only.test.")?, [IpAddr::V4(V4)]);
        drop(server);
        Ok(())
    })
}

#[test]
fn both_families_failing_is_the_failure() -> io::Result<()> {
    let nx = Server::start(Script::NxDomain)?;
    let servfail = Server::start(Script::Servfail)?;
    run(move || {
        let e = nx.resolver()?.lookup_ip("nowhere.test.").unwrap_err();
        assert!(
            matches!(DnsError::from_io(&e), Some(DnsError::NxDomain { .. })),
            "{e}"
        );
        let e = servfail.resolver()?.lookup_ip("broken.test.").unwrap_err();
        assert!(
            matches!(DnsError::from_io(&e), Some(DnsError::ServFail { .. })),
            "{e}"
        );
        drop((nx, servfail));
        Ok(())
    })
}

#[test]
fn callers_deadline_is_not_a_dns_error() -> io::Result<()> {
    // The caller's deadline passes while the A answer is held back: the
    // lookup returns the deadline (and stops its AAAA question too), not a
    // DNS error.
    let server = Server::start(Script::AOnlyAfterAaaa)?;
    run(move || {
        let r = server.resolver()?;
        let mut inner = None;
        let outer = coro::with_timeout(Duration::ZERO, || inner = Some(r.lookup_ip("late.test.")));
        assert!(outer.is_err());
        let e = inner.expect("lookup_ip ran").unwrap_err();
        assert!(coro::WaitError::from_io(&e).is_some(), "{e}");
        assert!(DnsError::from_io(&e).is_none(), "{e}");
        drop(server);
        Ok(())
    })
}
