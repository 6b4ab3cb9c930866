//! The scripted DNS server of the resolver tests: a real UDP socket (and
//! a TCP listener on the same port) on loopback, on green threads of the
//! test's runtime, that a test programs to answer well, badly, late, or
//! not at all; with builders for the messages and records it sends.

#![allow(dead_code)]

use std::cell::{Cell, RefCell};
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddr};
use std::rc::Rc;
use std::time::Duration;

use coro::net::dns::{Config, DnsError, Resolver};
use coro::net::{TcpListener, UdpSocket};
use hickory_proto::op::{Message, MessageType, OpCode, ResponseCode};
use hickory_proto::rr::rdata::{A, CNAME, SOA};
use hickory_proto::rr::{Name, RData, Record, RecordType};

/// What the scripted server does with one query.
pub enum Act {
    /// Sends these bytes from the server's socket.
    Send(Vec<u8>),
    /// Sends these bytes from another socket (a spoofer).
    SendFromElsewhere(Vec<u8>),
    /// Waits.
    Sleep(Duration),
}

/// The scripted server.
pub struct Peer {
    /// Where it listens (UDP, and TCP if it has a TCP side).
    pub addr: SocketAddr,
    udp: Rc<UdpSocket>,
    tcp: Option<Rc<TcpListener>>,
    /// Queries received over UDP, with their source.
    pub seen: Rc<RefCell<Vec<(Message, SocketAddr)>>>,
    /// Queries received over TCP.
    pub tcp_seen: Rc<Cell<usize>>,
}

impl Drop for Peer {
    fn drop(&mut self) {
        self.udp.close();
        if let Some(t) = &self.tcp {
            t.close();
        }
    }
}

impl Peer {
    /// Queries received over UDP.
    pub fn queries(&self) -> usize {
        self.seen.borrow().len()
    }

    /// Queries for `name` (as [`qname`] gives it) and `rtype` received
    /// over UDP.
    pub fn asked(&self, name: &str, rtype: RecordType) -> usize {
        self.seen
            .borrow()
            .iter()
            .filter(|(q, _)| qname(q) == name && q.queries()[0].query_type() == rtype)
            .count()
    }
}

/// A server answering each UDP query with `udp(query)`'s acts (in a green
/// thread of its own per query, so a sleeping answer does not hold up the
/// next query).
pub fn peer(udp: impl Fn(&Message) -> Vec<Act> + 'static) -> io::Result<Peer> {
    peer_with_tcp(udp, None::<fn(&Message) -> Vec<u8>>)
}

/// As [`peer`], with a TCP listener on the same port whose answer to a
/// query is `tcp(query)` (raw bytes, length prefix included).
pub fn peer_with_tcp(
    udp: impl Fn(&Message) -> Vec<Act> + 'static,
    tcp: Option<impl Fn(&Message) -> Vec<u8> + 'static>,
) -> io::Result<Peer> {
    let (sock, listener) = loop {
        let sock = UdpSocket::bind("127.0.0.1:0")?;
        if tcp.is_none() {
            break (sock, None);
        }
        // The TCP listener needs the same port: retry if it is taken.
        if let Ok(l) = TcpListener::bind(sock.local_addr()?) {
            break (sock, Some(Rc::new(l)));
        }
    };
    let addr = sock.local_addr()?;
    let udp_sock = Rc::new(sock);
    let seen = Rc::new(RefCell::new(Vec::new()));
    let tcp_seen = Rc::new(Cell::new(0));
    let handler = Rc::new(udp);
    {
        let (sock, seen) = (udp_sock.clone(), seen.clone());
        coro::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok((n, from)) = sock.recv_from(&mut buf) {
                let q = Message::from_vec(&buf[..n]).expect("the resolver's query parses");
                seen.borrow_mut().push((q.clone(), from));
                let (sock, handler) = (sock.clone(), handler.clone());
                coro::spawn(move || {
                    for act in handler(&q) {
                        match act {
                            Act::Send(b) => {
                                let _ = sock.send_to(&b, from);
                            }
                            Act::SendFromElsewhere(b) => {
                                let other = UdpSocket::bind("127.0.0.1:0").unwrap();
                                other.send_to(&b, from).unwrap();
                            }
                            Act::Sleep(d) => {
                                let _ = coro::sleep(d);
                            }
                        }
                    }
                });
            }
        });
    }
    if let (Some(l), Some(tcp)) = (&listener, tcp) {
        let (l, count) = (l.clone(), tcp_seen.clone());
        coro::spawn(move || {
            while let Ok((mut s, _)) = l.accept() {
                let mut len = [0u8; 2];
                s.read_exact(&mut len).unwrap();
                let mut q = vec![0u8; u16::from_be_bytes(len).into()];
                s.read_exact(&mut q).unwrap();
                count.set(count.get() + 1);
                let _ = s.write_all(&tcp(&Message::from_vec(&q).unwrap()));
            }
        });
    }
    Ok(Peer {
        addr,
        udp: udp_sock,
        tcp: listener,
        seen,
        tcp_seen,
    })
}

/// A resolver for `servers` with short timeouts.
pub fn resolver(servers: &[&Peer], attempts: usize) -> io::Result<Resolver> {
    let mut c = Config::with_servers(servers.iter().map(|p| p.addr).collect());
    c.timeout = Duration::from_millis(300);
    c.attempts = attempts;
    Resolver::new(c)
}

pub fn name(s: &str) -> Name {
    Name::from_ascii(s).unwrap()
}

/// A response to `q` with `rcode`, its question echoed.
pub fn response(q: &Message, rcode: ResponseCode) -> Message {
    let mut m = Message::new();
    m.set_id(q.id())
        .set_message_type(MessageType::Response)
        .set_op_code(OpCode::Query)
        .set_recursion_desired(true)
        .set_recursion_available(true)
        .set_response_code(rcode)
        .add_queries(q.queries().to_vec());
    m
}

/// `message` as sent over TCP: its length first (RFC 7766 §8).
pub fn framed(message: Vec<u8>) -> Vec<u8> {
    let mut out = u16::try_from(message.len())
        .expect("a message below 64 KiB")
        .to_be_bytes()
        .to_vec();
    out.extend_from_slice(&message);
    out
}

/// A NOERROR response to `q` with these answers.
pub fn answer(q: &Message, records: Vec<Record>) -> Vec<u8> {
    let mut m = response(q, ResponseCode::NoError);
    m.add_answers(records);
    m.to_vec().unwrap()
}

pub fn a(owner: &str, ttl: u32, ip: [u8; 4]) -> Record {
    Record::from_rdata(name(owner), ttl, RData::A(A(Ipv4Addr::from(ip))))
}

pub fn cname(owner: &str, target: &str) -> Record {
    cname_ttl(owner, target, 300)
}

pub fn cname_ttl(owner: &str, target: &str, ttl: u32) -> Record {
    Record::from_rdata(name(owner), ttl, RData::CNAME(CNAME(name(target))))
}

pub fn soa(zone: &str, ttl: u32, minimum: u32) -> Record {
    let rdata = SOA::new(
        name("ns.test."),
        name("admin.test."),
        1,
        3600,
        600,
        86400,
        minimum,
    );
    Record::from_rdata(name(zone), ttl, RData::SOA(rdata))
}

/// The `DnsError` of a failed lookup.
#[track_caller]
pub fn dns_err<T: std::fmt::Debug>(r: io::Result<T>) -> DnsError {
    let e = r.expect_err("the lookup should fail");
    DnsError::from_io(&e)
        .unwrap_or_else(|| panic!("not a DnsError: {e}"))
        .clone()
}

/// The question's name, lower-cased, without the dot.
pub fn qname(q: &Message) -> String {
    q.queries()[0]
        .name()
        .to_ascii()
        .to_lowercase()
        .trim_end_matches('.')
        .to_owned()
}
