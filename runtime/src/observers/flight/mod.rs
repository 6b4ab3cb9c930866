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
//! The recorder keeps the last [`EVENTS`] resumes and the last
//! `2 * EVENTS` other events, clock readings among them (in rings of 208
//! KiB); older ones are overwritten. The rings are allocated by the first
//! runtime an OS thread builds and kept for the next ones (see `Rings`): a
//! runtime built per request or per test does not zero 208 KiB each time.
//!
//! # Times
//!
//! A clock read (the TSC where the CPU has an invariant one, see [`clock`])
//! costs about as much as a whole switch in a tight loop of yields, so the
//! recorder reads the clock as a resume ends only where that is cheap
//! beside the resume, or where the time matters:
//!
//! * **Stamping**, how a runtime starts and what it returns to whenever
//!   its loop waits for I/O, a stretch of slower resumes is seen, or
//!   [`Runtime::block_on`](crate::Runtime::block_on) returns: every resume
//!   is stamped as it ends. Its start is the latest reading before it (the
//!   end of the resume before it, or the loop's own reading around a poll,
//!   a timer check or the start of `block_on`), so its length is what the
//!   clock measured, plus the scheduler's own work before the switch
//!   (taking the thread off the ready queue, copying a copied-out stack
//!   back in).
//! * **Sampling**, after 64 stamped resumes in a row that ran under 500 ns
//!   each (a tight loop of yields or hand-offs, where a clock read at
//!   every switch would cost about as much as the switches): the clock is
//!   read where the loop polls the OS (at least every 256 resumes) or
//!   fires timers, and as a resume ends during which the recorder's ticker
//!   ticked (one thread per process, every millisecond while a runtime
//!   samples, see `ticker`). So a resume of a millisecond or more still has its real
//!   end; its start is placed after the resumes since the reading before,
//!   each given the sampled run's average length. The resumes between two
//!   readings share the interval evenly, and the first reading that shows
//!   a slower stretch returns the runtime to stamping: only the resumes of
//!   that first stretch (under a millisecond, or it would have been seen)
//!   are shown spread over it.
//!
//! A hog therefore shows its whole length, whether the latency watchdog
//! reported it or not. Polls are timed by the readings around them.
//! Spawns, wakes and fired timers are not stamped themselves: each is
//! placed in order between the readings around it, and a spawn or wake by
//! a green thread inside the resume that made it.
//!
//! # Cost
//!
//! A resume that yielded is one 4-byte store into a ring indexed by the
//! switch number the scheduler counts anyway, and one compare of the
//! ticker's word with the value last seen (a park or a finish marks the
//! slot again, with a park's reason). The
//! ring keeps a 28-bit tag of the thread, not its id (see below), so that
//! it takes little of the cache. A stamp is a clock read and two stores
//! into the other ring, as is a wake or a spawn; who woke or spawned is
//! not stored, the event's order key says which resume was running. The
//! measured cost is in BENCHMARKS.md.
//!
//! # Thread ids
//!
//! A thread's tag is its id for the first 134 million threads a runtime
//! spawns; later ones take tags that are given back at finish and handed
//! out again only once no trace can show the old holder (see `tags`): the
//! ids a trace shows are exact, however many threads were spawned.
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
mod ticker;

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::io;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::kernel::clock::{self, Instant};
use crate::kernel::context;
use crate::kernel::sched::Scheduler;
use crate::kernel::task::{Task, ThreadState};

/// Resumes the recorder keeps (a power of two); it keeps twice as many
/// other events.
pub const EVENTS: usize = 4096;

/// Other events the recorder keeps: a stamped resume adds a clock reading.
const OTHERS: usize = 2 * EVENTS;

/// Snapshots taken on latency warnings that a runtime keeps.
pub const KEPT_SNAPSHOTS: usize = 4;

/// Stamped resumes in a row under [`FAST`] after which the recorder
/// samples (see "Times" in the module docs).
const SAMPLE_AFTER: u32 = 64;

/// A resume shorter than this is too short to stamp, beside a clock read.
const FAST: Duration = Duration::from_nanos(500);

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
/// The resume just before the [`TICK`] before this event began at the
/// payload (a tick count): a sampled resume the ticker saw run.
const BEGAN: u64 = 7;
/// What the sub-kind of a [`TIMER`] names.
const TIMER_KINDS: [&str; 3] = ["sleep", "timeout", "future sleep"];
/// The payload's bits: 56.
const PAYLOAD: u64 = (1 << 56) - 1;

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
/// reason). The other events, clock readings among them, go into a second
/// ring with its own index, each with an order key placing it among the
/// resumes (see [`key`]).
pub(crate) struct Recorder {
    /// Resume `n`'s thread and how it ended at `n % EVENTS`.
    ///
    /// # Invariant
    /// Index `n % EVENTS` holds resume `n` for the last `EVENTS` resumes
    /// that ended (every resume records itself): the thread's tag ([`tags`])
    /// above four bits of its state after the resume, or 0 for a yield. 32
    /// bits a resume: the ring is written on every switch, and the less
    /// cache it takes, the less it evicts.
    res: Rc<[Cell<u32>; EVENTS]>,
    /// A parked resume's reason, at the same index.
    res_s: Rc<[Cell<&'static str>; EVENTS]>,
    /// The other events: one word of kind and payload, and the order key
    /// ([`key`]). Who spawned or woke is not stored: the key says which
    /// resume was running, and the resume ring which thread that was.
    ///
    /// # Invariant
    /// Index `i % OTHERS` holds event `i` for the last `OTHERS` values of
    /// `i` below `head`.
    ev: Rc<[RingSlot; OTHERS]>,
    /// Other events recorded since the runtime started.
    head: Cell<u64>,
    /// While sampling, the ticker's word as last seen; while stamping,
    /// [`ticker::NEVER`], so that every resume is stamped.
    ///
    /// # Invariant
    /// It is not `NEVER` exactly while the recorder is subscribed to the
    /// ticker (`Drop` unsubscribes).
    seen: Cell<u64>,
    /// Tick count and switch count of the last clock reading recorded.
    last: Cell<u64>,
    last_n: Cell<u64>,
    /// Stamped resumes in a row under [`FAST`], and when the first began.
    run: Cell<u32>,
    run_since: Cell<u64>,
    /// While sampling: the average ticks a resume of the run took.
    avg: Cell<u64>,
    /// [`FAST`] in ticks (tests may raise it, see `tests::sample_below`).
    fast: Cell<u64>,
    /// The tags of threads spawned after the first 2^27 (see [`tags`]).
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
/// Allocating and zeroing them (208 KiB) is not left to every runtime
/// built: the first runtime
/// an OS thread builds allocates them and the thread keeps a handle; a later
/// runtime takes them over once no other recorder holds them (at most one
/// set is kept; runtimes alive at the same time on one OS thread beyond
/// the first get their own).
///
/// A taken-over ring still holds the old runtime's entries, and that is
/// never seen: a trace reads only the resumes `1..=switches` and the
/// events `head - OTHERS..head` of its own runtime (see `trace`), every
/// one of which this runtime wrote (`resume_ended` records each resume).
/// The values are plain integers and `&'static str`s, so a stale entry
/// could only ever be a wrong word, never an invalid one.
#[derive(Clone)]
struct Rings {
    res: Rc<[Cell<u32>; EVENTS]>,
    res_s: Rc<[Cell<&'static str>; EVENTS]>,
    ev: Rc<[RingSlot; OTHERS]>,
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
        let now = clock::now().ticks();
        Recorder {
            res,
            res_s,
            ev,
            head: Cell::new(0),
            seen: Cell::new(ticker::NEVER),
            last: Cell::new(now),
            last_n: Cell::new(0),
            run: Cell::new(0),
            run_since: Cell::new(now),
            avg: Cell::new(0),
            fast: Cell::new(clock::duration_to_ticks(FAST)),
            tags: RefCell::default(),
            hog_seen: Cell::new(0),
            last_auto: Cell::new(0),
            latency: RefCell::new(VecDeque::new()),
            names: RefCell::new(VecDeque::new()),
        }
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.stamping();
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
        let slot = &self.ev[i as usize & (OTHERS - 1)];
        slot.a.set(a);
        slot.k.set(key);
    }

    /// Resume `n` of `t` ended: one store, and a stamp if one is due (see
    /// "Times" in the module docs). The store says only that `t` ran; a
    /// resume that did not end in a yield is marked by [`ended`], from the
    /// scheduler's branch for it, so that the switch path does not look at
    /// how a resume ended.
    ///
    /// [`ended`]: Self::ended
    #[inline(always)]
    pub(crate) fn resume_ended(&self, t: &Task, n: u64) {
        if OFF {
            return;
        }
        self.res[n as usize & (EVENTS - 1)].set(t.flight_tag);
        if ticker::now() != self.seen.get() {
            self.stamp(n);
        }
    }

    /// Resume `n` of `t` ended in `t`'s state now (parked or finished; a
    /// resume not marked so reads as a yield).
    #[inline]
    pub(crate) fn ended(&self, t: &Task, n: u64) {
        self.ended_in(t, n, t.state.get());
    }

    /// [`ended`](Self::ended), in `state`.
    #[inline]
    fn ended_in(&self, t: &Task, n: u64, state: ThreadState) {
        if OFF {
            return;
        }
        let i = n as usize & (EVENTS - 1);
        self.res[i].set(t.flight_tag | state as u32);
        if state == ThreadState::Parked {
            self.res_s[i].set(t.waiting_on.get());
        }
    }

    /// Stamps resume `n`, which just ended: every resume while stamping,
    /// one the ticker ticked during while sampling.
    #[cold]
    #[inline(never)]
    fn stamp(&self, n: u64) {
        let now = clock::now().ticks();
        let key = 4 * n + 2;
        self.push(key, TICK | (now & PAYLOAD) << 8);
        let last = self.last.get();
        let count = n.saturating_sub(self.last_n.get()).max(1);
        let span = now.saturating_sub(last);
        if self.seen.get() == ticker::NEVER {
            if count == 1 && span < self.fast.get() {
                let run = self.run.get() + 1;
                if run == 1 {
                    self.run_since.set(last);
                }
                self.run.set(run);
                if run >= SAMPLE_AFTER {
                    self.sample(now.saturating_sub(self.run_since.get()) / u64::from(run));
                }
            } else {
                self.run.set(0);
            }
        } else if span >= self.fast.get().saturating_mul(count) {
            // A slow stretch: the resume that just ended ran long, and the
            // ones before it since the last reading are given the run's
            // average.
            let began = last
                .saturating_add(self.avg.get().saturating_mul(count - 1))
                .min(now);
            self.push(key, BEGAN | (began & PAYLOAD) << 8);
            self.stamping();
        } else {
            self.avg.set(span / count);
            self.seen.set(ticker::now());
        }
        self.last.set(now);
        self.last_n.set(n);
    }

    /// Starts sampling, with resumes of `avg` ticks so far.
    fn sample(&self, avg: u64) {
        self.run.set(0);
        if ticker::subscribe() {
            self.avg.set(avg);
            self.seen.set(ticker::now());
        }
    }

    /// Goes back to stamping every resume.
    fn stamping(&self) {
        if self.seen.replace(ticker::NEVER) != ticker::NEVER {
            ticker::unsubscribe();
        }
        self.run.set(0);
    }

    /// The loop stops running threads for a while (`block_on` returns):
    /// the next resumes are stamped.
    pub(crate) fn rest(&self) {
        if !OFF {
            self.stamping();
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

    /// The loop read the clock: `ticks`.
    #[inline]
    pub(crate) fn tick(&self, key: u64, ticks: u64) {
        if OFF {
            return;
        }
        self.push(key, TICK | (ticks & PAYLOAD) << 8);
        // While sampling, a slower stretch since the last reading ends
        // the sampled run (which resume made it slow is not known).
        let n = key / 4;
        let count = n.saturating_sub(self.last_n.get());
        if count > 0 && self.seen.get() != ticker::NEVER {
            let span = ticks.saturating_sub(self.last.get());
            if span >= self.fast.get().saturating_mul(count) {
                self.stamping();
            } else {
                self.avg.set(span / count);
            }
        }
        self.last.set(ticks);
        self.last_n.set(n);
    }

    /// A poll that began at the previous tick ended at `ticks` with
    /// `events` events; `blocking`: it could wait, and the next resumes
    /// are stamped.
    #[inline]
    pub(crate) fn poll(&self, key: u64, ticks: u64, events: usize, blocking: bool) {
        let events = (events as u64).min(PAYLOAD);
        self.push(key, POLL | u64::from(blocking) << 4 | events << 8);
        self.tick(key, ticks);
        if blocking {
            self.rest();
        }
    }

    /// The tag (as [`Task::flight_tag`] holds it) of thread `id`, spawned
    /// now on `s`.
    ///
    /// # Errors
    ///
    /// `OutOfMemory` when the tags run out (see `tags`).
    #[inline]
    pub(crate) fn tag(s: &Scheduler, id: u64) -> io::Result<u32> {
        if OFF {
            return Ok(0);
        }
        if id < u64::from(tags::DIRECT) {
            return Ok((id as u32) << 4);
        }
        let tag = s
            .observers
            .flight
            .tags
            .borrow_mut()
            .take(id, s.counters.switches.get())?;
        Ok(tag << 4)
    }

    /// The thread of `s` whose tag is `flight_tag` finished (or failed to
    /// start): a taken tag is handed out again once no trace can show that
    /// thread's resumes (see `tags`).
    #[inline]
    pub(crate) fn untag(s: &Scheduler, flight_tag: u32) {
        if OFF || flight_tag >> 4 < tags::DIRECT {
            return;
        }
        s.observers
            .flight
            .tags
            .borrow_mut()
            .give_back(flight_tag >> 4, s.counters.switches.get());
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
/// and the other events since the oldest of them (at most `2 * EVENTS`).
///
/// # Panics
///
/// Outside a runtime.
pub fn snapshot() -> Trace {
    context::with_sched("coro::flight::snapshot", |s| {
        s.observers.flight.trace(s, "snapshot".into(), None, None)
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
        s.observers
            .flight
            .latency
            .borrow()
            .iter()
            .cloned()
            .collect()
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
pub(crate) fn timeline(s: &Scheduler, start: SystemTime) -> Vec<crate::observers::profile::Slice> {
    let t = s.observers.flight.trace(s, "profile".into(), None, None);
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
            Some(crate::observers::profile::Slice {
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
/// ended, switch number `slice`; `returned`: `t` finished in it): marks it
/// in the ring, and takes a snapshot if the rate limit allows.
#[cold]
#[inline(never)]
pub(crate) fn hog(s: &Scheduler, t: &Task, hog: u64, slice: u64, returned: bool) {
    let f = &s.observers.flight;
    f.hog_seen.set(hog);
    // How it ended, before the scheduler's branch for it marks it.
    let state = if returned {
        ThreadState::Dead
    } else {
        t.state.get()
    };
    f.ended_in(t, slice, state);
    // After resume `slice`'s end (this runs before `current` is reset). A
    // late report (the slice ended before it was seen) names an earlier
    // resume, found by its number when the ring is read.
    f.push(4 * slice + 2, HOG | (hog & PAYLOAD) << 8);
    let Some(every) = s.config.latency_snapshots else {
        return;
    };
    let now = clock::now().ticks();
    let last = f.last_auto.get();
    if OFF || last != 0 && now.saturating_sub(last) < clock::duration_to_ticks(every) {
        return;
    }
    f.last_auto.set(now);
    let mut trace = f.trace(s, String::new(), Some(t), Some(slice));
    trace.reason = match trace.events.iter().rev().find_map(|e| match e.event {
        Event::Resume { thread, ran, .. } if hog == slice && thread == t.id => Some(ran),
        _ => None,
    }) {
        Some(ran) => format!(
            "latency warning: green thread #{} '{}' ran {:.3} s without yielding",
            t.id,
            t.display_name(),
            ran.as_secs_f64()
        ),
        None => "latency warning".to_owned(),
    };
    log::info!(
        target: "coro::flight",
        "flight recorder: {} events before the end of the slice saved ({}); \
         read them with coro::flight::latency_snapshots() or the back door's `trace latency PATH`",
        trace.events.len(),
        trace.reason,
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

    /// Whether `s`'s recorder samples (rather than stamps every resume).
    fn sampling() -> bool {
        context::with_sched("test", |s| s.observers.flight.seen.get() != ticker::NEVER)
    }

    /// Makes the current runtime's recorder count resumes under `d` as
    /// short: a test build's yields on a loaded machine may take longer
    /// than [`FAST`], and the tests here are about what follows.
    fn sample_below(d: Duration) {
        context::with_sched("test", |s| {
            s.observers.flight.fast.set(clock::duration_to_ticks(d))
        });
    }

    /// Yields until the recorder samples (at most a million times).
    #[track_caller]
    fn yield_until_sampling() -> usize {
        let mut yields = 0;
        while !sampling() {
            crate::yield_now();
            yields += 1;
            assert!(yields < 1_000_000, "still stamping after {yields} yields");
        }
        yields
    }

    /// A runtime stamps every resume until a run of short ones, samples
    /// then, and stamps again once its loop waits for I/O.
    #[test]
    fn a_runtime_samples_only_runs_of_short_resumes() {
        crate::run(|| {
            assert!(!sampling());
            sample_below(Duration::from_micros(100));
            let other = crate::spawn(|| {
                while sampling() {
                    crate::yield_now();
                }
            });
            let yields = yield_until_sampling();
            assert!(yields >= SAMPLE_AFTER as usize / 2, "{yields}");
            // A wait for a timer is a blocking poll.
            crate::sleep(Duration::from_millis(1)).unwrap();
            assert!(!sampling());
            other.join().unwrap();
        });
    }

    /// A resume that runs long among short ones while the recorder samples
    /// keeps its length: the ticker ticks while it runs, so it is stamped
    /// as it ends, and its start follows the short ones before it.
    #[test]
    fn a_hog_among_short_resumes_keeps_its_length() {
        let least = Duration::from_millis(60);
        let (hog_id, trace) = crate::run(move || {
            let done = Rc::new(Cell::new(false));
            let yielders: Vec<_> = (0..2)
                .map(|_| {
                    let done = done.clone();
                    crate::spawn(move || {
                        while !done.get() {
                            crate::yield_now();
                        }
                    })
                })
                .collect();
            sample_below(Duration::from_micros(100));
            // The hog must start while the recorder samples. A slow first
            // pass through new code (an emulator translating it, a loaded
            // machine) can end sampling before the hog's first resume:
            // such a hog returns at once and another is tried.
            let mut attempts = 0;
            let id = loop {
                attempts += 1;
                assert!(attempts <= 50, "no hog started while the recorder sampled");
                yield_until_sampling();
                let hog = crate::spawn(move || {
                    if !sampling() {
                        return false;
                    }
                    // At least `least`, and two ticks of the ticker.
                    let (start, mut seen, mut ticks) =
                        (std::time::Instant::now(), ticker::now(), 0);
                    while ticks < 2 || start.elapsed() < least {
                        if ticker::now() != seen {
                            seen = ticker::now();
                            ticks += 1;
                        }
                        std::hint::spin_loop();
                    }
                    true
                });
                let id = hog.thread().id();
                if hog.join().unwrap() {
                    break id;
                }
            };
            done.set(true);
            for y in yielders {
                y.join().unwrap();
            }
            (id, snapshot())
        });
        let ran: Vec<Duration> = trace
            .events
            .iter()
            .filter_map(|e| match e.event {
                Event::Resume { thread, ran, .. } if thread == hog_id => Some(ran),
                _ => None,
            })
            .collect();
        assert_eq!(ran.len(), 1, "{ran:?}");
        assert!(ran[0] >= least - Duration::from_millis(5), "{ran:?}");
    }

    /// Tags past the first 2^27 threads are handed out again, but only
    /// once no trace can hold the old holder's resumes: threads spawned
    /// and finished one after another (three rings' worth, so tags are
    /// reused) each show their own resumes, one finish each.
    #[test]
    fn reused_tags_name_each_thread_once() {
        let (ids, trace) = crate::run(|| {
            context::with_sched("test", |s| s.next_id.set(tags::DIRECT.into()));
            let ids: Vec<u64> = (0..3 * EVENTS)
                .map(|_| {
                    let t = crate::spawn(crate::yield_now);
                    let id = t.thread().id();
                    t.join().unwrap();
                    id
                })
                .collect();
            (ids, snapshot())
        });
        let mut per_thread = HashMap::<u64, Vec<After>>::new();
        for e in &trace.events {
            if let Event::Resume { thread, then, .. } = e.event {
                per_thread.entry(thread).or_default().push(then);
            }
        }
        let shown: Vec<u64> = ids
            .iter()
            .copied()
            .filter(|id| per_thread.contains_key(id))
            .collect();
        assert!(shown.len() > EVENTS / 8, "{}", shown.len());
        // All but the oldest one shown (its first resume may have left the
        // ring) ran twice: a yield, then its finish.
        for id in &shown[1..] {
            assert_eq!(
                per_thread[id],
                [After::Yield, After::Finish],
                "thread #{id}"
            );
        }
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
