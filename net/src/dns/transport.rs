//! One exchange with one server: a query out, its answer back and
//! checked, over UDP (a fresh socket per query) or TCP.
//!
//! The checks here are the wire's: the reply parses, comes from the
//! server, carries the query's id and question, and fits the size the
//! query allowed. What a checked reply means (an answer, a retry, a
//! failure) is decided in `reply.rs`.
//!
//! # Design
//!
//! Each UDP query gets a socket of its own, bound to port 0 (the kernel
//! picks a random ephemeral port, `ip_local_port_range`) and connected to
//! the server, and a query id from the OS CSPRNG: an off-path attacker must
//! guess both (RFC 5452). A datagram from another address, or with another
//! id, is dropped and the wait goes on; one from the server with the right
//! id that does not parse, is larger than the query allowed, or answers
//! another question ends the exchange with an error. The per-server
//! timeout is a `with_timeout` scope around the whole exchange; a deadline
//! of the caller's that passes first ends it with the caller's error, not
//! a [`DnsError`].

use std::io::{self, Read, Write};
use std::net::SocketAddr;

use hickory_proto::op::{Edns, Message, MessageType, OpCode, Query};
use hickory_proto::rr::{DNSClass, Name, RecordType};

use super::config::Config;
use super::error::DnsError;
use crate::{TcpStream, UdpSocket};

/// Why an exchange with one server failed.
#[derive(Debug)]
pub(crate) enum Fail {
    /// The server's fault or the network's: try the next server.
    Dns(DnsError),
    /// No answer within the per-server timeout; `dropped` datagrams did
    /// not match and were ignored.
    Timeout { dropped: usize },
    /// The caller's own deadline or interruption, or a local resource
    /// error (no fd for a socket): ends the lookup as it is.
    Caller(io::Error),
}

/// The transport an exchange uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Via {
    /// One datagram each way, of at most the size the query allows.
    Udp,
    /// A connection of its own (RFC 7766).
    Tcp,
}

/// A query ready to send.
#[derive(Debug)]
pub(crate) struct Outgoing {
    /// Its id.
    pub id: u16,
    /// The question.
    pub query: Query,
    /// The encoded message.
    pub bytes: Vec<u8>,
    /// It carries an EDNS0 record.
    pub edns: bool,
    /// The largest UDP answer it allows: the EDNS0 payload size it
    /// advertises, 512 bytes without EDNS0 (RFC 1035 §4.2.1).
    pub udp_limit: usize,
}

impl Outgoing {
    /// A recursive query for `name`/`rtype` with a fresh random id, and an
    /// EDNS0 record advertising `edns_payload` unless that is 0.
    pub fn new(name: &Name, rtype: RecordType, edns_payload: u16) -> io::Result<Outgoing> {
        let mut id = [0u8; 2];
        getrandom::fill(&mut id)
            .map_err(|e| io::Error::other(format!("dns: no random query id: {e}")))?;
        let id = u16::from_ne_bytes(id);
        let query = Query::query(name.clone(), rtype);
        let mut m = Message::new();
        m.set_id(id)
            .set_message_type(MessageType::Query)
            .set_op_code(OpCode::Query)
            .set_recursion_desired(true)
            .add_query(query.clone());
        if edns_payload != 0 {
            let mut e = Edns::new();
            e.set_max_payload(edns_payload).set_version(0);
            m.set_edns(e);
        }
        let bytes = m.to_vec().map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("dns: cannot encode a query for {name}: {e}"),
            )
        })?;
        Ok(Outgoing {
            id,
            query,
            bytes,
            edns: edns_payload != 0,
            udp_limit: if edns_payload == 0 {
                512
            } else {
                usize::from(edns_payload)
            },
        })
    }
}

/// Sends `q` to `server` over `via` and waits for its answer, checked
/// against the query (not yet judged: see `reply.rs`).
pub(crate) fn exchange(
    server: SocketAddr,
    q: &Outgoing,
    via: Via,
    cfg: &Config,
) -> Result<Message, Fail> {
    match via {
        Via::Udp => udp(server, q, cfg),
        Via::Tcp => tcp(server, q, cfg),
    }
}

/// Sends `q` to `server` over UDP and waits for its answer.
fn udp(server: SocketAddr, q: &Outgoing, cfg: &Config) -> Result<Message, Fail> {
    let local = if server.is_ipv4() {
        "0.0.0.0:0"
    } else {
        "[::]:0"
    };
    let sock = UdpSocket::bind(local).map_err(Fail::Caller)?;
    let limit = q.udp_limit;
    let mut dropped = 0;
    let mut buf = vec![0u8; limit + 1];
    let r = coro_runtime::with_timeout(cfg.timeout, || -> Result<Message, Fail> {
        sock.connect(server).map_err(|e| sock_fail(server, e))?;
        sock.send(&q.bytes).map_err(|e| sock_fail(server, e))?;
        loop {
            let (n, from) = sock.recv_from(&mut buf).map_err(|e| sock_fail(server, e))?;
            // The socket is connected, so the kernel filters on the source
            // already; checked again so the rule does not rest on that.
            if from != server || n < 2 || u16::from_be_bytes([buf[0], buf[1]]) != q.id {
                dropped += 1;
                log::debug!(
                    "dns: dropped a datagram of {n} bytes from {from} (expected {server}, id {})",
                    q.id
                );
                continue;
            }
            if n > limit {
                return Err(Fail::Dns(DnsError::Oversized {
                    server,
                    len: n,
                    limit,
                }));
            }
            return parse(server, &buf[..n], q);
        }
    });
    match r {
        Ok(r) => r,
        Err(coro_runtime::Timeout) => Err(Fail::Timeout { dropped }),
    }
}

/// Sends `q` to `server` over TCP (RFC 7766: a two-byte length before each
/// message) and reads its answer.
fn tcp(server: SocketAddr, q: &Outgoing, cfg: &Config) -> Result<Message, Fail> {
    let r = coro_runtime::with_timeout(cfg.timeout, || -> Result<Message, Fail> {
        let mut s = TcpStream::connect(server).map_err(|e| sock_fail(server, e))?;
        let len = u16::try_from(q.bytes.len()).expect("a query is far below 64 KiB");
        let mut out = Vec::with_capacity(q.bytes.len() + 2);
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(&q.bytes);
        s.write_all(&out).map_err(|e| sock_fail(server, e))?;
        let mut len = [0u8; 2];
        s.read_exact(&mut len)
            .map_err(|e| tcp_read_fail(server, e))?;
        let mut buf = vec![0u8; usize::from(u16::from_be_bytes(len))];
        s.read_exact(&mut buf)
            .map_err(|e| tcp_read_fail(server, e))?;
        parse(server, &buf, q)
    });
    match r {
        Ok(r) => r,
        Err(coro_runtime::Timeout) => Err(Fail::Timeout { dropped: 0 }),
    }
}

/// A socket error: the caller's (a wait cut short, no fds) or the server's.
fn sock_fail(server: SocketAddr, e: io::Error) -> Fail {
    if coro_runtime::WaitError::from_io(&e).is_some()
        || e.kind() == io::ErrorKind::TimedOut
        || crate::is_fd_exhaustion(&e)
    {
        Fail::Caller(e)
    } else {
        Fail::Dns(DnsError::Unreachable {
            server,
            why: e.to_string(),
        })
    }
}

/// A TCP read error: the connection closing early is a truncated answer.
fn tcp_read_fail(server: SocketAddr, e: io::Error) -> Fail {
    if e.kind() == io::ErrorKind::UnexpectedEof {
        Fail::Dns(DnsError::Truncated { server })
    } else {
        sock_fail(server, e)
    }
}

/// Decodes an answer and checks it answers `q`.
fn parse(server: SocketAddr, bytes: &[u8], q: &Outgoing) -> Result<Message, Fail> {
    let malformed = |why: String| Fail::Dns(DnsError::Malformed { server, why });
    let mismatched = |why: String| Fail::Dns(DnsError::Mismatched { server, why });
    let m =
        Message::from_vec(bytes).map_err(|e| malformed(format!("{e} ({} bytes)", bytes.len())))?;
    if m.message_type() != MessageType::Response {
        return Err(malformed("a query, not a response".into()));
    }
    if m.id() != q.id {
        return Err(mismatched(format!("id {} instead of {}", m.id(), q.id)));
    }
    if m.op_code() != OpCode::Query {
        return Err(malformed(format!("opcode {:?}", m.op_code())));
    }
    match m.queries() {
        [asked] => {
            if asked.name() != q.query.name()
                || asked.query_type() != q.query.query_type()
                || asked.query_class() != DNSClass::IN
            {
                return Err(mismatched(format!(
                    "the question is {} {} {}, not {} {} IN",
                    asked.name(),
                    asked.query_class(),
                    asked.query_type(),
                    q.query.name(),
                    q.query.query_type()
                )));
            }
        }
        // A server that cannot parse a query may not echo it (FORMERR,
        // NOTIMP); an answer needs the question.
        [] if !m.truncated() && !settles(m.response_code()) => {}
        qs => return Err(mismatched(format!("{} questions instead of 1", qs.len()))),
    }
    Ok(m)
}

/// Whether `rc` answers the question (an answer, or "no such name").
fn settles(rc: hickory_proto::op::ResponseCode) -> bool {
    use hickory_proto::op::ResponseCode;
    matches!(rc, ResponseCode::NoError | ResponseCode::NXDomain)
}
