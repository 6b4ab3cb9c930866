//! Futures on green threads: [`block_on`] runs a `Future` on the calling
//! green thread, and [`sleep`] / [`sleep_until`] are coro's timers as
//! futures. The bridge from coro's blocking style to async crates.
//!
//! # Design
//!
//! `block_on` polls the future on the green thread's own stack; while it
//! is pending, only that green thread parks (the runtime runs the others),
//! and its [`Waker`] schedules it again (see `waker`
//! for why no wake is lost and a late one is harmless). The future is
//! local to the call: a timeout, a cancel scope or an interrupt ends the
//! park with an error, `block_on` returns it, and the future is dropped
//! right there, on the green thread: that is its cancellation.
//!
//! Since a future polled by `block_on` runs on a green thread, it may call
//! coro's blocking functions too; they suspend the green thread in the
//! middle of the poll, as anywhere else.
//!
//! Sockets as `AsyncRead`/`AsyncWrite` (tokio's, `futures-io`'s, hyper's)
//! are in `coro-net`, behind cargo features; they wait on the same reactor
//! through [`Registration::poll_ready`](crate::Registration::poll_ready).

mod sleep;
mod waker;

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

pub use sleep::{sleep, sleep_until, Sleep};
pub(crate) use sleep::{waker_timer_is_live, TimerWakers};
pub(crate) use waker::FutureWake;

use crate::context;
use crate::error::WaitError;

/// Runs `fut` to completion on the calling green thread and returns its
/// output. While the future is pending, only this green thread is
/// suspended; the runtime runs the others (and its reactor and timers,
/// which coro's async adapters wait on).
///
/// Not to be confused with [`Runtime::block_on`](crate::Runtime::block_on),
/// which starts a runtime on an OS thread: this one runs *inside* a green
/// thread of a running runtime.
///
/// # The waker
///
/// The [`Waker`] the future gets is `Send + Sync`: keep it, clone it, call
/// it from any OS thread. On the runtime's own OS thread a wake schedules
/// the green thread directly; from another OS thread it goes through the
/// runtime's inbox (as [`Handle`](crate::Handle) does). A wake that comes
/// while the future is being polled is not lost (the thread does not park
/// then), and one that comes after `block_on` returned, timed out or was
/// interrupted does nothing.
///
/// A future that wakes itself and returns `Pending` (a cooperative yield,
/// as `tokio::task::yield_now` does) makes the green thread
/// [yield](crate::yield_now) before it is polled again; that yield is a
/// blocking call's: a passed deadline, a cancellation or an interrupt ends
/// `block_on` there as at a park, and inside
/// [`no_suspend`](crate::no_suspend) (or while the thread unwinds), where
/// the thread may not switch, `block_on` fails at once with
/// [`WaitError::SuspendForbidden`] instead of polling again in a loop.
/// A future that does I/O through coro's adapters spends selfishness per
/// syscall that does not wait (see [`try_selfish`](crate::try_selfish)),
/// as blocking socket calls do, and is switched out in the middle of its
/// poll when the budget runs out. So a busy future cannot starve the other
/// green threads.
///
/// # Cancellation
///
/// A deadline of an enclosing [`with_timeout`](crate::with_timeout) or
/// [`CancelScope`](crate::CancelScope), an
/// [interrupt](crate::Coro::interrupt), or runtime shutdown ends the wait:
/// the future is dropped on this green thread (its destructor runs here,
/// before `block_on` returns) and the error is returned.
///
/// # Errors
///
/// [`WaitError`] if a park (or the yield after a wake of its own) was cut
/// short (see above); [`WaitError::SuspendForbidden`] if the future stays
/// pending inside [`no_suspend`](crate::no_suspend) or while the thread
/// unwinds (the runtime logs it, naming the thread). The future is gone.
///
/// # Panics
///
/// Outside a green thread of a coro runtime (a plain OS thread, or the
/// scheduler itself), with a message naming `coro::future::block_on`.
/// A panic of the future's `poll` unwinds out of `block_on` like any panic
/// of the green thread.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
///
/// coro::run(|| {
///     let (tx, rx) = std::sync::mpsc::channel();
///     let waiter = coro::spawn(move || {
///         // Any future: here one that another OS thread completes.
///         coro::future::block_on(std::future::poll_fn(|cx| {
///             tx.send(cx.waker().clone()).unwrap();
///             std::task::Poll::Ready(())
///         }))
///     });
///     waiter.join().unwrap().unwrap();
///     rx.recv().unwrap().wake(); // a late wake: harmless
///
///     let late = coro::with_timeout(Duration::from_millis(10), || {
///         coro::future::block_on(std::future::pending::<()>())
///     });
///     assert!(late.is_err());
/// });
/// ```
#[track_caller]
pub fn block_on<F: Future>(fut: F) -> Result<F::Output, WaitError> {
    let Some(state) = context::try_with_current(|s, t| match t.tail.future_wake.take() {
        Some(mut cached) => {
            // Unshared (see `recycle`), so `get_mut` succeeds.
            if let Some(w) = Arc::get_mut(&mut cached) {
                w.reset(Some(s.remote.outside()));
                return cached;
            }
            Arc::new(FutureWake::new(t.key.get(), t.id, s.remote.outside()))
        }
        None => Arc::new(FutureWake::new(t.key.get(), t.id, s.remote.outside())),
    }) else {
        outside()
    };
    let waker = Waker::from(state.clone());
    let mut cx = Context::from_waker(&waker);
    let mut fut = pin!(fut);
    loop {
        // Acquire: the poll sees what every earlier waker call published.
        state.woken.swap(false, Ordering::AcqRel);
        if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            // No selfishness is spent here: the I/O the future did spent
            // it (coro-net's adapters do, per syscall), as blocking calls do.
            drop(waker);
            recycle(state);
            return Ok(v);
        }
        if state.woken.load(Ordering::Acquire) {
            // Woken during the poll (a cooperative yield, or an event that
            // came meanwhile): let the others run, then poll again. Where
            // the thread may not switch this fails, rather than spin.
            crate::suspend::yield_in("future", "coro::future::block_on")?;
            continue;
        }
        let gen = context::with_current("coro::future::block_on", |_, t| t.park_gen.get());
        state.parked.store(gen + 1, Ordering::Relaxed);
        // No wake can slip in between the check above and the park: a wake
        // on this OS thread cannot run meanwhile, and one from another OS
        // thread is delivered by the loop, after this thread parked, and
        // finds `parked` set.
        let r = if state.woken.load(Ordering::Acquire) {
            Ok(())
        } else {
            crate::suspend::park_as("future")
        };
        state.parked.store(0, Ordering::Relaxed);
        r?;
    }
}

/// Keeps `state` for the thread's next `block_on` if no clone of its waker
/// survived: then nothing can wake through it any more (no other thread
/// holds a reference, and none can make one), so reusing it cannot carry
/// a late wake into the next call. Saves an allocation per call.
fn recycle(mut state: Arc<FutureWake>) {
    if let Some(w) = Arc::get_mut(&mut state) {
        w.reset(None);
        context::try_with_current(|_, t| {
            let old = t.tail_to_fill().future_wake.replace(Some(state));
            drop(old);
        });
    }
}

#[cold]
#[track_caller]
fn outside() -> ! {
    panic!(
        "coro: coro::future::block_on needs a green thread of a coro runtime, but none runs \
         here (call it inside coro::run / Runtime::block_on / coro::spawn)"
    )
}
