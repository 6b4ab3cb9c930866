//! What one server's reply means: an answer to the question, a reason to
//! ask again another way (over TCP, without EDNS0), or a failure that
//! sends the resolver to the next server.
//!
//! # Design
//!
//! Every reply a server sends, whichever path fetched it (UDP with EDNS0,
//! the retry without, TCP), is judged by [`judge`] and by nothing else, so
//! a rule that holds for one path holds for all: an incomplete (truncated)
//! reply is never read as an answer, a failure code never as "no
//! records". Only a [`Verdict::Answer`] goes on to the cache and to the
//! reading of records.

use std::net::SocketAddr;

use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::Name;

use super::error::DnsError;
use super::transport::{Outgoing, Via};

/// What to do with a reply.
#[derive(Debug)]
pub(crate) enum Verdict {
    /// It answers the question: records, "no such records" (NODATA) or
    /// "no such name" (NXDOMAIN), complete.
    Answer,
    /// Truncated over UDP: ask the same server the same query over TCP
    /// (RFC 7766 §5).
    OverTcp,
    /// FORMERR to a query with EDNS0: ask the same server without it, on
    /// the same transport (RFC 6891 §7).
    WithoutEdns,
    /// The server failed or cannot answer: try the next one.
    Fail(DnsError),
}

/// Judges `m`, the reply from `server` to `q` (asked about `name`) over
/// `via`, already checked to answer `q` (its id and question).
///
/// `OverTcp` comes only for a UDP reply and `WithoutEdns` only for a query
/// with EDNS0, so a caller that follows them asks at most four times.
pub(crate) fn judge(
    server: SocketAddr,
    name: &Name,
    q: &Outgoing,
    m: &Message,
    via: Via,
) -> Verdict {
    // An incomplete reply says nothing about the question, whatever its
    // code (RFC 2181 §9).
    if m.truncated() {
        return match via {
            Via::Udp => Verdict::OverTcp,
            Via::Tcp => Verdict::Fail(DnsError::Truncated { server }),
        };
    }
    match m.response_code() {
        ResponseCode::NoError if m.answers().is_empty() && !speaks_for(m) => {
            // No records, from a server that neither recurses nor holds
            // the zone: a referral, not a statement that the name has no
            // such records (glibc moves to the next server too).
            Verdict::Fail(DnsError::NotRecursive {
                name: name.to_string(),
                server,
            })
        }
        ResponseCode::NoError | ResponseCode::NXDomain => Verdict::Answer,
        ResponseCode::FormErr if q.edns => Verdict::WithoutEdns,
        ResponseCode::ServFail => Verdict::Fail(DnsError::ServFail {
            name: name.to_string(),
            server,
        }),
        other => Verdict::Fail(DnsError::Refused {
            name: name.to_string(),
            server,
            rcode: other.to_string(),
        }),
    }
}

/// Whether the server may state that a name has no records: it recursed
/// for us (RA) or holds the zone (AA).
fn speaks_for(m: &Message) -> bool {
    m.recursion_available() || m.authoritative()
}
