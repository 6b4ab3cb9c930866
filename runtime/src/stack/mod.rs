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
//! the pool before mapping a new one. The pool keeps stacks of the runtime's
//! default size only, up to a bound.

#[cfg(unix)]
pub(crate) mod overflow;

use std::io;

use corosensei::stack::{DefaultStack, Stack};

/// Smallest stack a green thread may ask for.
pub const MIN_STACK_SIZE: usize = 16 * 1024;

/// A bounded pool of stacks of one size.
pub(crate) struct StackPool {
    size: usize,
    max: usize,
    free: Vec<DefaultStack>,
}

impl StackPool {
    pub(crate) fn new(size: usize, max: usize) -> StackPool {
        StackPool {
            size,
            max,
            free: Vec::new(),
        }
    }

    /// The pool's stack size (the runtime default).
    pub(crate) fn size(&self) -> usize {
        self.size
    }

    /// A stack with at least `size` usable bytes.
    pub(crate) fn get(&mut self, size: usize) -> io::Result<DefaultStack> {
        if size == self.size {
            if let Some(s) = self.free.pop() {
                return Ok(s);
            }
        }
        map_stack(size)
    }

    /// Returns a stack to the pool (or unmaps it if the pool is full or the
    /// stack has another size).
    pub(crate) fn put(&mut self, stack: DefaultStack) {
        if self.free.len() < self.max && usable_size(&stack) == round_up(self.size) {
            self.free.push(stack);
        }
    }

    /// Stacks waiting in the pool.
    pub(crate) fn pooled(&self) -> usize {
        self.free.len()
    }
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
