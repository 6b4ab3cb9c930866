//! The flight recorder: an always-on, bounded ring of a runtime's recent
//! scheduling events, and snapshots of it as [`Trace`]s in Chrome's
//! trace-event JSON (which Perfetto and `chrome://tracing` open).
//!
//! # What it records
//!
//! | event | when | with |
//! |---|---|---|
//! | spawn | a green thread is spawned | the spawning thread |
//! | resume | a resume ends | how it ended (yield, park and its reason, finish) and how long it ran |
//! | wake | a parked thread is made ready | the green thread that woke it (0: the scheduler: a timer, I/O, another OS thread) |
//! | timer | a timer fires | its kind (`sleep`, `timeout`) |
//! | poll | the loop polls the OS | the number of events, and how long it blocked |
//!
//! The recorder keeps the last [`EVENTS`] resumes and the last [`EVENTS`]
//! other events (in rings of 144 KiB); older ones are overwritten. The
//! rings are allocated by the first runtime an OS thread builds and kept
//! for the next ones (see `Rings`): a runtime built per request or per
//! test does not zero 144 KiB each time.
//!
//! # Cost, and how times are known
//!
//! A clock read costs about as much as a whole switch here (12 ns against a
//! 10–17 ns yield), so the switch path reads no clock, and the commonest
//! event (a resume that yielded) is one 4-byte store, into a ring indexed
//! by the switch number the scheduler counts anyway (a park adds its
//! reason). The ring is written on every switch, so its size in the cache
//! is most of its cost: it keeps 28 bits of the thread's id (the rest is
//! found again when the ring is read, see `Ids`). A wake or a spawn is two
//! stores into the other ring; who woke or spawned is not stored, the
//! event's order key says which resume was running. The clock is read where the loop reads it
//! anyway or where a read is cheap beside the work: around each poll (the
//! loop polls at least every 256 resumes while threads are ready, and each
//! time it waits) and when timers fire. An event's time is interpolated
//! between the two clock readings around it, so a resume's length is exact
//! to those readings when it is alone between two polls and an estimate
//! (its share of the interval) when several resumes share one. A slice the
//! latency watchdog reported carries its measured start (to the watchdog's
//! sampling period), and the clock is read when it ends: a hog's resume is
//! shown with its real length. The measured cost on the yield benchmark is
//! in BENCHMARKS.md.
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

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::rc::Rc;
use std::sync::atomic::Ordering;
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
/// The watchdog reported the resume whose switch number is the payload;
/// an [`ARG`] with the slice's start follows it.
const HOG: u64 = 6;
/// The tick count (low 56 bits) that goes with the event before it.
const ARG: u64 = 7;
/// A resume ended; plus the thread's state after it (the resume ring).
const RESUME: u64 = 0x10;
/// What the sub-kind of a [`TIMER`] names.
const TIMER_KINDS: [&str; 3] = ["sleep", "timeout", "future sleep"];
/// The payload's bits: 56.
const PAYLOAD: u64 = (1 << 56) - 1;

/// One event as read from the ring, ready to decode.
#[derive(Clone, Copy)]
struct Slot {
    /// The kind in the low byte, a thread id (or a count) above.
    a: u64,
    /// A thread id, a tick count or a count, by kind.
    b: u64,
    /// A park's reason, a timer's kind, a poll's `"wait"`.
    s: &'static str,
}

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
    /// Resume `n`'s kind, state and thread at `n % EVENTS`.
    ///
    /// # Invariant
    /// Index `n % EVENTS` holds resume `n` for the last `EVENTS` resumes
    /// that ended (every resume records itself).
    /// 32 bits a resume: the low 28 bits of the thread's id above its
    /// state (see [`resume_tag`]; the ring is written on every switch, and
    /// at half the size it evicts half as much of the cache).
    res: Rc<[Cell<u32>; EVENTS]>,
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
/// Allocating and zeroing them (144 KiB: about as much work as spawning a
/// hundred threads) is not left to every runtime built: the first runtime
/// an OS thread builds allocates them and the thread keeps a handle; a later
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
    res: Rc<[Cell<u32>; EVENTS]>,
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
        let i = self.head.get();
        self.head.set(i.wrapping_add(1));
        let slot = &self.ev[i as usize & (EVENTS - 1)];
        slot.a.set(a);
        slot.k.set(key);
    }

    /// Resume `n` of `t` ended: one store, two for a park (its reason).
    #[inline(always)]
    pub(crate) fn resume_ended(&self, t: &Task, n: u64) {
        let state = t.state.get();
        let i = n as usize & (EVENTS - 1);
        self.res[i].set(t.flight_tag | state as u32);
        if state == ThreadState::Parked {
            self.res_s[i].set(t.waiting_on.get());
        }
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

    /// Copies the ring out, oldest first, with the names of the threads it
    /// mentions that are still alive (and `extra`).
    /// `last` is the last resume that ended (by default, when `None`: the
    /// one before the running one, if a thread runs).
    fn trace(
        &self,
        s: &Scheduler,
        reason: String,
        extra: Option<&Task>,
        last: Option<u64>,
    ) -> Trace {
        let now = clock::now().ticks();
        // The resumes that ended (not the one in progress, if any).
        let switches = s.counters.switches.get();
        let running = !s.current.get().is_null();
        let last = last.unwrap_or(switches - u64::from(running));
        let first = (last + 1).saturating_sub(EVENTS as u64).max(1);
        let ids = Ids::of(s);
        // The thread that ran resume `n` (the spawner or waker of an event
        // recorded during it), 0 when it is no longer in the ring.
        let thread_of = |n: u64| -> u64 {
            if running && n == switches {
                context::current_id_of(s)
            } else if (first..=last).contains(&n) {
                ids.full(self.res[n as usize & (EVENTS - 1)].get() >> 4)
            } else {
                0
            }
        };
        // The other events, oldest first, with their keys.
        let head = self.head.get();
        let n = head.min(EVENTS as u64);
        let raw: Vec<(u64, u64)> = (head - n..head)
            .map(|i| {
                let e = &self.ev[i as usize & (EVENTS - 1)];
                (e.k.get(), e.a.get())
            })
            .collect();
        let mut others: Vec<(u64, Slot)> = Vec::with_capacity(raw.len());
        for (j, &(k, a)) in raw.iter().enumerate() {
            let payload = a >> 8;
            // A waker or spawner: the thread of the resume running then.
            let by = if k % 4 == 0 { thread_of(k / 4) } else { 0 };
            // The tick count of the slot after this one (a poll's end, a
            // hog's start).
            let next = || {
                raw.get(j + 1)
                    .map_or(now, |&(_, b)| full_ticks(b >> 8, now))
            };
            let slot = match a & 0xf {
                SPAWN | WAKE => Slot {
                    a: a & 0xf | payload << 8,
                    b: by,
                    s: "",
                },
                TIMER => Slot {
                    a: TIMER | payload << 8,
                    b: 0,
                    s: TIMER_KINDS
                        .get((a >> 4 & 0xf) as usize)
                        .copied()
                        .unwrap_or(""),
                },
                TICK => Slot {
                    a: TICK,
                    b: full_ticks(payload, now),
                    s: "",
                },
                POLL => Slot {
                    a: POLL | payload << 8,
                    b: next(),
                    s: if a & 0x10 != 0 { "wait" } else { "poll" },
                },
                HOG => Slot {
                    a: HOG | payload << 8,
                    b: next(),
                    s: "",
                },
                _ => continue,
            };
            others.push((k, slot));
        }
        let resumes = (first..=last).map(|n| {
            let i = n as usize & (EVENTS - 1);
            let r = self.res[i].get();
            let state = RESUME | u64::from(r & 0xf) | ids.full(r >> 4) << 8;
            let reason = if state & 0xf == ThreadState::Parked as u64 {
                self.res_s[i].get()
            } else {
                ""
            };
            (
                4 * n + 1,
                Slot {
                    a: state,
                    b: n,
                    s: reason,
                },
            )
        });
        // Merge by key, from where both rings still hold everything.
        let lo = if head > EVENTS as u64 {
            others.first().map_or(0, |o| o.0)
        } else {
            0
        }
        .max(if first > 1 { 4 * first } else { 0 });
        let mut all: Vec<(u64, Slot)> = others
            .into_iter()
            .chain(resumes)
            .filter(|(k, _)| *k >= lo)
            .collect();
        all.sort_by_key(|(k, _)| *k); // stable: others keep their order
        let first_event = all.first().map_or(0, |(k, _)| *k / 2);
        let slots: Vec<Slot> = all.into_iter().map(|(_, sl)| sl).collect();
        let mut names: HashMap<u64, String> = self
            .names
            .borrow()
            .iter()
            .map(|(id, n)| (*id, n.to_string()))
            .collect();
        for (_, t) in s.tasks.borrow().iter() {
            if let Some(name) = &t.name {
                names.insert(t.id, name.to_string());
            }
        }
        if let Some(t) = extra {
            if let Some(name) = &t.name {
                names.insert(t.id, name.to_string());
            }
        }
        decode(&slots, now, names, reason, first_event)
    }
}

/// Turns the ring's slots into timed events (see the module docs for how
/// times are interpolated).
fn decode(
    slots: &[Slot],
    now: u64,
    names: HashMap<u64, String>,
    reason: String,
    first: u64,
) -> Trace {
    // Anchors: (position, ticks). Position i is just before slot i.
    let mut anchors: Vec<(usize, u64)> = Vec::new();
    let mut reported = std::collections::HashSet::new();
    for (i, sl) in slots.iter().enumerate() {
        match sl.a & 0xff {
            TICK | POLL => anchors.push((i + 1, sl.b)),
            HOG => {
                // The reported resume began at `b`; when the report came in
                // time (the slot just before is that resume), it ended at
                // the clock reading that follows.
                let slice = sl.a >> 8;
                let Some(r) = slots[..i]
                    .iter()
                    .rposition(|x| x.a & 0xff & RESUME != 0 && x.b == slice)
                else {
                    continue;
                };
                reported.insert(r);
                anchors.push((r, sl.b));
                if r + 1 == i {
                    if let Some(end) = slots.get(i + 1).filter(|n| n.a & 0xff == TICK) {
                        anchors.push((i, end.b));
                    }
                }
            }
            _ => {}
        }
    }
    anchors.push((slots.len() + 1, now));
    anchors.sort_by_key(|a| a.0);
    // Ticks never go back; a hog's start cannot be before an earlier reading.
    let mut last = 0;
    for a in &mut anchors {
        a.1 = a.1.max(last);
        last = a.1;
    }
    let base = anchors.first().map_or(now, |a| a.1);
    let at = |pos: usize| -> u64 {
        let k = anchors.partition_point(|a| a.0 <= pos);
        match (k.checked_sub(1).map(|j| anchors[j]), anchors.get(k)) {
            (Some(lo), Some(hi)) if hi.0 > lo.0 => {
                lo.1 + (hi.1 - lo.1) * (pos - lo.0) as u64 / (hi.0 - lo.0) as u64
            }
            (Some(lo), _) => lo.1,
            (None, Some(hi)) => hi.1,
            (None, None) => now,
        }
    };
    let rel = |t: u64| clock::ticks_to_duration(t.saturating_sub(base));
    let mut events = Vec::with_capacity(slots.len());
    for (i, sl) in slots.iter().enumerate() {
        let id = sl.a >> 8;
        let end = at(i + 1);
        let event = match sl.a & 0xff {
            SPAWN => Event::Spawn {
                thread: id,
                parent: sl.b,
            },
            WAKE => Event::Wake {
                thread: id,
                by: sl.b,
            },
            TIMER => Event::Timer {
                thread: id,
                kind: sl.s,
            },
            POLL => {
                let start = at(i);
                events.push(TimedEvent {
                    at: rel(start),
                    event: Event::Poll {
                        events: id as usize,
                        took: clock::ticks_to_duration(end - start),
                        blocking: sl.s == "wait",
                    },
                });
                continue;
            }
            k if k & RESUME != 0 => {
                let start = at(i);
                let then = match k & 0xf {
                    s if s == ThreadState::Ready as u64 => After::Yield,
                    s if s == ThreadState::Parked as u64 => After::Park(sl.s),
                    _ => After::Finish,
                };
                events.push(TimedEvent {
                    at: rel(start),
                    event: Event::Resume {
                        thread: id,
                        ran: clock::ticks_to_duration(end - start),
                        then,
                        latency_warning: reported.contains(&i),
                    },
                });
                continue;
            }
            _ => continue,
        };
        events.push(TimedEvent {
            at: rel(end),
            event,
        });
    }
    Trace {
        reason,
        taken: SystemTime::now(),
        start_wall: crate::clock::Instant::from_ticks(base).to_system_time(),
        first_event: first,
        names,
        events,
    }
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
        /// How long it ran (see the module docs for the precision).
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

/// How the resume ring stores thread `id` ([`Task::flight_tag`]): its
/// low 28 bits, above four bits for the state after the resume.
pub(crate) fn resume_tag(id: u64) -> u32 {
    ((id & ID_BITS) as u32) << 4
}

/// The bits of a thread id the resume ring keeps.
const ID_BITS: u64 = (1 << 28) - 1;

/// Full thread ids from the resume ring's low 28 bits: a thread alive now
/// by its own id; another one is the newest id with those bits (a thread
/// that ran within the ring's last [`EVENTS`] resumes and has finished
/// since is at most 2^28 spawns old unless it lived through them all, and
/// then it is alive).
struct Ids {
    live: HashMap<u64, u64>,
    newest: u64,
}

impl Ids {
    fn of(s: &Scheduler) -> Ids {
        let live = s
            .tasks
            .borrow()
            .iter()
            .map(|(_, t)| (t.id & ID_BITS, t.id))
            .collect();
        let newest = s.next_id.get().saturating_sub(1);
        Ids { live, newest }
    }

    fn full(&self, low: u32) -> u64 {
        let low = u64::from(low);
        match self.live.get(&low) {
            Some(&id) => id,
            None => self.newest - (self.newest.wrapping_sub(low) & ID_BITS),
        }
    }
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
/// ended, switch number `slice`): records when it began and ended, and
/// takes a snapshot if the rate limit allows.
#[cold]
#[inline(never)]
pub(crate) fn hog(s: &Scheduler, t: &Task, hog: u64, slice: u64) {
    let Some(w) = &s.watchdog else { return };
    s.flight.hog_seen.set(hog);
    let now = clock::now().ticks();
    // Late (the slice ended before the report was seen): the slice's
    // resume is found by its number when the ring is read.
    let since = w.shared.hog_since.load(Ordering::Relaxed);
    // After resume `slice`'s end (this runs before `current` is reset).
    let key = 4 * slice + 2;
    s.flight.push(key, HOG | (hog & PAYLOAD) << 8);
    s.flight.push(key, ARG | (since & PAYLOAD) << 8);
    s.flight.tick(key, now);
    let Some(every) = s.config.latency_snapshots else {
        return;
    };
    let last = s.flight.last_auto.get();
    if last != 0 && now.saturating_sub(last) < clock::duration_to_ticks(every) {
        return;
    }
    s.flight.last_auto.set(now);
    let ran =
        clock::ticks_to_duration(now.saturating_sub(w.shared.hog_since.load(Ordering::Relaxed)));
    let reason = if hog == slice {
        format!(
            "latency warning: green thread #{} '{}' ran {:.3} s without yielding",
            t.id,
            t.display_name(),
            ran.as_secs_f64()
        )
    } else {
        "latency warning".to_owned()
    };
    let trace = s.flight.trace(s, reason.clone(), Some(t), Some(slice));
    log::info!(
        target: "coro::flight",
        "flight recorder: {} events before the end of the slice saved ({reason}); \
         read them with coro::flight::latency_snapshots() or the back door's `trace latency PATH`",
        trace.events.len()
    );
    let mut kept = s.flight.latency.borrow_mut();
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

    #[test]
    fn ids_are_rebuilt_from_their_low_bits() {
        let wrap = ID_BITS + 1;
        // A live thread keeps its own id, however old; a finished one is
        // the newest id with those bits.
        let ids = Ids {
            live: [(7, 7)].into_iter().collect(),
            newest: 3 * wrap + 100,
        };
        assert_eq!(ids.full(7), 7);
        assert_eq!(ids.full(99), 3 * wrap + 99);
        assert_eq!(ids.full(100), 3 * wrap + 100);
        assert_eq!(ids.full(101), 2 * wrap + 101);
        let young = Ids {
            live: HashMap::new(),
            newest: 5,
        };
        assert_eq!(young.full(3), 3);
        assert_eq!(resume_tag(wrap + 9) >> 4, 9);
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
