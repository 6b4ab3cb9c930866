//! The delivery queue: takes committed messages, hands them to the
//! [`Transport`] in batches, removes what was delivered from the spool,
//! and retries what was deferred after `retry_delay`.
//!
//! One green thread runs [`Queue::run`]: it takes everything waiting (a
//! batch shares the transport's fsyncs, as commits share the spool's),
//! delivers it, logs one line per recipient, and removes the delivered
//! messages from the spool. Deferred messages wait in memory (part 2 keeps
//! their retry state in the spool and schedules them on a periodic
//! executor). At stop, [`Queue::stop`] lets the batch in flight finish and
//! leaves the rest queued in the spool for the next start.

use std::cell::Cell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use coro::sync::{Fifo, Mutex};

use crate::delivery::{Status, Transport};
use crate::spool::{Message, Spool};

/// The delivery queue (cheap to clone: a handle).
#[derive(Clone)]
pub struct Queue {
    inner: Rc<Inner>,
}

struct Inner {
    /// Messages waiting for a delivery attempt, oldest first.
    active: Fifo<Arc<Message>>,
    /// Held while a batch is being delivered; `stop` takes it to wait for
    /// the batch in flight.
    busy: Mutex<()>,
    /// Set by `stop`: no new batch starts.
    stopping: Cell<bool>,
    /// The green thread running `run`, once it runs.
    runner: std::cell::RefCell<Option<coro::Coro>>,
    transport: Box<dyn Transport>,
    retry_delay: Duration,
}

impl std::fmt::Debug for Queue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queue")
            .field("active", &self.inner.active.len())
            .finish()
    }
}

impl Queue {
    /// A queue delivering through `transport`.
    pub fn new(transport: Box<dyn Transport>, retry_delay: Duration) -> Queue {
        Queue {
            inner: Rc::new(Inner {
                active: Fifo::new(),
                busy: Mutex::new(()),
                stopping: Cell::new(false),
                runner: Default::default(),
                transport,
                retry_delay,
            }),
        }
    }

    /// Where the transport delivers.
    pub fn describe(&self) -> String {
        self.inner.transport.describe()
    }

    /// Queues a committed message for delivery.
    pub fn enqueue(&self, msg: Arc<Message>) {
        self.inner.active.push(msg);
    }

    /// Messages waiting for an attempt.
    pub fn len(&self) -> usize {
        self.inner.active.len()
    }

    /// The delivery loop; returns after [`stop`](Queue::stop).
    pub fn run(&self, spool: &Spool) {
        let inner = &self.inner;
        *inner.runner.borrow_mut() = Some(coro::current());
        while !inner.stopping.get() {
            let Ok(batch) = inner.active.pop_all() else {
                break;
            };
            let Ok(_busy) = inner.busy.lock() else {
                break;
            };
            if inner.stopping.get() {
                break;
            }
            let outcomes = inner.transport.deliver(&batch);
            let mut done = Vec::new();
            for (msg, outcome) in batch.iter().zip(outcomes) {
                let delay = SystemTime::now()
                    .duration_since(msg.env.arrival)
                    .unwrap_or_default()
                    .as_secs_f64();
                let mut deferred = false;
                for (rcpt, status) in msg.env.rcpts.iter().zip(&outcome.rcpts) {
                    let (word, text) = match status {
                        Status::Sent(t) => ("sent", t),
                        Status::Deferred(t) => {
                            deferred = true;
                            ("deferred", t)
                        }
                        Status::Bounced(t) => ("bounced", t),
                    };
                    log::info!(
                        "{}: to=<{rcpt}>, relay={}, delay={delay:.2}, status={word} ({text})",
                        msg.env.id,
                        outcome.relay
                    );
                }
                if deferred {
                    self.retry_later(msg.clone());
                } else {
                    done.push(msg.env.id.clone());
                }
            }
            match spool.remove(&done) {
                Ok(()) => done.iter().for_each(|id| log::info!("{id}: removed")),
                Err(e) => log::warn!(
                    "removing {} delivered messages from the spool: {e}",
                    done.len()
                ),
            }
        }
    }

    /// Puts `msg` back after the retry delay.
    fn retry_later(&self, msg: Arc<Message>) {
        let q = self.clone();
        let delay = self.inner.retry_delay;
        let spawned = coro::Builder::new()
            .name(format!("retry {}", msg.env.id))
            .spawn(move || {
                if coro::sleep(delay).is_ok() {
                    q.enqueue(msg);
                }
            });
        if let Err(e) = spawned {
            log::warn!("cannot schedule a retry: {e}; the message stays in the spool");
        }
    }

    /// Stops the loop: waits for the batch in flight, then ends the loop.
    /// Messages still queued stay in the spool.
    pub fn stop(&self) {
        let inner = &self.inner;
        inner.stopping.set(true);
        let guard = inner.busy.lock();
        if let Some(runner) = inner.runner.borrow().as_ref() {
            let _ = runner.interrupt();
        }
        drop(guard);
    }
}
