//! Helpers shared by the bench files: peer runtimes built the same way in
//! every bench, and resident-memory readings.

use std::time::Duration;

/// tokio's current-thread runtime, with timers enabled.
pub fn tokio_rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// Configures `may` to run one worker thread (call once, before using may).
pub fn may_one_worker() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        may::config().set_workers(1);
    });
}

/// A coro runtime without latency warnings (benches measure the bare loop).
pub fn coro_rt() -> coro::Runtime {
    coro::Runtime::builder()
        .latency_warning(None)
        .build()
        .expect("coro runtime")
}

/// Resident set size of this process in bytes (Linux `/proc/self/statm`).
pub fn rss_bytes() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = s.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as u64;
    Some(pages * page)
}

/// CPU time the calling OS thread has used (`CLOCK_THREAD_CPUTIME_ID`):
/// the cost of a runtime's work without the time it waited for timers or
/// lost to other processes on this shared machine.
pub fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a live, writable timespec; the clock always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// The clock of the coro loops' `iter_custom` closures: wall time, or,
/// when `CORO_BENCH_CPU` is set, the CPU time of the calling OS thread
/// ([`thread_cpu`]), which runs the whole loop. On a shared machine the
/// time lost to other processes is then not counted, so two builds run in
/// alternation differ by their own work.
#[derive(Debug)]
pub struct Stopwatch {
    wall: std::time::Instant,
    cpu: Option<Duration>,
}

impl Stopwatch {
    /// Starts timing.
    pub fn start() -> Stopwatch {
        static CPU: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        let cpu = *CPU.get_or_init(|| std::env::var_os("CORO_BENCH_CPU").is_some());
        Stopwatch {
            wall: std::time::Instant::now(),
            cpu: cpu.then(thread_cpu),
        }
    }

    /// The time since [`start`](Self::start), on its clock.
    pub fn elapsed(&self) -> Duration {
        match self.cpu {
            Some(start) => thread_cpu().saturating_sub(start),
            None => self.wall.elapsed(),
        }
    }
}

/// Percentile `p` (0..=100) of sorted durations.
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() - 1) as f64 * p / 100.0).round() as usize;
    sorted[i]
}
