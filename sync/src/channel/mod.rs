//! Queues between green threads: the unbounded [`Fifo`] and the bounded
//! [`channel`].
//!
//! Both hand an item straight to the first waiting receiver, in FIFO order,
//! and give it back to the queue (at the front) if that receiver is
//! interrupted or times out before it runs: nothing is lost.

mod bounded;
mod error;
mod fifo;

pub use bounded::{channel, Receiver, Sender};
pub use error::{SendError, TryRecvError, TrySendError};
pub use fifo::Fifo;
