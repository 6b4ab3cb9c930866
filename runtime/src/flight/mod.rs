//! The flight recorder: an always-on, bounded ring of a runtime's recent
//! scheduling events, and snapshots of it as [`Trace`]s in Chrome's
//! trace-event JSON (which Perfetto and `chrome://tracing` open).
//!
//! # What it records
//!
//! | event | when | with |
//! |---|---|---|
//! | spawn | a green thread is spawned | the spawning thread |
//! | resume | a resume ends | how it ended (yield, park and its reason, finish), when it began and how long it ran |
//! | wake | a parked thread is made ready | the green thread that woke it (0: the scheduler: a timer, I/O, another OS thread) |
//! | timer | a timer fires | its kind (`sleep`, `timeout`) |
//! | poll | the loop polls the OS | the number of events, and how long it blocked |
//!
//! The recorder keeps the last [`EVENTS`] resumes and the last [`EVENTS`]
//! other events (in rings of 160 KiB); older ones are overwritten. The
//! rings are allocated by the first runtime an OS thread builds and kept
//! for the next ones (see `Rings`): a runtime built per request or per
//! test does not zero 160 KiB each time.
//!
//! # Times
//!
//! Every resume is stamped. The scheduler reads the clock (the TSC where
//! the CPU has an invariant one, see [`clock`](crate::clock)) as each
//! resume ends, and the resume ring keeps the ticks since the previous
//! resume's end (32 bits; a longer interval, over a second, adds an event
//! with the whole count). A trace rebuilds every resume's end from the
//! recorder's last reading backwards. A resume's start is the latest clock
//! reading before it: the end of the resume before it, or the loop's own
//! reading around a poll, a timer check or the start of
//! [`Runtime::block_on`](crate::Runtime::block_on), whichever came last.
//! So a resume's length is what the clock measured, plus the scheduler's
//! own work between that reading and the switch (taking the thread off
//! the ready queue, and copying a copied-out stack back in); a hog that
//! ran 60 ms shows 60 ms, reported by the latency watchdog or not.
//!
//! Polls are timed by the readings around them. Spawns, wakes and fired
//! timers are not stamped themselves: each is placed in order between the
//! readings around it, and a spawn or wake by a green thread inside the
//! resume that made it.
//!
//! # Cost
//!
//! The switch path reads the clock once and stores one 8-byte word into a
//! ring indexed by the switch number the scheduler counts anyway (a park
//! adds its reason). The ring is written on every switch, so its size in
//! the cache is part of its cost: it keeps a 28-bit tag of the thread, not
//! its id (see below). A wake or a spawn is two stores into the other
//! ring; who woke or spawned is not stored, the event's order key says
//! which resume was running. The measured cost is in BENCHMARKS.md.
//!
//! # Thread ids
//!
//! Tags are handed out at spawn and given back at finish so that, in any
//! trace, a tag names one thread (see `tags`): the ids a trace shows are
//! exact, for threads alive or finished, however many were spawned.
//!
//! # Compiled out
//!
//! Built with `--cfg coro_flight_off` (in `RUSTFLAGS`), the runtime records
//! nothing and traces are empty: the baseline the recorder's cost is
//! measured against, not a configuration to run.
//!
//! # Snapshots
//!
//! * [`snapshot`]: the ring now;
//! * the back door's `trace` command (`trace dump PATH`);
//! * automatically when the latency watchdog reports a slice, once it ends
//!   (at most one per
//!   [`RuntimeBuilder::latency_snapshots`](crate::RuntimeBuilder::latency_snapshots)
//!   interval): [`latency_snapshots`] keeps the last [`KEPT_SNAPSHOTS`].
//!
//! # Examples
//!
//! ```
//! coro::run(|| {
//!     coro::spawn(|| coro::yield_now()).join().unwrap();
//!     let trace = coro::flight::snapshot();
//!     assert!(trace.events.iter().any(|e| matches!(e.event, coro::flight::Event::Spawn { .. })));
//!     let json = trace.to_chrome_json();
//!     assert!(json.starts_with("{\"traceEvents\":["));
//! });
//! ```

mod chrome;
mod read;
mod tags;

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::io;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::clock::{self, Instant};
use crate::context;
use crate::sched::Scheduler;
use crate::task::{Task, ThreadState};

/// Resumes, and other events, the recorder keeps (a power of two).
pub const EVENTS: usize = 4096;

/// Snapshots taken on latency warnings that a runtime keeps.
pub const KEPT_SNAPSHOTS: usize = 4;

/// Whether recording is compiled out (see "Compiled out" above).
const OFF: bool = cfg!(coro_flight_off);

/// Kinds, in the low four bits of an event's word (the payload, a thread
/// id, a count or a tick count, is above its low byte).
const SPAWN: u64 = 1;
const WAKE: u64 = 2;
/// A timer fired; bits 4-7: which kind ([`TIMER_KINDS`]).
const TIMER: u64 = 3;
/// A clock reading: the payload is the tick count (its low 56 bits).
const TICK: u64 = 4;
/// A poll ended, with its count of events; bit 4: it could wait. A
/// [`TICK`] with its end follows it.
const POLL: u64 = 5;
/// The watchdog reported the resume whose switch number is the payload.
const HOG: u64 = 6;
/// The resume whose order key this event shares ran longer than its slot
/// holds ([`SATURATED`]): the payload is the ticks since the resume
/// before it ended.
const LONG: u64 = 7;
/// What the sub-kind of a [`TIMER`] names.
const TIMER_KINDS: [&str; 3] = ["sleep", "timeout", "future sleep"];
/// The payload's bits: 56.
const PAYLOAD: u64 = (1 << 56) - 1;
/// A resume slot's tick count when the ticks do not fit (a [`LONG`] event
/// holds them).
const SATURATED: u64 = u32::MAX as u64;

/// One slot of the event ring: the kind and payload, and the order key.
struct RingSlot {
    a: Cell<u64>,
    k: Cell<u64>,
}

/// A runtime's recorder: two rings, merged when read.
///
/// Resumes, the commonest event, go into a ring indexed by the switch
/// number the scheduler counts anyway: a resume that yielded is one store,
/// with no index of the recorder's own to load and bump (a park adds its
/// reason). The other events go into a second ring with its own index,
/// each with an order key placing it among the resumes (see [`key`]).
pub(crate) struct Recorder {
    /// Resume `n`'s time, thread and state at `n % EVENTS`.
    ///
    /// # Invariant
    /// Index `n % EVENTS` holds resume `n` for the last `EVENTS` resumes
    /// that ended (every resume records itself), as one word: bits 0-3 the
    /// thread's state after it, bits 4-31 the thread's tag ([`tags`]), bits
    /// 32-63 the ticks from the end of resume `n - 1` to its own end, or
    /// [`SATURATED`] and a [`LONG`] event with the count.
    res: Rc<[Cell<u64>; EVENTS]>,
    /// A parked resume's reason, at the same index.
    res_s: Rc<[Cell<&'static str>; EVENTS]>,
    /// The other events: one word of kind and payload, and the order key
    /// ([`key`]). Who spawned or woke is not stored: the key says which
    /// resume was running, and the resume ring which thread that was.
    ///
    /// # Invariant
    /// Index `i % EVENTS` holds event `i` for the last `EVENTS` values of
    /// `i` below `head`.
    ev: Rc<[RingSlot; EVENTS]>,
    /// Other events recorded since the runtime started.
    head: Cell<u64>,
    /// Ticks at the end of the last resume (when the runtime was built,
    /// before the first): every resume's end is found from it backwards.
    last_end: Cell<u64>,
    /// The tags of the threads (see [`tags`]).
    tags: RefCell<tags::Tags>,
    /// The last watchdog-reported slice handled (see `hog`).
    pub(crate) hog_seen: Cell<u64>,
    /// Ticks of the last automatic snapshot (0: none yet).
    last_auto: Cell<u64>,
    /// The automatic snapshots kept, oldest first.
    latency: RefCell<VecDeque<Trace>>,
    /// Names of the last [`NAMES`] named threads spawned, so that a trace
    /// names threads that have finished.
    names: RefCell<VecDeque<(u64, Arc<str>)>>,
}

/// Thread names the recorder remembers.
const NAMES: usize = 1024;

/// A recorder's three rings, kept per OS thread between runtimes.
///
/// Building a runtime used to allocate and zero them (160 KiB: about as
/// much work as spawning a hundred threads). Now the first runtime an OS
/// thread builds allocates them and the thread keeps a handle; a later
/// runtime takes them over once no other recorder holds them (at most one
/// set is kept; runtimes alive at the same time on one OS thread beyond
/// the first get their own).
///
/// A taken-over ring still holds the old runtime's entries, and that is
/// never seen: a trace reads only the resumes `1..=switches` and the
/// events `head - EVENTS..head` of its own runtime (see `trace`), every
/// one of which this runtime wrote (`resume_ended` records each resume).
/// The values are plain integers and `&'static str`s, so a stale entry
/// could only ever be a wrong word, never an invalid one.
#[derive(Clone)]
struct Rings {
    res: Rc<[Cell<u64>; EVENTS]>,
    res_s: Rc<[Cell<&'static str>; EVENTS]>,
    ev: Rc<[RingSlot; EVENTS]>,
}

thread_local! {
    /// This OS thread's kept rings (see [`Rings`]).
    static KEPT_RINGS: RefCell<Option<Rings>> = const { RefCell::new(None) };
}

impl Rings {
    fn new() -> Rings {
        fn ring<T, const N: usize>(slot: impl Fn() -> T) -> Rc<[T; N]> {
            let r: Rc<[T]> = (0..N).map(|_| slot()).collect();
            r.try_into()
                .unwrap_or_else(|_| unreachable!("N slots were made"))
        }
        Rings {
            res: ring(|| Cell::new(0)),
            res_s: ring(|| Cell::new("")),
            ev: ring(|| RingSlot {
                a: Cell::new(0),
                k: Cell::new(0),
            }),
        }
    }

    /// Whether only the thread's handle holds them (no recorder does).
    fn is_free(&self) -> bool {
        Rc::strong_count(&self.res) == 1
            && Rc::strong_count(&self.res_s) == 1
            && Rc::strong_count(&self.ev) == 1
    }

    /// Rings for a new recorder: this OS thread's kept ones if no recorder
    /// holds them, else new ones (kept if the thread has none yet).
    fn take() -> Rings {
        KEPT_RINGS
            .try_with(|kept| {
                let mut kept = kept.borrow_mut();
                match &*kept {
                    Some(r) if r.is_free() => r.clone(),
                    Some(_) => Rings::new(),
                    None => kept.insert(Rings::new()).clone(),
                }
            })
            // The OS thread is exiting (its thread-locals are being
            // destroyed): nothing to keep them in.
            .unwrap_or_else(|_| Rings::new())
    }
}

impl Default for Recorder {
    fn default() -> Recorder {
        let Rings { res, res_s, ev } = Rings::take();
        Recorder {
            res,
            res_s,
            ev,
            head: Cell::new(0),
            last_end: Cell::new(clock::now().ticks()),
            tags: RefCell::default(),
            hog_seen: Cell::new(0),
            last_auto: Cell::new(0),
            latency: RefCell::new(VecDeque::new()),
            names: RefCell::new(VecDeque::new()),
        }
    }
}

impl Recorder {
    /// Records an event other than a resume: two stores into one slot;
    /// `key` is [`key`]'s.
    #[inline(always)]
    fn push(&self, key: u64, a: u64) {
        if OFF {
            return;
        }
        let i = self.head.get();
        self.head.set(i.wrapping_add(1));
        let slot = &self.ev[i as usize & (EVENTS - 1)];
        slot.a.set(a);
        slot.k.set(key);
    }

    /// Resume `n` of `t` ended, now: a clock read and one store, two for a
    /// park (its reason).
    #[inline(always)]
    pub(crate) fn resume_ended(&self, t: &Task, n: u64) {
        if OFF {
            return;
        }
        let now = clock::now().ticks();
        let ticks = now.saturating_sub(self.last_end.replace(now));
        if ticks >= SATURATED {
            self.long(n, ticks);
        }
        let state = t.state.get();
        let i = n as usize & (EVENTS - 1);
        self.res[i].set(ticks.min(SATURATED) << 32 | u64::from(t.flight_tag | state as u32));
        if state == ThreadState::Parked {
            self.res_s[i].set(t.waiting_on.get());
        }
    }

    /// Resume `n` ran `ticks` (since the resume before it ended), more
    /// than its slot holds.
    #[cold]
    #[inline(never)]
    fn long(&self, n: u64, ticks: u64) {
        // Its key is the resume's own: merged, it comes just before it.
        self.push(4 * n + 1, LONG | ticks.min(PAYLOAD) << 8);
    }

    /// `t` was made ready (by the running green thread, if any: the key
    /// says which).
    #[inline(always)]
    pub(crate) fn woken(&self, key: u64, t: u64) {
        self.push(key, WAKE | t << 8);
    }

    /// `t` was spawned (by the running green thread, if any).
    #[inline(always)]
    pub(crate) fn spawned(&self, key: u64, t: &Task) {
        if OFF {
            return;
        }
        self.push(key, SPAWN | t.id << 8);
        if let Some(name) = &t.name {
            self.named(t.id, name);
        }
    }

    /// Keeps a spawned thread's name for traces.
    #[inline(never)]
    fn named(&self, id: u64, name: &Arc<str>) {
        let mut names = self.names.borrow_mut();
        if names.len() == NAMES {
            names.pop_front();
        }
        names.push_back((id, name.clone()));
    }

    /// A timer of `t` fired; `kind` indexes [`TIMER_KINDS`].
    #[inline]
    pub(crate) fn timer(&self, key: u64, t: u64, kind: u64) {
        self.push(key, TIMER | kind << 4 | t << 8);
    }

    /// The clock read `ticks`.
    #[inline]
    pub(crate) fn tick(&self, key: u64, ticks: u64) {
        self.push(key, TICK | (ticks & PAYLOAD) << 8);
    }

    /// A poll that began at the previous tick ended at `ticks` with
    /// `events` events; `blocking`: it could wait.
    #[inline]
    pub(crate) fn poll(&self, key: u64, ticks: u64, events: usize, blocking: bool) {
        let events = (events as u64).min(PAYLOAD);
        self.push(key, POLL | u64::from(blocking) << 4 | events << 8);
        self.tick(key, ticks);
    }

    /// The tag (as [`Task::flight_tag`] holds it) of thread `id`, spawned
    /// now on `s`.
    ///
    /// # Errors
    ///
    /// `OutOfMemory` when the tags run out (see `tags`).
    pub(crate) fn tag(s: &Scheduler, id: u64) -> io::Result<u32> {
        if OFF {
            return Ok(0);
        }
        let tag = s
            .flight
            .tags
            .borrow_mut()
            .take(id, s.counters.switches.get())?;
        Ok(tag << 4)
    }

    /// Thread `t` of `s` will not run again: its tag can be handed out
    /// again once it can no longer be in a trace (see `tags`).
    pub(crate) fn untag(s: &Scheduler, flight_tag: u32) {
        if OFF {
            return;
        }
        s.flight
            .tags
            .borrow_mut()
            .give_back(flight_tag >> 4, s.counters.switches.get());
    }
}

/// Turns a resume ring's word into its ticks, tag and state.
fn unpack(word: u64) -> (u64, u32, u64) {
    (word >> 32, (word as u32) >> 4, word & 0xf)
}

/// How a resume ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum After {
    /// The thread yielded (or was forced to): it is ready again.
    Yield,
    /// It parked; the reason (`"Mutex::lock"`, `"sleep"`, `"readable"`).
    Park(&'static str),
    /// It finished.
    Finish,
}

/// A recorded event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// `thread` was spawned by `parent` (0: not by a green thread).
    Spawn {
        /// The new thread.
        thread: u64,
        /// The spawning green thread, 0 for none.
        parent: u64,
    },
    /// `thread` ran for `ran`, then `then`.
    Resume {
        /// The thread.
        thread: u64,
        /// How long it ran (see "Times" in the module docs).
        ran: Duration,
        /// How the resume ended.
        then: After,
        /// The latency watchdog reported this slice.
        latency_warning: bool,
    },
    /// `thread` was made ready by `by` (0: by the scheduler: I/O, a timer,
    /// another OS thread).
    Wake {
        /// The woken thread.
        thread: u64,
        /// The waking green thread, 0 for none.
        by: u64,
    },
    /// A timer of `thread` fired.
    Timer {
        /// Its thread.
        thread: u64,
        /// `"sleep"` or `"timeout"`.
        kind: &'static str,
    },
    /// The loop polled the OS.
    Poll {
        /// Events it returned.
        events: usize,
        /// How long the poll took (blocked, if `blocking`).
        took: Duration,
        /// It could wait (nothing was ready).
        blocking: bool,
    },
}

/// An event and when it happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimedEvent {
    /// Since the trace's first clock reading (for a resume or a poll: its
    /// start).
    pub at: Duration,
    /// The event.
    pub event: Event,
}

/// A snapshot of the flight recorder.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Trace {
    /// Why it was taken (`"snapshot"`, or the latency warning).
    pub reason: String,
    /// When it was taken.
    pub taken: SystemTime,
    /// The wall time of `at == 0`.
    pub start_wall: SystemTime,
    /// Where the trace starts in the runtime's history: twice the switch
    /// number of its first resume (0 while nothing was overwritten yet).
    pub first_event: u64,
    /// Names of the named threads it mentions that were alive.
    pub names: HashMap<u64, String>,
    /// The events, oldest first.
    pub events: Vec<TimedEvent>,
}

impl Trace {
    /// The name of thread `id` for display: its name, or `#id`.
    pub fn thread_name(&self, id: u64) -> String {
        match self.names.get(&id) {
            Some(n) => format!("#{id} {n}"),
            None => format!("#{id}"),
        }
    }

    /// The trace as Chrome trace-event JSON (see [`write_chrome_json`](Self::write_chrome_json)).
    pub fn to_chrome_json(&self) -> String {
        let mut v = Vec::new();
        chrome::write(self, &mut v).expect("writing to a Vec cannot fail");
        String::from_utf8(v).expect("the writer writes UTF-8")
    }

    /// Writes the trace in Chrome's trace-event format (the JSON object
    /// form), which Perfetto (ui.perfetto.dev) and `chrome://tracing` open.
    ///
    /// Each green thread is a thread track (`tid` = its id, named by
    /// `thread_name` metadata), the scheduler is `tid` 0. A resume is a
    /// complete event (`"ph":"X"`, `ts`, `dur` in microseconds) named after
    /// the thread, with how it ended in `args`; polls are complete events
    /// on the scheduler's track; spawns, wakes and timers are instant events
    /// (`"ph":"i"`) on the thread's track, with the spawner or waker in
    /// `args`.
    ///
    /// # Errors
    ///
    /// Those of `w`.
    pub fn write_chrome_json<W: std::io::Write>(&self, w: W) -> std::io::Result<()> {
        let mut w = std::io::BufWriter::new(w);
        chrome::write(self, &mut w)?;
        std::io::Write::flush(&mut w)
    }

    /// Writes the trace as Chrome trace-event JSON to a new file at `path`
    /// and syncs it. Plain file I/O: on a green thread, run it inside
    /// [`blocking`](crate::blocking) if the disk may be slow.
    ///
    /// # Errors
    ///
    /// Those of creating, writing and syncing the file.
    pub fn save<P: AsRef<std::path::Path>>(&self, path: P) -> std::io::Result<()> {
        let f = std::fs::File::create(path)?;
        self.write_chrome_json(&f)?;
        f.sync_all()
    }
}

/// The current runtime's flight recorder now: its last [`EVENTS`] resumes
/// and the other events since the oldest of them (at most [`EVENTS`]).
///
/// # Panics
///
/// Outside a runtime.
pub fn snapshot() -> Trace {
    context::with_sched("coro::flight::snapshot", |s| {
        s.flight.trace(s, "snapshot".into(), None, None)
    })
}

/// The snapshots the current runtime took when latency warnings were
/// reported (at most [`KEPT_SNAPSHOTS`], oldest first).
///
/// # Panics
///
/// Outside a runtime.
pub fn latency_snapshots() -> Vec<Trace> {
    context::with_sched("coro::flight::latency_snapshots", |s| {
        s.flight.latency.borrow().iter().cloned().collect()
    })
}

/// The order key of an event other than a resume recorded now: `4n`
/// while resume `n` runs (it happens before that resume's end, whose key
/// is `4n + 1`), `4n + 2` between resume `n`'s end and the next resume.
/// A key that is a multiple of 4 thus names the green thread that was
/// running (see `Recorder::trace`).
#[inline(always)]
pub(crate) fn key(s: &Scheduler) -> u64 {
    4 * s.counters.switches.get() + if s.current.get().is_null() { 2 } else { 0 }
}

/// The tick count whose low 56 bits are `low`, nearest before `now` (a
/// 56-bit tick count wraps after years at GHz rates).
fn full_ticks(low: u64, now: u64) -> u64 {
    now.wrapping_sub(now.wrapping_sub(low) & PAYLOAD)
}

/// The recorder's resumes and polls since `start` (wall time), as the
/// timeline of a profile whose interval began then.
pub(crate) fn timeline(s: &Scheduler, start: SystemTime) -> Vec<crate::profile::Slice> {
    let t = s.flight.trace(s, "profile".into(), None, None);
    // `at` of the trace, measured from the profile's start.
    let offset =
        |at: Duration| -> Option<Duration> { (t.start_wall + at).duration_since(start).ok() };
    t.events
        .iter()
        .filter_map(|e| {
            let (track, name, dur, what, warn) = match e.event {
                Event::Resume {
                    thread,
                    ran,
                    then,
                    latency_warning,
                } => (
                    thread,
                    t.thread_name(thread),
                    ran,
                    match then {
                        After::Yield => "yield".to_owned(),
                        After::Finish => "finish".to_owned(),
                        After::Park(why) => format!("park: {why}"),
                    },
                    latency_warning,
                ),
                Event::Poll {
                    events,
                    took,
                    blocking,
                } => (
                    0,
                    if blocking { "wait" } else { "poll" }.to_owned(),
                    took,
                    format!("{events} events"),
                    false,
                ),
                _ => return None,
            };
            Some(crate::profile::Slice {
                track,
                name,
                start: offset(e.at)?,
                dur,
                what,
                latency_warning: warn,
            })
        })
        .collect()
}

/// The watchdog reported slice `hog` (it may be the one of `t` that just
/// ended, switch number `slice`): marks it in the ring, and takes a
/// snapshot if the rate limit allows.
#[cold]
#[inline(never)]
pub(crate) fn hog(s: &Scheduler, t: &Task, hog: u64, slice: u64) {
    let f = &s.flight;
    f.hog_seen.set(hog);
    // After resume `slice`'s end (this runs before `current` is reset). A
    // late report (the slice ended before it was seen) names an earlier
    // resume, found by its number when the ring is read.
    f.push(4 * slice + 2, HOG | (hog & PAYLOAD) << 8);
    let Some(every) = s.config.latency_snapshots else {
        return;
    };
    // The slice's end, read as it ended.
    let now = f.last_end.get();
    let last = f.last_auto.get();
    if OFF || last != 0 && now.saturating_sub(last) < clock::duration_to_ticks(every) {
        return;
    }
    f.last_auto.set(now);
    let reason = if hog == slice {
        format!(
            "latency warning: green thread #{} '{}' ran {:.3} s without yielding",
            t.id,
            t.display_name(),
            clock::ticks_to_duration(f.ticks_of(slice)).as_secs_f64()
        )
    } else {
        "latency warning".to_owned()
    };
    let trace = f.trace(s, reason.clone(), Some(t), Some(slice));
    log::info!(
        target: "coro::flight",
        "flight recorder: {} events before the end of the slice saved ({reason}); \
         read them with coro::flight::latency_snapshots() or the back door's `trace latency PATH`",
        trace.events.len()
    );
    let mut kept = f.latency.borrow_mut();
    if kept.len() == KEPT_SNAPSHOTS {
        kept.pop_front();
    }
    kept.push_back(trace);
}

impl Instant {
    /// This instant in wall time.
    fn to_system_time(self) -> SystemTime {
        let now = clock::now();
        let wall = SystemTime::now();
        if self <= now {
            wall.checked_sub(now.duration_since(self)).unwrap_or(wall)
        } else {
            wall + self.duration_since(now)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each thread's resumes in `t`: how many, and how the last ended.
    fn resumes_of(t: &Trace, id: u64) -> (usize, Option<After>) {
        let runs: Vec<After> = t
            .events
            .iter()
            .filter_map(|e| match e.event {
                Event::Resume { thread, then, .. } if thread == id => Some(then),
                _ => None,
            })
            .collect();
        (runs.len(), runs.last().copied())
    }

    /// Thread ids whose low 28 bits collide (the spawn counter is set
    /// forward to make them): a finished thread keeps its resumes beside a
    /// live one with the same low bits, and two live ones stay apart.
    #[test]
    fn ids_in_a_trace_are_exact_when_their_low_28_bits_collide() {
        let wrap = 1u64 << 28;
        let set_next_id = |id: u64| context::with_sched("test", |s| s.next_id.set(id));
        let yielder = |n: usize| {
            move || {
                for _ in 0..n {
                    crate::yield_now();
                }
            }
        };
        let (ids, trace) = crate::run(move || {
            set_next_id(wrap + 10);
            let done = crate::spawn(yielder(1));
            let done_id = done.thread().id();
            done.join().unwrap();
            set_next_id(2 * wrap + 10);
            let a = crate::spawn(move || {
                set_next_id(4 * wrap + 10);
                crate::spawn(yielder(0)).join().unwrap();
                yielder(2)();
            });
            set_next_id(3 * wrap + 10);
            let b = crate::spawn(yielder(5));
            let ids = [done_id, a.thread().id(), b.thread().id()];
            a.join().unwrap();
            b.join().unwrap();
            (ids, snapshot())
        });
        assert_eq!(ids, [wrap + 10, 2 * wrap + 10, 3 * wrap + 10]);
        let [done, a, b] = ids;
        let child = 4 * wrap + 10;
        assert_eq!(resumes_of(&trace, done), (2, Some(After::Finish)));
        // `a`: spawns and joins its child (a park), two yields, the finish.
        assert_eq!(resumes_of(&trace, a), (4, Some(After::Finish)));
        assert_eq!(resumes_of(&trace, b), (6, Some(After::Finish)));
        assert_eq!(resumes_of(&trace, child), (1, Some(After::Finish)));
        let main = trace
            .events
            .iter()
            .find_map(|e| match e.event {
                Event::Spawn { thread, parent } if thread == done => Some(parent),
                _ => None,
            })
            .expect("the first thread's spawn");
        let spawned: Vec<(u64, u64)> = trace
            .events
            .iter()
            .filter_map(|e| match e.event {
                Event::Spawn { thread, parent } => Some((thread, parent)),
                _ => None,
            })
            .collect();
        assert!(spawned.contains(&(child, a)), "{spawned:?}");
        assert!(spawned.contains(&(b, main)), "{spawned:?}");
        // The finished thread woke its joiner as it finished.
        assert!(trace.events.iter().any(|e| e.event
            == Event::Wake {
                thread: main,
                by: done
            }));
        assert!(trace.events.iter().any(|e| e.event
            == Event::Wake {
                thread: a,
                by: child
            }));
    }

    /// A resume longer than a slot's 32 bits of ticks (over a second at
    /// GHz rates) keeps its whole length: the clock reading it starts from
    /// is set five seconds back while it runs.
    #[test]
    fn a_resume_longer_than_its_slot_holds_keeps_its_length() {
        let five = Duration::from_secs(5);
        let (id, trace) = crate::run(move || {
            let t = crate::spawn(move || {
                context::with_sched("test", |s| {
                    let back = clock::duration_to_ticks(five);
                    s.flight.last_end.set(s.flight.last_end.get() - back);
                });
                crate::yield_now();
            });
            let id = t.thread().id();
            t.join().unwrap();
            (id, snapshot())
        });
        assert!(clock::duration_to_ticks(five) > SATURATED);
        let ran: Vec<Duration> = trace
            .events
            .iter()
            .filter_map(|e| match e.event {
                Event::Resume { thread, ran, .. } if thread == id => Some(ran),
                _ => None,
            })
            .collect();
        assert_eq!(ran.len(), 2, "{ran:?}");
        assert!(ran[0] >= five, "{ran:?}");
    }

    #[test]
    fn rings_are_kept_for_the_next_recorder_of_the_os_thread() {
        std::thread::spawn(|| {
            let first = Recorder::default();
            let ptr = Rc::as_ptr(&first.ev);
            // Alive at the same time: a second set.
            let second = Recorder::default();
            assert!(!std::ptr::eq(Rc::as_ptr(&second.ev), ptr));
            drop(first);
            drop(second);
            // The kept set is the first one, taken over whole.
            let third = Recorder::default();
            assert!(std::ptr::eq(Rc::as_ptr(&third.ev), ptr));
            let kept = KEPT_RINGS.with(|k| k.borrow().clone()).unwrap();
            assert!(std::ptr::eq(Rc::as_ptr(&kept.res), Rc::as_ptr(&third.res)));
            assert!(std::ptr::eq(
                Rc::as_ptr(&kept.res_s),
                Rc::as_ptr(&third.res_s)
            ));
        })
        .join()
        .unwrap();
    }

    #[test]
    fn tick_counts_are_rebuilt_from_their_low_56_bits() {
        let now = (5 << 56) + 1000;
        assert_eq!(full_ticks(900, now), (5 << 56) + 900);
        assert_eq!(full_ticks(PAYLOAD, now), (5 << 56) - 1);
        assert_eq!(full_ticks(1000, 1000), 1000);
    }
}
