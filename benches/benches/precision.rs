//! Timer precision: overshoot of `sleep(1 ms)` (p50 and p99 over 500 sleeps)
//! for coro, tokio's current-thread runtime and may with one worker.
//!
//! Not a criterion bench: it prints one table. Run with
//! `cargo bench -p coro-benches --bench precision`.

use std::time::{Duration, Instant};

use coro_benches::percentile;

const SLEEPS: usize = 500;
const D: Duration = Duration::from_millis(1);

fn report(name: &str, mut v: Vec<Duration>) {
    v.sort();
    println!(
        "timer::sleep_1ms_overshoot/{name:<6} p50 {:>8.1} us   p99 {:>8.1} us   max {:>8.1} us",
        percentile(&v, 50.0).as_secs_f64() * 1e6,
        percentile(&v, 99.0).as_secs_f64() * 1e6,
        v.last().unwrap().as_secs_f64() * 1e6,
    );
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let mut rt = coro_benches::coro_rt();
    let coro = rt.block_on(|| {
        (0..SLEEPS)
            .map(|_| {
                let t = Instant::now();
                coro::sleep(D).unwrap();
                t.elapsed() - D
            })
            .collect()
    });
    let tokio = coro_benches::tokio_rt().block_on(async {
        let mut v = Vec::new();
        for _ in 0..SLEEPS {
            let t = Instant::now();
            tokio::time::sleep(D).await;
            v.push(t.elapsed() - D);
        }
        v
    });
    coro_benches::may_one_worker();
    // SAFETY: the coroutine only sleeps through may's own sleep.
    let may = unsafe {
        may::coroutine::spawn(|| {
            (0..SLEEPS)
                .map(|_| {
                    let t = Instant::now();
                    may::coroutine::sleep(D);
                    t.elapsed() - D
                })
                .collect::<Vec<_>>()
        })
    }
    .join()
    .unwrap();
    report("coro", coro);
    report("tokio", tokio);
    report("may", may);
}
