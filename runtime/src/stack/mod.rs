//! Green-thread stacks: a per-runtime pool of `mmap`ed stacks with a guard page,
//! and the handler that turns a guard-page hit into a clear message.
//!
//! # Layout
//!
//! Each stack is one anonymous mapping, allocated by corosensei's
//! `DefaultStack` (`mmap` of the whole range as `PROT_NONE`, then `mprotect`
//! of all but the lowest page to read/write):
//!
//! ```text
//!   high addresses
//!   +------------------------+  <- base (stack pointer starts here)
//!   |                        |
//!   |   usable stack         |  size bytes, read/write, committed lazily
//!   |   (grows downwards)    |  by the kernel as pages are touched
//!   |                        |
//!   +------------------------+  <- limit + page
//!   |   guard page           |  PROT_NONE: touching it raises SIGSEGV,
//!   +------------------------+  <- limit     caught by `overflow`
//!   low addresses
//! ```
//!
//! Only touched pages are resident, so an idle thread costs the few pages its
//! frames reached (see README, "Memory"). Each stack is two kernel mappings
//! (the guard and the rest), which is what `vm.max_map_count` limits.
//!
//! Finished threads give their stack back to the pool; spawning takes one from
//! the pool before mapping a new one, the most recently returned first (its
//! pages are likely still in the caches). The pool keeps stacks of the
//! runtime's default size only, up to a bound (1 024 by default).
//!
//! # What the pool keeps
//!
//! A pooled stack keeps the pages its thread touched, so that reusing it soon
//! costs no page faults. A stack that has waited in the pool for
//! [`TRIM_AFTER`] is *trimmed*: its pages are given back to the kernel
//! (`madvise(MADV_DONTNEED)`; the mapping stays, and a later reuse faults in
//! fresh zeroed pages). The loop trims when it is about to block and every
//! few dozen polls while busy, and a blocking poll wakes up when the next
//! trim is due, so after a burst of deep threads a quiet server gives the
//! memory back within a few seconds; while threads come and go quickly, the
//! stacks they reuse are never trimmed.

#[cfg(unix)]
pub(crate) mod overflow;

use std::io;
use std::time::Duration;

use corosensei::stack::{DefaultStack, Stack};

use crate::clock;

/// Smallest stack a green thread may ask for.
pub const MIN_STACK_SIZE: usize = 16 * 1024;

/// How long a stack waits in the pool before its pages are given back.
pub(crate) const TRIM_AFTER: Duration = Duration::from_secs(2);

/// A stack waiting in the pool.
struct Pooled {
    stack: DefaultStack,
    /// Tick count when it was returned.
    returned: u64,
}

/// A bounded pool of stacks of one size.
pub(crate) struct StackPool {
    size: usize,
    max: usize,
    /// Oldest first; reuse takes from the end.
    free: Vec<Pooled>,
    /// # Invariant
    /// `free[..trimmed]` have had their pages given back. Stacks are pushed
    /// and popped at the end, so the trimmed ones are the oldest.
    trimmed: usize,
}

impl StackPool {
    pub(crate) fn new(size: usize, max: usize) -> StackPool {
        StackPool {
            size,
            max,
            free: Vec::new(),
            trimmed: 0,
        }
    }

    /// The pool's stack size (the runtime default).
    pub(crate) fn size(&self) -> usize {
        self.size
    }

    /// A stack with at least `size` usable bytes.
    pub(crate) fn get(&mut self, size: usize) -> io::Result<DefaultStack> {
        if size == self.size {
            if let Some(p) = self.free.pop() {
                self.trimmed = self.trimmed.min(self.free.len());
                return Ok(p.stack);
            }
        }
        map_stack(size)
    }

    /// Returns a stack to the pool (or unmaps it if the pool is full or the
    /// stack has another size).
    pub(crate) fn put(&mut self, stack: DefaultStack) {
        if self.free.len() < self.max && usable_size(&stack) == round_up(self.size) {
            self.free.push(Pooled {
                stack,
                returned: clock::now().ticks(),
            });
        }
    }

    /// Gives back the pages of the stacks that have waited [`TRIM_AFTER`]
    /// by `now` (ticks). Returns when the next one is due, if any.
    pub(crate) fn trim(&mut self, now: u64) -> Option<u64> {
        let age = clock::duration_to_ticks(TRIM_AFTER);
        while let Some(p) = self.free.get(self.trimmed) {
            let due = p.returned.saturating_add(age);
            if due > now {
                return Some(due);
            }
            release_pages(&p.stack);
            self.trimmed += 1;
        }
        None
    }

    /// Stacks waiting in the pool.
    pub(crate) fn pooled(&self) -> usize {
        self.free.len()
    }
}

/// Gives a stack's usable pages back to the kernel (the guard page and the
/// mapping stay). Failure only means the memory stays resident.
fn release_pages(s: &DefaultStack) {
    let page = page_size();
    let start = s.limit().get() + page;
    let len = s.base().get() - start;
    // SAFETY: [start, start + len) is the read/write part of a stack mapping
    // this pool owns; its thread has finished, so nothing lives on it, and
    // MADV_DONTNEED on private anonymous memory only makes later reads see
    // zeroed pages.
    unsafe { libc::madvise(start as *mut libc::c_void, len, libc::MADV_DONTNEED) };
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as usize
    } else {
        4096
    }
}

fn round_up(size: usize) -> usize {
    let p = page_size();
    size.div_ceil(p) * p
}

/// Usable bytes of a stack (without its guard page).
pub(crate) fn usable_size(s: &DefaultStack) -> usize {
    s.base().get() - s.limit().get() - page_size()
}

fn max_map_count() -> Option<u64> {
    std::fs::read_to_string("/proc/sys/vm/max_map_count")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Maps a new stack, turning `ENOMEM` into an error that says what to raise.
fn map_stack(size: usize) -> io::Result<DefaultStack> {
    DefaultStack::new(size).map_err(|e| {
        if e.raw_os_error() == Some(libc::ENOMEM) {
            let limit = match max_map_count() {
                Some(n) => format!("vm.max_map_count = {n}"),
                None => "the kernel's limit on memory mappings".to_string(),
            };
            io::Error::new(
                io::ErrorKind::OutOfMemory,
                format!(
                    "cannot map a {size}-byte stack for a new green thread: out of memory, \
                     or the process reached {limit} (each green thread's stack takes 2 mappings); \
                     raise vm.max_map_count (sysctl -w vm.max_map_count=N) or RLIMIT_AS, \
                     lower the stack size, or run fewer green threads"
                ),
            )
        } else {
            io::Error::new(
                e.kind(),
                format!("cannot map a {size}-byte stack for a new green thread: {e}"),
            )
        }
    })
}
