//! What the runtime gives back of a long-parked thread's stack: by
//! default the pages below its stack pointer ([`trim_below_sp`]: provably
//! unused, whatever any program does), and with the `unsafe` opt-in
//! [`RuntimeBuilder::idle_stack_copy_out`](crate::RuntimeBuilder::idle_stack_copy_out)
//! the whole stack (Shrapnel's way of keeping idle threads small): the
//! used part goes to the heap, compressed, and its pages go back to the
//! kernel; it is copied back just before the thread next runs.
//!
//! # Why copying out is an opt-in
//!
//! A green thread's stack is its own, and safe code may lend it:
//! `std::thread::scope` (and crossbeam's and rayon's scopes) let OS threads
//! borrow a green thread's locals while it parks waiting for them, and
//! `coro::scope` lets sibling green threads do the same. A copied-out stack
//! reads as zeros to those borrowers, and their writes are lost when it is
//! copied back (std's own `&Scope`, on that stack, reads as null). The
//! runtime cannot see such loans, so copying out is sound only under the
//! promise the opt-in's `# Safety` section spells out. The default trims
//! only what lies below the stack pointer: no live frame is there, so no
//! borrow can point there.
//!
//! # Trimming below the stack pointer
//!
//! The live part of a parked thread's stack starts [`switch_depth`] bytes
//! below its recorded stack pointer (the switch's own saved registers); the
//! whole pages below that (and below the x86-64 red zone) belong to frames
//! that have returned. A thread that once ran deep (a large buffer, a deep
//! recursion) and then parked long gives those pages back; a shallow one
//! keeps the one or two pages its frames occupy. Each park is trimmed once.
//!
//! # Parked on another stack
//!
//! A green thread may run code on a stack other than its own and block
//! there: a `corosensei` coroutine resumed inside it, `stacker::maybe_grow`
//! (which parsers use to survive deep recursion), `recursive`, a
//! generator. Its recorded stack pointer is then that stack's, and says
//! nothing about where the thread's own live frames end (they end at the
//! frame that switched, somewhere above). Such a stack lies outside the
//! thread's slot (each of those maps stacks of its own), so the sweep
//! checks that the recorded stack pointer lies in the usable part of the
//! thread's own slot before it trims or copies anything, and otherwise
//! leaves the stack whole and counts the park
//! ([`Stats::idle_stack_foreign`](crate::Stats::idle_stack_foreign)).
//!
//! What the check cannot see is a stack made of the thread's own memory:
//! code that turns a buffer in one of the thread's own frames into a
//! stack (only `unsafe` code can: `psm::on_stack`, an `unsafe impl` of
//! corosensei's `Stack`) and blocks on it records a pointer inside the
//! slot, with live frames of the thread below it. The runtime assumes no
//! code does that; none of the crates above does.
//!
//! # Copying out
//!
//! A parked thread's live stack is the range from its stack pointer at the
//! switch (recorded by `crate::suspend::suspend` in [`ThreadStack::sp`], less the
//! few words the switch itself pushes below it: [`switch_depth`]) up to
//! the stack's base, usually a few hundred bytes to a few KiB, while the
//! pages it keeps resident are whole 4 KiB pages (more if it once ran
//! deeper). [`copy_out`] saves that range, with runs of zero words left
//! out (fresh stack memory is zero, and frames hold many zero words: a
//! read buffer that received nothing yet, null pointers, small integers'
//! high halves), then releases all of the stack's usable pages
//! (`MADV_DONTNEED`: they read as zeros when touched again). [`copy_in`]
//! writes the saved words back before the scheduler switches to the
//! thread. A thread resumes at the same addresses, so every pointer into its own
//! stack stays valid.
//!
//! The loop copies out only threads that stayed parked for a whole sweep
//! period ([`IdleSweep`], 2 s by default): a thread that wakes more often
//! never pays for it. A copied-out thread pays one copy and a page fault
//! or two when it wakes.
//!
//! # What copying out rests on (see `context`, invariant 4)
//!
//! The runtime itself keeps no pointer into a parked thread's live stack
//! but the thread's own `yielder` (used only while it runs): `spawn`,
//! `blocking` and `Handle::spawn` take `'static` closures, and `block_on`'s
//! closure borrows from the OS thread's own stack. The one place of ours
//! that erases a lifetime so that other threads may borrow from a parked
//! thread's stack, `coro::scope`, [`pin`](ThreadStack::pin)s the owner's
//! stack until the last of its threads has ended (a pinned stack is only
//! trimmed below its stack pointer). Everything else that could borrow a
//! parked thread's stack (OS threads through `std::thread::scope`, the
//! kernel through a buffer it holds across a park) is excluded by the
//! caller of the `unsafe` opt-in, and only there.

use std::cell::Cell;
use std::rc::Rc;
use std::sync::OnceLock;

use corosensei::stack::{DefaultStack, Stack};
use corosensei::{Coroutine, Yielder};
use slab::Slab;

use super::unix::{self, page_size};
use crate::clock;
use crate::task::{Task, ThreadState};

/// What the stack module keeps for each green thread (a field of its task).
/// `repr(C)`: `sp`, written at every suspend, comes first (see `Task`'s
/// layout).
#[derive(Default)]
#[repr(C)]
pub(crate) struct ThreadStack {
    /// The stack pointer when the thread last suspended (0 before it
    /// first did): where it resumes, for the scheduler's prefetch, and,
    /// when it lies in the thread's own slot, where the live part of the
    /// thread's stack starts, for [`trim_below_sp`] and [`copy_out`]. It
    /// may be another stack's (see "Parked on another stack").
    pub(crate) sp: Cell<usize>,
    /// The saved live part while the stack is copied out (see `encode`).
    saved: Cell<Option<Box<[u8]>>>,
    /// `park_gen + 1` of the park the sweep last saw the thread in (0: not
    /// seen parked).
    seen: Cell<u64>,
    /// Pins that keep the stack in place (see [`ThreadStack::pin`]).
    pins: Cell<u32>,
    /// `park_gen + 1` of the park in which the pages below the stack
    /// pointer were last given back (0: never).
    trimmed: Cell<u64>,
}

impl ThreadStack {
    /// Whether the stack is copied out (its pages released).
    #[inline(always)]
    pub(crate) fn is_copied_out(&self) -> bool {
        // SAFETY: a shared read of the Cell's contents; `Cell` never hands
        // out references to them, and nothing writes them during this read
        // (one OS thread).
        unsafe { (*self.saved.as_ptr()).is_some() }
    }

    /// Keeps the stack from being copied out until the guard is dropped
    /// (for code that lets other threads borrow from this thread's stack
    /// while it is parked). Pins nest.
    pub(crate) fn pin(&self) -> StackPin<'_> {
        self.pins.set(self.pins.get() + 1);
        StackPin(self)
    }
}

/// Keeps a thread's stack in place while it lives ([`ThreadStack::pin`]).
#[must_use = "the stack is pinned only while the guard lives"]
pub(crate) struct StackPin<'a>(&'a ThreadStack);

impl Drop for StackPin<'_> {
    fn drop(&mut self) {
        self.0.pins.set(self.0.pins.get() - 1);
    }
}

/// Bytes below the recorded stack pointer that the switch itself uses
/// (`Yielder::suspend`'s frame, if the compiler kept it out of line, and
/// the registers the switch pushes), with a margin; `None` when it could
/// not be measured sanely (copying out is then off).
///
/// Measured once per process: a coroutine on a stack filled with a
/// pattern records its stack pointer as `crate::suspend::suspend` does, then
/// suspends through an out-of-line `Yielder::suspend` (the deepest way the
/// switch can go); the lowest word no longer holding the pattern is the
/// deepest the switch wrote.
pub(crate) fn switch_depth() -> Option<usize> {
    static DEPTH: OnceLock<Option<usize>> = OnceLock::new();
    *DEPTH.get_or_init(|| {
        let d = measure(0xa5a5_a5a5_a5a5_a5a5)?.max(measure(0x5a5a_5a5a_5a5a_5a5a)?);
        // The inlined switch pushes 3 words; a margin for what the
        // measurement cannot see (a different inlining decision).
        let d = (d.max(24) + 64 + 15) & !15;
        (d <= 4096).then_some(d)
    })
}

fn measure(pattern: u64) -> Option<usize> {
    let stack = DefaultStack::new(super::MIN_STACK_SIZE).ok()?;
    let (lo, hi) = (stack.limit().get() + page_size(), stack.base().get());
    for p in (lo..hi).step_by(8) {
        // SAFETY: the usable part of a stack nothing runs on yet.
        unsafe { (p as *mut u64).write_volatile(pattern) };
    }
    let mark = Rc::new(Cell::new(0usize));
    let m = mark.clone();
    let mut co = Coroutine::with_stack(stack, move |y: &Yielder<(), ()>, ()| {
        m.set(super::stack_pointer());
        let suspend: fn(&Yielder<(), ()>, ()) = Yielder::suspend;
        std::hint::black_box(suspend)(y, ());
    });
    co.resume(());
    let lowest = (lo..hi)
        .step_by(8)
        // SAFETY: as above; the coroutine is suspended.
        .find(|&p| unsafe { (p as *const u64).read_volatile() } != pattern)
        .unwrap_or(hi);
    co.resume(());
    mark.get().checked_sub(lowest)
}

/// The base (highest address) of a task's stack.
fn base(t: &Task) -> usize {
    t.stack_limit + t.stack_guard + t.stack_size
}

/// Bytes below the stack pointer that a suspended frame may still use
/// without owning them (the x86-64 System V red zone; none elsewhere here).
const RED_ZONE: usize = if cfg!(target_arch = "x86_64") { 128 } else { 0 };

/// The stack pointer a parked thread recorded, if it lies in the usable
/// part of the thread's own slot; `None` if the thread has not suspended
/// yet, or suspended while running on another stack (see "Parked on
/// another stack" in the module docs).
fn sp_on_own_stack(t: &Task) -> Option<usize> {
    let sp = t.stack.sp.get();
    let usable_lo = t.stack_limit + t.stack_guard;
    (sp > usable_lo && sp < base(t)).then_some(sp)
}

/// Whether a parked thread suspended while running on a stack other than
/// its own (so the sweep leaves its stack whole, see the module docs).
pub(crate) fn parked_on_other_stack(t: &Task) -> bool {
    t.stack.sp.get() != 0 && sp_on_own_stack(t).is_none()
}

/// Gives back the whole pages of a parked thread's stack below its live
/// part (see the module docs); returns whether anything was released.
/// Nothing is released for a thread that parked on another stack.
pub(crate) fn trim_below_sp(t: &Task) -> bool {
    let Some(depth) = switch_depth() else {
        return false;
    };
    if t.state.get() != ThreadState::Parked || t.stack.is_copied_out() {
        return false;
    }
    let Some(sp) = sp_on_own_stack(t) else {
        return false;
    };
    let usable_lo = t.stack_limit + t.stack_guard;
    let hi = sp.saturating_sub(depth + RED_ZONE) & !(page_size() - 1);
    if hi <= usable_lo {
        return false;
    }
    // SAFETY: [usable_lo, hi) lies in the thread's own stack slot, above
    // its guard gap and below `sp`, which lies in the usable part of that
    // slot (`sp_on_own_stack`): so the range is this thread's stack and no
    // other thread's, and no other mapping. The thread is parked, so `sp`
    // is the stack pointer `crate::suspend::suspend` recorded at its
    // switch, and the switch was made on the thread's own stack (see
    // "Parked on another stack" in the module docs): its live data is its
    // frames from `sp - depth` up (the switch's saved registers reach at
    // most `depth` below `sp`, measured by `switch_depth`; `RED_ZONE`
    // covers what a frame may keep below its own stack pointer). A thread
    // that parked while running on another stack (a coroutine resumed
    // inside it, `stacker::maybe_grow`, a generator) recorded that stack's
    // pointer, which says nothing about where its own live frames end:
    // that pointer lies outside the slot, and nothing is released (the
    // check above). Below `hi` are only frames that have returned: no
    // reference into them can exist in a safe program, on any thread (a
    // borrow of a local lives no longer than the local's frame; lending to
    // OS threads, to `coro::scope`'s threads or to the kernel lends locals
    // of live frames, which are all above `hi`). No signal handler runs on
    // a parked thread's stack (it is not the OS thread's stack pointer).
    // So nothing reads the discarded contents: `MADV_DONTNEED` only makes
    // those pages read as zeros when the thread next grows its stack over
    // them. Unwinding (shutdown's forced unwind, a panic) runs from the top
    // frames down, through live frames only.
    unsafe { unix::release(usable_lo, hi - usable_lo) };
    true
}

/// Copies a parked thread's live stack out and releases its pages.
/// Returns the bytes saved, or `None` if the thread cannot be copied out
/// (not parked, pinned, already out, or copying is off).
pub(crate) fn copy_out(t: &Task) -> Option<usize> {
    let depth = switch_depth()?;
    if t.state.get() != ThreadState::Parked || t.stack.pins.get() > 0 || t.stack.is_copied_out() {
        return None;
    }
    // A thread parked on another stack: where its own live frames end is
    // unknown, so its stack stays whole (see `trim_below_sp`).
    let sp = sp_on_own_stack(t)?;
    let usable_lo = t.stack_limit + t.stack_guard;
    let hi = base(t);
    let lo = (sp.saturating_sub(depth) & !15).max(usable_lo);
    if lo >= hi {
        return None;
    }
    // SAFETY: [lo, hi) lies in the thread's stack slot, mapped read/write
    // (its guard page is below `usable_lo`), and holds everything live on
    // the thread's own stack: `sp` lies in the slot's usable part, so the
    // thread switched away from its own frames there, and they are all
    // above `sp - depth` (as argued in `trim_below_sp`). The thread is parked: no code
    // runs on this stack, and nothing else accesses it: the runtime keeps
    // no pointer into it, `coro::scope` owners are pinned (checked above),
    // and every other loan (an OS thread in `std::thread::scope`, the
    // kernel) is excluded by the caller of the `unsafe` opt-in
    // `RuntimeBuilder::idle_stack_copy_out`, the only way `copy_out` runs.
    // So reading it through a shared slice is sound.
    let live = unsafe { std::slice::from_raw_parts(lo as *const u64, (hi - lo) / 8) };
    let saved = encode(live);
    let n = saved.len();
    t.stack.saved.set(Some(saved));
    // SAFETY: everything live on the stack is saved; the rest of the usable
    // range is dead frames of earlier calls, and by the opt-in's contract
    // (above) no one outside the thread reads or writes the live part until
    // it runs again. The thread does not run until `copy_in` has written
    // its words back (`Scheduler::resume_unprofiled`, also on shutdown's
    // unwind path, which resumes it the same way).
    unsafe { unix::release(usable_lo, hi - usable_lo) };
    Some(n)
}

/// Writes a copied-out thread's stack back (before it runs). Does nothing
/// for a stack in place.
#[cold]
#[inline(never)]
pub(crate) fn copy_in(t: &Task) {
    let Some(saved) = t.stack.saved.take() else {
        return;
    };
    let hi = base(t);
    // SAFETY: `saved` was made by `copy_out` from this thread's stack,
    // which has not moved (a slot is the thread's until it finishes):
    // writing every saved word back to the same addresses restores the
    // live part exactly, whatever the released pages hold now. The thread
    // is not running; the scheduler switches to it after this returns.
    unsafe { decode(&saved, hi) };
}

/// The saved form: the word count, then runs of `[zeros: u32][words: u32]`
/// followed by that many literal words, all little-endian bytes.
fn encode(words: &[u64]) -> Box<[u8]> {
    let mut out = Vec::with_capacity(words.len() * 8 / 2 + 16);
    out.extend_from_slice(&(words.len() as u32).to_le_bytes());
    let mut i = 0;
    while i < words.len() {
        let z = words[i..].iter().take_while(|&&w| w == 0).count();
        i += z;
        let n = words[i..].iter().take_while(|&&w| w != 0).count();
        out.extend_from_slice(&(z as u32).to_le_bytes());
        out.extend_from_slice(&(n as u32).to_le_bytes());
        for w in &words[i..i + n] {
            out.extend_from_slice(&w.to_le_bytes());
        }
        i += n;
    }
    out.into_boxed_slice()
}

/// Writes the words of `saved` back, ending at `hi`, zero runs included
/// (the released pages read as zeros natively, but nothing here depends on
/// what they hold: under valgrind they do not).
///
/// # Safety
///
/// `[hi - 8 * count, hi)` is writable memory that nothing else uses.
unsafe fn decode(saved: &[u8], hi: usize) {
    let u32_at = |i: usize| u32::from_le_bytes(saved[i..i + 4].try_into().unwrap()) as usize;
    let count = u32_at(0);
    let mut at = hi - count * 8;
    let mut i = 4;
    while i < saved.len() {
        let (z, n) = (u32_at(i), u32_at(i + 4));
        i += 8;
        // SAFETY: the caller's range; the encoded counts add up to `count`.
        unsafe {
            std::ptr::write_bytes(at as *mut u8, 0, z * 8);
            at += z * 8;
            std::ptr::copy_nonoverlapping(saved[i..].as_ptr(), at as *mut u8, n * 8);
        }
        at += n * 8;
        i += n * 8;
    }
}

/// The loop's sweep over parked threads: a pass visits every thread (a few
/// hundred per call, so a million threads do not stall the loop); a thread
/// found parked in the same park by two passes at least `after` apart has
/// its stack trimmed below its stack pointer, or copied out (with the
/// opt-in, unless pinned).
pub(crate) struct IdleSweep {
    after: Option<u64>,
    /// Copy whole stacks out (the `unsafe` opt-in), not only trim them.
    copy_out: bool,
    /// Next thread-table key to visit in the current pass.
    cursor: usize,
    /// A pass is under way.
    running: bool,
    /// Ticks when the next pass may start.
    next_pass: u64,
    /// Threads whose stacks are copied out now.
    pub(crate) out: usize,
    /// Parks whose stacks were trimmed below the stack pointer, in all.
    pub(crate) trims: u64,
    /// Parks the sweep left whole because the thread parked on another
    /// stack than its own, in all (see "Parked on another stack").
    pub(crate) foreign: u64,
}

/// Threads one sweep call visits.
const SWEEP_BATCH: usize = 512;

impl IdleSweep {
    /// A sweep that trims (or, with `copy_out`, copies out) the stacks of
    /// threads parked for `after` (never, `None`).
    pub(crate) fn new(after: Option<std::time::Duration>, copy_out: bool) -> IdleSweep {
        IdleSweep {
            after: after.map(clock::duration_to_ticks),
            copy_out,
            trims: 0,
            foreign: 0,
            cursor: 0,
            running: false,
            next_pass: 0,
            out: 0,
        }
    }

    /// Visits the next batch of threads if a pass is due or under way.
    /// Returns whether the pass still has threads to visit (the loop should
    /// not block), and when the next pass is due.
    pub(crate) fn step(&mut self, tasks: &Slab<Rc<Task>>, now: u64) -> (bool, Option<u64>) {
        let Some(after) = self.after else {
            return (false, None);
        };
        if !self.running {
            if now < self.next_pass {
                return (false, Some(self.next_pass));
            }
            if tasks.len() <= 1 {
                // Only the caller of block_on: nothing to do this period.
                self.next_pass = now.saturating_add(after);
                return (false, Some(self.next_pass));
            }
            self.running = true;
            self.cursor = 0;
            self.next_pass = now.saturating_add(after);
        }
        let end = (self.cursor + SWEEP_BATCH).min(tasks.capacity());
        for key in self.cursor..end {
            let Some(t) = tasks.get(key) else { continue };
            let gen = t.park_gen.get() + 1;
            if t.state.get() != ThreadState::Parked {
                t.stack.seen.set(0);
            } else if t.stack.seen.get() == gen {
                if parked_on_other_stack(t) {
                    // Left whole: counted once per park.
                    if t.stack.trimmed.replace(gen) != gen {
                        self.foreign += 1;
                    }
                } else if self.copy_out && copy_out(t).is_some() {
                    self.out += 1;
                } else if t.stack.trimmed.get() != gen {
                    t.stack.trimmed.set(gen);
                    if trim_below_sp(t) {
                        self.trims += 1;
                    }
                }
            } else {
                t.stack.seen.set(gen);
            }
        }
        self.cursor = end;
        if end >= tasks.capacity() {
            self.running = false;
        }
        (self.running, Some(self.next_pass))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoding_round_trips() {
        let mut words = vec![0u64; 300];
        words[0] = 7;
        words[5] = u64::MAX;
        words[6] = 1;
        words[299] = 3;
        for w in &mut words[100..140] {
            *w = 0x1234;
        }
        let saved = encode(&words);
        assert!(saved.len() < words.len() * 8 / 4, "{} bytes", saved.len());
        let mut back = vec![0u64; 300];
        let hi = back.as_mut_ptr() as usize + 300 * 8;
        // SAFETY: `back` is 300 writable words ending at `hi`.
        unsafe { decode(&saved, hi) };
        assert_eq!(back, words);
        let all_zero = encode(&[0u64; 10]);
        let mut back = [0u64; 10];
        // SAFETY: as above.
        unsafe { decode(&all_zero, back.as_mut_ptr() as usize + 80) };
        assert_eq!(back, [0; 10]);
    }

    #[test]
    fn the_switch_depth_is_measured() {
        let d = switch_depth().expect("measurable");
        println!(
            "switch depth {d} (raw {:?})",
            measure(0xa5a5_a5a5_a5a5_a5a5)
        );
        assert!((24..=4096).contains(&d), "{d}");
    }
}
