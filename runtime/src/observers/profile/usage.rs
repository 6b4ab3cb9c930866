//! Resource usage of the runtime's OS thread: `getrusage(RUSAGE_THREAD)`
//! (Linux, Android, FreeBSD, OpenBSD; `RUSAGE_SELF`, the whole process,
//! elsewhere) and the tick clock, read together as one [`Sample`].

use std::ops::{AddAssign, Sub};
use std::time::Duration;

use crate::kernel::clock;

#[cfg(any(
    target_os = "linux",
    target_os = "android",
    target_os = "freebsd",
    target_os = "openbsd"
))]
const WHO: libc::c_int = libc::RUSAGE_THREAD;
#[cfg(not(any(
    target_os = "linux",
    target_os = "android",
    target_os = "freebsd",
    target_os = "openbsd"
)))]
const WHO: libc::c_int = libc::RUSAGE_SELF;

/// What `getrusage` reports that the profiler charges, as deltas or totals.
///
/// The fields are those of `getrusage(2)`: CPU time in user and kernel mode,
/// page faults served without and with I/O, voluntary and involuntary
/// context switches of the OS thread.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Usage {
    /// CPU time in user mode (`ru_utime`).
    pub utime: Duration,
    /// CPU time in the kernel (`ru_stime`).
    pub stime: Duration,
    /// Page faults served without I/O (`ru_minflt`).
    pub minflt: u64,
    /// Page faults that needed I/O (`ru_majflt`).
    pub majflt: u64,
    /// Voluntary context switches: the OS thread blocked (`ru_nvcsw`).
    pub nvcsw: u64,
    /// Involuntary context switches: the kernel preempted it (`ru_nivcsw`).
    pub nivcsw: u64,
}

impl Usage {
    /// User plus system time.
    pub fn cpu(&self) -> Duration {
        self.utime + self.stime
    }
}

impl AddAssign for Usage {
    fn add_assign(&mut self, o: Usage) {
        self.utime += o.utime;
        self.stime += o.stime;
        self.minflt += o.minflt;
        self.majflt += o.majflt;
        self.nvcsw += o.nvcsw;
        self.nivcsw += o.nivcsw;
    }
}

impl Sub for Usage {
    type Output = Usage;
    /// Saturating: the kernel's counters never go back, but a delta is never
    /// allowed to underflow.
    fn sub(self, o: Usage) -> Usage {
        Usage {
            utime: self.utime.saturating_sub(o.utime),
            stime: self.stime.saturating_sub(o.stime),
            minflt: self.minflt.saturating_sub(o.minflt),
            majflt: self.majflt.saturating_sub(o.majflt),
            nvcsw: self.nvcsw.saturating_sub(o.nvcsw),
            nivcsw: self.nivcsw.saturating_sub(o.nivcsw),
        }
    }
}

/// The tick clock and the thread's usage, read one after the other.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Sample {
    pub(crate) ticks: u64,
    pub(crate) usage: Usage,
}

fn tv(t: libc::timeval) -> Duration {
    Duration::new(t.tv_sec.max(0) as u64, (t.tv_usec.max(0) as u32) * 1000)
}

/// Reads the clock and `getrusage` for the calling OS thread.
pub(crate) fn sample() -> Sample {
    let ticks = clock::now().ticks();
    // SAFETY: an all-zero `rusage` is a valid value (integers and timevals).
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid, writable rusage; WHO is a valid `who` for
    // this target. getrusage only fails for a bad `who` or pointer, neither
    // possible here; on failure `ru` stays zeroed and deltas saturate to 0.
    unsafe { libc::getrusage(WHO, &mut ru) };
    Sample {
        ticks,
        usage: Usage {
            utime: tv(ru.ru_utime),
            stime: tv(ru.ru_stime),
            minflt: ru.ru_minflt.max(0) as u64,
            majflt: ru.ru_majflt.max(0) as u64,
            nvcsw: ru.ru_nvcsw.max(0) as u64,
            nivcsw: ru.ru_nivcsw.max(0) as u64,
        },
    }
}
