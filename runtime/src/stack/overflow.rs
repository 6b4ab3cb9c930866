//! Stack-overflow reporting for green threads (Linux, BSD, macOS).
//!
//! A green thread that runs off its stack touches the guard page below it and
//! the kernel raises `SIGSEGV` (`SIGBUS` on macOS). The handler installed here
//! runs on the OS thread's alternate signal stack, checks whether the faulting
//! address lies in the guard page of the green thread that is running, and if
//! so writes one line naming that thread and its stack size to stderr and
//! aborts. Any other fault is passed on: the previous handler (std's, which
//! reports overflows of OS-thread stacks, or the default action) is put back
//! and the faulting instruction runs again.
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
/// that have none.
const ALT_STACK_SIZE: usize = 64 * 1024;

/// The handlers that were installed before ours, in `SIGNALS` order.
static PREVIOUS: OnceLock<[libc::sigaction; 2]> = OnceLock::new();

/// Installs the handler once per process.
pub(crate) fn install() {
    PREVIOUS.get_or_init(|| {
        // SAFETY: sigaction is a plain C struct; all-zero is a valid value.
        let mut prev: [libc::sigaction; 2] = unsafe { std::mem::zeroed() };
        for (i, &sig) in SIGNALS.iter().enumerate() {
            // SAFETY: all-zero is a valid sigaction; we fill in the fields used.
            let mut act: libc::sigaction = unsafe { std::mem::zeroed() };
            act.sa_sigaction = handler as *const () as usize;
            act.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
            // SAFETY: `act.sa_mask` is a valid sigset to initialise; `act` and
            // `prev[i]` are valid for the call, and the handler we install is
            // async-signal-safe (see the module docs).
            unsafe {
                libc::sigemptyset(&mut act.sa_mask);
                libc::sigaction(sig, &act, &mut prev[i]);
            }
        }
        prev
    });
}

/// An alternate signal stack mapped for this OS thread, removed on drop.
/// `None` inside if the thread already had one (std gives its threads one).
pub(crate) struct AltStack(Option<(*mut libc::c_void, usize)>);

impl AltStack {
    /// Makes sure this OS thread has an alternate signal stack, so the handler
    /// can run after the green stack is exhausted.
    pub(crate) fn ensure() -> io::Result<AltStack> {
        // SAFETY: all-zero is a valid stack_t; sigaltstack with a null new
        // stack only reports the current one into `old`.
        let mut old: libc::stack_t = unsafe { std::mem::zeroed() };
        // SAFETY: see above.
        if unsafe { libc::sigaltstack(ptr::null(), &mut old) } != 0 {
            return Err(io::Error::last_os_error());
        }
        if old.ss_flags & libc::SS_DISABLE == 0 && old.ss_size >= 8 * 1024 {
            return Ok(AltStack(None));
        }
        // SAFETY: anonymous private mapping with no address hint; the result is
        // checked against MAP_FAILED.
        let mem = unsafe {
            libc::mmap(
                ptr::null_mut(),
                ALT_STACK_SIZE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if mem == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let st = libc::stack_t {
            ss_sp: mem,
            ss_flags: 0,
            ss_size: ALT_STACK_SIZE,
        };
        // SAFETY: `st` describes the mapping made above, which stays mapped
        // until this AltStack is dropped, and Drop disables it first.
        if unsafe { libc::sigaltstack(&st, ptr::null_mut()) } != 0 {
            let e = io::Error::last_os_error();
            // SAFETY: unmapping the mapping made above, which nothing uses.
            unsafe { libc::munmap(mem, ALT_STACK_SIZE) };
            return Err(e);
        }
        Ok(AltStack(Some((mem, ALT_STACK_SIZE))))
    }
}

impl Drop for AltStack {
    fn drop(&mut self) {
        if let Some((mem, len)) = self.0 {
            let st = libc::stack_t {
                ss_sp: ptr::null_mut(),
                ss_flags: libc::SS_DISABLE,
                ss_size: 0,
            };
            // SAFETY: disabling the alternate stack before unmapping it; we are
            // not running on it (Drop runs in normal context).
            unsafe {
                libc::sigaltstack(&st, ptr::null_mut());
                libc::munmap(mem, len);
            }
        }
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

extern "C" fn handler(sig: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for SA_SIGINFO handlers, and
    // for SIGSEGV/SIGBUS si_addr is the faulting address.
    let addr = unsafe { (*info).si_addr() } as usize;
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
        (addr >= t.stack_limit && addr < t.stack_limit + page)
            .then(|| (t.id, t.display_name(), t.stack_size))
    })
    .flatten();
    if let Some((id, name, size)) = hit {
        let mut buf = Buf {
            bytes: [0; 512],
            len: 0,
        };
        let _ = write!(
            buf,
            "\ncoro: green thread #{id} '{name}' overflowed its stack of {size} bytes \
             (guard page hit at {addr:#x}); aborting. Give it a bigger stack with \
             coro::Builder::stack_size or Runtime::builder().stack_size.\n"
        );
        // SAFETY: write(2) and abort(3) are async-signal-safe; the buffer is
        // valid for `len` bytes.
        unsafe {
            libc::write(2, buf.bytes.as_ptr().cast(), buf.len);
            libc::abort();
        }
    }
    // Not ours: put the previous handler back and return, so the fault
    // happens again and that handler (or the default action) deals with it.
    if let Some(prev) = PREVIOUS.get() {
        let i = if sig == libc::SIGSEGV { 0 } else { 1 };
        // SAFETY: restoring a sigaction value the kernel gave us earlier.
        unsafe { libc::sigaction(sig, &prev[i], ptr::null_mut()) };
    }
}
