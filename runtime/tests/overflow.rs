//! Stack overflow in a green thread: a message naming the thread and its
//! stack size, then abort (checked from a child process); a frame that skips
//! the guard page without probing faults in the guard gap, not in the next
//! stack. Also: running out of mappings or memory for stacks is an error
//! from `Builder::spawn`.

use std::sync::atomic::{AtomicUsize, Ordering};

use coro_runtime as coro;

use coro_test_support::child::{child, child_ok, child_with_env, emulator, is_child, skip};

#[inline(never)]
fn recurse(n: u64) -> u64 {
    let buf = std::hint::black_box([n as u8; 512]);
    if n == u64::MAX {
        return 0;
    }
    recurse(n + 1) + buf[7] as u64
}

#[test]
fn stack_overflow_names_the_thread_and_aborts() {
    const NAME: &str = "stack_overflow_names_the_thread_and_aborts";
    if is_child(NAME) {
        coro::run(|| {
            coro::Builder::new()
                .name("deep-recursion".into())
                .stack_size(64 * 1024)
                .spawn(|| recurse(0))
                .unwrap()
                .join()
                .unwrap();
        });
        unreachable!("the overflow must abort the process");
    }
    check_overflow_report(child(NAME));
}

/// The same overflow with guard pages made by `mprotect`, the path taken
/// where the kernel has no guard regions.
#[test]
fn stack_overflow_is_reported_with_mprotect_guard_pages() {
    check_overflow_report(child_with_env(
        "stack_overflow_names_the_thread_and_aborts",
        &[("CORO_NO_GUARD_REGIONS", "1")],
    ));
}

#[track_caller]
fn check_overflow_report(out: std::process::Output) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(out.status.signal(), Some(libc::SIGABRT), "{stderr}");
    }
    assert!(stderr.contains("'deep-recursion'"), "{stderr}");
    assert!(
        stderr.contains("overflowed its stack of 65536 bytes"),
        "{stderr}"
    );
}

#[test]
fn a_segfault_that_is_not_an_overflow_is_not_reported_as_one() {
    const NAME: &str = "a_segfault_that_is_not_an_overflow_is_not_reported_as_one";
    if is_child(NAME) {
        coro::run(|| {
            let p = std::hint::black_box(16usize) as *const u8;
            // SAFETY: not safe at all: this child process exists to fault.
            let v = unsafe { std::ptr::read_volatile(p) };
            println!("{v}");
        });
        return;
    }
    let out = child(NAME);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(out.status.signal(), Some(libc::SIGSEGV), "{stderr}");
    }
    assert!(!stderr.contains("overflowed"), "{stderr}");
}

/// A SIGSEGV that is not a green thread's overflow goes to the handler
/// installed before the runtime's, every time (it is never swallowed, and
/// the runtime's handler stays), and a later overflow is still reported by
/// name.
#[test]
fn other_signals_reach_the_previous_handler_and_ours_stays() {
    const NAME: &str = "other_signals_reach_the_previous_handler_and_ours_stays";
    static SEEN: AtomicUsize = AtomicUsize::new(0);
    extern "C" fn previous(_: libc::c_int, _: *mut libc::siginfo_t, _: *mut libc::c_void) {
        SEEN.fetch_add(1, Ordering::SeqCst);
    }
    if is_child(NAME) {
        // SAFETY: installing a valid SA_SIGINFO handler that only counts.
        unsafe {
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = previous as *const () as usize;
            act.sa_flags = libc::SA_SIGINFO;
            libc::sigemptyset(&mut act.sa_mask);
            assert_eq!(
                libc::sigaction(libc::SIGSEGV, &act, std::ptr::null_mut()),
                0
            );
        }
        coro::run(|| {
            for _ in 0..2 {
                // SAFETY: raising a signal whose handler only counts.
                unsafe { libc::raise(libc::SIGSEGV) };
            }
            println!("SEEN {}", SEEN.load(Ordering::SeqCst));
            coro::Builder::new()
                .name("after-forwarding".into())
                .stack_size(64 * 1024)
                .spawn(|| recurse(0))
                .unwrap()
                .join()
                .unwrap();
        });
        unreachable!("the overflow must abort the process");
    }
    let out = child(NAME);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stdout.contains("SEEN 2"), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("'after-forwarding' overflowed its stack"),
        "{stderr}"
    );
}

#[test]
fn out_of_memory_for_stacks_is_an_error_from_spawn() {
    const NAME: &str = "out_of_memory_for_stacks_is_an_error_from_spawn";
    if is_child(NAME) {
        // No watchdog thread: started with the runtime, it may not have run
        // yet when the address space fills up, and then std's thread start
        // fails to map its signal stack and panics, on a machine whose
        // RUST_BACKTRACE=1 hangs in the panic hook (the backtrace needs
        // memory too, while it holds the lock the allocation-failure hook
        // takes).
        let mut rt = coro::Runtime::builder()
            .latency_warning(None)
            .build()
            .unwrap();
        let err = rt.block_on(|| {
            // Cap the address space, then spawn 1 MiB stacks until one fails.
            let lim = libc::rlimit {
                rlim_cur: 1 << 30,
                rlim_max: libc::RLIM_INFINITY,
            };
            // SAFETY: setrlimit with a valid rlimit struct.
            assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_AS, &lim) }, 0);
            let mut hs = Vec::new();
            loop {
                match coro::Builder::new().stack_size(1 << 20).spawn(coro::park) {
                    Ok(h) => hs.push(h),
                    Err(e) => break e,
                }
                if hs.len() > 100_000 {
                    panic!("no error after 100000 spawns");
                }
            }
        });
        assert_eq!(err.kind(), std::io::ErrorKind::OutOfMemory);
        println!("SPAWN-ERROR: {err}");
        return;
    }
    let stdout = child_ok(NAME);
    assert!(stdout.contains("SPAWN-ERROR"), "{stdout}");
    assert!(stdout.contains("vm.max_map_count"), "{stdout}");
}

/// With guard pages made by `mprotect` (kernels without guard regions;
/// forced here with `CORO_NO_GUARD_REGIONS`) each stack takes two kernel
/// mappings, and reaching `vm.max_map_count` is an error from spawn that
/// names the limit.
#[test]
fn reaching_the_mapping_limit_is_an_error_from_spawn() {
    const NAME: &str = "reaching_the_mapping_limit_is_an_error_from_spawn";
    let Some(max) = max_map_count() else {
        return skip(NAME, "no /proc/sys/vm/max_map_count: not Linux");
    };
    if max > 300_000 {
        return skip(
            NAME,
            &format!("vm.max_map_count is raised to {max}: too slow to reach here"),
        );
    }
    if is_child(NAME) {
        let (n, err) = coro::run(move || {
            let mut hs = Vec::new();
            loop {
                match coro::Builder::new().stack_size(16 * 1024).spawn(coro::park) {
                    Ok(h) => hs.push(h),
                    Err(e) => break (hs.len(), e),
                }
                assert!(hs.len() <= max, "no error after {max} threads");
            }
        });
        println!("SPAWNED {n} SPAWN-ERROR: {err}");
        return;
    }
    let out = child_with_env(NAME, &[("CORO_NO_GUARD_REGIONS", "1")]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("vm.max_map_count"), "{stdout}");
    assert!(stdout.contains("2 mappings"), "{stdout}");
}

/// With guard regions (Linux 6.13+) stacks share their
/// chunk's mapping, so more threads than the mapping limit allowed before
/// (about `vm.max_map_count / 2`) live at once, each with a working guard
/// page (the overflow tests above fault on it).
#[test]
fn more_threads_than_mappings_allow() {
    const NAME: &str = "more_threads_than_mappings_allow";
    let Some(max) = max_map_count() else {
        return skip(NAME, "no /proc/sys/vm/max_map_count: not Linux");
    };
    if max > 300_000 {
        return skip(
            NAME,
            &format!("vm.max_map_count is raised to {max}: the ceiling is not in the way"),
        );
    }
    if is_child(NAME) {
        let n = max / 2 + 2_000;
        coro::run(move || {
            let hs: Vec<_> = (0..n)
                .map(|_| {
                    coro::Builder::new()
                        .spawn(coro::park)
                        .unwrap_or_else(|e| panic!("spawn failed: {e}"))
                })
                .collect();
            coro::yield_now(); // every thread runs and parks
            assert_eq!(coro::stats().live, n + 1);
            println!("LIVE {}", n + 1);
            for h in &hs {
                h.thread().unpark().unwrap();
            }
            for h in hs {
                h.join().unwrap().unwrap();
            }
        });
        return;
    }
    let out = child(NAME);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // The spawn error names the fallback when the runtime has no guard
    // regions: each stack is then two mappings, and the ceiling holds.
    if !out.status.success() && stderr.contains("takes 2 mappings") {
        if let Some(emulator) = emulator() {
            return skip(
                NAME,
                &format!(
                    "no guard regions under {emulator} (it accepts MADV_GUARD_INSTALL and \
                     ignores it, so the runtime uses mprotect: two mappings per stack)"
                ),
            );
        }
        panic!("this kernel has no guard regions (MADV_GUARD_INSTALL, Linux 6.13+): {stderr}");
    }
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("LIVE"), "{stdout}");
}

fn max_map_count() -> Option<usize> {
    std::fs::read_to_string("/proc/sys/vm/max_map_count")
        .ok()
        .and_then(|s| s.trim().parse::<usize>().ok())
}

/// A SIGSEGV forwarded with std's own handler before ours (every Rust program
/// has it): std's handler, called for a sent SIGSEGV, resets the disposition
/// to the default and returns; ours is put back, so a later green overflow
/// is still reported (not a bare SIGSEGV death).
#[test]
fn a_sent_sigsegv_forwarded_to_std_keeps_the_overflow_report() {
    const NAME: &str = "a_sent_sigsegv_forwarded_to_std_keeps_the_overflow_report";
    if is_child(NAME) {
        coro::run(|| {
            // SAFETY: a child process that exists to receive this signal.
            unsafe { libc::raise(libc::SIGSEGV) };
            // SAFETY: all-zero is a valid sigaction.
            let mut cur: libc::sigaction = unsafe { std::mem::zeroed() };
            // SAFETY: querying only.
            unsafe { libc::sigaction(libc::SIGSEGV, std::ptr::null(), &mut cur) };
            println!(
                "SURVIVED raise; SIGSEGV disposition now {:#x}",
                cur.sa_sigaction
            );
            coro::Builder::new()
                .name("after-forwarding".into())
                .stack_size(64 * 1024)
                .spawn(|| recurse(0))
                .unwrap()
                .join()
                .unwrap();
        });
        unreachable!("the overflow must abort the process");
    }
    let out = child(NAME);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stdout.contains("SURVIVED raise"), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("'after-forwarding' overflowed its stack"),
        "overflow not reported: {stderr}"
    );
}

// A 69 776-byte frame as gcc emits it without -fstack-clash-protection:
// the stack pointer moved down at once, then a store at the far (lowest)
// end first. (ELF symbol names: Linux only.)
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
std::arch::global_asm!(
    ".globl coro_test_unprobed_big_frame",
    "coro_test_unprobed_big_frame:",
    "sub rsp, 69776",
    "mov qword ptr [rsp], rdi",
    "add rsp, 69776",
    "ret",
);

// The same on aarch64: 69 776 = 0x11 << 12 + 0x90.
#[cfg(all(target_os = "linux", target_arch = "aarch64"))]
std::arch::global_asm!(
    ".globl coro_test_unprobed_big_frame",
    "coro_test_unprobed_big_frame:",
    "sub sp, sp, #0x11, lsl #12",
    "sub sp, sp, #0x90",
    "str x0, [sp]",
    "add sp, sp, #0x90",
    "add sp, sp, #0x11, lsl #12",
    "ret",
);

#[cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
extern "C" {
    fn coro_test_unprobed_big_frame(x: u64);
}

/// Green threads on 16 KiB stacks, side by side; one calls a frame of
/// 69 776 bytes that skips the guard unprobed (as gcc emits one without
/// stack-clash protection). With a one-page guard its store would land in
/// a neighbour's live stack unreported; with the guard gap it faults there
/// and the overflow report names the thread.
#[cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
#[test]
fn an_unprobed_69_776_byte_frame_faults_in_the_guard_gap() {
    const NAME: &str = "an_unprobed_69_776_byte_frame_faults_in_the_guard_gap";
    if is_child(NAME) {
        coro::run(|| {
            let neighbours: Vec<_> = (0..8)
                .map(|_| {
                    coro::Builder::new()
                        .stack_size(16 * 1024)
                        .spawn(|| {
                            let canary = std::hint::black_box([0x5au8; 512]);
                            let _ = coro::park_as("neighbour");
                            assert!(canary.iter().all(|&b| b == 0x5a), "canary overwritten");
                        })
                        .unwrap()
                })
                .collect();
            coro::yield_now();
            coro::Builder::new()
                .name("big-frame".into())
                .stack_size(16 * 1024)
                // SAFETY: the assembly function keeps the ABI: it restores
                // the stack pointer and clobbers no callee-saved register.
                .spawn(|| unsafe { coro_test_unprobed_big_frame(0xdead_beef) })
                .unwrap()
                .join()
                .unwrap();
            for n in &neighbours {
                n.thread().unpark().unwrap();
            }
            for n in neighbours {
                n.join().unwrap();
            }
            println!("the frame wrote past the guard unnoticed");
        });
        return;
    }
    let out = child(NAME);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "the child finished: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(
        stderr.contains("green thread") && stderr.contains("'big-frame' overflowed its stack"),
        "{stderr}"
    );
    assert!(stderr.contains("guard gap hit"), "{stderr}");
}
