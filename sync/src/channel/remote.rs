//! The `Send` channel: any OS thread or runtime sends into it, and its
//! [`Receiver`] waits on a green thread (or on a plain OS thread).
//!
//! # Design
//!
//! The queue sits behind a `std::sync::Mutex` in an `Arc`. A receiver that
//! finds it empty leaves a [`std::task::Waker`] in it and parks: on a green
//! thread the waker is the runtime's [`RemoteWaker`], which wakes the
//! runtime's loop through its mio waker; on a plain OS thread it unparks
//! that thread. A send pushes under the lock and wakes every waker left
//! there; woken receivers look again (a wake for a park that already ended
//! does nothing). Items stay in the queue until a receiver takes them, so a
//! receiver that times out or is interrupted loses nothing.

use std::collections::VecDeque;
use std::fmt;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Wake, Waker};

use coro_runtime::RemoteWaker;

use super::error::{RecvError, SendError, TryRecvError};
use crate::waitlist;

struct State<T> {
    queue: VecDeque<T>,
    /// Live `Sender` handles.
    senders: usize,
    /// The `Receiver` is alive.
    receiver: bool,
    /// Receivers waiting for an item (a shared receiver can have several).
    waiters: Vec<Waker>,
}

struct Shared<T> {
    state: Mutex<State<T>>,
}

impl<T> Shared<T> {
    fn lock(&self) -> MutexGuard<'_, State<T>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Creates an unbounded channel whose [`Sender`] is `Send + Clone` and
/// whose [`Receiver`] waits on a green thread: the bridge from other OS
/// threads (a library callback, a thread pool, another runtime) into a
/// runtime, and between runtimes (one per core).
///
/// `send` never waits. `recv` suspends only the calling green thread and is
/// woken through the runtime's mio waker; called on a plain OS thread it
/// blocks that thread, so the same channel carries results back out.
/// Like [`channel`](crate::channel), `recv` fails with
/// [`RecvError::Disconnected`] once every sender is gone and the queue is
/// drained.
///
/// # Examples
///
/// ```
/// use coro::sync::remote;
///
/// coro::run(|| {
///     let (tx, rx) = remote::channel();
///     let workers: Vec<_> = (0..4)
///         .map(|i| {
///             let tx = tx.clone();
///             std::thread::spawn(move || tx.send(i * i).unwrap())
///         })
///         .collect();
///     drop(tx);
///     // Only this green thread waits; the runtime's other threads run.
///     let mut got: Vec<u32> = rx.iter().collect();
///     got.sort();
///     assert_eq!(got, [0, 1, 4, 9]);
///     for w in workers {
///         w.join().unwrap();
///     }
/// });
/// ```
pub fn channel<T: Send>() -> (Sender<T>, Receiver<T>) {
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            queue: VecDeque::new(),
            senders: 1,
            receiver: true,
            waiters: Vec::new(),
        }),
    });
    (
        Sender {
            shared: shared.clone(),
        },
        Receiver {
            shared,
            _not_sync: PhantomData,
        },
    )
}

/// The sending end of a [`remote::channel`](channel): `Send + Sync`, clone
/// it for more senders. `send` never waits.
pub struct Sender<T> {
    shared: Arc<Shared<T>>,
}

/// The receiving end of a [`remote::channel`](channel). It is `Send` (make
/// the channel anywhere, move the receiver into the runtime) but not
/// `Sync`; green threads of one runtime may share it through an `Rc`.
///
/// ```compile_fail
/// fn sync<T: Sync>() {}
/// sync::<coro::sync::remote::Receiver<u32>>();
/// ```
pub struct Receiver<T> {
    shared: Arc<Shared<T>>,
    /// `!Sync`: waiting from several OS threads at once is not supported.
    _not_sync: PhantomData<std::cell::Cell<()>>,
}

impl<T> Sender<T> {
    /// Queues `value` and wakes a waiting receiver. Never waits.
    ///
    /// # Errors
    ///
    /// [`SendError::Disconnected`] with the value if the receiver is gone.
    pub fn send(&self, value: T) -> Result<(), SendError<T>> {
        let mut st = self.shared.lock();
        if !st.receiver {
            drop(st);
            waitlist::failed_at_once();
            return Err(SendError::Disconnected(value));
        }
        st.queue.push_back(value);
        let waiters = std::mem::take(&mut st.waiters);
        drop(st);
        for w in waiters {
            w.wake();
        }
        Ok(())
    }

    /// Whether the receiver is gone (every send would fail).
    pub fn is_closed(&self) -> bool {
        !self.shared.lock().receiver
    }
}

impl<T> Clone for Sender<T> {
    fn clone(&self) -> Sender<T> {
        self.shared.lock().senders += 1;
        Sender {
            shared: self.shared.clone(),
        }
    }
}

impl<T> Drop for Sender<T> {
    /// The last sender out wakes the waiting receivers: they fail with
    /// [`RecvError::Disconnected`] once the queue is drained.
    fn drop(&mut self) {
        let mut st = self.shared.lock();
        st.senders -= 1;
        let waiters = if st.senders == 0 {
            std::mem::take(&mut st.waiters)
        } else {
            Vec::new()
        };
        drop(st);
        for w in waiters {
            w.wake();
        }
    }
}

impl<T> fmt::Debug for Sender<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("remote::Sender")
            .field("closed", &self.is_closed())
            .finish_non_exhaustive()
    }
}

/// Wakes a plain OS thread blocked in `recv`.
struct ThreadWaker(std::thread::Thread);

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

impl<T> Receiver<T> {
    /// Receives the next item, waiting while the queue is empty: on a green
    /// thread only that thread waits; on a plain OS thread, that thread.
    ///
    /// # Errors
    ///
    /// * [`RecvError::Disconnected`] once every [`Sender`] is gone and the
    ///   queue is drained (without waiting, it spends selfishness, so a
    ///   loop that ignores it yields).
    /// * [`RecvError::Wait`] if a green thread's wait was cut short
    ///   (timeout, interrupt, shutdown); nothing is lost.
    #[track_caller]
    pub fn recv(&self) -> Result<T, RecvError> {
        let green = coro_runtime::in_green_thread();
        let mut mine: Option<Waker> = None;
        loop {
            let mut st = self.shared.lock();
            if let Some(v) = st.queue.pop_front() {
                forget_waiter(&mut st, mine.as_ref());
                return Ok(v);
            }
            if st.senders == 0 {
                forget_waiter(&mut st, mine.as_ref());
                drop(st);
                if mine.is_none() {
                    waitlist::failed_at_once();
                }
                return Err(RecvError::Disconnected);
            }
            let w = if green {
                RemoteWaker::current().into_waker()
            } else {
                Waker::from(Arc::new(ThreadWaker(std::thread::current())))
            };
            forget_waiter(&mut st, mine.as_ref());
            st.waiters.push(w.clone());
            mine = Some(w);
            drop(st);
            if green {
                if let Err(e) = coro_runtime::park_as("remote channel") {
                    forget_waiter(&mut self.shared.lock(), mine.as_ref());
                    return Err(RecvError::Wait(e));
                }
            } else {
                std::thread::park();
            }
        }
    }

    /// Receives the next item if one is queued.
    ///
    /// # Errors
    ///
    /// [`TryRecvError::Empty`] if none is queued,
    /// [`TryRecvError::Disconnected`] if none is queued and every sender is
    /// gone.
    pub fn try_recv(&self) -> Result<T, TryRecvError> {
        let mut st = self.shared.lock();
        match st.queue.pop_front() {
            Some(v) => Ok(v),
            None if st.senders == 0 => Err(TryRecvError::Disconnected),
            None => Err(TryRecvError::Empty),
        }
    }

    /// An iterator that [`recv`](Receiver::recv)s until it fails: it ends
    /// when every sender is gone and the queue is drained, and when a green
    /// thread's wait is cut short (a deadline passed, a cancel, an
    /// interrupt, shutdown; see [`Iter`]). A loop that must tell those
    /// apart calls `recv` itself.
    pub fn iter(&self) -> Iter<'_, T> {
        Iter {
            rx: self,
            ended: false,
        }
    }

    /// Number of items queued.
    pub fn len(&self) -> usize {
        self.shared.lock().queue.len()
    }

    /// Whether no item is queued.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether every sender is gone (the channel ends once drained).
    pub fn is_closed(&self) -> bool {
        self.shared.lock().senders == 0
    }
}

/// Takes `mine` (a waker this receiver left before) out of the waiters.
fn forget_waiter<T>(st: &mut State<T>, mine: Option<&Waker>) {
    if let Some(m) = mine {
        st.waiters.retain(|w| !w.will_wake(m));
    }
}

impl<T> Drop for Receiver<T> {
    /// Closes the channel: queued items are dropped (outside the lock) and
    /// later sends fail.
    fn drop(&mut self) {
        let items = {
            let mut st = self.shared.lock();
            st.receiver = false;
            std::mem::take(&mut st.queue)
        };
        drop(items);
    }
}

impl<T> fmt::Debug for Receiver<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("remote::Receiver")
            .field("len", &self.len())
            .field("closed", &self.is_closed())
            .finish()
    }
}

/// The iterator of [`Receiver::iter`]: receives until `recv` fails.
///
/// # When it ends
///
/// It returns `None` once every sender is gone and the queue is drained,
/// and once a green thread's wait is cut short: the deadline of an
/// enclosing `with_timeout` or cancel scope passed, the scope was
/// cancelled, the thread was interrupted, or the runtime is shutting down.
/// After a deadline every `recv` would fail at once, so a loop over the
/// iterator must end there rather than spin. It ends at once (an item is a
/// value, with no room for the error); a loop that must know why it
/// stopped calls [`recv`](Receiver::recv) itself. Once it returned `None`
/// it always does (it is fused).
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
        let item = self.rx.recv().ok();
        self.ended = item.is_none();
        item
    }
}

impl<T> std::iter::FusedIterator for Iter<'_, T> {}

impl<'a, T> IntoIterator for &'a Receiver<T> {
    type Item = T;
    type IntoIter = Iter<'a, T>;

    fn into_iter(self) -> Iter<'a, T> {
        self.iter()
    }
}

/// Compile-time proof of the auto traits the bridge relies on.
const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    const fn send<T: Send>() {}
    send_sync::<Sender<u32>>();
    send::<Receiver<u32>>();
};
