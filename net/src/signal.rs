//! Unix signals as something a green thread can wait for: [`Signals`].
//!
//! # Design
//!
//! A signal handler may do almost nothing (no allocation, no locks), so the
//! field's standard answer is a self-pipe: `signal-hook` installs a handler
//! that records the signal and writes a byte into a pipe, and
//! `signal-hook-mio` makes the pipe's read end a mio source. [`Signals`]
//! registers that source with the runtime's reactor through
//! [`Registration`], exactly as the sockets do, so [`Signals::recv`] parks
//! only the calling green thread until the pipe turns readable, then drains
//! it and hands out the recorded signals one at a time. The wait honours
//! `with_timeout` (`TimedOut`) and `Coro::interrupt`, like a socket read.
//!
//! signalfd would do the same on Linux only, and needs the signals blocked
//! in every OS thread of the process (the blocking pool's and the
//! watchdog's included) before any of them starts; the self-pipe works
//! whatever the threads' masks are, and on the BSDs and macOS too.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::io;

use coro_runtime::{Direction, Interest, Registration};
use libc::c_int;

pub use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2};

/// A set of Unix signals that green threads can wait for.
///
/// While a `Signals` for a signal exists, that signal no longer has its
/// default action (SIGINT and SIGTERM no longer end the process): it is
/// recorded and handed to [`recv`](Signals::recv). Several `Signals` may
/// watch the same signal; each sees every delivery. Deliveries of one
/// signal that arrive before anyone looks may be merged into one, as the
/// kernel merges pending signals.
///
/// # Default action after drop
///
/// Dropping a `Signals` stops recording, but the process-wide handler
/// `signal-hook` installed stays (a handler cannot be removed safely while
/// other threads may run it); the signal is then ignored rather than
/// restored to its default action. A server that wants a second Ctrl-C to
/// kill it keeps the `Signals` and exits itself on the second signal.
///
/// # Examples
///
/// Wait for SIGTERM or SIGINT in one green thread while others serve:
///
/// ```no_run
/// use coro::signal::{Signals, SIGINT, SIGTERM};
///
/// coro::run(|| -> std::io::Result<()> {
///     let signals = Signals::new([SIGINT, SIGTERM])?;
///     let server = coro::spawn(|| { /* accept loop */ });
///     let sig = signals.recv()?; // only this green thread waits
///     eprintln!("got signal {sig}, stopping");
///     server.thread().interrupt().ok();
///     Ok(())
/// })
/// .unwrap();
/// ```
pub struct Signals {
    /// The pipe's readiness and the green threads parked on it. Declared
    /// before `source` so it is closed (waking any waiter) before the
    /// pipe's fds close.
    reg: Registration,
    /// signal-hook's delivery: the handler registrations and the pipe.
    source: RefCell<signal_hook_mio::v1_0::Signals>,
    /// Signals drained from the pipe and not yet handed out, oldest first.
    pending: RefCell<VecDeque<c_int>>,
}

impl Signals {
    /// Starts recording `signals` and registers the pipe they are reported
    /// through with this runtime.
    ///
    /// # Errors
    ///
    /// `InvalidInput` for a signal that cannot be handled (SIGKILL,
    /// SIGSTOP, SIGILL, SIGFPE, SIGSEGV) or that is not a valid signal
    /// number; otherwise as creating the pipe, installing the handler
    /// (`sigaction`) or registering with the reactor.
    ///
    /// # Panics
    ///
    /// Outside a runtime.
    pub fn new<I>(signals: I) -> io::Result<Signals>
    where
        I: IntoIterator<Item = c_int>,
    {
        let signals: Vec<c_int> = signals.into_iter().collect();
        for &s in &signals {
            check(s)?;
        }
        let mut source = signal_hook_mio::v1_0::Signals::new(&signals)?;
        let reg = Registration::new(&mut source, Interest::READABLE)?;
        Ok(Signals {
            reg,
            source: RefCell::new(source),
            pending: RefCell::new(VecDeque::new()),
        })
    }

    /// Adds `signal` to the set recorded.
    ///
    /// # Errors
    ///
    /// As [`new`](Signals::new).
    pub fn add_signal(&self, signal: c_int) -> io::Result<()> {
        check(signal)?;
        self.source.borrow().add_signal(signal)
    }

    /// Waits until one of the signals arrives and returns its number.
    /// Only the calling green thread waits. Signals that arrived before the
    /// call (since the `Signals` was made) are returned first, oldest first.
    ///
    /// # Errors
    ///
    /// `TimedOut` when an enclosing `with_timeout` expires, an
    /// interruption error when the green thread is
    /// [interrupted](coro_runtime::Coro::interrupt) (its
    /// [`WaitError`](coro_runtime::WaitError) is the source; never
    /// `ErrorKind::Interrupted`), `NotConnected` after
    /// [`close`](Signals::close). A signal that arrives while the wait is
    /// cut short is kept for the next call.
    pub fn recv(&self) -> io::Result<c_int> {
        loop {
            if let Some(s) = self.pending.borrow_mut().pop_front() {
                return Ok(s);
            }
            let got = self.reg.io(Direction::Read, || match self.drain() {
                0 => Err(io::ErrorKind::WouldBlock.into()),
                n => Ok(n),
            })?;
            debug_assert!(got > 0);
        }
    }

    /// Returns a signal that has arrived, if any, without waiting.
    ///
    /// # Errors
    ///
    /// `NotConnected` after [`close`](Signals::close).
    pub fn try_recv(&self) -> io::Result<Option<c_int>> {
        if self.reg.is_closed() {
            // The same error a wait gets.
            self.reg.wait(Direction::Read)?;
        }
        if self.pending.borrow().is_empty() {
            self.drain();
        }
        Ok(self.pending.borrow_mut().pop_front())
    }

    /// Wakes every green thread waiting in [`recv`](Signals::recv) with
    /// `NotConnected`, and fails later calls the same way. The signals stay
    /// recorded (see the type's docs) until the `Signals` is dropped.
    pub fn close(&self) {
        self.reg.close()
    }

    /// Moves what the handler recorded into `pending`; returns how many.
    fn drain(&self) -> usize {
        let mut source = self.source.borrow_mut();
        let mut pending = self.pending.borrow_mut();
        let before = pending.len();
        pending.extend(source.pending());
        pending.len() - before
    }
}

/// `InvalidInput` for a signal number signal-hook would panic on: a
/// forbidden one, or one outside its table (1..128; the OS refuses the
/// numbers within that it has no signal for).
fn check(signal: c_int) -> io::Result<()> {
    if signal_hook::consts::FORBIDDEN.contains(&signal) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("coro::signal: signal {signal} cannot be handled (SIGKILL, SIGSTOP and the fault signals cannot)"),
        ));
    }
    if !(1..128).contains(&signal) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("coro::signal: {signal} is not a signal number"),
        ));
    }
    Ok(())
}

impl std::fmt::Debug for Signals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Signals")
            .field("pending", &self.pending.try_borrow().map(|p| p.len()).ok())
            .field("closed", &self.reg.is_closed())
            .finish()
    }
}
