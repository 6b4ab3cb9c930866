//! hyper 1.x on coro (feature `hyper`): sockets as `hyper::rt::Read` and
//! `Write`, [`CoroTimer`] (`hyper::rt::Timer` on coro's timer wheel) and
//! [`CoroExecutor`] (`hyper::rt::Executor`: each future a green thread).
//! The counterparts of hyper-util's `TokioIo`, `TokioTimer` and
//! `TokioExecutor`, with no tokio runtime anywhere.

use std::future::Future;
use std::io;
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use coro_runtime::{future, Direction};

use crate::source::Source;

/// `hyper::rt::Read::poll_read`: reads straight into hyper's buffer.
pub(crate) fn poll_read<S>(
    src: &Source<S>,
    cx: &mut Context<'_>,
    mut buf: hyper::rt::ReadBufCursor<'_>,
) -> Poll<io::Result<()>>
where
    S: mio::event::Source + AsRawFd,
{
    // SAFETY: `as_mut` hands out the cursor's unfilled part, which may be
    // uninitialized; nothing below reads it or writes uninitialized bytes
    // into it (the contract of `as_mut`): its pointer and length go only to
    // read(2), which writes at most `len` bytes and reads none.
    let dst = unsafe { buf.as_mut() };
    if dst.is_empty() {
        return Poll::Ready(Ok(()));
    }
    let n = std::task::ready!(src.poll_io(Direction::Read, cx, |s| {
        // SAFETY: `dst` is a live, exclusively borrowed buffer of
        // `dst.len()` bytes for the whole call, and `s`'s fd is open (the
        // `Source` owns it and is borrowed here).
        let r = unsafe { libc::read(s.as_raw_fd(), dst.as_mut_ptr().cast(), dst.len()) };
        if r < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(r as usize)
        }
    }))?;
    // SAFETY: read(2) returned `n`, so it initialized the first `n` bytes of
    // the unfilled part (`n <= dst.len()`); `advance` marks exactly those
    // as filled. On every other path (pending, error) nothing is advanced.
    unsafe { buf.advance(n) };
    Poll::Ready(Ok(()))
}

/// `hyper::rt::Executor` that runs each future hyper hands it (HTTP/2
/// connection tasks, `upgrade`s) as a new green thread, inside
/// [`block_on`](coro_runtime::future::block_on), in the runtime of the green
/// thread that calls `execute`.
///
/// A future that cannot start (no memory for a stack) is dropped and the
/// error logged at ERROR.
///
/// # Panics
///
/// `execute` outside a green thread.
#[derive(Debug, Default, Clone, Copy)]
pub struct CoroExecutor;

impl<F> hyper::rt::Executor<F> for CoroExecutor
where
    F: Future + 'static,
{
    fn execute(&self, fut: F) {
        let spawned = coro_runtime::Builder::new()
            .name("hyper-task".into())
            .spawn(move || {
                // An error means the task was interrupted or the runtime
                // shuts down: the future is dropped, which cancels it.
                let _ = future::block_on(fut);
            });
        if let Err(e) = spawned {
            log::error!(target: "coro", "CoroExecutor: a hyper task could not start: {e}");
        }
    }
}

/// `hyper::rt::Timer` on coro's timer wheel: its sleeps are
/// [`coro::future::Sleep`](coro_runtime::future::Sleep)s (`Send + Sync`, as
/// hyper requires), for `header_read_timeout`, keep-alive timers and the
/// like.
#[derive(Debug, Default, Clone, Copy)]
pub struct CoroTimer;

/// A [`future::Sleep`] as a `hyper::rt::Sleep`.
#[derive(Debug)]
struct HyperSleep(future::Sleep);

impl Future for HyperSleep {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        Pin::new(&mut self.0).poll(cx)
    }
}

impl hyper::rt::Sleep for HyperSleep {}

impl hyper::rt::Timer for CoroTimer {
    fn sleep(&self, d: Duration) -> Pin<Box<dyn hyper::rt::Sleep>> {
        Box::pin(HyperSleep(future::sleep(d)))
    }

    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn hyper::rt::Sleep>> {
        self.sleep(deadline.saturating_duration_since(Instant::now()))
    }
}
