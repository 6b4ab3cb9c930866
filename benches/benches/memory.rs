//! Memory at scale, beside tokio tasks and may coroutines:
//!
//! * `memory::idle_thread_rss`: resident bytes per idle thread with 10 000
//!   of them sleeping, at the default stack size: just parked, and after
//!   they stayed parked past `idle_stack_release` (2 s by default): with
//!   the default (the pages below each stack pointer given back) and with
//!   the `unsafe` opt-in `idle_stack_copy_out` (whole stacks copied out).
//!   Page-table bytes per thread (`VmPTE`) beside them: stacks sit 1 MiB
//!   apart (the guard gap), which takes more page tables than RSS shows.
//! * `memory::live_100k`: 100 000 parked green threads with the default
//!   256 KiB stack (past the ~32 700 that two kernel mappings per stack
//!   allowed under the default `vm.max_map_count`): the time to spawn them,
//!   the kernel mappings the process has, resident bytes per thread.
//! * `memory::sleeping_1m`: 1 000 000 sleeping green threads with 16 KiB
//!   stacks (beside 1 000 000 tokio tasks); then, in the same process, one
//!   more thread overflows its stack and the guard page catches it (checked
//!   in a child process, whose output is shown).
//!
//! Not a criterion bench: it prints one table. Run with
//! `cargo bench -p coro-benches --bench memory` (about a minute; the 1M
//! part peaks near 2 GiB resident).

use std::io::Write;
use std::process::Command;
use std::time::{Duration, Instant};

use coro_benches::rss_bytes;

const N: u64 = 10_000;
const LIVE: u64 = 100_000;
const MILLION: u64 = 1_000_000;
const CHILD_ENV: &str = "CORO_MEMORY_BENCH_CHILD";

fn per(before: u64, after: u64, n: u64) -> f64 {
    after.saturating_sub(before) as f64 / n as f64
}

fn report(name: &str, what: &str, before: u64, after: u64, n: u64) {
    println!(
        "{name:<34} {:>8.0} bytes per thread ({n} {what}, {:.1} MiB in all)",
        per(before, after, n),
        after.saturating_sub(before) as f64 / (1 << 20) as f64
    );
}

/// Kernel memory mappings of this process.
fn mappings() -> usize {
    std::fs::read_to_string("/proc/self/maps")
        .map(|m| m.lines().count())
        .unwrap_or(0)
}

/// Page-table bytes of this process (`VmPTE`).
fn page_tables() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmPTE:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .unwrap_or(0)
        * 1024
}

/// Sleeps (on a green thread) until `n` stacks are copied out (or, without
/// the opt-in, trimmed), at most `max`.
fn wait_copied_out(n: usize, max: Duration) -> Duration {
    let t = Instant::now();
    while coro::stats().idle_stacks < n
        && (coro::stats().idle_stack_trims as usize) < n
        && t.elapsed() < max
    {
        coro::sleep(Duration::from_millis(50)).unwrap();
    }
    t.elapsed()
}

fn idle_coro(copy_out: bool) {
    let builder = coro::Runtime::builder().latency_warning(None);
    // SAFETY: the bench's threads only sleep; nothing outside the runtime
    // borrows their stacks.
    let builder = unsafe { builder.idle_stack_copy_out(copy_out) };
    let mut rt = builder.build().expect("coro runtime");
    let (b, parked, out, waited, pte) = rt.block_on(|| {
        // Warm the allocator and the thread table first.
        coro::spawn(|| ()).join().unwrap();
        let before = rss_bytes().unwrap();
        let pte0 = page_tables();
        let hs: Vec<_> = (0..N)
            .map(|_| coro::spawn(|| coro::sleep(Duration::from_secs(3600))))
            .collect();
        coro::yield_now(); // every thread runs once and goes to sleep
        let parked = rss_bytes().unwrap();
        let waited = wait_copied_out(N as usize, Duration::from_secs(20));
        let out = rss_bytes().unwrap();
        let pte = page_tables().saturating_sub(pte0);
        for h in &hs {
            h.thread().interrupt().unwrap();
        }
        for h in hs {
            let _ = h.join();
        }
        (before, parked, out, waited, pte)
    });
    let name = if copy_out {
        "memory::idle_thread_rss/coro-copy"
    } else {
        "memory::idle_thread_rss/coro"
    };
    report(name, "sleeping, just parked", b, parked, N);
    let how = if copy_out {
        "copied out (unsafe opt-in)"
    } else {
        "trimmed below sp (default)"
    };
    report(
        name,
        &format!("sleeping, {:.1} s idle: {how}", waited.as_secs_f64()),
        b,
        out,
        N,
    );
    println!(
        "{name:<34} {:>8.0} bytes of page tables per thread (VmPTE)",
        pte as f64 / N as f64
    );
}

fn idle_tokio() {
    let (b, a) = coro_benches::tokio_rt().block_on(async {
        tokio::spawn(async {}).await.unwrap();
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
    report("memory::idle_thread_rss/tokio", "sleeping", b, a, N);
}

fn idle_may() {
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
    report("memory::idle_thread_rss/may", "sleeping", before, after, N);
    for h in hs {
        let _ = h.join();
    }
}

fn live_100k() {
    let mut rt = coro_benches::coro_rt();
    rt.block_on(|| {
        let (maps0, rss0, pte0) = (mappings(), rss_bytes().unwrap(), page_tables());
        let t = Instant::now();
        let hs: Vec<_> = (0..LIVE)
            .map(|_| {
                coro::Builder::new()
                    .spawn(|| coro::park_as("bench"))
                    .unwrap_or_else(|e| panic!("spawn failed: {e}"))
            })
            .collect();
        coro::yield_now(); // all run and park
        let took = t.elapsed();
        let (maps, rss) = (mappings(), rss_bytes().unwrap());
        assert_eq!(coro::stats().live, LIVE as usize + 1);
        println!(
            "memory::live_100k/coro              {LIVE} parked threads, 256 KiB stacks: spawned and parked in {:.0} ms ({:.0} ns each), \
             {} kernel mappings (was {maps0}; vm.max_map_count {}), {:.0} bytes resident and {:.0} of page tables per thread",
            took.as_secs_f64() * 1e3,
            took.as_nanos() as f64 / LIVE as f64,
            maps,
            std::fs::read_to_string("/proc/sys/vm/max_map_count")
                .unwrap_or_default()
                .trim(),
            per(rss0, rss, LIVE),
            per(pte0, page_tables(), LIVE),
        );
        for h in &hs {
            h.thread().unpark().unwrap();
        }
        for h in hs {
            h.join().unwrap().unwrap();
        }
    });
}

/// 1M sleepers with 16 KiB stacks, copied out as they go; then one more
/// thread overflows its stack (the process aborts).
fn sleeping_1m_child() {
    let builder = coro::Runtime::builder()
        .latency_warning(None)
        .stack_size(16 * 1024)
        .idle_stack_release(Some(Duration::from_millis(500)));
    // SAFETY: the bench's threads only sleep; nothing outside the runtime
    // borrows their stacks.
    let mut rt = unsafe { builder.idle_stack_copy_out(true) }
        .build()
        .unwrap();
    rt.block_on(|| {
        let before = rss_bytes().unwrap();
        let t = Instant::now();
        let mut hs = Vec::with_capacity(MILLION as usize);
        let mut peak = before;
        for batch in 0..10 {
            for _ in 0..MILLION / 10 {
                hs.push(coro::spawn(|| coro::sleep(Duration::from_secs(3600))));
            }
            coro::yield_now();
            peak = peak.max(rss_bytes().unwrap());
            if batch < 9 {
                // Let the batches before this one be copied out meanwhile.
                coro::sleep(Duration::from_millis(300)).unwrap();
            }
        }
        let spawned = t.elapsed();
        let waited = wait_copied_out(MILLION as usize, Duration::from_secs(60));
        let after = rss_bytes().unwrap();
        println!(
            "memory::sleeping_1m/coro            {MILLION} sleeping threads, 16 KiB stacks: {:.0} bytes per thread \
             after {:.1} s idle (copied out, unsafe opt-in; peak {:.0} MiB while spawning in 10 batches, {:.1} s), {} mappings, {:.0} bytes of page tables per thread",
            per(before, after, MILLION),
            waited.as_secs_f64(),
            (peak - before) as f64 / (1 << 20) as f64,
            spawned.as_secs_f64(),
            mappings(),
            page_tables() as f64 / MILLION as f64,
        );
        std::io::stdout().flush().unwrap();
        coro::Builder::new()
            .name("overflows-among-a-million".into())
            .spawn(|| {
                #[inline(never)]
                fn recurse(n: u64) -> u64 {
                    let buf = std::hint::black_box([n as u8; 512]);
                    if n == u64::MAX {
                        return 0;
                    }
                    recurse(n + 1) + buf[7] as u64
                }
                recurse(0)
            })
            .unwrap()
            .join()
            .unwrap();
        drop(hs);
    });
}

fn sleeping_1m_tokio() {
    let (b, a) = coro_benches::tokio_rt().block_on(async {
        tokio::spawn(async {}).await.unwrap();
        let before = rss_bytes().unwrap();
        let hs: Vec<_> = (0..MILLION)
            .map(|_| tokio::spawn(tokio::time::sleep(Duration::from_secs(3600))))
            .collect();
        tokio::task::yield_now().await;
        let after = rss_bytes().unwrap();
        for h in hs {
            h.abort();
        }
        (before, after)
    });
    report("memory::sleeping_1m/tokio", "sleeping tasks", b, a, MILLION);
}

/// Each measurement runs alone in a child process of this bench, so that
/// one runtime's freed memory does not hide another's.
fn main() {
    if let Ok(which) = std::env::var(CHILD_ENV) {
        match which.as_str() {
            "idle/coro" => idle_coro(false),
            "idle/coro-copy" => idle_coro(true),
            "idle/tokio" => idle_tokio(),
            "idle/may" => idle_may(),
            "live_100k" => live_100k(),
            "1m/coro" => sleeping_1m_child(),
            "1m/tokio" => sleeping_1m_tokio(),
            other => panic!("unknown child {other}"),
        }
        return;
    }
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    for which in [
        "idle/coro",
        "idle/coro-copy",
        "idle/tokio",
        "idle/may",
        "live_100k",
        "1m/coro",
        "1m/tokio",
    ] {
        let out = Command::new(std::env::current_exe().unwrap())
            .env(CHILD_ENV, which)
            .output()
            .expect("child bench");
        print!("{}", String::from_utf8_lossy(&out.stdout));
        if which == "1m/coro" {
            // The child ends with a thread overflowing its stack.
            let stderr = String::from_utf8_lossy(&out.stderr);
            let overflow = stderr
                .lines()
                .find(|l| l.contains("overflowed its stack"))
                .unwrap_or("(no overflow message: the guard page did not work)");
            println!(
                "memory::sleeping_1m/guard           then: {}",
                overflow.trim()
            );
        } else if !out.status.success() {
            println!("{which}: failed: {}", String::from_utf8_lossy(&out.stderr));
        }
    }
}
