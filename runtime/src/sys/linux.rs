//! The precise wake-up timer on Linux and Android: a `timerfd` in the mio poll.
//!
//! The timerfd is made the first time it is armed: a runtime that never
//! waits for a deadline (or one that is built, runs a batch of threads and
//! is dropped) saves its three system calls, a few microseconds.

use std::cell::{Cell, OnceCell};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

use mio::unix::SourceFd;
use mio::{Interest, Registry};

use crate::clock::{self, Instant};
use crate::reactor::TIMER_TOKEN;

pub(crate) struct PreciseTimer {
    /// Made and registered at the first [`arm`](Self::arm).
    fd: OnceCell<OwnedFd>,
    /// The deadline the timerfd is armed for (ticks), 0 when disarmed.
    armed: Cell<u64>,
}

impl PreciseTimer {
    pub(crate) fn new(_registry: &Registry) -> io::Result<PreciseTimer> {
        Ok(PreciseTimer {
            fd: OnceCell::new(),
            armed: Cell::new(0),
        })
    }

    /// The timerfd, made and registered with `registry` if it is not yet.
    fn fd(&self, registry: &Registry) -> io::Result<&OwnedFd> {
        if let Some(fd) = self.fd.get() {
            return Ok(fd);
        }
        // SAFETY: timerfd_create has no memory preconditions; the result is
        // checked before use.
        let raw = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a fresh fd that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        registry.register(
            &mut SourceFd(&fd.as_raw_fd()),
            TIMER_TOKEN,
            Interest::READABLE,
        )?;
        Ok(self.fd.get_or_init(|| fd))
    }

    /// Arms the timerfd for `deadline`, unless it already is.
    ///
    /// The timerfd is armed relative to the present (`deadline - now`), so
    /// an error in the tick rate shifts a timer by that error times its own
    /// length, never by the time since the clock was calibrated.
    ///
    /// If the timerfd cannot be made (no file descriptors left), it stays
    /// disarmed and [`poll_timeout`](Self::poll_timeout) falls back to
    /// epoll's millisecond timeout; the next arm tries again.
    pub(crate) fn arm(&self, registry: &Registry, deadline: Instant) {
        let t = deadline.ticks().max(1);
        if self.armed.get() == t {
            return;
        }
        let Ok(fd) = self.fd(registry) else {
            return;
        };
        let ns = relative_ns(deadline, clock::now());
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: (ns / 1_000_000_000) as libc::time_t,
                tv_nsec: (ns % 1_000_000_000) as libc::c_long,
            },
        };
        // SAFETY: the fd is our timerfd; `spec` is a valid itimerspec.
        let rc = unsafe { libc::timerfd_settime(fd.as_raw_fd(), 0, &spec, std::ptr::null_mut()) };
        if rc == 0 {
            self.armed.set(t);
        }
    }

    /// Timeout to give mio when blocking until `deadline`: none, the timerfd
    /// wakes the poll (falls back to mio's timeout if arming failed).
    pub(crate) fn poll_timeout(&self, deadline: Instant) -> Option<Duration> {
        if self.armed.get() == deadline.ticks().max(1) {
            None
        } else {
            Some(deadline.duration_since(clock::now()))
        }
    }

    /// Time left on the timerfd, `None` when disarmed.
    #[cfg(test)]
    fn remaining(&self) -> Option<Duration> {
        let fd = self.fd.get()?;
        // SAFETY: all-zero is a valid itimerspec; the fd is our timerfd.
        let mut cur: libc::itimerspec = unsafe { std::mem::zeroed() };
        // SAFETY: as above; `cur` is valid for writing.
        unsafe { libc::timerfd_gettime(fd.as_raw_fd(), &mut cur) };
        let d = Duration::new(cur.it_value.tv_sec as u64, cur.it_value.tv_nsec as u32);
        (!d.is_zero()).then_some(d)
    }

    /// Called when the timerfd's token fired: drains it.
    pub(crate) fn fired(&self) {
        let Some(fd) = self.fd.get() else {
            return;
        };
        let mut buf = [0u8; 8];
        // SAFETY: reading at most 8 bytes into an 8-byte buffer from our fd.
        unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), 8) };
        self.armed.set(0);
    }
}

/// Nanoseconds from `now` to `deadline` on the monotonic clock (at least 1:
/// a zero `it_value` would disarm the timer).
fn relative_ns(deadline: Instant, now: Instant) -> u64 {
    (deadline.duration_since(now).as_nanos() as u64).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deadline 50 ms ahead arms the timerfd about 50 ms ahead however
    /// long ago the clock was calibrated (not placed by extrapolating from
    /// the calibration, which would drift with uptime).
    #[test]
    fn the_timerfd_is_armed_relative_to_the_present() {
        let poll = mio::Poll::new().unwrap();
        let timer = PreciseTimer::new(poll.registry()).unwrap();
        assert!(timer.fd.get().is_none(), "made before it is needed");
        let deadline = clock::now() + Duration::from_millis(50);
        timer.arm(poll.registry(), deadline);
        let left = timer.remaining().expect("armed");
        let after = clock::now();
        // Time only passes between arming and reading: at most 50 ms left,
        // and at least what is left until the deadline now (less a little
        // for the two clocks' rates and the reads).
        assert!(left <= Duration::from_millis(50), "{left:?}");
        let floor = deadline.duration_since(after);
        assert!(
            left + Duration::from_micros(200) >= floor,
            "{left:?} left, {floor:?} to the deadline"
        );
        assert_eq!(relative_ns(clock::now(), deadline), 1);
    }
}
