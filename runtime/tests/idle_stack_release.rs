//! Stacks of parked green threads under the default settings: the idle
//! sweep gives back only the pages below a parked thread's stack pointer
//! (an RSS test shows they are given back), so OS threads borrowing the
//! thread's locals (`std::thread::scope`, a nested spawn through `&Scope`)
//! see them intact.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use coro_runtime::{self as coro, RemoteWaker};

use coro_test_support::child::{child_ok, is_child};
use coro_test_support::memory::{assert_rss_given_back, page_size, resident_pages, rss};

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

/// Under plain `coro::run` defaults, an OS
/// worker reads a parked green thread's local array after the idle sweep
/// went over it (about 4 s), then writes 42 into it.
#[test]
fn std_scope_workers_see_a_parked_threads_locals_under_defaults() {
    let (read_ok, local) = coro_test_support::run(|| {
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

/// A worker spawns another OS thread through std's `&Scope`, which lives
/// on the parked green thread's stack, after the sweep (were the stack
/// copied out, the worker would read it as null and the process die).
#[test]
fn a_nested_spawn_through_std_scope_works_after_the_sweep() {
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

/// What the default does give back. 2 000 threads each touch
/// 64 KiB of stack, then park shallow: the pages below their stack
/// pointers go back (about 125 MiB), and each keeps only what its live
/// frames use. Measured in a child process, alone.
#[test]
fn the_default_gives_back_the_pages_below_a_parked_threads_stack_pointer() {
    const NAME: &str = "the_default_gives_back_the_pages_below_a_parked_threads_stack_pointer";
    if is_child(NAME) {
        let mut rt = coro::Runtime::builder()
            .idle_stack_release(Some(Duration::from_millis(20)))
            .build()
            .unwrap();
        rt.block_on(|| {
            /// Touches 64 KiB of stack; returns where.
            #[inline(never)]
            fn touch() -> usize {
                let mut buf = [1u8; 64 * 1024];
                std::hint::black_box(&mut buf);
                buf.as_ptr() as usize
            }
            let touched = Rc::new(RefCell::new(Vec::new()));
            let before = rss();
            let hs: Vec<_> = (0..2000)
                .map(|_| {
                    let touched = touched.clone();
                    coro::spawn(move || {
                        touched.borrow_mut().push(touch());
                        coro::park_as("test")
                    })
                })
                .collect();
            coro::yield_now();
            let parked = rss();
            let resident_parked = resident_pages(&touched.borrow(), 64 * 1024);
            for _ in 0..4000 {
                if coro::stats().idle_stack_trims >= 2000 {
                    break;
                }
                coro::sleep(Duration::from_millis(5)).unwrap();
            }
            let after = rss();
            let resident_after = resident_pages(&touched.borrow(), 64 * 1024);
            println!(
                "RSS before {before} parked {parked} trimmed {after} ({} trims); touched \
                 pages resident: {resident_parked:?} parked, {resident_after:?} trimmed",
                coro::stats().idle_stack_trims
            );
            // (The first threads may be trimmed already.)
            let (total, resident) = resident_parked;
            assert!(
                total >= 2000 && resident * 10 >= total * 9,
                "{resident_parked:?}"
            );
            // What a parked thread's live frames use, where its buffer was
            // (less than 16 KiB), stays; the rest of the buffer goes.
            let live = (16 * 1024usize).div_ceil(page_size()) + 1;
            assert!(
                resident_after.1 <= 2000 * live,
                "touched pages still resident: {resident_after:?}"
            );
            assert_rss_given_back(NAME, before, parked, after, 24);
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
