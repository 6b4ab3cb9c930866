//! Wall time ↔ ticks: the tick count at a [`SystemTime`] and back, both
//! through the one wall offset (Shrapnel's `TSC_from_posix_*` and
//! `posix_*_from_TSC`).

use std::time::{SystemTime, UNIX_EPOCH};

use super::{wall_at, wall_offset, Instant};

/// The tick count at wall time `t`: the inverse of [`wall_at`], under the
/// wall offset in force now ([`set_wall_offset`](super::set_wall_offset),
/// [`resync_wall`](super::resync_wall)). Saturates at tick 0 for a time
/// before tick zero and at the far future.
///
/// Use it to wait for a wall-clock moment: `sleep_until(instant_at(t))`.
/// The deadline is fixed in ticks when converted, so a later change of the
/// wall clock (or of the offset) does not move it; convert again after a
/// resync to follow the new wall time.
///
/// # Examples
///
/// ```
/// use std::time::{Duration, SystemTime};
/// use coro::clock;
///
/// let in_a_minute = SystemTime::now() + Duration::from_secs(60);
/// let t = clock::instant_at(in_a_minute);
/// assert!(t > clock::now());
/// // Back to wall time, exact to the tick.
/// let back = clock::wall_at(t);
/// let diff = back.duration_since(in_a_minute).unwrap_or_else(|e| e.duration());
/// assert!(diff < Duration::from_micros(1));
/// ```
pub fn instant_at(t: SystemTime) -> Instant {
    let since_epoch: i128 = match t.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_nanos() as i128,
        Err(e) => -(e.duration().as_nanos() as i128),
    };
    // The offset and the rate as one matching pair (a recalibration on
    // another thread changes both).
    let (mut off, mut to_ns) = super::wall_params();
    if off == i64::MIN {
        wall_offset();
        (off, to_ns) = super::wall_params();
    }
    let since_zero = since_epoch - off as i128;
    if since_zero <= 0 {
        return Instant::from_ticks(0);
    }
    // The exact inverse of `wall_at`'s `ticks * to_ns >> 32` (rounded), not
    // `duration_to_ticks`: its factor is rounded on its own, and the round
    // trip would drift by a part in 10^10 of the time since tick zero.
    let ns = since_zero.min(u64::MAX as i128) as u128;
    let to_ns = u128::from(to_ns.max(1));
    let ticks = ((ns << 32) + to_ns / 2) / to_ns;
    Instant::from_ticks(ticks.min(u128::from(u64::MAX)) as u64)
}

impl Instant {
    /// [`instant_at`]: the instant at wall time `t`.
    pub fn from_wall(t: SystemTime) -> Instant {
        instant_at(t)
    }

    /// [`wall_at`]: the wall time at this instant.
    pub fn to_wall(self) -> SystemTime {
        wall_at(self)
    }
}
