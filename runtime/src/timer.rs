//! The timers: deadlines in clock ticks, fired in `(deadline, seq)` order so
//! equal deadlines fire in insertion order.
//!
//! # Design
//!
//! A hierarchical timing wheel (as tokio's and the Linux kernel's) in front
//! of a small binary heap:
//!
//! ```text
//!   insert ──► unit < elapsed? ──yes──► near heap (exact order: deadline, seq)
//!                  │ no                      ▲
//!                  ▼                         │ a level-0 slot whose time came
//!   level 5 │64 slots│ ≈ 19 days             │
//!   ...      ...                             │
//!   level 1 │64 slots│ 64 units each ──cascade down──┐
//!   level 0 │64 slots│ 1 unit each  ─────────────────┴──┘
//! ```
//!
//! Time is counted in *units* of `2^SHIFT` ticks (about 25 µs with the TSC
//! at 2.6 GHz, 65 µs on the nanosecond clock). Every entry whose unit is
//! below `elapsed` is in the near heap; every other one is in the wheel, on
//! the level given by the highest bit in which its unit differs from
//! `elapsed` (6 bits per level), in the slot given by its unit's bits at
//! that level. Inserting into the wheel is a push onto a slot's list; as
//! time passes, the next occupied slot is found with one bitmap per level;
//! a level-0 slot whose unit has come is sorted as a batch and queued
//! behind the slots opened before it (`batch`: a slot holds one unit, so
//! the queue stays in order), a higher slot is redistributed onto the
//! levels below. So an entry is moved at most once per level. The heap
//! holds only the entries inserted for a unit already opened (a sleep that
//! is due or nearly so), a few at a time; the heap and the batch queue keep
//! the exact order between them, so timers never fire early and sub-unit
//! deadlines stay precise; the wheel only decides when an entry comes near.
//! (Sorting a slot's entries at once costs a fraction of pushing each into
//! the heap and popping it: with 10 000 sleepers, 2 500 deadlines fall in
//! one unit.)
//!
//! Entries are never removed from the middle. An entry whose operation
//! finished first (a sleep that was interrupted, a `with_timeout` scope that
//! returned, a scope whose deadline moved) becomes *stale*: it is skipped when it pops, and everything
//! is rebuilt without stale entries once they
//! outnumber the live ones (and pass a small floor). So the structure holds
//! at most about twice the live timers plus that floor, and cancelling
//! costs O(1).
//!
//! The wheel counts *live* entries exactly: an insert adds one, and each
//! entry is taken off exactly once, either when it fires ([`TimerHeap::fired`])
//! or when its owner gives it up ([`TimerHeap::cancel_one`]): a sleep whose
//! timer did not fire, a scope that left with its timer armed and unexpired.
//! Dropping a stale entry changes nothing, so the count does not depend on
//! whether the owner gives up before or after its entry is dropped.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};
use std::rc::Rc;

use crate::task::{Task, ThreadState};

/// Stale entries tolerated before a rebuild is considered.
const STALE_FLOOR: usize = 256;

/// A unit is `2^SHIFT` clock ticks.
const SHIFT: u32 = 16;
/// Slots per level: `2^LEVEL_BITS`.
const LEVEL_BITS: u32 = 6;
const SLOTS: usize = 1 << LEVEL_BITS;
const LEVELS: usize = 6;
/// Units the wheel spans; later deadlines are placed at its far end and
/// placed again when that slot opens (they reach the heap only when their
/// true unit has come).
const SPAN: u64 = 1 << (LEVEL_BITS * LEVELS as u32);
/// A slot list whose capacity grew past this is freed once drained.
const SLOT_KEEP: usize = 256;

/// What a timer does when it fires.
#[derive(Debug, Clone, Copy)]
pub(crate) enum TimerKind {
    /// Wake the task if it is still in the park of this generation (sleep).
    Wake { gen: u64 },
    /// Expire the task's scope with this id (`with_timeout`, a cancel scope).
    Scope { id: u64 },
    /// Wake the `Waker` of a `future::Sleep`, kept in the scheduler's
    /// `TimerWakers` under `key` while its sequence number is `seq`.
    Waker { key: usize, seq: u64 },
}

pub(crate) struct Entry {
    pub(crate) deadline: u64,
    seq: u64,
    pub(crate) task: Rc<Task>,
    pub(crate) kind: TimerKind,
}

impl Entry {
    /// Whether firing this entry would still do something.
    pub(crate) fn is_live(&self) -> bool {
        match self.kind {
            TimerKind::Wake { gen } => {
                self.task.state.get() == ThreadState::Parked && self.task.park_gen.get() == gen
            }
            TimerKind::Scope { id } => crate::cancel::timer_is_live(&self.task, id, self.deadline),
            TimerKind::Waker { key, seq } => crate::future::waker_timer_is_live(key, seq),
        }
    }

    fn unit(&self) -> u64 {
        self.deadline >> SHIFT
    }
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    // Reversed: BinaryHeap is a max-heap and we want the earliest first.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.deadline, other.seq).cmp(&(self.deadline, self.seq))
    }
}

/// One level of the wheel.
struct Level {
    /// Bit `s` set: `slots[s]` is not empty.
    occupied: u64,
    /// `SLOTS` of them, on the heap (built there directly: see
    /// [`Level::new`]).
    slots: Box<[Vec<Entry>]>,
}

impl Level {
    #[inline]
    fn push(&mut self, slot: usize, e: Entry) {
        self.occupied |= 1 << slot;
        self.slots[slot].push(e);
    }
}

impl Level {
    /// An empty level, its slots made on the heap without passing through
    /// the stack (a level is 1.5 KiB; the wheel is made by whichever green
    /// thread first sleeps far ahead, possibly on a 16 KiB stack).
    fn new() -> Level {
        Level {
            occupied: 0,
            slots: (0..SLOTS).map(|_| Vec::new()).collect(),
        }
    }
}

/// The next occupied slot of the wheel.
#[derive(Debug, Clone, Copy)]
struct Expiration {
    level: usize,
    slot: usize,
    /// First unit the slot covers.
    start: u64,
}

/// The level an entry of unit `unit` goes on, seen from `elapsed`.
fn level_for(elapsed: u64, unit: u64) -> usize {
    let masked = (elapsed ^ unit) | (SLOTS as u64 - 1);
    let significant = 63 - masked.leading_zeros();
    // A unit clamped to the far end may cross into the next top-level
    // block: it stays on the top level (its slot wraps around).
    ((significant / LEVEL_BITS) as usize).min(LEVELS - 1)
}

/// Timers in deadline order, with lazy cancellation.
#[derive(Default)]
pub(crate) struct TimerHeap {
    /// # Invariant
    /// With `batch`, holds every stored entry whose unit is below
    /// `elapsed`: the ones inserted after their unit's slot was opened,
    /// earlier than the batch queue's last.
    near: BinaryHeap<Entry>,
    /// The entries of opened level-0 slots, and those inserted below
    /// `elapsed` at or after the last one, in `(deadline, seq)` order.
    batch: VecDeque<Entry>,
    /// Empty until an entry first goes on the wheel (`level`): a runtime
    /// that never waits far ahead does not make, clear and drop its 384
    /// slots (11 000 instructions, a third of building and dropping a
    /// runtime).
    ///
    /// # Invariant
    /// Holds every stored entry whose unit is at least `elapsed`, each on
    /// `level_for(elapsed_then, unit)` for an `elapsed_then` between the
    /// `elapsed` at its insertion and now (`elapsed` only moves up to the
    /// start of the next occupied slot, which keeps that true).
    levels: Vec<Level>,
    /// In units; see `near` and `levels`.
    elapsed: u64,
    /// Insertion counter: the tie-breaker for equal deadlines.
    seq: u64,
    /// Entries inserted and neither fired nor cancelled by their owner.
    live: usize,
    /// Entries stored (in the heap and the wheel), stale ones included.
    stored: usize,
}

impl TimerHeap {
    #[inline]
    pub(crate) fn insert(&mut self, deadline: u64, task: Rc<Task>, kind: TimerKind) {
        self.seq += 1;
        self.live += 1;
        self.stored += 1;
        let seq = self.seq;
        // The entry is built where it goes (building it first and moving
        // it costs a stalled load here: its fields were just stored).
        match self.spot(deadline >> SHIFT) {
            // Due or nearly so, and not before the last queued entry (its
            // seq is lower): at the back of the batch queue, in order. So
            // threads woken in deadline order that sleep again by the same
            // step (every thread of a periodic tick running late) never
            // touch the heap.
            None if self.batch.back().is_none_or(|b| b.deadline <= deadline) => {
                self.batch.push_back(Entry {
                    deadline,
                    seq,
                    task,
                    kind,
                })
            }
            None => self.near.push(Entry {
                deadline,
                seq,
                task,
                kind,
            }),
            Some((level, slot)) => self.level(level).push(
                slot,
                Entry {
                    deadline,
                    seq,
                    task,
                    kind,
                },
            ),
        }
    }

    /// Wheel level `level`, making the levels if they are not yet.
    #[inline]
    fn level(&mut self, level: usize) -> &mut Level {
        if self.levels.is_empty() {
            self.make_levels();
        }
        &mut self.levels[level]
    }

    #[cold]
    #[inline(never)]
    fn make_levels(&mut self) {
        self.levels = (0..LEVELS).map(|_| Level::new()).collect();
    }

    /// Puts a stored entry where the invariants say it belongs.
    fn place(&mut self, e: Entry) {
        match self.spot(e.unit()) {
            None => self.near.push(e),
            Some((level, slot)) => self.level(level).push(slot, e),
        }
    }

    /// Where an entry of `unit` belongs: the heap (`None`), or a level and
    /// slot of the wheel.
    #[inline]
    fn spot(&mut self, unit: u64) -> Option<(usize, usize)> {
        if unit < self.elapsed {
            return None;
        }
        // Past the span: at the far end, the top-level slot just before
        // the current one (never the current one, which would be opened
        // again and again without the entry moving down).
        let top = 1u64 << (LEVEL_BITS * (LEVELS as u32 - 1));
        let unit = unit.min((self.elapsed & !(top - 1)) + (SPAN - 1));
        let level = level_for(self.elapsed, unit);
        let slot = ((unit >> (level as u32 * LEVEL_BITS)) as usize) & (SLOTS - 1);
        Some((level, slot))
    }

    /// The wheel's next occupied slot, if any: the one that starts first,
    /// the higher level first when two start together (its entries then
    /// move down before the lower slot opens).
    ///
    /// Not simply the lowest occupied level: opening a level-0 slot moves
    /// `elapsed` past it, possibly onto the start of a higher level's slot,
    /// and entries inserted after that go on level 0 ahead of the higher
    /// slot. Scanning level 0 first then found a slot beyond the present,
    /// stopped, and moved `elapsed` past the higher slot without opening
    /// it: its entries fired up to a whole slot late (the
    /// `sleepers_that_sleep_again_are_never_late` test; 80-95 ms stalls with
    /// 10 000 sleepers).
    fn next_expiration(&self) -> Option<Expiration> {
        let mut best: Option<Expiration> = None;
        for (level, l) in self.levels.iter().enumerate().rev() {
            if l.occupied == 0 {
                continue;
            }
            let shift = level as u32 * LEVEL_BITS;
            let now_slot = ((self.elapsed >> shift) as usize) & (SLOTS - 1);
            let rotated = l.occupied.rotate_right(now_slot as u32);
            let slot = (rotated.trailing_zeros() as usize + now_slot) & (SLOTS - 1);
            let level_span = 1u64 << (shift + LEVEL_BITS);
            let level_start = self.elapsed & !(level_span - 1);
            let mut start = level_start + ((slot as u64) << shift);
            if start + (1 << shift) <= self.elapsed {
                // Wrapped: only the top level, for entries placed at its
                // far end.
                start += level_span;
            }
            // Levels are visited from the top: on a tie the higher stays.
            if best.is_none_or(|b| start < b.start) {
                best = Some(Expiration { level, slot, start });
            }
        }
        best
    }

    /// Opens the next occupied slot: a level-0 slot's entries go to the
    /// batch queue, sorted, a higher slot's are placed again on the levels
    /// below.
    fn open(&mut self, exp: Expiration) {
        let l = &mut self.levels[exp.level];
        l.occupied &= !(1 << exp.slot);
        let mut entries = std::mem::take(&mut l.slots[exp.slot]);
        self.elapsed = if exp.level == 0 {
            exp.start + 1
        } else {
            exp.start.max(self.elapsed)
        };
        // Liveness is not checked here: it reads the entry's task, a cache
        // miss per entry on a path every entry takes up to once per level.
        // Stale entries are dropped when they pop, or by `compact`.
        if exp.level == 0 {
            // One unit, now below `elapsed`: sorted, it goes behind the
            // slots opened before (earlier units) in the batch queue.
            entries.sort_unstable_by_key(|e| (e.deadline, e.seq));
            let in_order = match (self.batch.back(), entries.first()) {
                (Some(b), Some(f)) => (b.deadline, b.seq) <= (f.deadline, f.seq),
                _ => true,
            };
            if in_order {
                self.batch.extend(entries.drain(..));
            }
        }
        for e in entries.drain(..) {
            self.place(e);
        }
        if entries.capacity() <= SLOT_KEEP {
            // Keep the buffer for the slot's next use (no allocation).
            let l = &mut self.levels[exp.level];
            if l.slots[exp.slot].is_empty() {
                l.slots[exp.slot] = entries;
            }
        }
    }

    /// Moves into the heap everything whose unit has come by `now` (ticks).
    fn advance(&mut self, now: u64) {
        let now_unit = now >> SHIFT;
        while let Some(exp) = self.next_expiration() {
            if exp.start > now_unit {
                break;
            }
            self.open(exp);
        }
        // No slot starts at or before `now_unit`: moving `elapsed` up to
        // it passes no entry.
        self.elapsed = self.elapsed.max(now_unit + 1);
    }

    /// Whether the first entry below `elapsed` is the batch queue's (else
    /// the heap's); `None` when both are empty.
    #[inline]
    fn first_is_batched(&self) -> Option<bool> {
        match (self.near.peek(), self.batch.front()) {
            (None, None) => None,
            (Some(_), None) => Some(false),
            (None, Some(_)) => Some(true),
            (Some(h), Some(b)) => Some((b.deadline, b.seq) < (h.deadline, h.seq)),
        }
    }

    /// The first entry below `elapsed`, in `(deadline, seq)` order.
    #[inline]
    fn first(&self) -> Option<&Entry> {
        if self.first_is_batched()? {
            self.batch.front()
        } else {
            self.near.peek()
        }
    }

    /// Takes off [`first`](Self::first).
    #[inline]
    fn pop_first(&mut self) -> Option<Entry> {
        if self.first_is_batched()? {
            self.batch.pop_front()
        } else {
            self.near.pop()
        }
    }

    /// Earliest deadline of an entry that would still do something, or a
    /// time at or before it (the start of the wheel slot it is in: the
    /// loop wakes then and looks again). `None` when no entry would do
    /// anything. Stale entries met on the way are dropped.
    pub(crate) fn next_live_deadline(&mut self) -> Option<u64> {
        loop {
            while let Some(e) = self.first() {
                if e.is_live() {
                    return Some(e.deadline);
                }
                self.pop_first();
                self.stored -= 1;
            }
            let exp = self.next_expiration()?;
            if exp.level == 0 {
                // Open it now: the heap then knows the exact deadline.
                self.open(exp);
                continue;
            }
            // A slot further out: its start is early enough, if anything
            // in it is live (the first live entry found ends the search;
            // stale ones before it are dropped).
            let l = &mut self.levels[exp.level];
            let slot = &mut l.slots[exp.slot];
            while let Some(e) = slot.last() {
                if e.is_live() {
                    return Some(exp.start << SHIFT);
                }
                slot.pop();
                self.stored -= 1;
            }
            l.occupied &= !(1 << exp.slot);
        }
    }

    /// Pops the earliest entry if its deadline is at or before `now`.
    pub(crate) fn pop_expired(&mut self, now: u64) -> Option<Entry> {
        if self.first().is_none_or(|e| e.deadline > now) {
            self.advance(now);
        }
        if self.first()?.deadline <= now {
            self.stored -= 1;
            self.pop_first()
        } else {
            None
        }
    }

    /// A popped entry was live and fired.
    pub(crate) fn fired(&mut self) {
        self.live = self.live.saturating_sub(1);
    }

    /// Its owner gave up an entry that did not fire: it no longer does
    /// anything. Rebuilds when stale entries dominate.
    pub(crate) fn cancel_one(&mut self) {
        self.live = self.live.saturating_sub(1);
        let stale = self.stored.saturating_sub(self.live);
        if stale > STALE_FLOOR && stale * 2 > self.stored {
            self.compact();
        }
    }

    /// Drops every stale entry.
    pub(crate) fn compact(&mut self) {
        let mut keep: Vec<Entry> = std::mem::take(&mut self.near).into_vec();
        keep.extend(self.batch.drain(..));
        for l in &mut self.levels {
            l.occupied = 0;
            for s in l.slots.iter_mut() {
                keep.append(s);
            }
        }
        keep.retain(Entry::is_live);
        self.stored = keep.len();
        for e in keep {
            self.place(e);
        }
    }

    /// Timers that will still do something.
    pub(crate) fn pending(&self) -> usize {
        self.live
    }

    /// The entries that would still do something, in no order (`coro::timers`).
    pub(crate) fn live_entries(&self) -> impl Iterator<Item = &Entry> {
        self.near
            .iter()
            .chain(self.batch.iter())
            .chain(
                self.levels
                    .iter()
                    .flat_map(|l| l.slots.iter().flat_map(|s| s.iter())),
            )
            .filter(|e| e.is_live())
    }

    /// Entries stored, stale ones included.
    pub(crate) fn len(&self) -> usize {
        self.stored
    }

    pub(crate) fn clear(&mut self) {
        self.near.clear();
        self.batch.clear();
        // Every slot, occupied or not: one emptied by `compact` or by
        // `next_live_deadline` keeps its buffer, maybe a large one. (A
        // runtime that never waited far ahead has no levels to go through.)
        for l in &mut self.levels {
            l.occupied = 0;
            for s in l.slots.iter_mut() {
                *s = Vec::new();
            }
        }
        self.live = 0;
        self.stored = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task() -> Rc<Task> {
        let t = Rc::new(Task::new(crate::task::TaskInit {
            id: 1,
            flight_tag: 0,
            runtime: 0,
            name: None,
            selfishness: 4,
            stack_limit: 0,
            stack_guard: 0,
            stack_size: 0,
            spawned_at: 0,
        }));
        t.state.set(ThreadState::Parked);
        t
    }

    /// `clear` gives back the buffers of slots emptied without being
    /// opened (stale entries dropped while looking for the next live
    /// deadline), not only those of occupied slots, and drops every entry.
    #[test]
    fn clear_frees_every_slot_buffer() {
        let t = task();
        let mut h = TimerHeap::default();
        let start = 1u64 << 40;
        h.advance(start);
        for _ in 0..10_000 {
            h.insert(start + (1 << 30), t.clone(), TimerKind::Wake { gen: 0 });
        }
        // Their park is over: every entry is stale.
        t.park_gen.set(1);
        assert_eq!(h.next_live_deadline(), None);
        h.insert(start + (1 << 25), t.clone(), TimerKind::Wake { gen: 1 });
        h.clear();
        let room: usize = h
            .levels
            .iter()
            .flat_map(|l| l.slots.iter())
            .map(Vec::capacity)
            .sum();
        assert_eq!(room, 0);
        assert_eq!(Rc::strong_count(&t), 1);
    }

    /// Deadlines spread over every level (and past the wheel's span) come
    /// out in (deadline, insertion) order, none before its time, whatever
    /// the order they went in.
    #[test]
    fn entries_fire_in_order_across_levels() {
        let t = task();
        let mut h = TimerHeap::default();
        let start = 1u64 << 40;
        h.advance(start);
        let mut deadlines = Vec::new();
        let mut x = 12345u64;
        for i in 0..5000u64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            // Offsets from 0 to beyond the span, many equal ones.
            let off = match i % 5 {
                0 => x % 64,
                1 => (x % 4096) << SHIFT,
                2 => (x % (1 << 20)) << SHIFT,
                3 => (x % (SPAN * 2)) << SHIFT,
                _ => (x % 8) << SHIFT,
            };
            deadlines.push((start + off, i));
            h.insert(start + off, t.clone(), TimerKind::Wake { gen: 0 });
        }
        assert_eq!(h.len(), 5000);
        let mut want = deadlines.clone();
        want.sort();
        let mut got = Vec::new();
        let mut now = start;
        while let Some(next) = h.next_live_deadline() {
            now = now.max(next);
            while let Some(e) = h.pop_expired(now) {
                assert!(e.deadline <= now, "fired early");
                got.push((e.deadline, e.seq - 1));
                h.fired();
            }
        }
        assert_eq!(got, want);
        assert_eq!(h.len(), 0);
        assert_eq!(h.pending(), 0);
    }

    /// Inserts relative to a moving present (some already due), with some
    /// entries given up by their owners, against a sorted list: the live
    /// ones fire in order, none early, none lost, and the counts stay exact.
    #[test]
    fn random_inserts_cancels_and_time_match_a_sorted_list() {
        let mut h = TimerHeap::default();
        let mut now = 1u64 << 34;
        h.advance(now);
        let mut x = 99u64;
        let mut rnd = move |m: u64| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 17) % m
        };
        // (deadline, seq, task); a task whose park_gen moved is given up.
        let mut model: Vec<(u64, u64, Rc<Task>)> = Vec::new();
        let mut fired = 0;
        for step in 0..20_000u64 {
            match rnd(10) {
                0..=5 => {
                    let t = task();
                    let off = match rnd(4) {
                        0 => rnd(1 << 12),
                        1 => rnd(1 << 22),
                        2 => rnd(1 << 30),
                        _ => rnd(1 << 44),
                    };
                    let d = (now + off).saturating_sub(rnd(2) * (1 << 14));
                    h.insert(d, t.clone(), TimerKind::Wake { gen: 0 });
                    model.push((d, h.seq, t));
                }
                6 if !model.is_empty() => {
                    let i = rnd(model.len() as u64) as usize;
                    let (_, _, t) = model.swap_remove(i);
                    t.park_gen.set(1);
                    h.cancel_one();
                }
                _ => {
                    now += rnd(1 << 24);
                    model.sort_by_key(|m| (m.0, m.1));
                    let due = model.iter().take_while(|m| m.0 <= now).count();
                    // Stale entries may pop too (the scheduler skips them).
                    let pop_live = |h: &mut TimerHeap| loop {
                        match h.pop_expired(now) {
                            Some(e) if !e.is_live() => continue,
                            other => break other,
                        }
                    };
                    for (d, seq, _) in model.drain(..due) {
                        let e = pop_live(&mut h).expect("a due timer is missing");
                        assert_eq!((e.deadline, e.seq), (d, seq), "step {step}");
                        h.fired();
                        fired += 1;
                    }
                    assert!(pop_live(&mut h).is_none(), "fired early at step {step}");
                    if let Some(n) = h.next_live_deadline() {
                        assert!(n <= model[0].0, "next deadline late");
                    } else {
                        assert!(model.is_empty());
                    }
                }
            }
            assert_eq!(h.pending(), model.len());
            assert!(
                h.len() <= 2 * model.len() + STALE_FLOOR + 1,
                "{} stored",
                h.len()
            );
        }
        assert!(fired > 1000);
    }

    /// `next_live_deadline` never lies late: it is at or before the
    /// earliest deadline stored.
    #[test]
    fn next_deadline_is_never_late() {
        let t = task();
        let mut h = TimerHeap::default();
        let start = 1u64 << 36;
        h.advance(start);
        for d in [start + (3 << 30), start + (5 << 20), start + 100] {
            h.insert(d, t.clone(), TimerKind::Wake { gen: 0 });
            assert!(h.next_live_deadline().unwrap() <= d);
        }
        assert_eq!(h.next_live_deadline(), Some(start + 100));
    }

    /// The runtime's pattern: a heap that never saw the present (its
    /// `elapsed` still 0) or saw it long ago, threads that sleep again as
    /// soon as they wake (deadlines a few units ahead, some already due),
    /// time moving to each next deadline: the next deadline is never late.
    #[test]
    fn sleepers_that_sleep_again_are_never_late() {
        fn check(h: &TimerHeap, what: &str) {
            for (li, l) in h.levels.iter().enumerate() {
                for (si, sl) in l.slots.iter().enumerate() {
                    for e in sl {
                        assert!(
                            e.unit() >= h.elapsed,
                            "after {what}: unit {} < elapsed {} on level {li} slot {si}",
                            e.unit(),
                            h.elapsed
                        );
                    }
                }
            }
        }
        let mut x = 7u64;
        let mut rnd = move |m: u64| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 17) % m
        };
        for round in 0..10u64 {
            let mut h = TimerHeap::default();
            let mut now = (1u64 << 44) + rnd(1 << 40);
            let mut model: Vec<u64> = Vec::new();
            let n = 200 + rnd(2000);
            for _ in 0..n {
                let d = now + rnd(80 << SHIFT);
                h.insert(d, task(), TimerKind::Wake { gen: 0 });
                model.push(d);
            }
            let mut fired = 0;
            while fired < n * 10 {
                model.sort();
                check(&h, "before next");
                let next = h.next_live_deadline().expect("timers pending");
                check(&h, "next");
                assert!(next <= model[0], "round {round} fired {fired}: next {next} later than {} (elapsed {} unit {} near {} levels {:?})", model[0], h.elapsed, model[0] >> SHIFT, h.near.len(), h.levels.iter().map(|l| l.occupied).collect::<Vec<_>>());
                now = now.max(next) + rnd(1 << 12);
                while let Some(e) = h.pop_expired(now) {
                    assert!(e.deadline <= now);
                    h.fired();
                    fired += 1;
                    let i = model.iter().position(|&d| d == e.deadline).unwrap();
                    model.swap_remove(i);
                    let d = now + rnd(80 << SHIFT);
                    h.insert(d, task(), TimerKind::Wake { gen: 0 });
                    model.push(d);
                }
            }
        }
    }
}
