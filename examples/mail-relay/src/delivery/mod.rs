//! Delivery: the seam between the queue and where mail goes.
//!
//! The queue ([`crate::queue`]) splits each message's recipients by
//! destination ([`route`]) and hands a destination's [`Transport`] jobs: a
//! message and the recipients it is to get there. The transport says, per
//! job and per recipient, what became of them; the queue owns the policy
//! around it (remove what was sent, retry what was deferred, bounce what
//! failed, report what the sender asked for, see [`report`]). Three transports: [`Maildir`] (local delivery),
//! [`smtp`] (an upstream over SMTP, connections kept in a `GroupPool`) and
//! [`mx`] (each domain's mail exchangers, through the same cache).

mod maildir;
pub mod mx;
pub mod report;
pub mod route;
pub mod smtp;

use std::fmt;
use std::sync::Arc;

pub use maildir::Maildir;

use crate::spool::Stored;

/// One delivery request: a message and the recipients (indices into its
/// envelope's list) to deliver it to at one destination. The content is
/// read from the spool as the transport sends it.
#[derive(Debug, Clone)]
pub struct Job {
    /// The message.
    pub msg: Arc<Stored>,
    /// Envelope indices of the recipients, ascending.
    pub rcpts: Vec<usize>,
}

impl Job {
    /// The recipients' addresses.
    pub fn addresses(&self) -> impl Iterator<Item = &str> {
        self.rcpts.iter().map(|&i| self.msg.env.rcpts[i].as_str())
    }
}

/// Why a recipient got its status, for the log, `mailq` and bounces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Detail {
    /// RFC 3463 status code (`2.0.0`, `4.4.1`, `5.1.1`).
    pub dsn: String,
    /// The text for humans, Postfix-style: `host x[1.2.3.4] said: 450
    /// 4.3.0 busy (in reply to RCPT TO command)`.
    pub text: String,
    /// The remote server's reply, when there was one (a bounce's
    /// `Diagnostic-Code: smtp; ...`).
    pub reply: Option<String>,
    /// The remote server's name, when one was talked to (a bounce's
    /// `Remote-MTA`).
    pub remote: Option<String>,
}

impl Detail {
    /// A detail with no remote server involved.
    pub fn local(dsn: &str, text: impl Into<String>) -> Detail {
        Detail {
            dsn: dsn.to_owned(),
            text: text.into(),
            reply: None,
            remote: None,
        }
    }
}

impl fmt::Display for Detail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// Who tells a sender who asked (NOTIFY=SUCCESS) that a recipient's
/// copy was delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handoff {
    /// Delivered here (the Maildir): we report `delivered`.
    Delivered,
    /// Sent on to a next hop that does not announce DSN: we report
    /// `relayed` (RFC 3461 §5.2.2), the last word the sender will get.
    Relayed,
    /// Sent on to a next hop that announces DSN, with the request: it
    /// reports, we do not.
    PassedOn,
}

/// What became of one recipient.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// Delivered (here or to the next hop), and who reports it.
    Sent(Detail, Handoff),
    /// Not now; try again later.
    Deferred(Detail),
    /// Never: a permanent failure, bounced to the sender.
    Bounced(Detail),
}

impl Status {
    /// The detail, whatever the status.
    pub fn detail(&self) -> &Detail {
        match self {
            Status::Sent(d, _) | Status::Deferred(d) | Status::Bounced(d) => d,
        }
    }

    /// `sent`, `deferred` or `bounced`, as the log says it.
    pub fn word(&self) -> &'static str {
        match self {
            Status::Sent(..) => "sent",
            Status::Deferred(_) => "deferred",
            Status::Bounced(_) => "bounced",
        }
    }
}

/// What became of one job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// Where it went (`maildir`, an upstream's `host[ip]:port`).
    pub relay: String,
    /// One status per recipient of the job, in the job's order.
    pub rcpts: Vec<Status>,
    /// The destination itself failed (no connection could be made): the
    /// queue suspends it for a while instead of trying each message.
    pub dest_failed: bool,
    /// How many messages the connection carried, this one included
    /// (`conn_use=` in the log); 0 when not applicable.
    pub conn_use: u64,
}

impl Outcome {
    /// The same status for every recipient of `job`.
    pub fn all(relay: &str, job: &Job, status: Status) -> Outcome {
        Outcome {
            relay: relay.to_owned(),
            rcpts: vec![status; job.rcpts.len()],
            dest_failed: false,
            conn_use: 0,
        }
    }
}

/// Somewhere messages can be delivered.
///
/// Called on a green thread in plain blocking style: an implementation
/// waits on sockets or on `coro::blocking` and returns when the jobs are
/// done, one [`Outcome`] per job, in order.
pub trait Transport {
    /// Delivers `jobs` (at most [`batch_limit`](Transport::batch_limit)).
    fn deliver(&self, jobs: &[Job]) -> Vec<Outcome>;

    /// Where this transport delivers, for the startup line and the log.
    fn describe(&self) -> String;

    /// Jobs handed to one `deliver` call at most (a Maildir syncs a batch
    /// together; an SMTP connection carries one message at a time).
    fn batch_limit(&self) -> usize;

    /// `deliver` calls running at once at most (the destination's
    /// concurrency limit).
    fn concurrency(&self) -> usize;

    /// Lifts suspensions the transport keeps itself (`flush`); by default
    /// there are none.
    fn resume(&self) {}
}
