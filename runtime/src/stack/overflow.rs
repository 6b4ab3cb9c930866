//! Stack-overflow reporting for green threads (Linux, BSD, macOS).
//!
//! A green thread that runs off its stack touches the guard gap below it and
//! the kernel raises `SIGSEGV` (`SIGBUS` on macOS). The handler installed here
//! runs on the OS thread's alternate signal stack, checks whether the faulting
//! address lies in the guard gap of the green thread that is running, and if
//! so writes one line naming that thread and its stack size to stderr and
//! aborts. Any other signal is passed on, and later overflows are still
//! reported:
//!
//! * the previous handler is a function (std's, which reports overflows of
//!   OS-thread stacks, or the application's): it is called, with the
//!   `siginfo` and context when it asked for them (`SA_SIGINFO`); if it
//!   removed itself (std's resets to the default, expecting a fault to
//!   repeat) and the signal was sent by a process, which does not repeat,
//!   ours is put back;
//! * it was the default action: the default is put back and, for a fault,
//!   the instruction runs again and the process dies as it would have; a
//!   signal sent by a process (`kill`, `raise`) is raised again;
//! * it was ignored: a sent signal stays ignored; a fault cannot be ignored
//!   (it would repeat forever), so it gets the default action.
//!
//! The handler does no allocation and takes no lock: it reads the scheduler's
//! current-task pointer, formats into a buffer on the alternate stack, and
//! calls `write(2)` and `abort(3)`, both async-signal-safe.

use std::fmt::Write as _;
use std::io;
use std::ptr;
use std::sync::OnceLock;

use crate::context;

const SIGNALS: [libc::c_int; 2] = [libc::SIGSEGV, libc::SIGBUS];

/// Size of the alternate signal stack this module maps for runtime threads
/// whose own is missing or too small.
const ALT_STACK_SIZE: usize = 64 * 1024;

/// Stack the handler needs beyond the kernel's signal frame: its own frame,
/// the message formatting, and a chained previous handler.
const HANDLER_STACK: usize = 16 * 1024;

/// The smallest alternate stack the handler can run on: the kernel's signal
/// frame (which holds the CPU's extended state: a few KiB with AVX-512, more
/// with AMX; Linux reports it as `AT_MINSIGSTKSZ`) plus [`HANDLER_STACK`].
fn required_alt_stack() -> usize {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        // SAFETY: getauxval has no preconditions; 0 means "not reported".
        let frame = unsafe { libc::getauxval(libc::AT_MINSIGSTKSZ) } as usize;
        frame.max(libc::MINSIGSTKSZ) + HANDLER_STACK
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    {
        libc::MINSIGSTKSZ + HANDLER_STACK
    }
}

/// The handlers that were installed before ours, in `SIGNALS` order.
static PREVIOUS: OnceLock<[libc::sigaction; 2]> = OnceLock::new();

/// Installs the handler once per process.
pub(crate) fn install() {
    PREVIOUS.get_or_init(|| {
        // SAFETY: sigaction is a plain C struct; all-zero is a valid value.
        let mut prev: [libc::sigaction; 2] = unsafe { std::mem::zeroed() };
        for (i, &sig) in SIGNALS.iter().enumerate() {
            let act = our_action();
            // SAFETY: `act` and `prev[i]` are valid for the call, and the
            // handler we install is async-signal-safe (see the module docs).
            unsafe { libc::sigaction(sig, &act, &mut prev[i]) };
        }
        prev
    });
}

/// The disposition this module installs.
fn our_action() -> libc::sigaction {
    // SAFETY: all-zero is a valid sigaction; we fill in the fields used.
    let mut act: libc::sigaction = unsafe { std::mem::zeroed() };
    act.sa_sigaction = handler as *const () as usize;
    act.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
    // SAFETY: `act.sa_mask` is a valid sigset to initialise (sigemptyset is
    // async-signal-safe: this also runs inside the handler).
    unsafe { libc::sigemptyset(&mut act.sa_mask) };
    act
}

/// An alternate signal stack installed for this OS thread while a runtime
/// runs on it; on drop the thread's previous alternate stack (or none) is
/// put back. Holds nothing if the thread already had a large enough one
/// (std gives its threads one, often too small: 8 KiB).
///
/// The mapping itself is kept for the OS thread's next runtime ([`KEPT`]):
/// mapping and unmapping it cost more than the rest of building a runtime.
pub(crate) struct AltStack(Option<Installed>);

struct Installed {
    mapping: Mapping,
    /// The alternate stack the thread had before (possibly disabled).
    previous: libc::stack_t,
}

/// Memory mapped for an alternate stack, with a guard page below it (a
/// handler that runs off the stack faults instead of writing into
/// whatever is mapped next), unmapped on drop.
///
/// # Invariant
/// Not installed as any thread's alternate stack when dropped: it is
/// installed only inside an [`AltStack`], whose drop puts the previous one
/// back first (and leaks the mapping if that fails).
struct Mapping {
    /// The stack: `len` bytes from `mem`, above the guard page.
    mem: *mut libc::c_void,
    len: usize,
}

impl Mapping {
    fn new(len: usize) -> io::Result<Mapping> {
        let guard = super::unix::page_size();
        // SAFETY: anonymous private mapping with no address hint; the
        // result is checked against MAP_FAILED.
        let start = unsafe {
            libc::mmap(
                ptr::null_mut(),
                guard + len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if start == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let mapping = Mapping {
            mem: start.cast::<u8>().wrapping_add(guard).cast(),
            len,
        };
        // The mode `CORO_NO_GUARD_REGIONS` asks for, also when this is the
        // first guard of the process.
        super::unix::init_guard_mode();
        // SAFETY: the lowest page of the mapping just made, which nothing
        // uses; the guard only makes later accesses to it fault. (On
        // failure `mapping`'s drop unmaps it all: it is not installed.)
        unsafe { super::unix::install_guard(start as usize, guard) }?;
        Ok(mapping)
    }
}

impl Mapping {
    /// Whether it is this OS thread's enabled alternate stack.
    fn is_installed(&self) -> bool {
        // SAFETY: all-zero is a valid stack_t; a null new stack only
        // reports the current one into `cur`.
        let mut cur: libc::stack_t = unsafe { std::mem::zeroed() };
        // SAFETY: see above.
        let ok = unsafe { libc::sigaltstack(ptr::null(), &mut cur) } == 0;
        ok && cur.ss_flags & libc::SS_DISABLE == 0 && cur.ss_sp == self.mem
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // The invariant says it is not installed. Code that saved it while
        // a runtime ran and put it back afterwards (`sigaltstack` is an
        // unsafe call) breaks that: then it is leaked, never unmapped under
        // a handler that may run on it. (Another thread cannot have it
        // installed: `KEPT` is per thread, and so is the alternate stack.)
        if self.is_installed() {
            return;
        }
        let guard = super::unix::page_size();
        // SAFETY: the mapping made in `new` (the stack and the guard page
        // below it), not this thread's alternate stack (checked just
        // above), so no signal handler runs on it; nothing else points
        // into it.
        unsafe {
            libc::munmap(
                self.mem.cast::<u8>().wrapping_sub(guard).cast(),
                guard + self.len,
            )
        };
    }
}

thread_local! {
    /// This OS thread's alternate-stack mapping between runtimes (never
    /// installed while it is here: see [`Mapping`]). Freed when the
    /// thread exits.
    static KEPT: std::cell::Cell<Option<Mapping>> = const { std::cell::Cell::new(None) };
}

impl AltStack {
    /// Makes sure this OS thread has an alternate signal stack the handler
    /// can run on after the green stack is exhausted.
    pub(crate) fn ensure() -> io::Result<AltStack> {
        // SAFETY: all-zero is a valid stack_t; sigaltstack with a null new
        // stack only reports the current one into `old`.
        let mut old: libc::stack_t = unsafe { std::mem::zeroed() };
        // SAFETY: see above.
        if unsafe { libc::sigaltstack(ptr::null(), &mut old) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let required = required_alt_stack();
        // Asked first, never swapped in and out: a handler of the thread's
        // own may need all of the stack its owner gave it, and a signal
        // could arrive between two calls.
        if old.ss_flags & libc::SS_DISABLE == 0 && old.ss_size >= required {
            // Large enough, and used as it is: the thread's own, or ours put
            // back by code that saved it while a runtime ran (see
            // `Mapping::drop`), which stays out of `KEPT` from now on.
            let _ = KEPT.try_with(|k| {
                let kept = k.take();
                match kept {
                    Some(m) if m.mem == old.ss_sp => std::mem::forget(m),
                    other => k.set(other),
                }
            });
            return Ok(AltStack(None));
        }
        let len = ALT_STACK_SIZE.max(required);
        // Taken out while installed, so the thread's exit never unmaps it
        // under a running runtime (one built in another thread-local's
        // destructor, say).
        let kept = KEPT.try_with(|k| k.take()).ok().flatten();
        let mapping = match kept {
            Some(m) if m.len >= len => m,
            _ => Mapping::new(len)?,
        };
        let st = libc::stack_t {
            ss_sp: mapping.mem,
            ss_flags: 0,
            ss_size: mapping.len,
        };
        // SAFETY: `st` describes `mapping`, which stays mapped while it is
        // installed: it is unmapped only by `Mapping::drop`, and the
        // `AltStack` holding it puts the previous stack back before letting
        // it go.
        if unsafe { libc::sigaltstack(&st, ptr::null_mut()) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(AltStack(Some(Installed {
            mapping,
            previous: old,
        })))
    }
}

impl Drop for AltStack {
    fn drop(&mut self) {
        let Some(Installed { mapping, previous }) = self.0.take() else {
            return;
        };
        let mut previous = previous;
        // `SS_ONSTACK` is only reported, never passed in; the others
        // (`SS_DISABLE`, Linux's `SS_AUTODISARM`) are the thread's own.
        previous.ss_flags &= !libc::SS_ONSTACK;
        // SAFETY: putting back the alternate stack the thread had before
        // (it belongs to whoever installed it and is still mapped: std's
        // lives as long as its thread), or disabling it. Drop runs in normal
        // context, not on the alternate stack.
        if unsafe { libc::sigaltstack(&previous, ptr::null_mut()) } != 0 {
            // Still installed: it must stay mapped.
            std::mem::forget(mapping);
            return;
        }
        // Kept for the next runtime (one kept already is unmapped). While
        // the thread exits the closure is dropped unrun: unmapped here.
        let _ = KEPT.try_with(move |k| k.set(Some(mapping)));
    }
}

/// Formats into a fixed buffer without allocating.
struct Buf {
    bytes: [u8; 512],
    len: usize,
}

impl std::fmt::Write for Buf {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let n = s.len().min(self.bytes.len() - self.len);
        self.bytes[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        Ok(())
    }
}

extern "C" fn handler(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for SA_SIGINFO handlers. For
    // a fault (si_code > 0) si_addr is the faulting address; a signal sent by
    // a process (si_code <= 0) carries a pid there instead, so it is never
    // taken for a guard-page hit.
    let fault = unsafe { (*info).si_code } > 0;
    let addr = if fault {
        // SAFETY: as above; for a fault si_addr is the faulting address.
        let a = unsafe { (*info).si_addr() };
        a as usize
    } else {
        0
    };
    let page = 4096usize.max(
        // SAFETY: sysconf is async-signal-safe and has no preconditions.
        unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize,
    );
    let hit = context::try_with_sched(|s| {
        let t = s.current.get();
        if t.is_null() {
            return None;
        }
        // SAFETY: `current` points at the running task for as long as it runs
        // (we are on its OS thread, interrupting it); its id, name, stack
        // bounds are immutable after spawn.
        let t = unsafe { &*t };
        // The faulting address decides, never the thread's stack pointer:
        // a thread running on another stack (a coroutine's, stacker's)
        // that overflows it hits that stack's guard, not this one, and the
        // signal is passed on.
        let usable_lo = t.stack_limit + t.stack_guard.max(page);
        (fault && addr >= t.stack_limit && addr < usable_lo)
            .then(|| (t.id, t.display_name(), t.stack_size, usable_lo - addr))
    })
    .flatten();
    if let Some((id, name, size, below)) = hit {
        let mut buf = Buf {
            bytes: [0; 512],
            len: 0,
        };
        let _ = write!(
            buf,
            "\ncoro: green thread #{id} '{name}' overflowed its stack of {size} bytes \
             (guard gap hit at {addr:#x}, {below} bytes below it); aborting. Give it a bigger stack with \
             coro::Builder::stack_size or Runtime::builder().stack_size.\n"
        );
        // SAFETY: write(2) and abort(3) are async-signal-safe; the buffer is
        // valid for `len` bytes.
        unsafe {
            libc::write(2, buf.bytes.as_ptr().cast(), buf.len);
            libc::abort();
        }
    }
    // SAFETY: `info` and `ctx` are what the kernel passed to this handler.
    unsafe { forward(sig, info, ctx) };
}

/// Passes a signal that is not a green thread's overflow to the handler
/// that was installed before ours (see the module docs).
///
/// # Safety
///
/// Called only from the signal handler, with the kernel's `info` and `ctx`.
unsafe fn forward(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    let i = if sig == libc::SIGSEGV { 0 } else { 1 };
    // SAFETY: the kernel passes a valid siginfo (see `handler`). A signal
    // sent by a process has si_code <= 0 (SI_USER, SI_TKILL, SI_QUEUE...);
    // a fault the kernel raised has a positive one.
    let sent = unsafe { (*info).si_code } <= 0;
    let prev = match PREVIOUS.get() {
        Some(p) => p[i],
        // SAFETY: all-zero is SIG_DFL with no flags.
        None => unsafe { std::mem::zeroed() },
    };
    let h = prev.sa_sigaction;
    if h == libc::SIG_IGN && sent {
        return;
    }
    if h == libc::SIG_DFL || h == libc::SIG_IGN {
        // SAFETY: resetting to the default action with a valid, zeroed
        // sigaction; raise is async-signal-safe. A fault re-executes the
        // instruction on return and dies of the default action; a sent
        // signal is raised again and delivered when the handler returns.
        unsafe {
            let mut dfl: libc::sigaction = std::mem::zeroed();
            dfl.sa_sigaction = libc::SIG_DFL;
            libc::sigaction(sig, &dfl, ptr::null_mut());
            if sent {
                libc::raise(sig);
            }
        }
        return;
    }
    if prev.sa_flags & libc::SA_SIGINFO != 0 {
        // SAFETY: with SA_SIGINFO, sa_sigaction is the three-argument
        // handler its installer registered; it gets what the kernel gave us.
        let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
            unsafe { std::mem::transmute(h) };
        f(sig, info, ctx);
    } else {
        // SAFETY: without SA_SIGINFO, sa_sigaction holds a one-argument
        // handler (sa_handler shares the field).
        let f: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(h) };
        f(sig);
    }
    if sent {
        // A handler written for faults (std's is one) resets the disposition
        // to the default and returns, expecting the fault to happen again. A
        // sent signal does not happen again: the handler has dealt with it
        // (std's ignores it), and ours goes back in so later overflows are
        // still reported. After a fault the disposition is left as the
        // previous handler set it: the instruction runs again and meets it.
        let act = our_action();
        // SAFETY: reinstalling this module's own, async-signal-safe handler.
        unsafe { libc::sigaction(sig, &act, ptr::null_mut()) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn current() -> libc::stack_t {
        // SAFETY: all-zero is a valid stack_t; a null new stack only queries.
        let mut st: libc::stack_t = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        assert_eq!(unsafe { libc::sigaltstack(ptr::null(), &mut st) }, 0);
        st
    }

    /// An existing 8 KiB alternate stack is too small for the kernel's
    /// signal frame plus the handler; the runtime's own is used meanwhile,
    /// and the thread's own is put back afterwards (neither accepted as it
    /// is nor replaced by a disabled one).
    #[test]
    fn a_small_alternate_stack_is_replaced_then_restored() {
        std::thread::spawn(|| {
            let mut small = vec![0u8; 8 * 1024];
            let st = libc::stack_t {
                ss_sp: small.as_mut_ptr().cast(),
                ss_flags: 0,
                ss_size: small.len(),
            };
            // SAFETY: `small` outlives its use as the alternate stack (it is
            // disabled below before the vector is dropped).
            assert_eq!(unsafe { libc::sigaltstack(&st, ptr::null_mut()) }, 0);
            assert!(required_alt_stack() > 8 * 1024);
            let ours = AltStack::ensure().unwrap();
            let during = current();
            assert!(during.ss_size >= required_alt_stack());
            assert_ne!(during.ss_sp, small.as_mut_ptr().cast());
            drop(ours);
            let after = current();
            assert_eq!(after.ss_sp, small.as_mut_ptr().cast());
            assert_eq!(after.ss_size, 8 * 1024);
            let off = libc::stack_t {
                ss_sp: ptr::null_mut(),
                ss_flags: libc::SS_DISABLE,
                ss_size: 0,
            };
            // SAFETY: disabling the alternate stack before `small` is freed.
            unsafe { libc::sigaltstack(&off, ptr::null_mut()) };
        })
        .join()
        .unwrap();
    }

    /// A thread whose own alternate stack is large enough keeps it while a
    /// runtime runs (a handler of its own may need all of it); the
    /// runtime's mapping waits in `KEPT`.
    #[test]
    fn a_large_enough_alternate_stack_stays_installed() {
        std::thread::spawn(|| {
            disable_alt_stack();
            drop(AltStack::ensure().unwrap());
            let kept = kept_mem().expect("kept by the first runtime");
            let mut big = vec![0u8; 2 * ALT_STACK_SIZE.max(required_alt_stack())];
            let st = libc::stack_t {
                ss_sp: big.as_mut_ptr().cast(),
                ss_flags: 0,
                ss_size: big.len(),
            };
            // SAFETY: `big` outlives its use as the alternate stack (it is
            // disabled below before the vector is dropped).
            assert_eq!(unsafe { libc::sigaltstack(&st, ptr::null_mut()) }, 0);
            let ours = AltStack::ensure().unwrap();
            assert!(ours.0.is_none(), "nothing to put back");
            assert_eq!(current().ss_sp, big.as_mut_ptr().cast());
            assert_eq!(current().ss_size, big.len());
            assert_eq!(kept_mem(), Some(kept));
            drop(ours);
            assert_eq!(current().ss_sp, big.as_mut_ptr().cast());
            disable_alt_stack();
        })
        .join()
        .unwrap();
    }

    /// The thread's own alternate stack comes back with all its flags:
    /// Linux's `SS_AUTODISARM` too (only `SS_ONSTACK` is left out, which
    /// the kernel reports but does not take).
    #[cfg(any(target_os = "linux", target_os = "android"))]
    #[test]
    fn the_threads_own_stack_comes_back_with_its_flags() {
        const SS_AUTODISARM: libc::c_int = 1 << 31;
        std::thread::spawn(|| {
            let mut small = vec![0u8; 8 * 1024];
            let st = libc::stack_t {
                ss_sp: small.as_mut_ptr().cast(),
                ss_flags: SS_AUTODISARM,
                ss_size: small.len(),
            };
            // SAFETY: `small` outlives its use as the alternate stack (it is
            // disabled below before the vector is dropped).
            assert_eq!(unsafe { libc::sigaltstack(&st, ptr::null_mut()) }, 0);
            assert_ne!(current().ss_flags & SS_AUTODISARM, 0);
            drop(AltStack::ensure().unwrap());
            let after = current();
            assert_eq!(after.ss_sp, small.as_mut_ptr().cast());
            assert_ne!(after.ss_flags & SS_AUTODISARM, 0, "flag lost");
            disable_alt_stack();
        })
        .join()
        .unwrap();
    }

    /// The page below the mapping's stack is a guard: the kernel cannot
    /// read it (`write(2)` from it fails with `EFAULT`), while the stack
    /// itself reads.
    #[test]
    fn the_mapping_has_a_guard_page_below_its_stack() {
        let m = Mapping::new(ALT_STACK_SIZE).unwrap();
        let mut fds = [0; 2];
        // SAFETY: `fds` has room for the two descriptors.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        // SAFETY: the kernel reads one byte at each address, checking it
        // (a fault is an `EFAULT` error, not a signal).
        let from_stack = unsafe { libc::write(fds[1], m.mem, 1) };
        // SAFETY: as above.
        let from_guard =
            unsafe { libc::write(fds[1], m.mem.cast::<u8>().wrapping_sub(1).cast(), 1) };
        let err = io::Error::last_os_error();
        // SAFETY: our own descriptors, closed once.
        unsafe {
            libc::close(fds[0]);
            libc::close(fds[1]);
        }
        assert_eq!(from_stack, 1);
        assert_eq!(from_guard, -1);
        assert_eq!(err.raw_os_error(), Some(libc::EFAULT));
        // And the page is mapped, as part of this mapping (`mincore` fails
        // with `ENOMEM` where nothing is): not a hole that happens to be
        // below it.
        let page = super::super::unix::page_size();
        let mut vec = [0u8; 1];
        // SAFETY: a query; `vec` has room for one page's entry.
        let rc = unsafe {
            libc::mincore(
                m.mem.cast::<u8>().wrapping_sub(page).cast(),
                page,
                vec.as_mut_ptr(),
            )
        };
        assert_eq!(
            rc,
            0,
            "no page below the stack: {}",
            io::Error::last_os_error()
        );
    }

    /// Disables this thread's alternate stack (std's stays mapped until
    /// the thread exits).
    fn disable_alt_stack() {
        let off = libc::stack_t {
            ss_sp: ptr::null_mut(),
            ss_flags: libc::SS_DISABLE,
            ss_size: 0,
        };
        // SAFETY: disabling only: no memory is handed to the kernel.
        assert_eq!(unsafe { libc::sigaltstack(&off, ptr::null_mut()) }, 0);
    }

    /// The address of the mapping kept for this thread, if any.
    fn kept_mem() -> Option<*mut libc::c_void> {
        KEPT.with(|k| {
            let m = k.take();
            let mem = m.as_ref().map(|m| m.mem);
            k.set(m);
            mem
        })
    }

    /// The next runtime on the thread installs the same mapping (no mmap
    /// per runtime), and each puts the thread's own stack back.
    #[test]
    fn the_mapping_is_kept_for_the_threads_next_runtime() {
        std::thread::spawn(|| {
            disable_alt_stack();
            let first = AltStack::ensure().unwrap();
            let mem = current().ss_sp;
            drop(first);
            assert_ne!(current().ss_flags & libc::SS_DISABLE, 0);
            assert_eq!(kept_mem(), Some(mem));
            let second = AltStack::ensure().unwrap();
            assert_eq!(current().ss_sp, mem);
            assert_eq!(kept_mem(), None);
            drop(second);
            assert_ne!(current().ss_flags & libc::SS_DISABLE, 0);
        })
        .join()
        .unwrap();
    }

    /// A kept mapping that code put back as the thread's alternate stack
    /// itself is never unmapped: the next runtime finds it installed and
    /// takes it out of `KEPT` (and its drop would leave it mapped).
    #[test]
    fn a_kept_mapping_put_back_by_hand_is_never_unmapped() {
        std::thread::spawn(|| {
            disable_alt_stack();
            let ours = AltStack::ensure().unwrap();
            let saved = current();
            drop(ours);
            // SAFETY: the kept mapping, still mapped (it is in `KEPT`).
            assert_eq!(unsafe { libc::sigaltstack(&saved, ptr::null_mut()) }, 0);
            let mapping = KEPT.with(|k| k.take()).expect("kept");
            assert!(mapping.is_installed());
            KEPT.with(|k| k.set(Some(mapping)));
            let again = AltStack::ensure().unwrap();
            assert!(again.0.is_none(), "the installed one is large enough");
            assert_eq!(kept_mem(), None);
            // It stays mapped (leaked).
            disable_alt_stack();
        })
        .join()
        .unwrap();
    }
}
