//! The TSC clock: the tick count timers run on, and wall time pinned to it.
//!
//! # Design
//!
//! Shrapnel keeps two time scales. *Ticks* never jump: they are the CPU's
//! own counter where it has one the clock can trust (`counter`): on x86-64
//! the time-stamp counter (`rdtsc`) when the CPU reports an invariant TSC,
//! on aarch64 the generic timer's virtual count (`CNTVCT_EL0`) when its
//! stated frequency (`CNTFRQ_EL0`) agrees with the monotonic clock;
//! elsewhere, or with `CORO_CLOCK_MONOTONIC` set, the OS monotonic clock in
//! nanoseconds. Every timer deadline is a tick count. *Wall time* is derived
//! as `offset + ticks / rate`: a change of the system clock (NTP, a user, a
//! test) moves only that offset ([`resync_wall`], [`set_wall_offset`]) and never
//! when a timer fires. [`instant_at`] and [`wall_at`] convert between the
//! two scales through that offset.
//!
//! The tick rate is calibrated the first time the clock is used, against
//! `CLOCK_MONOTONIC` over about 10 ms (the TSC's is measured there; the
//! generic timer's stated one is checked there, to within 1%), and
//! refined by [`recalibrate`] over the whole time since then (runtimes call
//! it from their loop, at most once a minute), so a rate error of a
//! fraction of a ppm does not grow with uptime.
//! Conversions between ticks and [`Duration`] use a 32.32 fixed-point factor
//! (a multiply and a shift, no division on the hot path). Timers are placed
//! on `CLOCK_MONOTONIC` relative to the present (the timerfd is armed for
//! "deadline - now"), so they never depend on how far the calibration
//! anchor lies in the past.
//!
//! # Examples
//!
//! ```
//! use std::time::Duration;
//! use coro::clock;
//!
//! let t0 = clock::now();
//! let later = t0 + Duration::from_millis(5);
//! assert!(later > t0);
//! assert_eq!(later.duration_since(t0).as_millis(), 5);
//! println!("{} ticks per second from {:?}", clock::ticks_per_second(), clock::source());
//! ```

mod counter;
mod wall;

pub use wall::instant_at;

use std::fmt;
use std::ops::{Add, Sub};
use std::sync::atomic::{fence, AtomicI64, AtomicU64, Ordering};
use std::sync::Mutex;
use std::sync::OnceLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Where ticks come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Source {
    /// The CPU's invariant time-stamp counter (x86-64).
    Tsc,
    /// The Arm generic timer's virtual count, `CNTVCT_EL0` (aarch64).
    GenericTimer,
    /// The OS monotonic clock, in nanoseconds.
    Monotonic,
}

/// A point on the tick scale. Like [`std::time::Instant`], only comparable
/// with other values from this clock and this process.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Instant(u64);

struct Calibration {
    source: Source,
    /// Ticks per second (refined by [`recalibrate`]).
    hz: AtomicU64,
    /// `ticks * to_ns >> 32` = nanoseconds (refined by [`recalibrate`]).
    to_ns: AtomicU64,
    /// `ns * to_ticks >> 32` = ticks (refined by [`recalibrate`]).
    to_ticks: AtomicU64,
    /// Tick count and monotonic nanoseconds read together at calibration:
    /// the anchor [`recalibrate`] measures the rate from.
    tick0: u64,
    mono0_ns: u64,
    /// Monotonic nanoseconds of the last recalibration.
    last_ns: AtomicU64,
}

/// Fixed-point factors for a rate of `hz` ticks per second.
fn factors(hz: u64) -> (u64, u64) {
    let hz = hz.max(1) as u128;
    let to_ns = ((1_000_000_000u128 << 32) + hz / 2) / hz;
    let to_ticks = ((hz << 32) + 500_000_000) / 1_000_000_000;
    (
        to_ns.min(u64::MAX as u128) as u64,
        to_ticks.min(u64::MAX as u128) as u64,
    )
}

/// A tick count and the monotonic clock read as close together as this
/// thread can: the tightest of a few tries, so a preempted read does not skew
/// a rate measured from it.
fn read_pair() -> (u64, u64) {
    let mut best = (u64::MAX, 0, 0);
    for _ in 0..5 {
        let a = counter::read();
        let m = monotonic_ns();
        let b = counter::read();
        if b.wrapping_sub(a) < best.0 {
            best = (b.wrapping_sub(a), a + b.wrapping_sub(a) / 2, m);
        }
    }
    (best.1, best.2)
}

static CAL: OnceLock<Calibration> = OnceLock::new();

/// Nanoseconds since the Unix epoch at tick zero; see [`set_wall_offset`].
///
/// # Invariant
/// Written only inside [`publish`], together with the rate when
/// [`recalibrate`] changes it, so a reader that needs both (wall time at a
/// tick count) reads a matching pair through [`wall_params`].
static WALL_OFFSET_NS: AtomicI64 = AtomicI64::new(i64::MIN);

/// Sequence number of the (wall offset, rate) pair: odd while a writer
/// changes it (a seqlock; the values themselves are atomics).
static WALL_SEQ: AtomicU64 = AtomicU64::new(0);

/// Serialises writers of the pair.
static WALL_WRITE: Mutex<()> = Mutex::new(());

/// Changes the wall offset and/or the rate as one unit for readers.
fn publish<R>(f: impl FnOnce() -> R) -> R {
    let _w = WALL_WRITE.lock().unwrap_or_else(|e| e.into_inner());
    let s = WALL_SEQ.load(Ordering::Relaxed);
    WALL_SEQ.store(s.wrapping_add(1), Ordering::Relaxed);
    fence(Ordering::Release);
    let r = f();
    WALL_SEQ.store(s.wrapping_add(2), Ordering::Release);
    r
}

/// The wall offset (`i64::MIN` if unset) and the tick-to-nanosecond factor,
/// read as a matching pair (see [`publish`]).
pub(crate) fn wall_params() -> (i64, u64) {
    loop {
        let s1 = WALL_SEQ.load(Ordering::Acquire);
        if s1 & 1 == 1 {
            std::hint::spin_loop();
            continue;
        }
        let off = WALL_OFFSET_NS.load(Ordering::Relaxed);
        let to_ns = cal().to_ns.load(Ordering::Relaxed);
        fence(Ordering::Acquire);
        if WALL_SEQ.load(Ordering::Relaxed) == s1 {
            return (off, to_ns);
        }
    }
}

/// `ticks * to_ns >> 32`, rounded: nanoseconds in `ticks` at that factor.
fn ticks_ns(ticks: u64, to_ns: u64) -> u128 {
    (ticks as u128 * to_ns as u128 + (1 << 31)) >> 32
}

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// How far a counter's stated frequency may be from the rate measured
/// against the monotonic clock at calibration: a frequency the firmware got
/// wrong is off by far more (a different crystal's), a measurement over
/// 10 ms by far less.
const NOMINAL_TOLERANCE: f64 = 0.01;

/// Whether a counter stated to run at `nominal_hz` did: `ticks` counted
/// over `ns` monotonic nanoseconds, within [`NOMINAL_TOLERANCE`].
fn nominal_rate_holds(nominal_hz: u64, ticks: u64, ns: u64) -> bool {
    if nominal_hz == 0 || ns == 0 {
        return false;
    }
    let measured = ticks as f64 * 1e9 / ns as f64;
    (measured / nominal_hz as f64 - 1.0).abs() <= NOMINAL_TOLERANCE
}

/// The CPU's counter, unless `CORO_CLOCK_MONOTONIC` asks for the
/// monotonic clock.
fn usable_counter() -> Option<counter::Counter> {
    if std::env::var_os("CORO_CLOCK_MONOTONIC").is_some() {
        return None;
    }
    counter::detect()
}

fn calibrate() -> Calibration {
    let measured = usable_counter().and_then(|c| {
        // Pair the counter with the monotonic clock at both ends of a
        // ~10 ms window.
        let (t0, m0) = read_pair();
        std::thread::sleep(Duration::from_millis(10));
        let (t1, m1) = read_pair();
        let (ticks, ns) = (t1.wrapping_sub(t0), m1.saturating_sub(m0));
        let hz = match c.nominal_hz {
            None => (ticks as u128 * 1_000_000_000 / ns.max(1) as u128) as u64,
            Some(hz) if nominal_rate_holds(hz, ticks, ns) => hz,
            Some(_) => return None,
        };
        Some((c.source, hz.max(1), t1, m1))
    });
    let (source, hz, tick0, mono0_ns) = measured.unwrap_or_else(|| {
        let m = monotonic_ns();
        (Source::Monotonic, 1_000_000_000, m, m)
    });
    let (to_ns, to_ticks) = factors(hz);
    Calibration {
        source,
        hz: AtomicU64::new(hz),
        to_ns: AtomicU64::new(to_ns),
        to_ticks: AtomicU64::new(to_ticks),
        tick0,
        mono0_ns,
        last_ns: AtomicU64::new(mono0_ns),
    }
}

/// Refines the tick rate from the whole time since the clock was first
/// calibrated, if at least `min_interval` passed since the last refinement;
/// returns whether it did. Wall time stays continuous across the change (the
/// wall offset is adjusted), and timers are unaffected (they run on ticks).
///
/// Runtimes call this from their loop (at most once a minute); there is no
/// need to call it yourself. Does nothing when ticks are the monotonic clock itself.
pub fn recalibrate(min_interval: Duration) -> bool {
    let c = cal();
    if c.source == Source::Monotonic {
        return false;
    }
    let last = c.last_ns.load(Ordering::Relaxed);
    if monotonic_ns().saturating_sub(last) < min_interval.as_nanos() as u64 {
        return false;
    }
    let (t, m) = read_pair();
    if m <= c.mono0_ns {
        return false;
    }
    c.last_ns.store(m, Ordering::Relaxed);
    let hz = (t.wrapping_sub(c.tick0) as u128 * 1_000_000_000 / (m - c.mono0_ns) as u128) as u64;
    if hz == 0 {
        return false;
    }
    let (to_ns, to_ticks) = factors(hz);
    publish(|| {
        // Wall time stays where it was at `t`: the offset moves with the rate.
        let (off, old_to_ns) = (
            WALL_OFFSET_NS.load(Ordering::Relaxed),
            c.to_ns.load(Ordering::Relaxed),
        );
        c.hz.store(hz, Ordering::Relaxed);
        c.to_ns.store(to_ns, Ordering::Relaxed);
        c.to_ticks.store(to_ticks, Ordering::Relaxed);
        if off != i64::MIN {
            let wall = off as i128 + ticks_ns(t, old_to_ns) as i128;
            let off =
                (wall - ticks_ns(t, to_ns) as i128).clamp(i64::MIN as i128 + 1, i64::MAX as i128);
            WALL_OFFSET_NS.store(off as i64, Ordering::Relaxed);
        }
    });
    true
}

#[inline]
fn cal() -> &'static Calibration {
    CAL.get_or_init(calibrate)
}

/// Calibrates the clock now (otherwise it happens on first use, costing about
/// 10 ms there). Runtimes call this when they are built.
pub fn init() {
    cal();
}

/// The current tick count.
#[inline]
pub fn now() -> Instant {
    let c = cal();
    Instant(match c.source {
        Source::Monotonic => monotonic_ns(),
        _ => counter::read(),
    })
}

/// Where ticks come from on this machine.
pub fn source() -> Source {
    cal().source
}

/// Ticks per second, as calibrated (and refined since: see [`recalibrate`]).
pub fn ticks_per_second() -> u64 {
    cal().hz.load(Ordering::Relaxed)
}

/// Converts a tick count to a [`Duration`].
#[inline]
pub fn ticks_to_duration(ticks: u64) -> Duration {
    let ns = ticks_ns(ticks, cal().to_ns.load(Ordering::Relaxed));
    Duration::from_nanos(ns.min(u64::MAX as u128) as u64)
}

/// Converts a [`Duration`] to ticks, saturating at `u64::MAX`.
#[inline]
pub fn duration_to_ticks(d: Duration) -> u64 {
    let ns = d.as_nanos();
    if ns > u64::MAX as u128 {
        return u64::MAX;
    }
    let to_ticks = cal().to_ticks.load(Ordering::Relaxed) as u128;
    ((ns * to_ticks + (1 << 31)) >> 32).min(u64::MAX as u128) as u64
}

impl Instant {
    /// The current time, as [`now`] (the name std's and tokio's `Instant`
    /// use).
    pub fn now() -> Instant {
        now()
    }

    /// The raw tick count.
    pub fn ticks(self) -> u64 {
        self.0
    }

    /// Builds an instant from a raw tick count (as returned by [`Instant::ticks`]).
    pub fn from_ticks(ticks: u64) -> Instant {
        Instant(ticks)
    }

    /// Time from `earlier` to `self`, zero if `earlier` is later.
    pub fn duration_since(self, earlier: Instant) -> Duration {
        ticks_to_duration(self.0.saturating_sub(earlier.0))
    }

    /// Time since `self`.
    pub fn elapsed(self) -> Duration {
        now().duration_since(self)
    }

    /// `self + d`, or `None` on overflow of the tick count.
    pub fn checked_add(self, d: Duration) -> Option<Instant> {
        self.0.checked_add(duration_to_ticks(d)).map(Instant)
    }

    /// `self + d`, saturating at the far future.
    pub fn saturating_add(self, d: Duration) -> Instant {
        Instant(self.0.saturating_add(duration_to_ticks(d)))
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;
    /// Saturates at the far future instead of overflowing.
    fn add(self, d: Duration) -> Instant {
        self.saturating_add(d)
    }
}

impl Sub<Instant> for Instant {
    type Output = Duration;
    fn sub(self, earlier: Instant) -> Duration {
        self.duration_since(earlier)
    }
}

impl fmt::Debug for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Instant({} ticks)", self.0)
    }
}

fn system_now_ns() -> i64 {
    match SystemTime::now().duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_nanos() as i64,
        Err(e) => -(e.duration().as_nanos() as i64),
    }
}

/// Nanoseconds since the Unix epoch at tick zero: the single value that pins
/// wall time to the tick scale.
pub fn wall_offset() -> i64 {
    let cur = WALL_OFFSET_NS.load(Ordering::Relaxed);
    if cur != i64::MIN {
        return cur;
    }
    resync_wall()
}

/// Sets the wall-time offset (nanoseconds since the Unix epoch at tick zero).
/// Timers are not affected: they run on ticks.
pub fn set_wall_offset(ns_at_tick_zero: i64) {
    publish(|| WALL_OFFSET_NS.store(ns_at_tick_zero, Ordering::Relaxed));
}

/// Re-pins wall time to the system clock (after NTP or a user moved it) and
/// returns the new offset. Timers are not affected.
pub fn resync_wall() -> i64 {
    publish(|| {
        let ticks = now();
        let sys = system_now_ns();
        let since_zero = ticks_to_duration(ticks.0).as_nanos() as i64;
        let off = sys - since_zero;
        WALL_OFFSET_NS.store(off, Ordering::Relaxed);
        off
    })
}

/// Wall time now, derived from the tick count and the wall offset.
pub fn wall_now() -> SystemTime {
    wall_at(now())
}

/// Nanoseconds since the Unix epoch at tick count `t`.
fn wall_ns_at(t: u64) -> i128 {
    let (mut off, mut to_ns) = wall_params();
    if off == i64::MIN {
        resync_wall();
        (off, to_ns) = wall_params();
    }
    off as i128 + ticks_ns(t, to_ns) as i128
}

/// Wall time at tick count `t`.
pub fn wall_at(t: Instant) -> SystemTime {
    let ns = wall_ns_at(t.0);
    if ns >= 0 {
        UNIX_EPOCH + Duration::from_nanos(ns.min(u64::MAX as i128) as u64)
    } else {
        UNIX_EPOCH - Duration::from_nanos((-ns).min(u64::MAX as i128) as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions_round_trip() {
        for ms in [0u64, 1, 7, 1000, 86_400_000] {
            let d = Duration::from_millis(ms);
            let back = ticks_to_duration(duration_to_ticks(d));
            let err = back.as_nanos().abs_diff(d.as_nanos());
            assert!(err <= 2 + d.as_nanos() / 1_000_000, "{ms} ms -> {back:?}");
        }
    }

    /// A tick count and the monotonic clock read together: the tightest of
    /// a few brackets, so a preemption between the two reads (a loaded
    /// machine, an emulator) does not count as a rate error.
    fn now_and_monotonic() -> (Instant, u64) {
        (0..5)
            .map(|_| {
                let (a, m, b) = (now(), monotonic_ns(), now());
                (b.duration_since(a), a, m)
            })
            .min_by_key(|&(width, _, _)| width)
            .map(|(_, a, m)| (a, m))
            .unwrap()
    }

    #[test]
    fn rate_matches_monotonic_clock() {
        let (t0, m0) = now_and_monotonic();
        std::thread::sleep(Duration::from_millis(50));
        let (t1, m1) = now_and_monotonic();
        let dt = t1.duration_since(t0).as_nanos() as f64;
        let dm = (m1 - m0) as f64;
        assert!((dt / dm - 1.0).abs() < 0.01, "tick rate off: {dt} vs {dm}");
    }

    #[test]
    fn recalibration_keeps_wall_time_continuous() {
        // Wall time moves on by about the time that passed, however long
        // the OS keeps this thread off the CPU in between.
        let t = std::time::Instant::now();
        let before = wall_now();
        let changed = recalibrate(Duration::ZERO);
        let after = wall_now();
        let passed = t.elapsed();
        let slack = Duration::from_millis(50);
        match after.duration_since(before) {
            Ok(d) => assert!(
                d < passed + slack,
                "wall time jumped by {d:?} in {passed:?}"
            ),
            Err(e) => assert!(
                e.duration() < slack,
                "wall time went back by {:?}",
                e.duration()
            ),
        }
        if source() != Source::Monotonic {
            assert!(changed);
            assert!(!recalibrate(Duration::from_secs(3600)));
        }
    }

    /// A counter's stated frequency is used only when the monotonic clock
    /// saw it counted at that rate: a measurement's error passes, a wrong
    /// crystal's frequency (or none) does not.
    #[test]
    fn a_stated_frequency_is_trusted_only_when_the_monotonic_clock_agrees() {
        let ms10 = 10_000_000;
        assert!(nominal_rate_holds(62_500_000, 625_000, ms10));
        assert!(nominal_rate_holds(62_500_000, 625_000 + 6_000, ms10));
        assert!(nominal_rate_holds(62_500_000, 625_000 - 6_000, ms10));
        assert!(!nominal_rate_holds(62_500_000, 625_000 + 7_000, ms10));
        assert!(
            !nominal_rate_holds(19_200_000, 240_000, ms10),
            "a 24 MHz counter"
        );
        assert!(!nominal_rate_holds(0, 240_000, ms10));
        assert!(!nominal_rate_holds(24_000_000, 240_000, 0));
    }

    /// On aarch64 ticks are the generic timer's count, at the frequency it
    /// states (qemu-user's counter too: 62.5 MHz, from the host's clock).
    #[cfg(target_arch = "aarch64")]
    #[test]
    fn ticks_are_the_generic_timer_at_its_stated_frequency() {
        if std::env::var_os("CORO_CLOCK_MONOTONIC").is_some() {
            use std::io::Write as _;
            let _ = writeln!(
                std::io::stderr(),
                "SKIPPED ticks_are_the_generic_timer_at_its_stated_frequency: \
                 CORO_CLOCK_MONOTONIC is set"
            );
            return;
        }
        assert_eq!(source(), Source::GenericTimer);
        let stated = counter::detect().and_then(|c| c.nominal_hz).unwrap();
        // Recalibration (other tests run it) refines the rate, by far less
        // than the tolerance.
        assert!(
            nominal_rate_holds(stated, ticks_per_second(), 1_000_000_000),
            "{} ticks per second, {stated} stated",
            ticks_per_second()
        );
        let (a, b) = (now(), now());
        assert!(b >= a);
    }

    #[test]
    fn wall_offset_moves_wall_time_only() {
        let off = wall_offset();
        let before = wall_now();
        set_wall_offset(off + 3_600_000_000_000);
        let after = wall_now();
        assert!(after.duration_since(before).unwrap() >= Duration::from_secs(3599));
        resync_wall();
        let sys = SystemTime::now();
        let w = wall_now();
        let diff = match w.duration_since(sys) {
            Ok(d) => d,
            Err(e) => e.duration(),
        };
        assert!(diff < Duration::from_secs(1));
    }
}
