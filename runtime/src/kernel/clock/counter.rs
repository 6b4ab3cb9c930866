//! The CPU's tick counter, where it has one the clock can use (x86-64,
//! aarch64); the monotonic clock elsewhere.
//!
//! Each architecture gives the same two items: [`detect`], which says
//! whether this machine's counter can serve as the tick source, under
//! which [`Source`] and at which nominal rate if the hardware states one,
//! and [`read`], the counter's value.
//!
//! * x86-64: the time-stamp counter (`rdtsc`), when CPUID reports it
//!   invariant (leaf `0x8000_0007`, EDX bit 8). Its rate is not stated: the
//!   clock measures it.
//! * aarch64: the generic timer's virtual count (`CNTVCT_EL0`), which every
//!   aarch64 OS lets user code read (Linux emulates the read where an
//!   erratum makes it unreliable), at the frequency `CNTFRQ_EL0` holds. The
//!   firmware writes that register, and some firmware gets it wrong: the
//!   clock checks it against the monotonic clock before trusting it.
//! * elsewhere: no counter; the monotonic clock.

use super::Source;

/// A counter this machine has.
pub(super) struct Counter {
    /// What it is.
    pub(super) source: Source,
    /// Its rate in ticks per second as the hardware states it, to be
    /// checked; `None` when the rate must be measured.
    pub(super) nominal_hz: Option<u64>,
}

/// The CPU's invariant TSC, if it has one.
#[cfg(target_arch = "x86_64")]
pub(super) fn detect() -> Option<Counter> {
    use std::arch::x86_64::__cpuid;
    // Leaf 0x8000_0000 reports the highest extended leaf.
    let max_ext = __cpuid(0x8000_0000).eax;
    let invariant = max_ext >= 0x8000_0007 && __cpuid(0x8000_0007).edx & (1 << 8) != 0;
    invariant.then_some(Counter {
        source: Source::Tsc,
        nominal_hz: None,
    })
}

/// The time-stamp counter.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(super) fn read() -> u64 {
    // SAFETY: RDTSC is available on every x86-64 CPU and has no side effects.
    unsafe { std::arch::x86_64::_rdtsc() }
}

/// The generic timer's virtual count, with the frequency `CNTFRQ_EL0`
/// states (none if it states 0).
#[cfg(target_arch = "aarch64")]
pub(super) fn detect() -> Option<Counter> {
    let hz: u64;
    // SAFETY: reads a system register that is readable at EL0 wherever the
    // virtual count is (Linux, macOS and FreeBSD enable both); touches no
    // memory.
    unsafe {
        std::arch::asm!("mrs {}, cntfrq_el0", out(reg) hz, options(nomem, nostack, preserves_flags))
    };
    // The register is 32 bits wide; the upper half reads as zero.
    let hz = hz & 0xffff_ffff;
    (hz != 0).then_some(Counter {
        source: Source::GenericTimer,
        nominal_hz: Some(hz),
    })
}

/// The generic timer's virtual count.
///
/// The `isb` before the read keeps it in program order: without it the CPU
/// may read the counter before earlier instructions complete, and a tick
/// count taken after seeing another thread's (through an atomic) could be
/// the smaller one. Linux's own clock reads do the same.
#[cfg(target_arch = "aarch64")]
#[inline(always)]
pub(super) fn read() -> u64 {
    let t: u64;
    // SAFETY: `isb` only synchronises the instruction stream; the counter is
    // readable at EL0 (see `detect`). Neither touches memory.
    unsafe {
        std::arch::asm!("isb", "mrs {}, cntvct_el0", out(reg) t, options(nomem, nostack, preserves_flags))
    };
    t
}

/// No counter here.
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
pub(super) fn detect() -> Option<Counter> {
    None
}

/// Never the tick source here ([`detect`] finds none); the monotonic
/// clock, so that calibration code reads something sensible.
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
#[inline(always)]
pub(super) fn read() -> u64 {
    super::monotonic_ns()
}
