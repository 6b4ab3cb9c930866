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
//! BSD, macOS; an emulator that accepts the advice and ignores it, which a
//! probe at start-up catches; or `CORO_NO_GUARD_REGIONS` set, which the
//! tests use to exercise this path) the guard page is `mprotect(PROT_NONE)`, which splits
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

/// How guard pages are made, decided once per process before the first
/// guard ([`init_guard_mode`]): 0 undecided, 1 guard regions, 2 `mprotect`.
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
/// `mprotect`ed pages (two mappings per stack). `false` before the mode is
/// decided ([`init_guard_mode`]).
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
    init_guard_mode();
    #[cfg(any(target_os = "linux", target_os = "android"))]
    if guard_regions() {
        // SAFETY: advice on a range of our own mapping that nothing uses;
        // installing a guard region only makes later accesses fault.
        let rc = unsafe { libc::madvise(addr as *mut libc::c_void, len, MADV_GUARD_INSTALL) };
        return if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        };
    }
    // SAFETY: as above; PROT_NONE only makes later accesses fault.
    if unsafe { libc::mprotect(addr as *mut libc::c_void, len, libc::PROT_NONE) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Chooses the guard mode once per process, before the first guard is
/// installed: guard regions where the kernel makes them, unless
/// `CORO_NO_GUARD_REGIONS` is set (the tests force the fallback this way);
/// `mprotect` otherwise.
pub(crate) fn init_guard_mode() {
    if GUARD_MODE.load(Ordering::Relaxed) != 0 {
        return;
    }
    let regions = std::env::var_os("CORO_NO_GUARD_REGIONS").is_none() && guard_regions_work();
    // Threads deciding at once reach the same answer.
    GUARD_MODE.store(
        if regions {
            GUARD_REGIONS
        } else {
            GUARD_MPROTECT
        },
        Ordering::Relaxed,
    );
}

/// Whether `madvise(MADV_GUARD_INSTALL)` makes a page fault, tried on a
/// page of its own. Success is not taken on trust: an emulator
/// (qemu-user) or a sandbox may accept advice it does not know and do
/// nothing, which would leave every stack without a guard. The kernel
/// storing into the page (`uname` writes its answer there) must fail with
/// `EFAULT`. `uname` is one that tools which emulate some system calls
/// (valgrind answers `getrlimit` itself, writing from its own code) pass
/// to the kernel.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn guard_regions_work() -> bool {
    let page = page_size();
    let Ok(p) = map(page) else {
        return false;
    };
    // SAFETY: advice on the page just mapped, which nothing else uses.
    let installed = unsafe { libc::madvise(p as *mut libc::c_void, page, MADV_GUARD_INSTALL) } == 0;
    // SAFETY: uname stores one `utsname` at the pointer, inside the page (a
    // page is larger than a `utsname`), or fails with EFAULT; the page is
    // ours and unused.
    let faults = installed
        && unsafe { libc::uname(p as *mut libc::utsname) } != 0
        && io::Error::last_os_error().raw_os_error() == Some(libc::EFAULT);
    // SAFETY: the probe page, used by nothing else.
    unsafe { unmap(p, page) };
    faults
}

/// Guard regions are a Linux feature.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn guard_regions_work() -> bool {
    false
}

/// Gives the pages of `[addr, addr + len)` back to the kernel: they stay
/// mapped and their contents are lost (Linux: they read as zeros when
/// touched again; BSD, macOS: zeros or the old bytes, reclaimed lazily).
/// Guard regions stay.
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
    // private anonymous memory the advice only makes later reads see
    // zeroed (or, with MADV_FREE, possibly the old) bytes. Failure only
    // means the memory stays resident.
    unsafe { libc::madvise(addr as *mut libc::c_void, len, RELEASE) };
}

/// The advice that gives pages back: Linux's `MADV_DONTNEED` frees them at
/// once; on the BSDs and macOS it only lowers their priority and keeps
/// their contents, and `MADV_FREE` is the one that frees them.
#[cfg(any(target_os = "linux", target_os = "android"))]
const RELEASE: libc::c_int = libc::MADV_DONTNEED;
#[cfg(not(any(target_os = "linux", target_os = "android")))]
const RELEASE: libc::c_int = libc::MADV_FREE;

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether the kernel fails to read the byte at `addr` (`write(2)`
    /// from it into a pipe fails with `EFAULT`, where a user-space read
    /// would raise a signal).
    fn unreadable(addr: usize) -> bool {
        let mut fds = [0; 2];
        // SAFETY: `fds` has room for the two descriptors.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        // SAFETY: the kernel checks the address (a fault is an error).
        let n = unsafe { libc::write(fds[1], addr as *const libc::c_void, 1) };
        let err = io::Error::last_os_error();
        // SAFETY: our own descriptors, closed once.
        unsafe {
            libc::close(fds[0]);
            libc::close(fds[1]);
        }
        n == -1 && err.raw_os_error() == Some(libc::EFAULT)
    }

    /// A guard page installed in the mode this process chose faults (also
    /// where the kernel, or an emulator, accepts guard-region advice
    /// without honouring it), and the pages around it stay usable;
    /// releasing pages keeps the guard (and on Linux zeroes them).
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
            if cfg!(any(target_os = "linux", target_os = "android")) {
                assert_eq!(*((base + 2 * page) as *const u8), 0);
            }
            *(base as *mut u8) = 1;
        }
        assert!(unreadable(base + page), "the guard page is readable");
        assert!(
            unreadable(base + 2 * page - 1),
            "the guard page's end is readable"
        );
        assert!(!unreadable(base + 2 * page), "the page above the guard");
        assert!(!unreadable(base), "the page below the guard");
        // msync fails with ENOMEM for unmapped memory only: the guard page
        // is part of the mapping, not a hole.
        // SAFETY: MS_ASYNC on our own private anonymous mapping writes
        // nothing back and changes nothing.
        let rc = unsafe { libc::msync((base + page) as *mut libc::c_void, page, libc::MS_ASYNC) };
        assert_eq!(rc, 0, "{}", io::Error::last_os_error());
        // SAFETY: nothing uses the mapping any more.
        unsafe { unmap(base, 4 * page) };
    }
}
