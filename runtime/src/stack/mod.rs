//! Green-thread stacks: slots carved from large mappings with a guard page
//! each ([`GreenStack`], the `corosensei` stack type), the per-OS-thread pool
//! that recycles them, and the handler that turns a guard-page hit into a
//! clear message (`overflow`).
//!
//! # Design
//!
//! Mapping a stack per thread costs an `mmap`, an `mprotect` (which splits
//! the mapping: two of the process's `vm.max_map_count` mappings per stack)
//! and a `munmap` later, mostly kernel time. Here stacks of one size (a
//! *class*) are *slots* of a *chunk*, one mapping of about 32 MiB of address
//! space (see `unix` for the layout and the guard pages). A slot is carved
//! from a chunk the first time it is needed (its guard page installed then),
//! and a finished thread's slot goes on its class's free list; spawning
//! takes the most recently freed slot first (its pages are likely still in
//! the caches and resident), then carves, then maps a new chunk.
//!
//! The chunks and free lists belong to the OS thread (a thread-local arena),
//! not to one runtime: runtimes on one OS thread run one after another, and
//! when `block_on` returns all their threads are finished, so a runtime
//! built later on the same OS thread reuses the stacks, and a fresh runtime
//! spawns as cheaply as a warm one.
//!
//! # What the pool keeps, and when it gives it back
//!
//! * A freed stack keeps the pages its thread touched for [`TRIM_AFTER`],
//!   so that reusing it soon costs no page faults; then it is *trimmed*
//!   (`MADV_DONTNEED`: the pages go back to the kernel, the slot stays
//!   reserved). At most the runtime's `stack_pool` bound of freed stacks
//!   (1 024 by default) keep their pages: past it, the oldest is trimmed at
//!   once.
//! * A chunk whose slots are all free and trimmed is unmapped, so after a
//!   burst the address space and the page tables go back as well.
//! * The loop trims when it is about to block and every few dozen polls
//!   while busy, and a blocking poll wakes up when the next trim is due, so
//!   a quiet server gives the memory back within a few seconds. Between two
//!   runtimes on one OS thread nothing trims: what the last one freed in its
//!   last 2 s stays until the next runtime on that thread runs (it trims
//!   what is overdue at once) or the thread exits (everything is unmapped).

mod copy;
#[cfg(unix)]
pub(crate) mod overflow;
#[cfg(unix)]
mod unix;

pub(crate) use copy::{copy_in, IdleSweep, ThreadStack};

use std::cell::RefCell;
use std::io;
use std::time::Duration;

use corosensei::stack::valgrind::ValgrindStackRegistration;
use corosensei::stack::{Stack, StackPointer};
use slab::Slab;

use crate::clock;
use unix::page_size;

/// Smallest stack a green thread may ask for.
pub const MIN_STACK_SIZE: usize = 16 * 1024;

/// How long a freed stack keeps its pages before they are given back.
pub(crate) const TRIM_AFTER: Duration = Duration::from_secs(2);

/// Usable stack bytes a chunk aims at (its address space adds a guard gap
/// per slot); a chunk holds at least one slot.
const CHUNK_BYTES: usize = 32 << 20;

/// Default guard gap below each stack: the kernel's own `stack_guard_gap`
/// for the main thread's stack (256 pages, 1 MiB). A frame that steps over
/// a smaller guard without touching it (a large frame without stack
/// probes: C built without `-fstack-clash-protection`, as Debian's gcc
/// builds by default) would write into the neighbouring thread's live
/// stack; one of up to this size lands in the gap and faults.
pub const DEFAULT_STACK_GUARD: usize = 1 << 20;
/// Most slots in one chunk.
const MAX_SLOTS: usize = 1024;

/// A green thread's stack: one slot of a chunk, with its guard gap.
///
/// The memory belongs to the OS thread's arena; a `GreenStack` only names a
/// slot that is handed out. Dropping one (rather than giving it back with
/// [`StackPool::put`]) leaks the slot: it stays reserved and its chunk
/// mapped, which is always safe.
pub(crate) struct GreenStack {
    base: StackPointer,
    limit: StackPointer,
    /// Bytes of guard gap from `limit` up.
    guard: usize,
    /// Its class (high half) and chunk (low half) in one word: written
    /// with one store, so the 8-byte load that moves the handle on is
    /// served from that store. Two 4-byte fields made that load wait for
    /// both stores to reach the cache (a failed store-to-load forward,
    /// ~4 % of a spawn on this VM).
    class_chunk: u64,
}

impl GreenStack {
    /// Usable bytes (without the guard gap).
    pub(crate) fn usable_size(&self) -> usize {
        self.base.get() - self.limit.get() - self.guard
    }

    /// Bytes of the guard gap below the usable part.
    pub(crate) fn guard_size(&self) -> usize {
        self.guard
    }

    /// Lowest address of the slot: the guard gap starts here.
    pub(crate) fn limit_addr(&self) -> usize {
        self.limit.get()
    }
}

// SAFETY: `base` and `limit` bound one slot of a chunk mapped read/write,
// with the slot's lowest `guard` bytes made a guard gap
// (`unix::install_guard`) before the slot is first handed out; a frame
// that runs off the usable part faults there instead of reaching the slot
// below (for frames larger than the gap, see README's FFI caveat: Rust
// code probes every page of a large frame). The guard stays while the slot is
// handed out: guard pages are only removed by unmapping the chunk, which
// `Arena::release_chunks` does only when every carved slot of the chunk is
// back on the free list, i.e. no `GreenStack` names any of them (a dropped
// `GreenStack` never returns its slot to the free list, so its chunk is
// never unmapped; `Arena::drop` counts the same way). Usable size is at least `MIN_STACK_SIZE` (16 KiB, above
// corosensei's 4 KiB minimum), and both addresses are page-aligned, which
// satisfies `STACK_ALIGNMENT`.
unsafe impl Stack for GreenStack {
    #[inline]
    fn base(&self) -> StackPointer {
        self.base
    }

    #[inline]
    fn limit(&self) -> StackPointer {
        self.limit
    }
}

/// The current stack pointer (an address in the caller's frame where the
/// architecture has no instruction for it here).
#[inline(always)]
pub(crate) fn stack_pointer() -> usize {
    let sp: usize;
    #[cfg(target_arch = "x86_64")]
    // SAFETY: reads a register into another; touches no memory.
    unsafe {
        std::arch::asm!("mov {}, rsp", out(reg) sp, options(nomem, nostack, preserves_flags))
    };
    #[cfg(target_arch = "aarch64")]
    // SAFETY: as above.
    unsafe {
        std::arch::asm!("mov {}, sp", out(reg) sp, options(nomem, nostack, preserves_flags))
    };
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        let here = 0u8;
        sp = std::hint::black_box(&here) as *const u8 as usize;
    }
    sp
}

/// Asks the CPU to bring the lines around a suspended thread's stack
/// pointer into the cache (and its page into the TLB) before it is resumed:
/// the line below it, its own and the six above, which hold the frames a
/// resume returns through (the socket call's own frame is about 240
/// bytes). Four lines left that frame's saved registers to miss; sixteen
/// cost more than they saved (echo at 1 000 connections).
///
/// `sp` is a hint, never dereferenced: for a thread that parked while
/// running on another stack (see `copy`, "Parked on another stack") it is
/// that stack's pointer, which is where the thread resumes; a prefetch of
/// any address never faults.
#[inline(always)]
pub(crate) fn prefetch_stack(sp: usize) {
    if sp == 0 {
        return;
    }
    let p = (sp & !63).wrapping_sub(64) as *const i8;
    for i in 0..8 {
        prefetch(p.wrapping_add(i * 64));
    }
}

/// Prefetch hints for every line of the `len` bytes at `p` (`len` > 0;
/// none of it need be mapped).
#[inline(always)]
pub(crate) fn prefetch_range(p: *const i8, len: usize) {
    for off in (0..len).step_by(64) {
        prefetch(p.wrapping_add(off));
    }
    // The last line, when `p` is not line-aligned.
    prefetch(p.wrapping_add(len - 1));
}

/// A prefetch hint for the line at `p` (which need not be mapped).
#[inline(always)]
pub(crate) fn prefetch(p: *const i8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch never faults and changes no architectural state.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// A freed slot waiting for reuse.
struct Free {
    base: usize,
    chunk: u32,
    /// Tick count when it was freed.
    returned: u64,
}

/// One mapping of `slots` slots.
struct Chunk {
    addr: usize,
    slots: u32,
    /// Slots carved so far (`[0, carved)`: each has its guard page).
    carved: u32,
    /// Carved slots on the free list that were trimmed.
    trimmed: u32,
    /// Each carved slot told to valgrind as a stack (so that it sees a
    /// switch to it as a stack switch); undone when the chunk goes. A
    /// client request is a no-op outside valgrind, but doing it once per
    /// slot rather than once per spawn saves a spawn about 20
    /// instructions.
    valgrind: Vec<ValgrindStackRegistration>,
}

/// The stacks of one usable size and guard gap.
struct Class {
    usable: usize,
    /// Bytes of guard gap below each slot's usable part (whole pages).
    guard: usize,
    /// `usable` plus the guard gap.
    slot: usize,
    chunks: Slab<Chunk>,
    /// The chunk slots are carved from, while it has uncarved ones.
    carving: Option<usize>,
    /// Oldest first; reuse takes from the end.
    free: Vec<Free>,
    /// # Invariant
    /// `free[..trimmed]` have had their pages given back. Slots are pushed
    /// and popped at the end and trimmed oldest first, so the trimmed ones
    /// are a prefix.
    trimmed: usize,
    /// A slot was trimmed since chunks were last checked for release.
    release_pending: bool,
}

impl Class {
    fn new(usable: usize, guard: usize) -> Class {
        Class {
            usable,
            guard,
            slot: usable + guard,
            chunks: Slab::new(),
            carving: None,
            free: Vec::new(),
            trimmed: 0,
            release_pending: false,
        }
    }

    /// Takes the most recently freed slot; its base and chunk.
    #[inline]
    fn reuse(&mut self) -> Option<(usize, u32)> {
        let f = self.free.pop()?;
        if self.free.len() < self.trimmed {
            self.trimmed -= 1;
            self.chunks[f.chunk as usize].trimmed -= 1;
        }
        Some((f.base, f.chunk))
    }

    /// Carves a new slot (mapping a chunk if needed); its base and chunk.
    fn carve(&mut self) -> io::Result<(usize, u32)> {
        let key = match self.carving {
            Some(k) => k,
            None => {
                let k = self.map_chunk()?;
                self.carving = Some(k);
                k
            }
        };
        let limit = self.chunks[key].addr + self.chunks[key].carved as usize * self.slot;
        // SAFETY: the slot's lowest `guard` bytes, in a chunk of ours, never
        // handed out (it is past `carved`).
        unsafe { unix::install_guard(limit, self.guard) }.map_err(|e| self.error(e))?;
        let chunk = &mut self.chunks[key];
        chunk
            .valgrind
            .push(ValgrindStackRegistration::new(limit as *mut u8, self.slot));
        chunk.carved += 1;
        if chunk.carved == chunk.slots {
            self.carving = None;
        }
        Ok((limit + self.slot, key as u32))
    }

    /// Maps a chunk, with fewer slots if a large one does not fit.
    fn map_chunk(&mut self) -> io::Result<usize> {
        let mut slots = (CHUNK_BYTES / self.usable).clamp(1, MAX_SLOTS);
        loop {
            match unix::map(slots * self.slot) {
                Ok(addr) => {
                    return Ok(self.chunks.insert(Chunk {
                        addr,
                        slots: slots as u32,
                        carved: 0,
                        trimmed: 0,
                        valgrind: Vec::new(),
                    }))
                }
                Err(e) if slots > 1 && e.raw_os_error() == Some(libc::ENOMEM) => slots /= 2,
                Err(e) => return Err(self.error(e)),
            }
        }
    }

    /// Gives back the pages of the free slot at `free[i]`.
    fn trim_one(&mut self, i: usize) {
        let f = &self.free[i];
        // SAFETY: a free slot's usable part: its thread has finished, so
        // nothing lives there.
        unsafe { unix::release(f.base - self.usable, self.usable) };
        self.chunks[f.chunk as usize].trimmed += 1;
        self.release_pending = true;
    }

    /// Unmaps every chunk whose carved slots are all free and trimmed.
    fn release_chunks(&mut self) {
        let idle: Vec<usize> = self
            .chunks
            .iter()
            // Every carved slot free (a slot handed out, or leaked with its
            // thread, is not on the free list, so never counted trimmed).
            .filter(|(_, c)| c.trimmed == c.carved)
            .map(|(k, _)| k)
            .collect();
        for k in idle {
            let c = self.chunks.remove(k);
            let before = self.free.len();
            self.free.retain(|f| f.chunk as usize != k);
            // Its slots were all trimmed, so all in the prefix.
            self.trimmed -= before - self.free.len();
            if self.carving == Some(k) {
                self.carving = None;
            }
            // SAFETY: no slot of the chunk is handed out (`used == 0`), and
            // its free slots left the free list just now.
            unsafe { unix::unmap(c.addr, c.slots as usize * self.slot) };
        }
    }

    /// The error for a stack that could not be made, saying what to raise.
    fn error(&self, e: io::Error) -> io::Error {
        let size = self.usable;
        if e.raw_os_error() != Some(libc::ENOMEM) {
            return io::Error::new(
                e.kind(),
                format!("cannot map a {size}-byte stack for a new green thread: {e}"),
            );
        }
        let limit = match max_map_count() {
            Some(n) => format!("vm.max_map_count = {n}"),
            None => "the kernel's limit on memory mappings".to_string(),
        };
        let per = if unix::guard_regions() {
            "stacks share mappings (guard regions)".to_string()
        } else {
            format!("each green thread's stack takes 2 mappings, so {limit} allows about half as many threads")
        };
        io::Error::new(
            io::ErrorKind::OutOfMemory,
            format!(
                "cannot map a {size}-byte stack for a new green thread: out of memory or \
                 address space (RLIMIT_AS), or the process reached {limit} ({per}); \
                 raise vm.max_map_count (sysctl -w vm.max_map_count=N) or RLIMIT_AS, \
                 lower the stack size, or run fewer green threads"
            ),
        )
    }
}

/// Every stack class of one OS thread.
#[derive(Default)]
struct Arena {
    classes: Vec<Class>,
}

impl Drop for Arena {
    /// The OS thread exits: unmaps every chunk no thread uses (a leaked
    /// thread's chunk stays mapped: its stack is still referenced).
    fn drop(&mut self) {
        for class in &mut self.classes {
            let mut free = vec![0u32; class.chunks.capacity()];
            for f in &class.free {
                free[f.chunk as usize] += 1;
            }
            for (k, c) in class.chunks.iter() {
                if free[k] == c.carved {
                    // SAFETY: no slot of the chunk is handed out, and the
                    // arena (with its free list) goes away now.
                    unsafe { unix::unmap(c.addr, c.slots as usize * class.slot) };
                }
            }
        }
    }
}

thread_local! {
    /// This OS thread's stacks (see the module docs).
    static ARENA: RefCell<Arena> = const { RefCell::new(Arena { classes: Vec::new() }) };
}

/// Runs `f` on this OS thread's arena; `None` while the thread exits.
#[inline(always)]
fn with_arena<R>(f: impl FnOnce(&mut Arena) -> R) -> Option<R> {
    ARENA.try_with(|a| f(&mut a.borrow_mut())).ok()
}

/// A runtime's view of its OS thread's stacks: its default size and how
/// many freed stacks may keep their pages.
pub(crate) struct StackPool {
    size: usize,
    /// Guard gap below each stack (whole pages).
    guard: usize,
    max: usize,
    /// The arena's class of `size` stacks with this guard, once known.
    default_class: Option<u32>,
    /// Trims (or copies out) the stacks of threads parked for long (`copy`).
    pub(crate) idle: IdleSweep,
}

impl StackPool {
    pub(crate) fn new(
        size: usize,
        guard: usize,
        max: usize,
        idle_after: Option<Duration>,
        copy_out: bool,
    ) -> StackPool {
        unix::init_guard_mode();
        StackPool {
            size,
            guard: round_up(guard.max(page_size())),
            max,
            default_class: None,
            idle: IdleSweep::new(idle_after, copy_out),
        }
    }

    /// The pool's stack size (the runtime default).
    pub(crate) fn size(&self) -> usize {
        self.size
    }

    /// A stack with at least `size` usable bytes.
    #[inline(always)]
    pub(crate) fn get(&mut self, size: usize) -> io::Result<GreenStack> {
        // Nearly every spawn: the default size, from its class's free list.
        if let (true, Some(class)) = (size == self.size, self.default_class) {
            let reused = with_arena(|a| {
                let c = &mut a.classes[class as usize];
                c.reuse().map(|(base, chunk)| (base, base - c.slot, chunk))
            });
            if let Some(Some((base, limit, chunk))) = reused {
                return Ok(self.stack(base, limit, class, chunk));
            }
        }
        self.get_slow(size)
    }

    /// [`get`](Self::get), finding the class (and making it) and carving a
    /// slot if none is free.
    #[inline(never)]
    fn get_slow(&mut self, size: usize) -> io::Result<GreenStack> {
        let usable = round_up(size.max(MIN_STACK_SIZE));
        let guard = self.guard;
        let got = with_arena(|a| {
            let ci = match a
                .classes
                .iter()
                .position(|c| c.usable == usable && c.guard == guard)
            {
                Some(i) => i,
                None => {
                    a.classes.push(Class::new(usable, guard));
                    a.classes.len() - 1
                }
            };
            let class = &mut a.classes[ci];
            let (base, chunk) = match class.reuse() {
                Some(s) => s,
                None => class.carve()?,
            };
            Ok::<_, io::Error>((base, base - class.slot, ci as u32, chunk))
        })
        .unwrap_or_else(|| {
            Err(io::Error::other(
                "cannot give a green thread a stack: this OS thread is exiting",
            ))
        });
        let (base, limit, class, chunk) = got?;
        if size == self.size {
            // Classes are never removed from the arena: the index stays.
            self.default_class = Some(class);
        }
        Ok(self.stack(base, limit, class, chunk))
    }

    /// The handle of a slot just handed out.
    #[inline]
    fn stack(&self, base: usize, limit: usize, class: u32, chunk: u32) -> GreenStack {
        GreenStack {
            base: StackPointer::new(base).expect("stack base is not null"),
            limit: StackPointer::new(limit).expect("stack limit is not null"),
            guard: self.guard,
            class_chunk: (u64::from(class) << 32) | u64::from(chunk),
        }
    }

    /// Gives a finished thread's stack back to the pool; `now` is the
    /// scheduler's coarse clock (ticks), which dates it for [`trim`](Self::trim).
    #[inline]
    pub(crate) fn put(&mut self, stack: GreenStack, now: u64) {
        let (base, class, chunk) = (
            stack.base.get(),
            (stack.class_chunk >> 32) as u32,
            stack.class_chunk as u32,
        );
        let max = self.max;
        with_arena(|a| {
            let c = &mut a.classes[class as usize];
            c.free.push(Free {
                base,
                chunk,
                returned: now,
            });
            // At most `max` freed stacks keep their pages.
            if c.free.len() - c.trimmed > max {
                let i = c.trimmed;
                c.trim_one(i);
                c.trimmed += 1;
            }
        });
    }

    /// Gives back the pages of the stacks that have waited [`TRIM_AFTER`]
    /// by `now` (ticks), and unmaps chunks left with nothing in use.
    /// Returns when the next trim is due, if any.
    pub(crate) fn trim(&mut self, now: u64) -> Option<u64> {
        let age = clock::duration_to_ticks(TRIM_AFTER);
        with_arena(|a| {
            let mut next: Option<u64> = None;
            for c in &mut a.classes {
                while let Some(f) = c.free.get(c.trimmed) {
                    let due = f.returned.saturating_add(age);
                    if due > now {
                        next = Some(next.map_or(due, |n| n.min(due)));
                        break;
                    }
                    let i = c.trimmed;
                    c.trim_one(i);
                    c.trimmed += 1;
                }
                if std::mem::take(&mut c.release_pending) {
                    c.release_chunks();
                }
            }
            next
        })
        .flatten()
    }

    /// Stacks waiting on this OS thread for reuse.
    pub(crate) fn pooled(&self) -> usize {
        with_arena(|a| a.classes.iter().map(|c| c.free.len()).sum()).unwrap_or(0)
    }
}

fn round_up(size: usize) -> usize {
    let p = page_size();
    size.div_ceil(p) * p
}

fn max_map_count() -> Option<u64> {
    std::fs::read_to_string("/proc/sys/vm/max_map_count")
        .ok()?
        .trim()
        .parse()
        .ok()
}
