//! The clock's rate refinement (`clock::recalibrate`) seen from another OS
//! thread: wall time never jumps. Alone in its binary:
//! it recalibrates in a loop, which would disturb other tests' conversions.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use coro_runtime::clock;

/// `recalibrate` publishes the new rate and the matching wall offset as one
/// unit (a seqlock), so `wall_now()` on another OS thread (another
/// runtime's loop) never combines the new rate with the old offset; that
/// error would grow with machine uptime (ticks count from boot) and show
/// as wall time going backwards by up to half a millisecond.
#[test]
fn wall_time_stays_continuous_while_another_thread_recalibrates() {
    if clock::source() != clock::Source::Tsc {
        return;
    }
    let _ = clock::wall_now();
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let reader = std::thread::spawn(move || {
        let mut prev = clock::wall_now();
        let mut worst = Duration::ZERO;
        let mut n = 0u64;
        while !s.load(Ordering::Relaxed) {
            let w = clock::wall_now();
            if let Err(e) = w.duration_since(prev) {
                worst = worst.max(e.duration());
            }
            prev = w;
            n += 1;
        }
        (worst, n)
    });
    let t0 = SystemTime::now();
    let mut calls = 0;
    while t0.elapsed().unwrap() < Duration::from_secs(3) {
        clock::recalibrate(Duration::ZERO);
        calls += 1;
    }
    stop.store(true, Ordering::Relaxed);
    let (worst, reads) = reader.join().unwrap();
    println!("{calls} recalibrations, {reads} reads: wall time went back by up to {worst:?}");
    assert!(
        worst < Duration::from_micros(50),
        "wall_now() went backwards by {worst:?}"
    );
}
