//! The coro profiler: where a runtime's time went, per green thread and per
//! named region, with the `getrusage` counters of the code that ran.
//!
//! Shrapnel's coro profiler samples `getrusage()` around the code it
//! profiles and keeps call counts; this is that, for a whole runtime at
//! once. Between [`start`] and [`stop`] every moment of the runtime's OS
//! thread is charged to one *entry*:
//!
//! | entry | kind | charged with |
//! |---|---|---|
//! | a thread name (`upload`), or `<unnamed>` | [`Kind::Thread`] | green threads of that name while they run outside any region |
//! | a region name (`parse`) | [`Kind::Region`] | code inside [`region`] (the innermost one, in any thread) |
//! | `<wait>` | [`Kind::Wait`] | the loop blocked in the poller: every thread parked (sleeping, waiting for I/O, a lock, a blocking job) |
//! | `<scheduler>` | [`Kind::Scheduler`] | the rest of the loop: timers, polls that do not block, the ready queue, and the profiler's own samples |
//!
//! So the entries' wall times add up to the interval's wall time, and their
//! CPU times to the thread's. A thread's whole body is profiled under its
//! name ([`Builder::name`](crate::Builder::name)) with no annotation; use
//! [`region`] to split it further.
//!
//! Each entry has: `calls` (for a thread, the slices it ran, i.e. resumes;
//! for a region, the times it was entered; for `<wait>`, the polls that may
//! block), `wall`, and the [`Usage`] deltas of `getrusage(RUSAGE_THREAD)`:
//! user and system CPU time, minor and major page faults, voluntary and
//! involuntary context switches. A profile also holds the latency warnings
//! of the interval.
//!
//! # Cost
//!
//! Off (the default), the switch path pays one predictable branch on a
//! flag of the scheduler, and [`region`] one thread-local lookup and that
//! branch (see BENCHMARKS.md for the measured cost). On, every boundary (a
//! resume's start and end, a blocking poll's start and end, a region's entry
//! and exit) reads the clock and calls `getrusage`, about a microsecond per
//! switch; the profile is meant for finding where time goes, not to stay on.
//!
//! # Precision
//!
//! Wall times come from the tick clock and add up exactly. The `getrusage`
//! counters are the kernel's: on Linux a thread's CPU time advances at
//! scheduler ticks and context switches, so over a handful of short slices
//! an entry can show more CPU than wall time and its neighbour less; over
//! many slices, and in total, they are right. CPU time below wall time means
//! the OS thread did not run (a loaded machine), not that it waited.
//!
//! Jobs sent to [`blocking`](crate::blocking) run on other OS threads: their
//! CPU time is not in the profile; the thread that waits for one is parked
//! (`<wait>` while nothing else runs).
//!
//! # The file format, version 1
//!
//! [`Profile::write_to`] writes JSON lines (one JSON object per line, UTF-8).
//! The runtime only writes them: the `coro-profile` package reads them back
//! (its library, `coro_profile::load`, into this [`Profile`]) and its tool turns them
//! into an HTML report, a diff or a table.
//!
//! ```text
//! {"type":"header","format":"coro-profile","version":1,"program":"relay","pid":4242,
//!  "start_unix_ns":1700000000000000000,"wall_ns":2000000000,"latency_threshold_ns":200000000,
//!  "utime_ns":..,"stime_ns":..,"minflt":..,"majflt":..,"nvcsw":..,"nivcsw":..}
//! {"type":"entry","kind":"region","name":"parse","calls":12,"wall_ns":1500000000,
//!  "utime_ns":1490000000,"stime_ns":1000000,"minflt":3,"majflt":0,"nvcsw":0,"nivcsw":4}
//! {"type":"latency_warning","thread":7,"name":"upload","start_unix_ns":..,"ran_ns":310000000,
//!  "running":false}
//! ```
//!
//! (each object on one line). The header comes first, once: `version` is
//! this format's version, `latency_threshold_ns` is `null` when warnings
//! were off, the usage fields are the whole interval's. Then one `entry`
//! line per entry (`kind`: `thread`, `region`, `wait` or `scheduler`) and
//! one `latency_warning` line per warning whose slice overlapped the
//! interval (`name` is `null` for an unnamed thread; `running`: the slice
//! had not ended when the profile was taken). Last, one `slice` line per
//! span of the flight recorder's timeline ([`Profile::timeline`]):
//! `{"type":"slice","track":7,"name":"#7 upload","start_ns":..,"dur_ns":..,
//! "what":"park: sleep","latency_warning":false}` (added in version 1;
//! older readers skip the lines). Times are nanoseconds, counts
//! whole numbers. Readers ignore keys and line types they do not know; a
//! change that old readers would misread gets a new version number.
//!
//! # Examples
//!
//! ```
//! use std::time::Duration;
//!
//! coro::run(|| {
//!     coro::profile::start().unwrap();
//!     coro::profile::region("nap", || coro::sleep(Duration::from_millis(20))).unwrap();
//!     coro::profile::region("spin", || {
//!         let t = std::time::Instant::now();
//!         while t.elapsed() < Duration::from_millis(20) {}
//!     });
//!     let p = coro::profile::stop().unwrap();
//!     let total: Duration = p.entries.iter().map(|e| e.wall).sum();
//!     assert!(total.abs_diff(p.wall) < Duration::from_micros(1)); // rounding only
//!     assert!(p.entry("<wait>").unwrap().wall >= Duration::from_millis(15));
//!     let spin = p.entry("spin").unwrap();
//!     assert!(spin.wall >= Duration::from_millis(20));
//!     println!("spin: {:?} user, {:?} system", spin.usage.utime, spin.usage.stime);
//! });
//! ```

mod format;
mod record;
mod usage;

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::time::{Duration, SystemTime};

use crate::kernel::context;

pub use format::FORMAT_VERSION;
pub(crate) use record::{around_poll, resume, Profiler};
pub use usage::Usage;

/// What an [`Entry`] accounts for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// Green threads of one name, outside regions.
    Thread,
    /// A named [`region`].
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

/// One line of a profile: what a thread name, a region or a pseudo-entry
/// was charged with over the interval.
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

impl Entry {
    /// An entry of this kind and name with nothing charged to it yet (for
    /// a reader that fills in the rest).
    pub fn new(kind: Kind, name: impl Into<String>) -> Entry {
        Entry {
            kind,
            name: name.into(),
            calls: 0,
            wall: Duration::ZERO,
            usage: Usage::default(),
        }
    }
}

/// A latency warning of the profiled interval, as stored in a profile.
///
/// Its `Default` is a warning about thread 0 whose slice began at the Unix
/// epoch and ran for no time (for a reader that fills in the fields).
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

impl Default for Warning {
    fn default() -> Warning {
        Warning {
            thread: 0,
            name: None,
            started: SystemTime::UNIX_EPOCH,
            ran: Duration::ZERO,
            running: false,
        }
    }
}

/// A recorded interval: see the [module docs](self).
///
/// Its `Default` is an empty interval that began at the Unix epoch: what a
/// reader of the file format (the `coro-profile` package) starts from and
/// fills in field by field.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Profile {
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
    /// The entries, most wall time first.
    pub entries: Vec<Entry>,
    /// Latency warnings whose slice overlapped the interval.
    pub latency_warnings: Vec<Warning>,
    /// The flight recorder's resumes and polls of the interval's end (the
    /// ring keeps the last [`EVENTS`](crate::observers::flight::EVENTS) events), oldest
    /// first: the report's timeline.
    pub timeline: Vec<Slice>,
}

/// A span of the flight recorder's timeline (see [`crate::observers::flight`]): a
/// green thread's resume, or a poll of the loop.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
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

impl Default for Profile {
    fn default() -> Profile {
        Profile {
            program: String::new(),
            pid: 0,
            start: SystemTime::UNIX_EPOCH,
            wall: Duration::ZERO,
            latency_threshold: None,
            usage: Usage::default(),
            entries: Vec::new(),
            latency_warnings: Vec::new(),
            timeline: Vec::new(),
        }
    }
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

    /// Writes the profile in the file format (see the module docs).
    ///
    /// # Errors
    ///
    /// Those of `w`.
    pub fn write_to<W: Write>(&self, w: W) -> io::Result<()> {
        let mut w = BufWriter::new(w);
        format::write(self, &mut w)?;
        w.flush()
    }

    /// Writes the profile to a new file at `path` (replacing one there) and
    /// syncs it to disk.
    ///
    /// This is plain file I/O: on a green thread, run it inside
    /// [`blocking`](crate::blocking) if the disk may be slow.
    ///
    /// # Errors
    ///
    /// Those of creating, writing and syncing the file.
    pub fn save<P: AsRef<Path>>(&self, path: P) -> io::Result<()> {
        let f = File::create(path)?;
        self.write_to(&f)?;
        f.sync_all()
    }
}

/// Starts recording a profile of the current runtime.
///
/// # Errors
///
/// `AlreadyExists` if a recording is in progress.
///
/// # Panics
///
/// Outside a green thread.
#[track_caller]
pub fn start() -> io::Result<()> {
    context::with_current("coro::profile::start", |s, t| {
        if s.observers.profiler.start(t) {
            Ok(())
        } else {
            Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                "a profile is already being recorded in this runtime",
            ))
        }
    })
}

/// Stops the recording and returns it; `None` if none was in progress.
///
/// # Panics
///
/// Outside a runtime.
#[track_caller]
pub fn stop() -> Option<Profile> {
    context::with_sched("coro::profile::stop", |s| s.observers.profiler.stop(s))
}

/// The recording so far, which goes on; `None` if none is in progress.
///
/// # Panics
///
/// Outside a runtime.
#[track_caller]
pub fn snapshot() -> Option<Profile> {
    context::with_sched("coro::profile::snapshot", |s| {
        s.observers.profiler.snapshot(s)
    })
}

/// Whether a recording is in progress in the current runtime (`false`
/// outside a runtime).
pub fn is_running() -> bool {
    context::try_with_sched(|s| s.observers.profiler.on.get()).unwrap_or(false)
}

/// Runs `f`, charging its time to the region `name` while a profile is
/// recorded. Regions nest: time goes to the innermost. The region is closed
/// on every path out of `f`, a panic included.
///
/// Outside a green thread, or while no profile is recorded, it just runs `f`.
///
/// # Examples
///
/// ```
/// fn parse(body: &str) -> usize {
///     coro::profile::region("parse", || body.split(',').count())
/// }
/// assert_eq!(parse("a,b"), 2); // no runtime: no region, same result
/// ```
pub fn region<R>(name: &'static str, f: impl FnOnce() -> R) -> R {
    struct Close(Option<record::RegionGuard>);
    impl Drop for Close {
        fn drop(&mut self) {
            if let Some(g) = &self.0 {
                context::try_with_current(|s, t| g.exit(s, t));
            }
        }
    }
    let _close = Close(context::try_with_current(|s, t| record::enter(s, t, name)).flatten());
    f()
}
