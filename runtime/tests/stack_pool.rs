//! The stack pool gives memory back: stacks of finished
//! threads keep their touched pages only while they may be reused soon; a
//! burst of deep threads leaves nothing resident a few seconds later. And a
//! pooled stack is never reused while its thread lives. Memory is measured
//! in a child process, alone.

use std::time::Duration;

use coro_runtime as coro;

use coro_test_support::child::{child_ok, is_child};
use coro_test_support::memory::rss;

/// Touches about 160 KiB of the calling thread's stack.
#[inline(never)]
fn touch_stack() -> u8 {
    let mut buf = [1u8; 160 * 1024];
    std::hint::black_box(&mut buf);
    buf[4096]
}

#[test]
fn pooled_stacks_give_their_pages_back() {
    const NAME: &str = "pooled_stacks_give_their_pages_back";
    if is_child(NAME) {
        coro::run(|| {
            let before = rss();
            let hs: Vec<_> = (0..1000).map(|_| coro::spawn(touch_stack)).collect();
            for h in hs {
                h.join().unwrap();
            }
            let peak = rss();
            assert!(
                peak > before + (140 << 20),
                "the burst touched {} MiB",
                (peak - before) >> 20
            );
            assert!(coro::stats().pooled_stacks >= 999);
            // A quiet runtime: the pool is trimmed within a few seconds.
            let mut now = peak;
            for _ in 0..200 {
                coro::sleep(Duration::from_millis(100)).unwrap();
                now = rss();
                if now < before + (20 << 20) {
                    break;
                }
            }
            println!("RSS before {before} peak {peak} after {now}");
            assert!(
                now < before + (20 << 20),
                "still {} MiB above the start",
                (now - before) >> 20
            );
            // Trimmed stacks still work.
            let hs: Vec<_> = (0..100).map(|_| coro::spawn(touch_stack)).collect();
            for h in hs {
                h.join().unwrap();
            }
        });
        return;
    }
    let out = child_ok(NAME);
    assert!(out.contains("RSS before"), "{out}");
}

/// A stack goes back to the pool only when its thread has finished: live
/// threads never share one.
#[test]
fn no_stack_is_reused_while_its_thread_lives() {
    coro::run(|| {
        let hs: Vec<_> = (0..200)
            .map(|i| {
                coro::spawn(move || {
                    let here = std::hint::black_box(0u8);
                    let addr = &here as *const u8 as usize;
                    coro::yield_now();
                    (i, addr)
                })
            })
            .collect();
        let mut addrs: Vec<usize> = hs.into_iter().map(|h| h.join().unwrap().1).collect();
        addrs.sort();
        addrs.dedup();
        assert_eq!(addrs.len(), 200);
    });
}
