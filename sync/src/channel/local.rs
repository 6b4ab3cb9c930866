//! Channels between the green threads of one runtime, in the shapes of
//! `std::sync::mpsc`: the unbounded [`channel`], the bounded
//! [`sync_channel`] and its rendezvous form `sync_channel(0)`. The
//! [`Receiver`] waits while the channel is empty; a bounded [`Sender`] waits
//! while it is full.
//!
//! # Design
//!
//! One shared `Chan`: a buffer, a queue of waiting receivers (an item is
//! handed straight into the first one's slot) and a queue of waiting
//! senders. An unbounded channel is a bounded one whose capacity is never
//! reached.
//!
//! Waiting senders are given *room* in FIFO order, counted in `reserved` so
//! that a sender arriving later cannot take it: room in the buffer for a
//! bounded channel, a waiting receiver for a rendezvous channel. A sender
//! keeps its value until it runs with its room: a sender interrupted (or
//! timed out) after it was given room passes the room on and gets its value
//! back in the error, so a send that fails never delivered. A rendezvous
//! sender whose receiver left before it ran queues again at the front.
//!
//! A receiver interrupted after it was handed an item puts the item back at
//! the front (or hands it to the next waiting receiver), so nothing is lost;
//! the buffer may then hold one item beyond the capacity until it is taken.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::fmt;
use std::iter::FusedIterator;
use std::rc::Rc;

use super::error::{RecvError, SendError, TryRecvError, TrySendError};
use crate::waitlist::{self, WaitList};

/// State shared by the senders and the receiver.
struct Chan<T> {
    /// Items waiting for a receiver.
    ///
    /// # Invariant
    /// `buf.len() + reserved <= cap` for a bounded channel with `cap > 0`,
    /// except briefly after an interrupted receiver puts its item back.
    buf: RefCell<VecDeque<T>>,
    /// Most items buffered: `usize::MAX` for an unbounded channel, 0 for a
    /// rendezvous.
    cap: usize,
    /// Made by [`channel`] (no capacity to report).
    unbounded: bool,
    /// Room promised to senders that were woken and have not run yet: free
    /// buffer slots, or (rendezvous) waiting receivers.
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

/// Creates an unbounded channel, like [`std::sync::mpsc::channel`]: `send`
/// never waits.
///
/// The [`Sender`] can be cloned. Once every sender is gone and the buffer is
/// drained, [`recv`](Receiver::recv) fails with
/// [`RecvError::Disconnected`], so `while let Ok(item) = rx.recv()` ends
/// when the senders are done. Sending after the [`Receiver`] is dropped
/// fails with the value in [`SendError::Disconnected`].
///
/// Use [`sync_channel`] to bound the memory a fast producer can fill.
///
/// # Interruption and timeouts
///
/// A blocked `recv` that is interrupted or times out fails with
/// [`RecvError::Wait`]; if it had been handed an item already, the item goes
/// back to the front of the channel.
///
/// # Examples
///
/// ```
/// coro::run(|| {
///     let (tx, rx) = coro::sync::channel();
///     for id in 0..3 {
///         let tx = tx.clone();
///         coro::spawn(move || tx.send(id * 10).unwrap());
///     }
///     drop(tx); // the workers hold the only senders now
///     let mut got: Vec<i32> = rx.iter().collect(); // ends when they are done
///     got.sort();
///     assert_eq!(got, [0, 10, 20]);
/// });
/// ```
pub fn channel<T>() -> (Sender<T>, Receiver<T>) {
    new_chan(usize::MAX, true)
}

/// Creates a channel that holds at most `cap` items, like
/// [`std::sync::mpsc::sync_channel`]: `send` waits while it is full.
///
/// With `cap == 0` it is a *rendezvous* channel: a send waits until a
/// receiver waiting in [`recv`](Receiver::recv) takes the value, and
/// [`try_send`](Sender::try_send) succeeds only when a receiver waits.
///
/// # Fairness
///
/// Waiting senders get room in FIFO order, waiting receivers get items in
/// FIFO order, and neither can be overtaken by a thread that arrives later.
///
/// # Interruption and timeouts
///
/// A blocked `send` that is interrupted or times out returns the value in
/// [`SendError::Wait`]: the value was not delivered. A blocked `recv` that
/// is interrupted after it was handed an item puts it back at the front of
/// the channel.
///
/// # Examples
///
/// ```
/// coro::run(|| {
///     let (tx, rx) = coro::sync::sync_channel(2);
///     let producer = coro::spawn(move || {
///         for i in 0..5 {
///             tx.send(i).unwrap(); // waits while 2 items are queued
///         }
///     }); // tx dropped: the channel closes once drained
///     let mut got = Vec::new();
///     while let Ok(i) = rx.recv() {
///         got.push(i);
///     }
///     assert_eq!(got, [0, 1, 2, 3, 4]);
///     producer.join().unwrap();
///
///     // A rendezvous: the send returns once the receiver has the value.
///     let (tx, rx) = coro::sync::sync_channel(0);
///     let receiver = coro::spawn(move || rx.recv());
///     tx.send("hello").unwrap();
///     assert_eq!(receiver.join().unwrap(), Ok("hello"));
/// });
/// ```
pub fn sync_channel<T>(cap: usize) -> (Sender<T>, Receiver<T>) {
    new_chan(cap, false)
}

fn new_chan<T>(cap: usize, unbounded: bool) -> (Sender<T>, Receiver<T>) {
    let chan = Rc::new(Chan {
        buf: RefCell::new(VecDeque::with_capacity(if unbounded {
            0
        } else {
            cap.min(4096)
        })),
        cap,
        unbounded,
        reserved: Cell::new(0),
        senders: Cell::new(1),
        receiver: Cell::new(true),
        recv_waiters: RefCell::new(WaitList::new()),
        send_waiters: RefCell::new(WaitList::new()),
    });
    (Sender { chan: chan.clone() }, Receiver { chan })
}

/// The sending end of a [`channel`] or [`sync_channel`]; clone it for more
/// senders.
///
/// # `!Send`
///
/// It belongs to the runtime whose green threads use it; to send from
/// another OS thread or runtime, use [`remote::channel`](crate::remote::channel).
///
/// ```compile_fail
/// fn send<T: Send>() {}
/// send::<coro::sync::Sender<u32>>();
/// ```
pub struct Sender<T> {
    chan: Rc<Chan<T>>,
}

/// The receiving end of a [`channel`] or [`sync_channel`].
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

    /// Whether a sender may be given room now: a free buffer slot, or for a
    /// rendezvous a waiting receiver not yet promised to another sender.
    fn has_room(&self) -> bool {
        if self.cap == 0 {
            self.reserved.get() < self.recv_waiters.borrow().live_count()
        } else {
            self.buf.borrow().len().saturating_add(self.reserved.get()) < self.cap
        }
    }

    /// Gives room to waiting senders, in order; once the receiver is gone,
    /// wakes them all to fail.
    fn dispatch_send(&self) {
        let mut w = self.send_waiters.borrow_mut();
        loop {
            if self.receiver.get() && !self.has_room() {
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

    /// Takes the first buffered item, letting a waiting sender in.
    fn take(&self) -> Option<T> {
        let item = self.buf.borrow_mut().pop_front()?;
        if !self.send_waiters.borrow().is_empty() {
            self.dispatch_send();
        }
        Some(item)
    }
}

impl<T> Sender<T> {
    /// Sends `value`; for a [`sync_channel`], waits while the channel is
    /// full (a rendezvous: until a receiver takes it).
    ///
    /// # Errors
    ///
    /// * [`SendError::Disconnected`] if the receiver is gone (also if it goes
    ///   while this call waits).
    /// * [`SendError::Wait`] if waiting was cut short (timeout, interrupt,
    ///   shutdown); the value was not delivered.
    ///
    /// Both hand the value back. An error that comes without waiting spends
    /// selfishness (see the crate docs), so a loop that ignores it yields.
    ///
    /// # Panics
    ///
    /// If it has to wait and the caller is not a green thread.
    #[track_caller]
    pub fn send(&self, value: T) -> Result<(), SendError<T>> {
        match self.try_send(value) {
            Ok(()) => Ok(()),
            Err(TrySendError::Disconnected(v)) => {
                waitlist::failed_at_once();
                Err(SendError::Disconnected(v))
            }
            Err(TrySendError::Full(v)) => self.send_slow(v),
        }
    }

    #[cold]
    #[track_caller]
    fn send_slow(&self, mut value: T) -> Result<(), SendError<T>> {
        let c = &*self.chan;
        // A rendezvous sender whose receiver left before it ran keeps its
        // place at the front.
        let mut again = false;
        loop {
            let coro = waitlist::current_coro("Sender::send");
            let key = if again {
                c.send_waiters.borrow_mut().push_front(coro, ())
            } else {
                c.send_waiters.borrow_mut().push_back(coro, ())
            };
            c.dispatch_send();
            let r = if c.send_waiters.borrow().is_linked(key) {
                waitlist::wait(
                    &c.send_waiters,
                    key,
                    "Sender::send",
                    || c.dispatch_send(),
                    |()| {
                        // Room was given to us: pass it on.
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
            if c.cap > 0 {
                c.deliver(value);
            } else if let Err(v) = c.hand_to_receiver(value) {
                value = v;
                again = true;
                continue;
            }
            // Handed straight to a receiver, the value left the room free:
            // the next sender in line may have it.
            if !c.send_waiters.borrow().is_empty() {
                c.dispatch_send();
            }
            return Ok(());
        }
    }

    /// Sends `value` if that needs no waiting.
    ///
    /// # Errors
    ///
    /// [`TrySendError::Full`] if the channel is full or other senders wait
    /// for room (for a rendezvous: no receiver waits);
    /// [`TrySendError::Disconnected`] if the receiver is gone. Both hand the
    /// value back. Never switches threads.
    pub fn try_send(&self, value: T) -> Result<(), TrySendError<T>> {
        let c = &*self.chan;
        if !c.receiver.get() {
            return Err(TrySendError::Disconnected(value));
        }
        if !c.send_waiters.borrow().is_empty() {
            return Err(TrySendError::Full(value));
        }
        if c.cap == 0 && !c.has_room() {
            // Every waiting receiver is promised to a sender that waited.
            return Err(TrySendError::Full(value));
        }
        let Err(value) = c.hand_to_receiver(value) else {
            return Ok(());
        };
        let mut buf = c.buf.borrow_mut();
        if buf.len().saturating_add(c.reserved.get()) < c.cap {
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

    /// The channel's capacity: `None` for an unbounded [`channel`],
    /// `Some(0)` for a rendezvous.
    pub fn capacity(&self) -> Option<usize> {
        capacity(&self.chan)
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

fn capacity<T>(c: &Chan<T>) -> Option<usize> {
    (!c.unbounded).then_some(c.cap)
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
    /// The last sender out closes the channel: waiting receivers fail with
    /// [`RecvError::Disconnected`] once the buffer is drained. Never blocks.
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
            .field("capacity", &self.capacity())
            .field("closed", &self.is_closed())
            .finish()
    }
}

impl<T> Receiver<T> {
    /// Receives the next item, waiting while the channel is empty.
    ///
    /// # Errors
    ///
    /// * [`RecvError::Disconnected`] once every [`Sender`] is gone and the
    ///   buffer is drained (std's `RecvError`), also if the last sender goes
    ///   while this call waits.
    /// * [`RecvError::Wait`] if waiting was cut short (timeout, interrupt,
    ///   shutdown).
    ///
    /// An error that comes without waiting spends selfishness (see the crate
    /// docs), so a loop that ignores it yields.
    ///
    /// # Panics
    ///
    /// If it has to wait and the caller is not a green thread.
    #[track_caller]
    pub fn recv(&self) -> Result<T, RecvError> {
        self.recv_named("Receiver::recv")
    }

    /// [`recv`](Receiver::recv); `call` names the public call in the panic
    /// outside a green thread.
    #[track_caller]
    fn recv_named(&self, call: &str) -> Result<T, RecvError> {
        let c = &*self.chan;
        if let Some(v) = c.take() {
            return Ok(v);
        }
        if c.senders.get() == 0 {
            waitlist::failed_at_once();
            return Err(RecvError::Disconnected);
        }
        let coro = waitlist::current_coro(call);
        let key = c.recv_waiters.borrow_mut().push_back(coro, None);
        if c.cap == 0 {
            // A waiting receiver is room for a rendezvous sender.
            c.dispatch_send();
        }
        let item = waitlist::wait(
            &c.recv_waiters,
            key,
            "Receiver::recv",
            || c.dispatch_recv(),
            |item| {
                if let Some(item) = item {
                    c.give_back(item);
                }
            },
        )?;
        item.ok_or(RecvError::Disconnected)
    }

    /// Receives the next item if one is queued. Never switches threads.
    ///
    /// # Errors
    ///
    /// [`TryRecvError::Empty`] if none is queued (a rendezvous queues none:
    /// its values go only to a receiver waiting in `recv`),
    /// [`TryRecvError::Disconnected`] if none is queued and every sender is
    /// gone.
    pub fn try_recv(&self) -> Result<T, TryRecvError> {
        let c = &*self.chan;
        match c.take() {
            Some(v) => Ok(v),
            None if c.senders.get() == 0 => Err(TryRecvError::Disconnected),
            None => Err(TryRecvError::Empty),
        }
    }

    /// An iterator that [`recv`](Receiver::recv)s until it fails: it ends
    /// when every sender is gone and the channel is drained, and when the
    /// calling thread's wait is cut short (a deadline passed, a cancel, an
    /// interrupt, shutdown; see [`Iter`]). A loop that must tell those
    /// apart calls `recv` itself.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// coro::run(|| {
    ///     let (tx, rx) = coro::sync::channel();
    ///     for i in 1..=3 {
    ///         tx.send(i).unwrap();
    ///     }
    ///     // `tx` lives on: only the deadline ends this loop.
    ///     let mut sum = 0;
    ///     let r = coro::with_timeout(Duration::from_millis(10), || {
    ///         for i in rx.iter() {
    ///             sum += i;
    ///         }
    ///     });
    ///     assert_eq!((r, sum), (Err(coro::Timeout), 6));
    ///     // Every sender gone and the channel drained: it ends at once.
    ///     drop(tx);
    ///     assert_eq!(rx.iter().next(), None);
    /// });
    /// ```
    pub fn iter(&self) -> Iter<'_, T> {
        Iter {
            rx: self,
            ended: false,
        }
    }

    /// An iterator over the items queued now; it never waits.
    pub fn try_iter(&self) -> TryIter<'_, T> {
        TryIter { rx: self }
    }

    /// Whether every sender is gone (the channel ends once drained).
    pub fn is_closed(&self) -> bool {
        self.chan.senders.get() == 0
    }

    /// The channel's capacity: `None` for an unbounded [`channel`],
    /// `Some(0)` for a rendezvous.
    pub fn capacity(&self) -> Option<usize> {
        capacity(&self.chan)
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
            .field("capacity", &self.capacity())
            .field("closed", &self.is_closed())
            .finish()
    }
}

/// The iterator of [`Receiver::iter`]: receives until `recv` fails.
///
/// # When it ends
///
/// It returns `None` once every sender is gone and the channel is
/// drained, and once the calling green thread's wait is cut short: the
/// deadline of an enclosing `with_timeout` or cancel scope passed, the
/// scope was cancelled, the thread was interrupted, or the runtime is
/// shutting down. After a deadline every `recv` would fail at once, so a
/// loop over the iterator must end there rather than spin. It ends at once
/// (an item is a value, with no room for the error, as in std's
/// `mpsc::Iter`); a loop that must know why it stopped calls
/// [`recv`](Receiver::recv) itself. Once it returned `None` it always does
/// (it is fused).
#[derive(Debug)]
pub struct Iter<'a, T> {
    rx: &'a Receiver<T>,
    /// It returned `None`: it does from now on.
    ended: bool,
}

impl<T> Iterator for Iter<'_, T> {
    type Item = T;

    #[track_caller]
    fn next(&mut self) -> Option<T> {
        if self.ended {
            return None;
        }
        let item = self.rx.recv_named("Receiver::iter").ok();
        self.ended = item.is_none();
        item
    }
}

impl<T> FusedIterator for Iter<'_, T> {}

/// The iterator of [`Receiver::try_iter`]: the items queued now.
#[derive(Debug)]
pub struct TryIter<'a, T> {
    rx: &'a Receiver<T>,
}

impl<T> Iterator for TryIter<'_, T> {
    type Item = T;

    #[track_caller]
    fn next(&mut self) -> Option<T> {
        self.rx.try_recv().ok()
    }
}

/// The owning iterator of a [`Receiver`]: receives until `recv` fails.
///
/// It ends as [`Iter`] does: when every sender is gone and the channel is
/// drained, and at once when the calling thread's wait is cut short (a
/// deadline passed, a cancel, an interrupt, shutdown). It is fused.
#[derive(Debug)]
pub struct IntoIter<T> {
    rx: Receiver<T>,
    /// It returned `None`: it does from now on.
    ended: bool,
}

impl<T> Iterator for IntoIter<T> {
    type Item = T;

    #[track_caller]
    fn next(&mut self) -> Option<T> {
        if self.ended {
            return None;
        }
        let item = self.rx.recv_named("Receiver::into_iter").ok();
        self.ended = item.is_none();
        item
    }
}

impl<T> FusedIterator for IntoIter<T> {}

impl<'a, T> IntoIterator for &'a Receiver<T> {
    type Item = T;
    type IntoIter = Iter<'a, T>;

    fn into_iter(self) -> Iter<'a, T> {
        self.iter()
    }
}

impl<T> IntoIterator for Receiver<T> {
    type Item = T;
    type IntoIter = IntoIter<T>;

    fn into_iter(self) -> IntoIter<T> {
        IntoIter {
            rx: self,
            ended: false,
        }
    }
}
