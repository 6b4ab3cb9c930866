//! Issue 20 (soundness, round 2), one test per item, each failing without
//! its fix:
//!
//! 1. OS threads borrowing a parked green thread's locals
//!    (`std::thread::scope`, a nested spawn through `&Scope`) see them
//!    intact under the default settings: only the pages below a parked
//!    thread's stack pointer are given back, and those are (RSS test).
//! 2. A panic in user code that shutdown runs (a shutdown hook another
//!    runtime left behind, a logger) does not stop shutdown: every green
//!    thread is finished and a leaked one never runs again; a runtime whose
//!    `block_on` unwound is poisoned.
//! 3. A frame of 69 776 bytes that skips the guard (as gcc emits one
//!    without stack-clash protection) faults in the 1 MiB guard gap and is
//!    reported as an overflow, instead of writing into the next stack.
//! 4. `CancelScope::cancel_called` latches.

use std::cell::Cell;
use std::panic::{self, AssertUnwindSafe};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use coro_runtime::{self as coro, CancelScope, RemoteWaker, WaitError};

mod util;
use util::{child, child_ok, is_child};

/// A green thread that sets the returned flag once the idle sweep has
/// trimmed (or, with the opt-in, copied out) a parked thread's stack. It
/// wakes every 5 ms itself, so it is never swept: the flag means another
/// thread (the test's parked main thread) was.
fn watch_sweeps() -> Arc<AtomicBool> {
    let swept = Arc::new(AtomicBool::new(false));
    let flag = swept.clone();
    coro::spawn(move || loop {
        let st = coro::stats();
        if st.idle_stack_trims + st.idle_stacks as u64 >= 1 {
            flag.store(true, Ordering::SeqCst);
            return;
        }
        if coro::sleep(Duration::from_millis(5)).is_err() {
            return;
        }
    });
    swept
}

/// Waits (on an OS thread) until `flag` is set, at most 20 s.
fn wait_flag(flag: &AtomicBool) {
    for _ in 0..4000 {
        if flag.load(Ordering::SeqCst) {
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    panic!("the idle sweep never visited the parked thread");
}

/// Parks the running green thread until `done` is set (by an OS thread
/// that then wakes `waker`, made before the park).
fn park_until(done: &AtomicBool) {
    while !done.load(Ordering::SeqCst) {
        coro::park_as("OS threads borrowing my stack").unwrap();
    }
}

/// Item 1, the review's case under plain `coro::run` defaults: an OS
/// worker reads a parked green thread's local array after the idle sweep
/// went over it (about 4 s), then writes 42 into it.
#[test]
fn issue_20_1_std_scope_workers_see_a_parked_threads_locals_under_defaults() {
    let (read_ok, local) = util::run(|| {
        let swept = watch_sweeps();
        let mut local = [7u64; 512];
        let done = Arc::new(AtomicBool::new(false));
        let read_ok = Arc::new(AtomicBool::new(false));
        let waker = RemoteWaker::current();
        std::thread::scope(|s| {
            let slot = &mut local;
            let (swept, d, ok) = (swept.clone(), done.clone(), read_ok.clone());
            s.spawn(move || {
                wait_flag(&swept);
                ok.store(slot.iter().all(|&w| w == 7), Ordering::SeqCst);
                slot[100] = 42;
                d.store(true, Ordering::SeqCst);
                waker.wake();
            });
            park_until(&done);
        });
        (read_ok.load(Ordering::SeqCst), local)
    });
    assert!(read_ok, "the worker read a released stack");
    assert_eq!(local[100], 42, "the worker's write was lost");
    assert!(local
        .iter()
        .enumerate()
        .all(|(i, &w)| w == if i == 100 { 42 } else { 7 }));
}

/// Item 1: a worker spawns another OS thread through std's `&Scope`,
/// which lives on the parked green thread's stack, after the sweep (a
/// copied-out stack made it read as null and the process died).
#[test]
fn issue_20_1_a_nested_spawn_through_std_scope_works_after_the_sweep() {
    let mut rt = coro::Runtime::builder()
        .idle_stack_release(Some(Duration::from_millis(20)))
        .build()
        .unwrap();
    let local = rt.block_on(|| {
        let swept = watch_sweeps();
        let mut local = [0u64; 64];
        let done = Arc::new(AtomicBool::new(false));
        let waker = RemoteWaker::current();
        std::thread::scope(|s| {
            let (low, high) = local.split_at_mut(32);
            let (swept, d) = (swept.clone(), done.clone());
            s.spawn(move || {
                wait_flag(&swept);
                let inner = s.spawn(move || high.fill(2));
                inner.join().unwrap();
                low.fill(1);
                d.store(true, Ordering::SeqCst);
                waker.wake();
            });
            park_until(&done);
        });
        local
    });
    assert_eq!(&local[..32], &[1; 32]);
    assert_eq!(&local[32..], &[2; 32]);
}

/// Item 1: what the default does give back. 2 000 threads each touch
/// 64 KiB of stack, then park shallow: the pages below their stack
/// pointers go back (about 125 MiB), and each keeps only what its live
/// frames use. Measured in a child process, alone.
#[test]
fn issue_20_1_the_default_gives_back_the_pages_below_a_parked_threads_stack_pointer() {
    const NAME: &str =
        "issue_20_1_the_default_gives_back_the_pages_below_a_parked_threads_stack_pointer";
    if is_child(NAME) {
        let mut rt = coro::Runtime::builder()
            .idle_stack_release(Some(Duration::from_millis(20)))
            .build()
            .unwrap();
        rt.block_on(|| {
            #[inline(never)]
            fn touch() {
                let mut buf = [1u8; 64 * 1024];
                std::hint::black_box(&mut buf);
            }
            let before = rss();
            let hs: Vec<_> = (0..2000)
                .map(|_| {
                    coro::spawn(|| {
                        touch();
                        coro::park_as("test")
                    })
                })
                .collect();
            coro::yield_now();
            let parked = rss();
            for _ in 0..4000 {
                if coro::stats().idle_stack_trims >= 2000 {
                    break;
                }
                coro::sleep(Duration::from_millis(5)).unwrap();
            }
            let after = rss();
            println!(
                "RSS before {before} parked {parked} trimmed {after} ({} trims)",
                coro::stats().idle_stack_trims
            );
            assert!(parked > before + (100 << 20), "touched {}", parked - before);
            assert!(
                after < before + (24 << 20),
                "{} MiB still resident",
                (after - before) >> 20
            );
            assert_eq!(coro::stats().idle_stacks, 0, "nothing copied out");
            for h in &hs {
                h.thread().unpark().unwrap();
            }
            for h in hs {
                h.join().unwrap().unwrap();
            }
        });
        return;
    }
    let out = child_ok(NAME);
    assert!(out.contains("trimmed"), "{out}");
}

/// Resident bytes of this process.
fn rss() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: usize = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    // SAFETY: sysconf has no preconditions.
    pages * unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize
}

/// Panics when dropped (a hook's captured value).
struct PanicOnDrop;
impl Drop for PanicOnDrop {
    fn drop(&mut self) {
        panic!("a leftover shutdown hook's destructor panicked");
    }
}

/// Sets its flag when dropped.
struct Dropped(Rc<Cell<bool>>);
impl Drop for Dropped {
    fn drop(&mut self) {
        self.0.set(true);
    }
}

/// Item 2: runtime A's thread registers a shutdown hook while A shuts
/// down (after A ran its hooks), so the hook is left behind; runtime B's
/// shutdown drops it, and its destructor panics. B's shutdown still
/// finishes its threads (their destructors run), `block_on` returns, and B
/// is not poisoned.
#[test]
fn issue_20_2_a_panicking_leftover_shutdown_hook_does_not_stop_shutdown() {
    let mut a = coro::Runtime::new().unwrap();
    a.block_on(|| {
        coro::spawn(|| {
            struct RegisterOnDrop;
            impl Drop for RegisterOnDrop {
                fn drop(&mut self) {
                    let bomb = PanicOnDrop;
                    coro::on_shutdown(move || drop(bomb));
                }
            }
            let _r = RegisterOnDrop;
            let _ = coro::park_as("until A shuts down");
        });
        coro::yield_now();
    });
    let mut b = coro::Runtime::new().unwrap();
    let dropped = Rc::new(Cell::new(false));
    let d = dropped.clone();
    let r = panic::catch_unwind(AssertUnwindSafe(|| {
        b.block_on(move || {
            coro::spawn(move || {
                let _flag = Dropped(d);
                let _ = coro::park_as("until B shuts down");
            });
            coro::yield_now();
        })
    }));
    assert!(r.is_ok(), "the hook's panic unwound out of block_on");
    assert!(dropped.get(), "B's thread was not finished");
    assert!(!b.is_poisoned());
    assert_eq!(b.block_on(|| 5), 5);
}

/// A logger that panics on every ERROR record.
struct PanickingLogger;
impl log::Log for PanickingLogger {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        m.level() <= log::Level::Error
    }
    fn log(&self, r: &log::Record<'_>) {
        if r.level() <= log::Level::Error {
            panic!("the logger panicked on: {}", r.args());
        }
    }
    fn flush(&self) {}
}

/// Item 2: a thread that keeps catching its shutdown unwind is leaked,
/// and the ERROR line about it goes to a logger that panics. Shutdown
/// completes anyway, `block_on` returns, and the leaked thread never runs
/// again (a later `block_on` on the same runtime does not resume it).
#[test]
fn issue_20_2_a_panicking_logger_does_not_stop_shutdown_and_leaked_threads_stay_dead() {
    const NAME: &str =
        "issue_20_2_a_panicking_logger_does_not_stop_shutdown_and_leaked_threads_stay_dead";
    if is_child(NAME) {
        log::set_logger(&PanickingLogger).unwrap();
        log::set_max_level(log::LevelFilter::Error);
        let runs = Rc::new(Cell::new(0u32));
        let r = runs.clone();
        let mut rt = coro::Runtime::new().unwrap();
        let first = panic::catch_unwind(AssertUnwindSafe(|| {
            rt.block_on(move || {
                coro::spawn(move || loop {
                    r.set(r.get() + 1);
                    let _ = panic::catch_unwind(AssertUnwindSafe(|| coro::park_as("stubborn")));
                });
                coro::yield_now();
            })
        }));
        assert!(first.is_ok(), "the logger's panic unwound out of block_on");
        let after_first = runs.get();
        assert!(after_first > 1, "the thread was never unwound");
        rt.block_on(|| {
            for _ in 0..10 {
                coro::yield_now();
            }
        });
        assert_eq!(runs.get(), after_first, "the leaked thread ran again");
        println!("leaked thread stayed dead after {after_first} runs");
        return;
    }
    let out = child_ok(NAME);
    assert!(out.contains("stayed dead"), "{out}");
}

/// Item 2: a runtime whose `block_on` unwound refuses to run again, with a
/// message that says why.
#[test]
fn issue_20_2_a_runtime_whose_block_on_unwound_is_poisoned() {
    let mut rt = coro::Runtime::new().unwrap();
    let first = panic::catch_unwind(AssertUnwindSafe(|| rt.block_on(|| panic!("boom"))));
    assert!(first.is_err());
    assert!(rt.is_poisoned());
    let again = panic::catch_unwind(AssertUnwindSafe(|| rt.block_on(|| 1)));
    let p = again.expect_err("a poisoned runtime ran again");
    let msg = p
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap();
    assert!(msg.contains("poisoned"), "{msg}");
    // A runtime that returned normally stays usable.
    let mut ok = coro::Runtime::new().unwrap();
    assert_eq!(ok.block_on(|| 1), 1);
    assert!(!ok.is_poisoned());
    assert_eq!(ok.block_on(|| 2), 2);
}

#[cfg(target_arch = "x86_64")]
std::arch::global_asm!(
    ".globl coro_issue_20_big_frame",
    "coro_issue_20_big_frame:",
    // A 69 776-byte frame as gcc emits it without -fstack-clash-protection:
    // one subtraction, then a store at the far (lowest) end first.
    "sub rsp, 69776",
    "mov qword ptr [rsp], rdi",
    "add rsp, 69776",
    "ret",
);

#[cfg(target_arch = "x86_64")]
extern "C" {
    fn coro_issue_20_big_frame(x: u64);
}

/// Item 3: green threads on 16 KiB stacks, side by side; one calls the
/// unprobed frame. With a one-page guard its store landed in a
/// neighbour's live stack and nothing was reported; with the guard gap it
/// faults there and the overflow report names the thread.
#[cfg(target_arch = "x86_64")]
#[test]
fn issue_20_3_an_unprobed_69_776_byte_frame_faults_in_the_guard_gap() {
    const NAME: &str = "issue_20_3_an_unprobed_69_776_byte_frame_faults_in_the_guard_gap";
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
                .spawn(|| unsafe { coro_issue_20_big_frame(0xdead_beef) })
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

/// Item 3: the gap is configurable, and a bad size is an error naming it.
#[test]
fn issue_20_3_the_guard_gap_size_is_checked() {
    let e = coro::Runtime::builder()
        .stack_guard_size(0)
        .build()
        .unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    assert!(e.to_string().contains("stack_guard_size"), "{e}");
    let mut rt = coro::Runtime::builder()
        .stack_guard_size(64 * 1024)
        .build()
        .unwrap();
    assert_eq!(rt.block_on(|| coro::spawn(|| 3).join().unwrap()), 3);
    assert_eq!(coro::DEFAULT_STACK_GUARD, 1 << 20);
}

/// Item 4: a deadline that passed before the scope was entered latches:
/// moving it later does not un-cancel the scope, and the scope is entered
/// cancelled.
#[test]
fn issue_20_4_cancel_called_latches_before_entry() {
    util::run(|| {
        let scope = CancelScope::new();
        scope.set_deadline(Some(coro::clock::now()));
        scope.set_deadline(Some(coro::clock::now() + Duration::from_secs(30)));
        assert!(scope.cancel_called(), "un-latched by a later deadline");
        scope.set_deadline(None);
        assert!(scope.cancel_called(), "un-latched by removing the deadline");
        let r = scope.run(|| coro::sleep(Duration::from_secs(5)));
        assert!(r.is_err(), "entered uncancelled: {r:?}");
        assert!(scope.cancelled_caught());
    });
}

/// Item 4: the same inside the scope, before the deadline's timer fired.
#[test]
fn issue_20_4_cancel_called_latches_inside_the_scope() {
    util::run(|| {
        let scope = CancelScope::new();
        let s = scope.clone();
        let r = scope.run(move || {
            s.set_deadline(Some(coro::clock::now()));
            s.set_deadline(Some(coro::clock::now() + Duration::from_secs(30)));
            assert!(s.cancel_called());
            coro::sleep(Duration::from_secs(5))
        });
        assert!(r.is_err(), "the sleep was not cancelled: {r:?}");
        assert!(scope.cancel_called());
        let _ = WaitError::TimedOut;
    });
}
