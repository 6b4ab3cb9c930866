//! Stack memory (Linux, BSD, macOS): reserving chunks of stack slots,
//! guard pages, and giving pages back to the kernel.
//!
//! # Layout
//!
//! A *chunk* is one anonymous mapping holding many *slots*; each slot is one
//! green thread's stack with its guard gap at the bottom:
//!
//! ```text
//!   high addresses
//!   +------------------------+  <- chunk end = base of the top slot
//!   |  usable stack          |  read/write, committed lazily by the kernel
//!   |  (grows downwards)     |  as pages are touched
//!   +------------------------+
//!   |  guard gap             |  1 MiB by default (`stack_guard_size`):
//!   |                        |  any access raises SIGSEGV (`overflow`),
//!   |                        |  also a large frame's first store far below
//!   +------------------------+  <- limit of the top slot
//!   |  usable stack          |  the next slot: its base is the gap's
//!   |                        |  lower edge
//!   +------------------------+
//!   |  guard gap             |
//!   +------------------------+
//!   |  ...                   |
//!   +------------------------+  <- chunk start = limit of slot 0
//!   low addresses
//! ```
//!
//! The gap is as large as the kernel's own `stack_guard_gap` below the main
//! thread's stack. It costs no memory and no mapping (a guard region is
//! page-table markers; on the fallback the whole gap is one `mprotect`ed
//! range, the same two mappings per stack as a one-page guard), only
//! address space, reserved with `MAP_NORESERVE`.
//!
//! # Guard pages without splitting the mapping
//!
//! On Linux 6.13 and later a guard page is a *guard region*
//! (`madvise(MADV_GUARD_INSTALL)`): a marker in the page table that faults
//! on any access, inside a read/write mapping that stays one kernel mapping
//! (VMA). So a chunk of a thousand stacks costs one of the process's
//! `vm.max_map_count` mappings, not two thousand, and `MADV_DONTNEED` leaves
//! the markers in place. Where the kernel lacks guard regions (older Linux,
//! BSD, macOS; or `CORO_NO_GUARD_REGIONS` set, which the tests use to
//! exercise this path) the guard page is `mprotect(PROT_NONE)`, which splits
//! the mapping: two mappings per stack, as a separately mapped stack costs.
//! Either way a touch of the guard page raises `SIGSEGV` at an address
//! inside it, which is what the overflow handler checks.
//!
//! Chunks are reserved with `MAP_NORESERVE` (address space, not memory:
//! only touched pages are committed) and kept out of transparent huge pages
//! (`MAP_STACK`, `MADV_NOHUGEPAGE`), which would make every touched stack
//! top cost 2 MiB.

use std::io;
use std::ptr;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};

/// `MADV_GUARD_INSTALL` (Linux 6.13, `include/uapi/asm-generic/mman-common.h`;
/// not yet in the `libc` crate).
#[cfg(any(target_os = "linux", target_os = "android"))]
const MADV_GUARD_INSTALL: libc::c_int = 102;

/// How guard pages are made, decided at the first guard this process
/// installs: 0 undecided, 1 guard regions, 2 `mprotect`.
static GUARD_MODE: AtomicU8 = AtomicU8::new(0);
const GUARD_REGIONS: u8 = 1;
const GUARD_MPROTECT: u8 = 2;

/// The page size (cached; `sysconf` is a libc call).
pub(crate) fn page_size() -> usize {
    static PAGE: AtomicUsize = AtomicUsize::new(0);
    let p = PAGE.load(Ordering::Relaxed);
    if p != 0 {
        return p;
    }
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    let p = if p > 0 { p as usize } else { 4096 };
    PAGE.store(p, Ordering::Relaxed);
    p
}

/// Whether guard pages are guard regions (one mapping per chunk) rather than
/// `mprotect`ed pages (two mappings per stack). Decided by the first guard
/// installed; `false` before that.
pub(crate) fn guard_regions() -> bool {
    GUARD_MODE.load(Ordering::Relaxed) == GUARD_REGIONS
}

/// Reserves `len` bytes (a multiple of the page size) of read/write,
/// lazily committed memory for stacks. Returns its address.
pub(crate) fn map(len: usize) -> io::Result<usize> {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE | libc::MAP_STACK;
    #[cfg(target_os = "openbsd")]
    let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK;
    #[cfg(not(any(target_os = "linux", target_os = "android", target_os = "openbsd")))]
    let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS;
    // SAFETY: an anonymous private mapping with no address hint: it cannot
    // overlap anything the program uses. The result is checked.
    let p = unsafe {
        libc::mmap(
            ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            flags,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    #[cfg(any(target_os = "linux", target_os = "android"))]
    // SAFETY: advice on the mapping just made; it only forbids huge pages.
    // Failure (a kernel without THP) changes nothing.
    unsafe {
        libc::madvise(p, len, libc::MADV_NOHUGEPAGE)
    };
    Ok(p as usize)
}

/// Unmaps a chunk.
///
/// # Safety
///
/// `[addr, addr + len)` is a chunk made by [`map`] on which nothing lives
/// any more: no stack of it belongs to a coroutine.
pub(crate) unsafe fn unmap(addr: usize, len: usize) {
    // SAFETY: by the caller's promise nothing uses the range.
    let rc = unsafe { libc::munmap(addr as *mut libc::c_void, len) };
    debug_assert_eq!(rc, 0, "munmap of a stack chunk failed");
}

/// Makes the `len` bytes at `addr` (page-aligned, inside a chunk) a guard
/// gap: any access faults.
///
/// # Errors
///
/// The OS error of `madvise` or `mprotect` (`ENOMEM` when the process
/// reached `vm.max_map_count`, on the fallback path).
///
/// # Safety
///
/// The range belongs to a chunk made by [`map`] and nothing lives on it.
pub(crate) unsafe fn install_guard(addr: usize, len: usize) -> io::Result<()> {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    if GUARD_MODE.load(Ordering::Relaxed) != GUARD_MPROTECT {
        // SAFETY: advice on a range of our own mapping that nothing uses;
        // installing a guard region only makes later accesses fault.
        let rc = unsafe { libc::madvise(addr as *mut libc::c_void, len, MADV_GUARD_INSTALL) };
        if rc == 0 {
            GUARD_MODE.store(GUARD_REGIONS, Ordering::Relaxed);
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if GUARD_MODE.load(Ordering::Relaxed) == GUARD_REGIONS
            || e.raw_os_error() != Some(libc::EINVAL)
        {
            // Guard regions worked before: this is a real failure.
            return Err(e);
        }
        // EINVAL: the kernel does not know the advice. Fall back for good.
    }
    if GUARD_MODE.load(Ordering::Relaxed) == 0 {
        GUARD_MODE.store(GUARD_MPROTECT, Ordering::Relaxed);
    }
    // SAFETY: as above; PROT_NONE only makes later accesses fault.
    if unsafe { libc::mprotect(addr as *mut libc::c_void, len, libc::PROT_NONE) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Chooses the guard mode before the first guard is installed: guard
/// regions unless `CORO_NO_GUARD_REGIONS` is set (the tests force the
/// fallback this way) or the platform has none.
pub(crate) fn init_guard_mode() {
    if GUARD_MODE.load(Ordering::Relaxed) != 0 {
        return;
    }
    let fallback = cfg!(not(any(target_os = "linux", target_os = "android")))
        || std::env::var_os("CORO_NO_GUARD_REGIONS").is_some();
    if fallback {
        GUARD_MODE.store(GUARD_MPROTECT, Ordering::Relaxed);
    }
}

/// Gives the pages of `[addr, addr + len)` back to the kernel: they stay
/// mapped and read as zeros when touched again. Guard regions stay.
///
/// # Safety
///
/// The range lies in a chunk's usable memory and nothing live is stored
/// there (a finished thread's stack, or the dead part of a parked one).
pub(crate) unsafe fn release(addr: usize, len: usize) {
    if len == 0 {
        return;
    }
    // SAFETY: by the caller's promise, only dead data is discarded; on
    // private anonymous memory MADV_DONTNEED only makes later reads see
    // zeroed pages. Failure only means the memory stays resident.
    unsafe { libc::madvise(addr as *mut libc::c_void, len, libc::MADV_DONTNEED) };
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A guard page installed either way faults, and the pages around it
    /// stay usable; releasing pages zeroes them and keeps the guard.
    #[test]
    fn guard_and_release() {
        init_guard_mode();
        let page = page_size();
        let base = map(4 * page).unwrap();
        // SAFETY: a fresh mapping of ours.
        unsafe {
            install_guard(base + page, page).unwrap();
            *((base + 2 * page) as *mut u8) = 7;
            release(base + 2 * page, page);
            assert_eq!(*((base + 2 * page) as *const u8), 0);
            *(base as *mut u8) = 1;
        }
        let mut vec = [0u8; 1];
        // mincore fails with ENOMEM for unmapped memory only; a guard page is
        // mapped. Its protection is checked by the overflow tests, which
        // fault on it in a child process.
        // SAFETY: a query on our own mapping.
        let rc =
            unsafe { libc::mincore((base + page) as *mut libc::c_void, page, vec.as_mut_ptr()) };
        assert_eq!(rc, 0);
        // SAFETY: nothing uses the mapping any more.
        unsafe { unmap(base, 4 * page) };
    }
}
