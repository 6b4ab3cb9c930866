//! Wall time ↔ ticks: `clock::instant_at` is the
//! inverse of `clock::wall_at`, both follow the wall offset and its
//! re-synchronisation, and a sleep until a converted wall time lasts as
//! long as the wall clock says. One test: the wall offset is process-wide.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use coro_runtime::{self as coro, clock};

#[track_caller]
fn close(a: SystemTime, b: SystemTime, within: Duration) {
    let d = a.duration_since(b).unwrap_or_else(|e| e.duration());
    assert!(d <= within, "{a:?} vs {b:?}: {d:?} apart");
}

/// Re-synchronises the wall offset; returns how long that took, which
/// bounds the offset's error: it pairs a tick count with a wall-clock read,
/// and the OS can preempt the thread between the two.
fn resync() -> Duration {
    let t = std::time::Instant::now();
    clock::resync_wall();
    t.elapsed()
}

#[test]
fn wall_time_converts_to_ticks_and_back() {
    let synced = resync();
    // Round trips, now and far from now: exact to a tick or so.
    for offset in [0, 1, 3600, 86_400 * 365] {
        let t = SystemTime::now() + Duration::from_secs(offset);
        let within = Duration::from_micros(1);
        close(clock::wall_at(clock::instant_at(t)), t, within);
        let i = clock::Instant::from_wall(t);
        assert_eq!(i, clock::instant_at(t));
        close(i.to_wall(), t, within);
    }
    // Now is now, on both scales: a tick count read between two wall-clock
    // reads converts to a moment between them, however far apart the
    // reads are (give or take the offset's error).
    let wall_before = SystemTime::now();
    let ticks_now = clock::now();
    let wall_after = SystemTime::now();
    let slack = Duration::from_millis(50) + synced;
    let (early, late) = (
        clock::instant_at(wall_before),
        clock::instant_at(wall_after),
    );
    assert!(
        early.duration_since(ticks_now) <= slack,
        "{early:?} > {ticks_now:?}"
    );
    assert!(
        ticks_now.duration_since(late) <= slack,
        "{ticks_now:?} > {late:?}"
    );

    // Moving the wall offset moves the conversion, not the ticks.
    let t = SystemTime::now() + Duration::from_secs(10);
    let before = clock::instant_at(t);
    let off = clock::wall_offset();
    // Wall time one hour behind: the same wall time comes an hour of ticks
    // later. (Ahead would do too, but tick zero may be less than an hour
    // ago: the TSC starts at boot.)
    clock::set_wall_offset(off - 3_600_000_000_000);
    let after = clock::instant_at(t);
    let shift = after.duration_since(before);
    assert!(
        shift.abs_diff(Duration::from_secs(3600)) < Duration::from_micros(10),
        "{shift:?}"
    );
    close(clock::wall_at(after), t, Duration::from_micros(2));
    let resynced_in = resync();
    let resynced = clock::instant_at(t);
    let slack = Duration::from_millis(5) + synced + resynced_in;
    assert!(resynced.duration_since(before) < slack);
    assert!(before.duration_since(resynced) < slack);

    // Before tick zero: tick 0.
    assert_eq!(clock::instant_at(UNIX_EPOCH).ticks(), 0);

    // A green thread sleeps until a wall-clock moment.
    coro::run(|| {
        let start = SystemTime::now();
        let target = start + Duration::from_millis(30);
        coro::sleep_until(clock::instant_at(target)).unwrap();
        let slept = SystemTime::now().duration_since(start).unwrap();
        assert!(slept >= Duration::from_millis(29), "woke early: {slept:?}");
    });
}
