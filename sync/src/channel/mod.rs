//! Queues between green threads: the unbounded [`Fifo`], the channels of
//! one runtime ([`channel`], [`sync_channel`]), and the [`remote`] channel
//! that any OS thread or runtime can send into.
//!
//! All of them hand an item straight to the first waiting receiver, in FIFO
//! order, and give it back to the queue (at the front) if that receiver is
//! interrupted or times out before it runs: nothing is lost.

mod error;
mod fifo;
mod local;
pub(crate) mod remote;

pub use error::{RecvError, SendError, TryRecvError, TrySendError};
pub use fifo::Fifo;
pub use local::{channel, sync_channel, IntoIter, Iter, Receiver, Sender, TryIter};
