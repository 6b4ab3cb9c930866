//! The runtime at work: green threads, sleeps, a timeout, an interrupt, a
//! scope whose threads borrow a local buffer, a failure cancelling its
//! siblings, a latency warning and the stats.
//!
//! Run with `cargo run --example demo`.

use std::time::{Duration, Instant};

fn main() {
    // Prints log records: the runtime reports latency warnings through `log`.
    coro_examples::log_to_stderr();
    let start = Instant::now();
    let ms = move || start.elapsed().as_millis();

    let mut rt = coro::Runtime::builder()
        .latency_warning(Some(Duration::from_millis(100)))
        .build()
        .expect("runtime");
    rt.block_on(move || {
        // Three workers sleeping different amounts: they wake in deadline order.
        let workers: Vec<_> = [30u64, 10, 20]
            .into_iter()
            .map(|d| {
                coro::Builder::new()
                    .name(format!("sleeper-{d}ms"))
                    .spawn(move || {
                        coro::sleep(Duration::from_millis(d)).unwrap();
                        println!("{:>4} ms  {} woke up", ms(), coro::current().name().unwrap());
                        d
                    })
                    .unwrap()
            })
            .collect();

        // A slow operation under a timeout.
        let slow = coro::with_timeout(Duration::from_millis(15), || {
            coro::sleep(Duration::from_secs(10))
        });
        println!("{:>4} ms  with_timeout(15 ms, sleep 10 s) -> {slow:?}", ms());

        // A thread parked forever, interrupted from outside.
        let parked = coro::spawn(coro::park);
        coro::yield_now();
        parked.thread().interrupt().unwrap();
        println!("{:>4} ms  interrupted parked thread -> {:?}", ms(), parked.join().unwrap());

        let total: u64 = workers.into_iter().map(|h| h.join().unwrap()).sum();
        println!("{:>4} ms  workers slept {total} ms in all, concurrently", ms());

        // A scope: its threads borrow a local buffer (no Rc, no 'static)
        // and have all ended when it returns.
        let mut lens = [0usize; 3];
        let words = ["green", "threads", "scoped"];
        coro::scope(|s| {
            for (len, word) in lens.iter_mut().zip(&words) {
                s.spawn(move || {
                    coro::sleep(Duration::from_millis(word.len() as u64)).unwrap();
                    *len = word.len();
                });
            }
        })
        .unwrap();
        println!("{:>4} ms  scope: threads filled a borrowed buffer {lens:?}", ms());

        // A failing thread cancels its siblings; the scope reports it once.
        let failed = coro::scope(|s| {
            s.try_spawn(|| coro::sleep(Duration::from_secs(10))); // cancelled
            s.try_spawn(|| -> Result<(), std::io::Error> { Err(std::io::Error::other("no route")) });
        });
        println!("{:>4} ms  scope with a failing thread -> {}", ms(), failed.unwrap_err());

        // A hog: the watchdog names it while it still runs.
        coro::Builder::new()
            .name("hog".into())
            .spawn(|| {
                let t = Instant::now();
                while t.elapsed() < Duration::from_millis(150) {
                    std::hint::spin_loop();
                }
            })
            .unwrap()
            .join()
            .unwrap();

        // Offload a blocking call; other green threads keep running meanwhile.
        let n = coro::blocking(|| std::fs::read_dir(".").map(|d| d.count()).unwrap_or(0)).unwrap();
        println!("{:>4} ms  blocking(read_dir) -> {n} entries", ms());

        let s = coro::stats();
        println!(
            "{:>4} ms  stats: live {} spawned {} switches {} polls {} timers fired {} pending {} latency warnings {}",
            ms(),
            s.live,
            s.spawned,
            s.switches,
            s.polls,
            s.timers_fired,
            s.pending_timers,
            s.latency_warnings
        );
    });
}
