//! Memory: resident bytes per idle green thread with 10 000 of them sleeping,
//! at the default stack size, beside tokio tasks and may coroutines.
//!
//! Not a criterion bench: it prints one table. Run with
//! `cargo bench -p coro-benches --bench memory`.

use std::time::Duration;

use coro_benches::rss_bytes;

const N: u64 = 10_000;

fn report(name: &str, before: u64, after: u64) {
    let per = (after.saturating_sub(before)) as f64 / N as f64;
    println!(
        "memory::idle_thread_rss/{name:<6} {:>8.0} bytes per idle thread ({N} sleeping, {:.1} MiB in all)",
        per,
        (after - before) as f64 / (1 << 20) as f64
    );
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let mut rt = coro_benches::coro_rt();
    let (b, a) = rt.block_on(|| {
        // Warm the allocator and the thread table first.
        coro::spawn(|| ()).join().unwrap();
        let before = rss_bytes().unwrap();
        let hs: Vec<_> = (0..N)
            .map(|_| coro::spawn(|| coro::sleep(Duration::from_secs(3600))))
            .collect();
        coro::yield_now(); // every thread runs once and goes to sleep
        let after = rss_bytes().unwrap();
        for h in &hs {
            h.thread().interrupt().unwrap();
        }
        for h in hs {
            let _ = h.join();
        }
        (before, after)
    });
    report("coro", b, a);

    let (b, a) = coro_benches::tokio_rt().block_on(async {
        let before = rss_bytes().unwrap();
        let hs: Vec<_> = (0..N)
            .map(|_| tokio::spawn(tokio::time::sleep(Duration::from_secs(3600))))
            .collect();
        tokio::task::yield_now().await;
        let after = rss_bytes().unwrap();
        for h in hs {
            h.abort();
        }
        (before, after)
    });
    report("tokio", b, a);

    coro_benches::may_one_worker();
    let before = rss_bytes().unwrap();
    let hs: Vec<_> = (0..N)
        .map(|_| {
            // SAFETY: the coroutine only sleeps through may's own sleep.
            unsafe { may::coroutine::spawn(|| may::coroutine::sleep(Duration::from_millis(500))) }
        })
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    let after = rss_bytes().unwrap();
    report("may", before, after);
    for h in hs {
        let _ = h.join();
    }
}
