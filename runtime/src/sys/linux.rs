//! The precise wake-up timer on Linux and Android: a `timerfd` in the mio poll.

use std::cell::Cell;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

use mio::unix::SourceFd;
use mio::{Interest, Registry};

use crate::clock::{self, Instant};
use crate::reactor::TIMER_TOKEN;

pub(crate) struct PreciseTimer {
    fd: OwnedFd,
    /// The deadline the timerfd is armed for (ticks), 0 when disarmed.
    armed: Cell<u64>,
}

impl PreciseTimer {
    pub(crate) fn new(registry: &Registry) -> io::Result<PreciseTimer> {
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
        Ok(PreciseTimer {
            fd,
            armed: Cell::new(0),
        })
    }

    /// Arms the timerfd for `deadline` (absolute, on CLOCK_MONOTONIC), unless
    /// it already is.
    pub(crate) fn arm(&self, deadline: Instant) {
        let t = deadline.ticks().max(1);
        if self.armed.get() == t {
            return;
        }
        let ns = clock::monotonic_ns_at(deadline).max(1);
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
        let rc = unsafe {
            libc::timerfd_settime(
                self.fd.as_raw_fd(),
                libc::TFD_TIMER_ABSTIME,
                &spec,
                std::ptr::null_mut(),
            )
        };
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

    /// Called when the timerfd's token fired: drains it.
    pub(crate) fn fired(&self) {
        let mut buf = [0u8; 8];
        // SAFETY: reading at most 8 bytes into an 8-byte buffer from our fd.
        unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), 8) };
        self.armed.set(0);
    }
}
