//! The reactor: the mio `Poll`, the table of registered I/O sources, and the
//! waiters parked on their readiness.
//!
//! # Design
//!
//! mio is edge-triggered. Each registered source keeps two readiness flags
//! (readable, writable) that an event sets and that an operation clears when
//! the syscall says `EWOULDBLOCK`; a green thread waits only while its flag is
//! clear. All waiters of a direction are woken on an event (they re-try in the
//! order they queued; those that get `EWOULDBLOCK` wait again), so two threads
//! sharing one socket queue in order instead of one being forgotten.
//!
//! Tokens carry the table key and a generation, so an event fetched for a
//! source that has since been dropped, and whose key (or fd number) a new
//! source reuses, is recognised as stale and ignored.
//!
//! Two tokens are reserved: the runtime's [`mio::Waker`], which other OS
//! threads (the blocking-offload pool) use to wake the loop, and the
//! platform timer (see `sys`).

use std::cell::{Cell, RefCell};
use std::io;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{self, Context, Waker};
use std::time::Duration;

use mio::{Events, Interest, Poll, Token};
use slab::Slab;

use crate::kernel::context;
use crate::kernel::sched;
use crate::kernel::waiter_queue::WaiterQueue;
use crate::kernel::wake::Waiter;

pub(crate) const WAKER_TOKEN: Token = Token(usize::MAX);
pub(crate) const TIMER_TOKEN: Token = Token(usize::MAX - 1);

/// Readiness state of one registered source.
///
/// # Layout
///
/// `repr(C)`, with what every event and every wait of a busy socket
/// touches first: the generation, the flags and both waiter queues, the
/// few cache lines an event's prefetch asks for
/// (`Reactor::prefetch_sources`). With thousands of connections the states
/// do not stay in a core's cache, and each line is a likely miss per
/// message.
/// The task waker slots come last: only async adapters fill them, and an
/// event reads them only once `task_wakers` says one may be filled.
#[derive(Default)]
#[repr(C)]
pub(crate) struct IoState {
    gen: u32,
    readable: Cell<bool>,
    writable: Cell<bool>,
    /// The peer closed its side (or the socket has an error): final states,
    /// never cleared, so a read after a short read still sees the EOF.
    read_closed: Cell<bool>,
    /// A short stream read proves the socket drained (see
    /// [`Registration::new_tcp_stream`]): set at registration for a TCP
    /// stream registered for urgent-data events, cleared for good by the
    /// first such event.
    ///
    /// # Invariant
    ///
    /// Only true for a socket whose reads stop short of what is queued for
    /// no reason but an urgent mark, and whose poller reports urgent data
    /// (`EPOLLPRI`): then every short read with data still queued is
    /// preceded by an event that clears this flag.
    short_read_drains: Cell<bool>,
    write_closed: Cell<bool>,
    closed: Cell<bool>,
    /// Set for good by the first [`Registration::poll_ready`] that stores a
    /// task waker.
    ///
    /// # Invariant
    ///
    /// While it is false both waker slots are empty, so an event need not
    /// read them.
    task_wakers: Cell<bool>,
    readers: RefCell<WaiterQueue>,
    writers: RefCell<WaiterQueue>,
    /// The task `Waker` of the last [`Registration::poll_ready`] for
    /// reading that returned `Pending` (one per direction, as tokio's
    /// `PollEvented`): woken, and taken, by the next read event or `close`.
    read_waker: RefCell<Option<Waker>>,
    /// The same for writing.
    write_waker: RefCell<Option<Waker>>,
}

impl IoState {
    /// Wakes the waiters queued now, in order. The queue keeps its buffer
    /// (taking the whole deque would free it and the next wait would
    /// allocate again: a malloc and a free per message on a busy socket),
    /// and no borrow is held while a waiter is woken or dropped.
    #[inline]
    fn wake_all(q: &RefCell<WaiterQueue>) {
        let queued = q.borrow().len();
        for _ in 0..queued {
            let next = q.borrow_mut().pop_front();
            match next {
                Some(w) => w.wake(),
                None => break,
            };
        }
    }

    /// Whether an event on this source may still wake someone: a green
    /// thread parked in a wait on it (stale waiters, whose park ended, do
    /// not count) or a stored task waker (which may belong to anything).
    fn awaited(&self) -> bool {
        let waiting = |q: &RefCell<WaiterQueue>| q.borrow().iter().any(Waiter::is_waiting);
        waiting(&self.readers)
            || waiting(&self.writers)
            || self.read_waker.borrow().is_some()
            || self.write_waker.borrow().is_some()
    }

    /// Wakes and forgets the task waker of `dir`, if any may be stored (see
    /// `task_wakers`). No borrow is held while it runs (it is user code: it
    /// may poll this very source again).
    #[inline]
    fn wake_task(&self, dir: Direction) {
        if !self.task_wakers.get() {
            return;
        }
        let slot = match dir {
            Direction::Read => &self.read_waker,
            Direction::Write => &self.write_waker,
        };
        let w = slot.borrow_mut().take();
        if let Some(w) = w {
            w.wake();
        }
    }
}

pub(crate) struct Reactor {
    poll: RefCell<Poll>,
    events: RefCell<Events>,
    /// Shared with every [`Registration`], so one dropped while its runtime
    /// is not running still leaves the table it is in.
    sources: Rc<RefCell<Slab<Rc<IoState>>>>,
    next_gen: Cell<u32>,
    pub(crate) waker: Arc<mio::Waker>,
}

impl Reactor {
    pub(crate) fn new() -> io::Result<Reactor> {
        let poll = Poll::new()?;
        let waker = Arc::new(mio::Waker::new(poll.registry(), WAKER_TOKEN)?);
        Ok(Reactor {
            poll: RefCell::new(poll),
            events: RefCell::new(Events::with_capacity(1024)),
            sources: Rc::new(RefCell::new(Slab::new())),
            next_gen: Cell::new(0),
            waker,
        })
    }

    pub(crate) fn registry<R>(&self, f: impl FnOnce(&mio::Registry) -> R) -> R {
        f(self.poll.borrow().registry())
    }

    /// Registered sources (sockets and the like), for deadlock detection and stats.
    pub(crate) fn sources(&self) -> usize {
        self.sources.borrow().len()
    }

    /// Whether an event on a registered source may still wake someone (see
    /// `IoState::awaited`): a source nobody waits on can fire, but wakes
    /// nothing. O(sources) up to the first awaited one: only the deadlock
    /// check asks, when the loop is about to block with no timer.
    pub(crate) fn awaited(&self) -> bool {
        self.sources.borrow().iter().any(|(_, st)| st.awaited())
    }

    /// Forgets, on every source still registered (a socket kept for the
    /// runtime's next `block_on`), what a run left waiting on it once its
    /// threads are all gone: the queued waiters, and the stored task
    /// wakers, which are woken (their owners poll again and store them
    /// anew) and dropped. A `block_on` waker left there would hold the
    /// runtime's inbox, and a stored waker counts as a possible wake, so
    /// either would keep every later run from reporting a deadlock.
    /// Readiness stays: it is the socket's. Each waker runs under
    /// `caught` (user code on the scheduler's stack at shutdown).
    pub(crate) fn end_of_run(&self) {
        let states: Vec<Rc<IoState>> = self
            .sources
            .borrow()
            .iter()
            .map(|(_, st)| st.clone())
            .collect();
        for st in states {
            let queued = (
                std::mem::take(&mut *st.readers.borrow_mut()),
                std::mem::take(&mut *st.writers.borrow_mut()),
            );
            drop(queued);
            for slot in [&st.read_waker, &st.write_waker] {
                let w = slot.borrow_mut().take();
                if let Some(w) = w {
                    crate::kernel::panic_hook::caught(move || w.wake());
                }
            }
        }
    }

    /// Waits for events for at most `timeout` and wakes the threads waiting on
    /// them. Returns whether the waker fired.
    pub(crate) fn poll(&self, timeout: Option<Duration>) -> io::Result<PollOutcome> {
        let mut events = self.events.borrow_mut();
        match self.poll.borrow_mut().poll(&mut events, timeout) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
        let mut out = PollOutcome {
            events: events.iter().count(),
            ..PollOutcome::default()
        };
        // Every poll, whatever its size: most return fewer events than the
        // scheduler's `PREFETCH_BATCH`, so a threshold of as many would
        // skip the prefetch at 1 000 connections, where it pays
        // (BENCHMARKS.md, sockets and echo).
        let mut ahead = events.iter();
        let mut prefetched = 0;
        for ev in events.iter() {
            if prefetched == 0 {
                prefetched = self.prefetch_sources(ahead.by_ref().take(EVENT_PREFETCH));
            }
            prefetched = prefetched.saturating_sub(1);
            let token = ev.token();
            if token == WAKER_TOKEN {
                out.woken = true;
                continue;
            }
            if token == TIMER_TOKEN {
                out.timer = true;
                continue;
            }
            let key = token.0 & 0xffff_ffff;
            let gen = (token.0 >> 32) as u32;
            let state = match self.sources.borrow().get(key) {
                Some(s) if s.gen == gen => s.clone(),
                _ => continue,
            };
            if ev.is_read_closed() || ev.is_error() {
                state.read_closed.set(true);
            }
            if ev.is_priority() {
                // Urgent data: from now on a read may stop at an urgent
                // mark with more queued behind it.
                state.short_read_drains.set(false);
            }
            if ev.is_write_closed() || ev.is_error() {
                state.write_closed.set(true);
            }
            if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                state.readable.set(true);
                IoState::wake_all(&state.readers);
                state.wake_task(Direction::Read);
            }
            if ev.is_writable() || ev.is_write_closed() || ev.is_error() {
                state.writable.set(true);
                IoState::wake_all(&state.writers);
                state.wake_task(Direction::Write);
            }
        }
        Ok(out)
    }

    /// Starts bringing the states of the sources of `evs` into the cache,
    /// all at once, then the control blocks of the threads first in line to
    /// read them. Returns how many events it looked at.
    ///
    /// With thousands of sources the event loop would otherwise wait on
    /// each state and each woken thread in turn: they are in pages the TLB
    /// no longer maps after the syscalls since their last event, and a walk
    /// (or a software prefetch that needs one) holds the core until it is
    /// done. Asked for together, the walks overlap (as the scheduler's stack
    /// prefetches do, see `Scheduler::prefetch_ahead`).
    #[inline]
    fn prefetch_sources<'a>(&self, evs: impl Iterator<Item = &'a mio::event::Event>) -> usize {
        let sources = self.sources.borrow();
        let mut states: [Option<&Rc<IoState>>; EVENT_PREFETCH] = [None; EVENT_PREFETCH];
        let mut n = 0;
        // The fields an event touches (see `IoState`'s layout).
        let hot = std::mem::offset_of!(IoState, read_waker);
        for (slot, ev) in states.iter_mut().zip(evs) {
            n += 1;
            *slot = sources.get(ev.token().0 & 0xffff_ffff);
            if let Some(st) = slot {
                crate::kernel::stack::prefetch_range(Rc::as_ptr(st).cast::<i8>(), hot);
            }
        }
        for st in states.iter().flatten() {
            if let Ok(readers) = st.readers.try_borrow() {
                if let Some(w) = readers.front() {
                    w.prefetch_task();
                }
            }
        }
        n
    }
}

/// Events whose sources [`Reactor::prefetch_sources`] asks for together.
const EVENT_PREFETCH: usize = 8;

#[derive(Default)]
pub(crate) struct PollOutcome {
    pub(crate) woken: bool,
    pub(crate) timer: bool,
    /// Events the OS returned.
    pub(crate) events: usize,
}

/// A direction of readiness.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Readable (or peer closed, or error).
    Read,
    /// Writable (or closed, or error).
    Write,
}

/// An I/O source registered with the current runtime's reactor.
///
/// This is the building block of `coro::net`: try the non-blocking syscall,
/// and on `EWOULDBLOCK` call [`Registration::clear`] then
/// [`Registration::wait`], which suspends only this green thread.
/// [`Registration::io`] does all of that, plus selfishness.
///
/// Dropping the registration forgets the source; deregister it from mio (or
/// close its fd) as well. [`Registration::close`] wakes every waiter with an
/// error first.
pub struct Registration {
    state: Rc<IoState>,
    key: usize,
    /// The table of the runtime it is registered with.
    table: Rc<RefCell<Slab<Rc<IoState>>>>,
    /// Id of the runtime whose poller holds the source: waiting on it is
    /// only possible while that runtime runs (its events arrive nowhere else).
    runtime: u64,
}

impl Registration {
    /// Registers `source` for `interest` with the current runtime.
    ///
    /// # Panics
    ///
    /// Outside a runtime.
    pub fn new<S: mio::event::Source + ?Sized>(
        source: &mut S,
        interest: Interest,
    ) -> io::Result<Registration> {
        context::with_sched("registering a socket", |s| {
            let r = &s.driver.reactor;
            let gen = r.next_gen.get().wrapping_add(1);
            r.next_gen.set(gen);
            let state = Rc::new(IoState {
                gen,
                ..IoState::default()
            });
            let key = r.sources.borrow_mut().insert(state.clone());
            if key > 0xffff_ffff {
                r.sources.borrow_mut().remove(key);
                return Err(io::Error::other("coro: too many registered I/O sources"));
            }
            let token = Token(key | ((gen as usize) << 32));
            if let Err(e) = r.registry(|reg| reg.register(source, token, interest)) {
                r.sources.borrow_mut().remove(key);
                return Err(e);
            }
            Ok(Registration {
                state,
                key,
                table: r.sources.clone(),
                runtime: s.id,
            })
        })
    }

    /// Registers a connected TCP stream socket for `interest`, and for
    /// urgent-data events (`EPOLLPRI`, mio's `Interest::PRIORITY`) where
    /// the platform has them (Linux and Android), so that
    /// [`io_stream`](Registration::io_stream) may take a short read as
    /// proof the socket is drained and save the syscall that would only say
    /// `EWOULDBLOCK` (tokio's rule), until the socket's first urgent data.
    ///
    /// A TCP read stops short of what is queued only at an urgent mark; a
    /// socket that has seen urgent data keeps the safe rule (a read clears
    /// readiness only on `EWOULDBLOCK`) for the rest of its life. Register
    /// nothing but TCP streams this way: a Unix stream read also stops at
    /// an `SCM_RIGHTS` boundary, which no event announces.
    ///
    /// # Panics
    ///
    /// Outside a runtime.
    pub fn new_tcp_stream<S: mio::event::Source + ?Sized>(
        source: &mut S,
        interest: Interest,
    ) -> io::Result<Registration> {
        #[cfg(any(target_os = "linux", target_os = "android"))]
        {
            let reg = Registration::new(source, interest | Interest::PRIORITY)?;
            reg.state.short_read_drains.set(true);
            Ok(reg)
        }
        #[cfg(not(any(target_os = "linux", target_os = "android")))]
        Registration::new(source, interest)
    }

    /// Whether a short read now proves the socket drained (see
    /// [`new_tcp_stream`](Registration::new_tcp_stream)): true for a TCP
    /// stream registered that way that has not seen urgent data.
    pub fn short_read_drains(&self) -> bool {
        self.state.short_read_drains.get()
    }

    /// Deregisters `source` from the reactor (before its fd is closed).
    ///
    /// # Errors
    ///
    /// The OS error, or an error naming the mix-up if the source was
    /// registered with another runtime than the one running (nothing is done
    /// then: the source is not in this runtime's poller).
    pub fn deregister<S: mio::event::Source + ?Sized>(&self, source: &mut S) -> io::Result<()> {
        context::with_sched("deregistering a socket", |s| {
            self.same_runtime(s)?;
            s.driver.reactor.registry(|reg| reg.deregister(source))
        })
    }

    /// Fails unless `s` is the runtime this source is registered with.
    fn same_runtime(&self, s: &sched::Scheduler) -> io::Result<()> {
        if s.id == self.runtime {
            Ok(())
        } else {
            Err(foreign_error(self.runtime, s.id))
        }
    }

    fn queue(&self, dir: Direction) -> &RefCell<WaiterQueue> {
        match dir {
            Direction::Read => &self.state.readers,
            Direction::Write => &self.state.writers,
        }
    }

    fn flag(&self, dir: Direction) -> &Cell<bool> {
        match dir {
            Direction::Read => &self.state.readable,
            Direction::Write => &self.state.writable,
        }
    }

    /// Whether the last event said `dir` is ready (and no `clear` since), or
    /// that side was closed by the peer (which `clear` does not undo).
    pub fn is_ready(&self, dir: Direction) -> bool {
        self.flag(dir).get()
            || match dir {
                Direction::Read => self.state.read_closed.get(),
                Direction::Write => self.state.write_closed.get(),
            }
    }

    /// Forgets readiness in `dir`: call it when the syscall said `EWOULDBLOCK`.
    pub fn clear(&self, dir: Direction) {
        self.flag(dir).set(false);
    }

    /// Suspends this green thread until `dir` is ready. Returns at once if it
    /// already is.
    ///
    /// # Errors
    ///
    /// `NotConnected` if the registration was [closed](Registration::close)
    /// (before or while waiting); `TimedOut` or an interruption error (see
    /// [`WaitError`](crate::WaitError)) if the wait was cut short.
    ///
    /// An error naming the mix-up if the source was registered with another
    /// runtime than the one running (its readiness is reported to that
    /// runtime's poller only, so waiting here would never end).
    ///
    /// A wait refused at once is attributed to the caller
    /// (`#[track_caller]`): a loop that keeps making such calls is named,
    /// with that call site, in a spin warning (see
    /// [`SPIN_LIMIT`](crate::SPIN_LIMIT)).
    // Inlined into the socket calls: one frame less between the read and
    // the stack switch is one cache line less to read back per message
    // (BENCHMARKS.md, echo at 1 000 connections).
    #[inline(always)]
    #[track_caller]
    pub fn wait(&self, dir: Direction) -> io::Result<()> {
        loop {
            if self.state.closed.get() {
                crate::kernel::suspend::failed_at_once_if_green();
                return Err(closed_error());
            }
            if self.is_ready(dir) {
                return Ok(());
            }
            context::with_sched("a socket wait", |s| self.same_runtime(s))?;
            self.queue(dir)
                .borrow_mut()
                .push_back(Waiter::current("a socket wait"));
            let what = match dir {
                Direction::Read => "readable",
                Direction::Write => "writable",
            };
            if let Err(e) = crate::kernel::suspend::park_as(what) {
                self.remove_stale(dir);
                return Err(e.into());
            }
        }
    }

    /// The polling form of [`wait`](Registration::wait), for futures:
    /// `Ready(Ok(()))` if `dir` is ready; otherwise stores the task's waker
    /// (replacing the one stored by an earlier poll in this direction),
    /// which the next event in `dir` wakes, and returns `Pending`. Never
    /// parks. Async adapters (`coro-net`'s `AsyncRead`/`AsyncWrite`) call it
    /// before each syscall, and [`clear`](Registration::clear) on
    /// `EWOULDBLOCK`.
    ///
    /// One waker per direction, as tokio's `PollEvented`: two tasks polling
    /// the same direction of one source take turns being woken.
    ///
    /// # Errors
    ///
    /// `NotConnected` if the registration was [closed](Registration::close)
    /// (before or while pending: `close` wakes the stored waker); an error
    /// naming the mix-up if polled where another runtime than the source's
    /// runs (or none: its events would never arrive).
    pub fn poll_ready(&self, dir: Direction, cx: &mut Context<'_>) -> task::Poll<io::Result<()>> {
        if self.state.closed.get() {
            return task::Poll::Ready(Err(closed_error()));
        }
        if self.is_ready(dir) {
            return task::Poll::Ready(Ok(()));
        }
        match context::try_with_sched(|s| self.same_runtime(s)) {
            Some(Ok(())) => {}
            Some(Err(e)) => return task::Poll::Ready(Err(e)),
            None => {
                return task::Poll::Ready(Err(io::Error::other(
                    "coro: a socket was polled where no coro runtime runs: its readiness \
                     comes from the reactor of the runtime that made it (poll it inside \
                     coro::future::block_on)",
                )))
            }
        }
        let slot = match dir {
            Direction::Read => &self.state.read_waker,
            Direction::Write => &self.state.write_waker,
        };
        self.state.task_wakers.set(true);
        // The waker is cloned, and the one it replaces dropped, with no
        // borrow of the slot held: both are user code, which may poll or
        // close this very source (a task freed with its last waker that
        // owns the socket).
        if slot
            .borrow()
            .as_ref()
            .is_some_and(|w| w.will_wake(cx.waker()))
        {
            return task::Poll::Pending;
        }
        let new = cx.waker().clone();
        let old = slot.borrow_mut().replace(new);
        drop(old);
        // That code may also have closed the source or, by yielding, let
        // an event in: then no later event wakes the waker just stored.
        if self.state.closed.get() {
            let stored = slot.borrow_mut().take();
            drop(stored);
            return task::Poll::Ready(Err(closed_error()));
        }
        if self.is_ready(dir) {
            return task::Poll::Ready(Ok(()));
        }
        task::Poll::Pending
    }

    fn remove_stale(&self, dir: Direction) {
        self.queue(dir).borrow_mut().retain(Waiter::is_waiting);
    }

    /// Runs a non-blocking operation to completion on this green thread:
    /// tries `op`; on `WouldBlock` clears readiness and waits, then tries
    /// again. A call that succeeds without waiting spends one unit of
    /// selfishness (see [`try_selfish`](crate::try_selfish)). Its caller
    /// (`#[track_caller]`, as for [`wait`](Registration::wait)) is the call
    /// site a spin warning names (see [`SPIN_LIMIT`](crate::SPIN_LIMIT)).
    ///
    /// A read-side call is not even tried while the readiness flag is clear:
    /// mio is edge-triggered and only an `EWOULDBLOCK` clears the flag, so the
    /// syscall would fail; the event that sets the flag again is already on
    /// its way from the kernel.
    #[track_caller]
    pub fn io<R>(&self, dir: Direction, op: impl FnMut() -> io::Result<R>) -> io::Result<R> {
        self.run(dir, op, |_| false)
    }

    /// [`io`](Registration::io) for a byte stream: `op` reads into (or
    /// writes from) a buffer of `len` bytes and returns the count.
    ///
    /// For writes, a count short of `len` (but not zero) shows the socket
    /// buffer filled up, so write readiness is cleared without spending a
    /// syscall to hear `EWOULDBLOCK`; the edge that comes when room frees
    /// sets it again. Reads do the same only on a socket whose
    /// [`short_read_drains`](Registration::short_read_drains) (a TCP stream
    /// registered with [`new_tcp_stream`](Registration::new_tcp_stream) that
    /// has seen no urgent data); elsewhere they clear readiness only on
    /// `EWOULDBLOCK`, since a short read does not prove the socket is empty
    /// (Linux stops a TCP read at the urgent mark, a Unix stream read at an
    /// `SCM_RIGHTS` boundary) and no new edge would come for what is left.
    ///
    /// `len` is what the syscall could move at most: for `readv`/`writev`
    /// the buffers the kernel takes (`IOV_MAX` of them, std's cap), not
    /// all that were passed, or a capped call would look short.
    #[inline]
    #[track_caller]
    pub fn io_stream(
        &self,
        dir: Direction,
        len: usize,
        op: impl FnMut() -> io::Result<usize>,
    ) -> io::Result<usize> {
        match dir {
            Direction::Read => self.run(dir, op, |&n| {
                n > 0 && n < len && self.state.short_read_drains.get()
            }),
            Direction::Write => self.run(dir, op, |&n| n > 0 && n < len),
        }
    }

    #[inline]
    #[track_caller]
    fn run<R>(
        &self,
        dir: Direction,
        mut op: impl FnMut() -> io::Result<R>,
        drained: impl Fn(&R) -> bool,
    ) -> io::Result<R> {
        let mut waited = false;
        loop {
            if self.state.closed.get() {
                crate::kernel::suspend::failed_at_once_if_green();
                return Err(closed_error());
            }
            if dir == Direction::Read && !self.is_ready(dir) {
                self.wait(dir)?;
                waited = true;
                continue;
            }
            match op() {
                Ok(v) => {
                    if drained(&v) {
                        self.clear(dir);
                    }
                    if !waited {
                        crate::kernel::suspend::try_selfish_if_green();
                    }
                    return Ok(v);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.clear(dir);
                    self.wait(dir)?;
                    waited = true;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    if !waited {
                        // An error at once (EMFILE, ECONNRESET, ...) yields
                        // like a success at once: see "Calls that fail at
                        // once" in the crate docs.
                        crate::kernel::suspend::failed_at_once_if_green();
                    }
                    return Err(e);
                }
            }
        }
    }

    /// Marks the source closed and wakes every thread waiting on it; their
    /// waits (and any later ones) fail with `NotConnected`.
    pub fn close(&self) {
        if self.state.closed.replace(true) {
            return;
        }
        IoState::wake_all(&self.state.readers);
        IoState::wake_all(&self.state.writers);
        self.state.wake_task(Direction::Read);
        self.state.wake_task(Direction::Write);
    }

    /// Whether [`close`](Registration::close) was called.
    pub fn is_closed(&self) -> bool {
        self.state.closed.get()
    }
}

fn foreign_error(registered: u64, running: u64) -> io::Error {
    io::Error::other(format!(
        "coro: this socket is registered with runtime #{registered}, but runtime #{running} \
         is running: a socket can only be used in the runtime that created it (its readiness \
         is reported to that runtime's poller)"
    ))
}

fn closed_error() -> io::Error {
    io::Error::new(
        io::ErrorKind::NotConnected,
        "coro: the socket was closed (close() was called on it or on a clone)",
    )
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.close();
        // Its own runtime's table, whichever runtime (if any) runs now.
        let mut sources = self.table.borrow_mut();
        if sources
            .get(self.key)
            .is_some_and(|st| Rc::ptr_eq(st, &self.state))
        {
            sources.remove(self.key);
        }
    }
}

impl std::fmt::Debug for Registration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registration")
            .field("key", &self.key)
            .field("readable", &self.state.readable.get())
            .field("writable", &self.state.writable.get())
            .field("closed", &self.state.closed.get())
            .finish()
    }
}

#[cfg(test)]
mod layout_tests {
    use super::IoState;
    use std::mem::{offset_of, size_of};

    /// What an event and a wait touch (see the layout notes on `IoState`)
    /// ends 96 bytes into the `Rc`'s block, its two counts included.
    #[test]
    fn hot_fields_come_first() {
        let hot_end =
            offset_of!(IoState, writers) + size_of::<std::cell::RefCell<super::WaiterQueue>>();
        assert!(16 + hot_end <= 96, "the queues end at {hot_end}");
        assert!(offset_of!(IoState, read_waker) >= hot_end);
    }
}
