//! The bounded [`channel`]: [`Sender`]s wait while it is full, the
//! [`Receiver`] waits while it is empty.
//!
//! # Design
//!
//! One shared `Chan`: a buffer, a queue of waiting receivers (an item is
//! handed straight into the first one's slot) and a queue of waiting
//! senders. When a receiver takes an item out of the buffer, the slot it
//! frees is *reserved* for the first waiting sender (counted in `reserved`),
//! so a sender that arrives later cannot take it. A sender interrupted after
//! it was given a slot passes the reservation on; a receiver interrupted
//! after it was handed an item puts the item back at the front.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::fmt;
use std::rc::Rc;

use coro_runtime::WaitError;

use super::error::{SendError, TryRecvError, TrySendError};
use crate::waitlist::{self, WaitList};

/// State shared by the senders and the receiver.
struct Chan<T> {
    /// Items waiting for a receiver.
    ///
    /// # Invariant
    /// `buf.len() + reserved <= cap`, except briefly after an interrupted
    /// receiver puts its item back.
    buf: RefCell<VecDeque<T>>,
    cap: usize,
    /// Free slots promised to senders that were woken and have not run yet.
    reserved: Cell<usize>,
    /// Live `Sender` handles.
    senders: Cell<usize>,
    /// The `Receiver` is alive.
    receiver: Cell<bool>,
    /// Threads in `recv`, FIFO; an item (or `None` when the channel closed)
    /// is handed into the payload.
    recv_waiters: RefCell<WaitList<Option<T>>>,
    /// Threads in `send` waiting for room, FIFO.
    send_waiters: RefCell<WaitList<()>>,
}

/// Creates a channel that holds at most `cap` items; returns its two ends.
///
/// The [`Sender`] can be cloned; `recv` returns `Ok(None)` once every sender
/// is gone and the buffer is empty. Sending after the [`Receiver`] is dropped
/// fails with the value in [`SendError::Disconnected`].
///
/// # Fairness
///
/// Waiting senders get room in FIFO order, waiting receivers get items in
/// FIFO order, and neither can be overtaken by a thread that arrives later.
///
/// # Interruption and timeouts
///
/// A blocked `send` that is interrupted or times out returns the value in
/// [`SendError::Wait`]. A blocked `recv` that is interrupted after it was
/// handed an item puts it back at the front of the channel.
///
/// # Panics
///
/// If `cap` is 0 (rendezvous channels are not supported).
///
/// # Examples
///
/// ```
/// coro_runtime::run(|| {
///     let (tx, rx) = coro_sync::channel(2);
///     let producer = coro_runtime::spawn(move || {
///         for i in 0..5 {
///             tx.send(i).unwrap(); // waits while 2 items are queued
///         }
///     }); // tx dropped: the channel closes once drained
///     let mut got = Vec::new();
///     while let Some(i) = rx.recv().unwrap() {
///         got.push(i);
///     }
///     assert_eq!(got, [0, 1, 2, 3, 4]);
///     producer.join().unwrap();
/// });
/// ```
pub fn channel<T>(cap: usize) -> (Sender<T>, Receiver<T>) {
    assert!(
        cap > 0,
        "coro_sync::channel: capacity must be at least 1, got 0"
    );
    let chan = Rc::new(Chan {
        buf: RefCell::new(VecDeque::with_capacity(cap.min(4096))),
        cap,
        reserved: Cell::new(0),
        senders: Cell::new(1),
        receiver: Cell::new(true),
        recv_waiters: RefCell::new(WaitList::new()),
        send_waiters: RefCell::new(WaitList::new()),
    });
    (Sender { chan: chan.clone() }, Receiver { chan })
}

/// The sending end of a [`channel`]; clone it for more senders.
pub struct Sender<T> {
    chan: Rc<Chan<T>>,
}

/// The receiving end of a [`channel`].
///
/// Several green threads may call [`recv`](Receiver::recv) on a shared
/// receiver; they are served in FIFO order.
pub struct Receiver<T> {
    chan: Rc<Chan<T>>,
}

impl<T> Chan<T> {
    /// Hands `item` into the slot of the first waiting receiver and wakes
    /// it; returns the item if no receiver waits.
    fn hand_to_receiver(&self, item: T) -> Result<(), T> {
        let mut w = self.recv_waiters.borrow_mut();
        let Some(k) = w.first_live() else {
            return Err(item);
        };
        *w.data_mut(k) = Some(item);
        w.hand(k);
        Ok(())
    }

    /// Gives `item` to the first receiver that can take it, or buffers it.
    /// The caller has checked there is room (or holds a reservation).
    fn deliver(&self, item: T) {
        if let Err(item) = self.hand_to_receiver(item) {
            self.buf.borrow_mut().push_back(item);
        }
    }

    /// Puts back an item a receiver was handed but could not take: to the
    /// next waiting receiver, or first in the buffer.
    fn give_back(&self, item: T) {
        if let Err(item) = self.hand_to_receiver(item) {
            self.buf.borrow_mut().push_front(item);
        }
    }

    /// Reserves free slots for waiting senders, in order; once the receiver
    /// is gone, wakes them all to fail.
    fn dispatch_send(&self) {
        let mut w = self.send_waiters.borrow_mut();
        loop {
            let closed = !self.receiver.get();
            if !closed && self.buf.borrow().len() + self.reserved.get() >= self.cap {
                return;
            }
            let Some(k) = w.first_live() else { return };
            self.reserved.set(self.reserved.get() + 1);
            w.hand(k);
        }
    }

    /// Hands buffered items to waiting receivers, or `None` to all of them
    /// once the channel is closed and drained.
    fn dispatch_recv(&self) {
        {
            let mut w = self.recv_waiters.borrow_mut();
            let mut buf = self.buf.borrow_mut();
            while let Some(k) = w.first_live() {
                match buf.pop_front() {
                    Some(item) => *w.data_mut(k) = Some(item),
                    None if self.senders.get() == 0 => {}
                    None => break,
                }
                w.hand(k);
            }
        }
        self.dispatch_send();
    }
}

impl<T> Sender<T> {
    /// Sends `value`, waiting while the channel is full.
    ///
    /// # Errors
    ///
    /// * [`SendError::Disconnected`] if the receiver is gone (also if it goes
    ///   while this call waits).
    /// * [`SendError::Wait`] if waiting was cut short (timeout, interrupt,
    ///   shutdown).
    ///
    /// Both hand the value back.
    ///
    /// # Panics
    ///
    /// If it has to wait and the caller is not a green thread.
    pub fn send(&self, value: T) -> Result<(), SendError<T>> {
        match self.try_send(value) {
            Ok(()) => Ok(()),
            Err(TrySendError::Disconnected(v)) => Err(SendError::Disconnected(v)),
            Err(TrySendError::Full(v)) => self.send_slow(v),
        }
    }

    #[cold]
    fn send_slow(&self, value: T) -> Result<(), SendError<T>> {
        let c = &*self.chan;
        let coro = waitlist::current_coro("Sender::send");
        let key = c.send_waiters.borrow_mut().push_back(coro, ());
        c.dispatch_send();
        let r = if c.send_waiters.borrow().is_linked(key) {
            waitlist::wait(
                &c.send_waiters,
                key,
                "Sender::send",
                || c.dispatch_send(),
                |()| {
                    // A slot was reserved for us: pass it on.
                    c.reserved.set(c.reserved.get() - 1);
                    c.dispatch_send();
                },
            )
        } else {
            c.send_waiters.borrow_mut().remove(key);
            Ok(())
        };
        if let Err(e) = r {
            return Err(SendError::Wait(value, e));
        }
        c.reserved.set(c.reserved.get() - 1);
        if !c.receiver.get() {
            return Err(SendError::Disconnected(value));
        }
        c.deliver(value);
        // Handed straight to a receiver, the value left the reserved slot
        // free: the next sender in line may have it.
        if !c.send_waiters.borrow().is_empty() {
            c.dispatch_send();
        }
        Ok(())
    }

    /// Sends `value` if that needs no waiting.
    ///
    /// # Errors
    ///
    /// [`TrySendError::Full`] if the channel is full or other senders wait
    /// for room; [`TrySendError::Disconnected`] if the receiver is gone. Both
    /// hand the value back.
    pub fn try_send(&self, value: T) -> Result<(), TrySendError<T>> {
        let c = &*self.chan;
        if !c.receiver.get() {
            return Err(TrySendError::Disconnected(value));
        }
        if !c.send_waiters.borrow().is_empty() {
            return Err(TrySendError::Full(value));
        }
        let Err(value) = c.hand_to_receiver(value) else {
            return Ok(());
        };
        let mut buf = c.buf.borrow_mut();
        if buf.len() + c.reserved.get() < c.cap {
            buf.push_back(value);
            Ok(())
        } else {
            Err(TrySendError::Full(value))
        }
    }

    /// Whether the receiver is gone (every send would fail).
    pub fn is_closed(&self) -> bool {
        !self.chan.receiver.get()
    }

    /// The channel's capacity.
    pub fn capacity(&self) -> usize {
        self.chan.cap
    }

    /// Number of items queued.
    pub fn len(&self) -> usize {
        self.chan.buf.borrow().len()
    }

    /// Whether no item is queued.
    pub fn is_empty(&self) -> bool {
        self.chan.buf.borrow().is_empty()
    }
}

impl<T> Clone for Sender<T> {
    fn clone(&self) -> Sender<T> {
        self.chan.senders.set(self.chan.senders.get() + 1);
        Sender {
            chan: self.chan.clone(),
        }
    }
}

impl<T> Drop for Sender<T> {
    /// The last sender out closes the channel: waiting receivers get
    /// `Ok(None)` once the buffer is drained. Never blocks.
    fn drop(&mut self) {
        let n = self.chan.senders.get() - 1;
        self.chan.senders.set(n);
        if n == 0 {
            self.chan.dispatch_recv();
        }
    }
}

impl<T> fmt::Debug for Sender<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sender")
            .field("len", &self.len())
            .field("capacity", &self.chan.cap)
            .field("closed", &self.is_closed())
            .finish()
    }
}

impl<T> Receiver<T> {
    /// Receives the next item, waiting while the channel is empty.
    ///
    /// Returns `Ok(None)` once every [`Sender`] is gone and the buffer is
    /// drained.
    ///
    /// # Errors
    ///
    /// [`WaitError`] if waiting was cut short (timeout, interrupt, shutdown).
    ///
    /// # Panics
    ///
    /// If it has to wait and the caller is not a green thread.
    pub fn recv(&self) -> Result<Option<T>, WaitError> {
        match self.try_recv() {
            Ok(v) => return Ok(Some(v)),
            Err(TryRecvError::Disconnected) => return Ok(None),
            Err(TryRecvError::Empty) => {}
        }
        let c = &*self.chan;
        let coro = waitlist::current_coro("Receiver::recv");
        let key = c.recv_waiters.borrow_mut().push_back(coro, None);
        waitlist::wait(
            &c.recv_waiters,
            key,
            "Receiver::recv",
            || c.dispatch_recv(),
            |item| {
                if let Some(item) = item {
                    c.give_back(item);
                }
            },
        )
    }

    /// Receives the next item if one is queued.
    ///
    /// # Errors
    ///
    /// [`TryRecvError::Empty`] if none is queued,
    /// [`TryRecvError::Disconnected`] if none is queued and every sender is
    /// gone.
    pub fn try_recv(&self) -> Result<T, TryRecvError> {
        let c = &*self.chan;
        let item = c.buf.borrow_mut().pop_front();
        match item {
            Some(v) => {
                if !c.send_waiters.borrow().is_empty() {
                    c.dispatch_send();
                }
                Ok(v)
            }
            None if c.senders.get() == 0 => Err(TryRecvError::Disconnected),
            None => Err(TryRecvError::Empty),
        }
    }

    /// Whether every sender is gone (the channel ends once drained).
    pub fn is_closed(&self) -> bool {
        self.chan.senders.get() == 0
    }

    /// The channel's capacity.
    pub fn capacity(&self) -> usize {
        self.chan.cap
    }

    /// Number of items queued.
    pub fn len(&self) -> usize {
        self.chan.buf.borrow().len()
    }

    /// Whether no item is queued.
    pub fn is_empty(&self) -> bool {
        self.chan.buf.borrow().is_empty()
    }
}

impl<T> Drop for Receiver<T> {
    /// Closes the channel: queued items are dropped and waiting senders fail
    /// with [`SendError::Disconnected`]. Never blocks.
    fn drop(&mut self) {
        let c = &*self.chan;
        c.receiver.set(false);
        let items = std::mem::take(&mut *c.buf.borrow_mut());
        c.dispatch_send();
        drop(items);
    }
}

impl<T> fmt::Debug for Receiver<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Receiver")
            .field("len", &self.len())
            .field("capacity", &self.chan.cap)
            .field("closed", &self.is_closed())
            .finish()
    }
}
