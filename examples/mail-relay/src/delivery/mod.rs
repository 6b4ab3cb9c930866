//! Delivery: the seam between the queue and where mail goes.
//!
//! A [`Transport`] takes a batch of spooled messages and says, per message
//! and per recipient, what became of them. The queue ([`crate::queue`])
//! owns the policy around it (remove what was sent, retry what was
//! deferred). Part 1 has one transport, [`Maildir`] (local delivery when no
//! upstream is configured); part 2 adds SMTP to an upstream beside it,
//! behind the same trait.

mod maildir;

use std::sync::Arc;

pub use maildir::Maildir;

use crate::spool::Message;

/// What became of one recipient.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// Delivered; the text says where (a file name, an upstream's reply).
    Sent(String),
    /// Not now; try again later. The text says why.
    Deferred(String),
    /// Never: a permanent failure (part 2 bounces it to the sender). The
    /// Maildir transport has no permanent failures; the SMTP one (part 2)
    /// gets them as 5xx replies.
    #[allow(dead_code)]
    Bounced(String),
}

/// What became of one message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// Where it went (`maildir`, an upstream's `host[ip]:port`).
    pub relay: String,
    /// One status per envelope recipient, in envelope order.
    pub rcpts: Vec<Status>,
}

impl Outcome {
    /// The same status for every recipient of `msg`.
    pub fn all(relay: &str, msg: &Message, status: Status) -> Outcome {
        Outcome {
            relay: relay.to_owned(),
            rcpts: vec![status; msg.env.rcpts.len()],
        }
    }
}

/// Somewhere messages can be delivered.
///
/// Called on a green thread in plain blocking style: an implementation
/// waits on sockets or on `coro::blocking` and returns when the batch is
/// done, one [`Outcome`] per message, in order.
pub trait Transport {
    /// Delivers `batch`.
    fn deliver(&self, batch: &[Arc<Message>]) -> Vec<Outcome>;

    /// Where this transport delivers, for the startup line.
    fn describe(&self) -> String;
}
