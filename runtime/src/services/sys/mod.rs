//! Platform pieces of the loop: the precise wake-up timer.
//!
//! Each backend exports the same item, `PreciseTimer`, with:
//! `new(&mio::Registry) -> io::Result<PreciseTimer>`,
//! `arm(&self, &mio::Registry, deadline: clock::Instant)` (make the next
//! poll return by then),
//! `poll_timeout(&self, deadline) -> Option<Duration>` (what to pass to mio's
//! poll when blocking until `deadline`) and `fired(&self)` (the timer's
//! token fired: drain it).
//!
//! * Linux, Android: a `timerfd` registered with mio; the loop blocks in
//!   `epoll_wait` with no timeout and the timerfd wakes it with microsecond
//!   precision (epoll's own timeout has whole milliseconds).
//! * Other Unix (BSD, macOS): mio's poll timeout (kqueue takes nanoseconds).

#[cfg(any(target_os = "linux", target_os = "android"))]
mod linux;
#[cfg(any(target_os = "linux", target_os = "android"))]
pub(crate) use linux::PreciseTimer;

#[cfg(all(unix, not(any(target_os = "linux", target_os = "android"))))]
mod other;
#[cfg(all(unix, not(any(target_os = "linux", target_os = "android"))))]
pub(crate) use other::PreciseTimer;

#[cfg(not(unix))]
compile_error!("coro supports Unix targets only (Linux epoll; BSD and macOS kqueue)");
