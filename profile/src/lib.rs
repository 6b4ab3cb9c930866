//! Reads the profiles that coro's profiler writes.
//!
//! `coro::profile` records where a runtime's time went and saves it as a
//! file of JSON lines (`Profile::save`, or the back door's
//! `profile dump PATH`); the format is documented with the profiler. This
//! crate reads such a file back into a [`Profile`], and its binary,
//! `coro-profile`, turns one into something to read:
//!
//! ```text
//! coro-profile report PROFILE [-o REPORT.html]   one self-contained HTML page
//! coro-profile diff A B                          what changed between two runs
//! coro-profile show PROFILE                      the entries as a text table
//! ```
//!
//! The reader accepts every file of a format version up to
//! [`FORMAT_VERSION`], ignores keys and line types it does not know (a
//! later minor addition still reads), and refuses a newer version with an
//! error that says so.
//!
//! # Examples
//!
//! ```
//! use std::time::Duration;
//!
//! let file = concat!(
//!     r#"{"type":"header","format":"coro-profile","version":1,"program":"relay","#,
//!     r#""pid":42,"start_unix_ns":1700000000000000000,"wall_ns":2000000000}"#, "\n",
//!     r#"{"type":"entry","kind":"region","name":"parse","calls":12,"wall_ns":1500000000,"#,
//!     r#""utime_ns":1490000000}"#, "\n",
//! );
//! let p = coro_profile::Profile::read_from(file.as_bytes())?;
//! assert_eq!(p.program, "relay");
//! let parse = p.entry("parse").unwrap();
//! assert_eq!(parse.wall, Duration::from_millis(1500));
//! assert_eq!(parse.usage.cpu(), Duration::from_millis(1490));
//! # Ok::<(), std::io::Error>(())
//! ```

mod read;

use std::fs::File;
use std::io::{self, BufRead, BufReader};
use std::path::Path;
use std::time::{Duration, SystemTime};

/// The newest format version this crate reads.
pub const FORMAT_VERSION: u64 = 1;

/// What an [`Entry`] accounts for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// Green threads of one name, outside regions.
    Thread,
    /// A named region (`coro::profile::region`).
    Region,
    /// `<wait>`: the loop blocked in the poller.
    Wait,
    /// `<scheduler>`: the rest of the scheduler loop.
    Scheduler,
}

impl Kind {
    /// The name used in the file (`thread`, `region`, `wait`, `scheduler`).
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Thread => "thread",
            Kind::Region => "region",
            Kind::Wait => "wait",
            Kind::Scheduler => "scheduler",
        }
    }
}

/// The `getrusage` counters charged to an entry or to the whole interval.
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

/// What a thread name, a region or a pseudo-entry was charged with over
/// the interval.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Entry {
    /// What it accounts for.
    pub kind: Kind,
    /// The thread or region name, `<unnamed>`, `<wait>` or `<scheduler>`.
    pub name: String,
    /// Slices run (threads), entries (regions), blocking polls (`<wait>`).
    pub calls: u64,
    /// Wall time charged.
    pub wall: Duration,
    /// `getrusage` deltas charged.
    pub usage: Usage,
}

/// A latency warning whose slice overlapped the interval.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Warning {
    /// The green thread's id.
    pub thread: u64,
    /// Its name, if it had one.
    pub name: Option<String>,
    /// When its slice began.
    pub started: SystemTime,
    /// How long the slice ran (so far, if `running`).
    pub ran: Duration,
    /// The slice had not ended when the profile was taken.
    pub running: bool,
}

/// A span of the flight recorder's timeline: a green thread's resume, or a
/// poll of the loop.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Slice {
    /// The green thread's id; 0 for the scheduler (polls).
    pub track: u64,
    /// The thread's name (`#7 upload`), `poll` or `wait`.
    pub name: String,
    /// Its start, from the interval's start.
    pub start: Duration,
    /// Its length.
    pub dur: Duration,
    /// How it ended: `yield`, `park: REASON`, `finish`, or a poll's
    /// `N events`.
    pub what: String,
    /// The latency watchdog reported it.
    pub latency_warning: bool,
}

/// A profile as read from its file.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Profile {
    /// The format version the file was written in.
    pub version: u64,
    /// The program's executable name.
    pub program: String,
    /// Its process id.
    pub pid: u32,
    /// When the interval began.
    pub start: SystemTime,
    /// Its length; the entries' wall times add up to it.
    pub wall: Duration,
    /// The runtime's latency-warning threshold (`None`: warnings were off).
    pub latency_threshold: Option<Duration>,
    /// The OS thread's usage over the interval.
    pub usage: Usage,
    /// The entries, in the file's order (most wall time first).
    pub entries: Vec<Entry>,
    /// Latency warnings whose slice overlapped the interval.
    pub latency_warnings: Vec<Warning>,
    /// The flight recorder's spans of the interval's end, oldest first.
    pub timeline: Vec<Slice>,
}

impl Profile {
    /// The entry of this name, if any (the first, when a thread and a region
    /// share a name).
    pub fn entry(&self, name: &str) -> Option<&Entry> {
        self.entries.iter().find(|e| e.name == name)
    }

    /// The entry of this kind and name, if any.
    pub fn entry_of(&self, kind: Kind, name: &str) -> Option<&Entry> {
        self.entries
            .iter()
            .find(|e| e.kind == kind && e.name == name)
    }

    /// Reads a profile in the file format.
    ///
    /// # Errors
    ///
    /// Those of `r`; `InvalidData` naming the line and the problem for text
    /// that is not a profile, or one of a newer format version.
    pub fn read_from<R: BufRead>(r: R) -> io::Result<Profile> {
        read::read(r)
    }

    /// Reads a profile file.
    ///
    /// # Errors
    ///
    /// As [`read_from`](Self::read_from), and those of opening the file.
    pub fn load<P: AsRef<Path>>(path: P) -> io::Result<Profile> {
        Profile::read_from(BufReader::new(File::open(path)?))
    }
}
