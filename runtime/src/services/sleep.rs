//! `sleep` and `sleep_until`: a park that a timer ends.

use std::time::Duration;

use crate::kernel::clock::{self, Instant};
use crate::kernel::context;
use crate::kernel::error::WaitError;
use crate::kernel::suspend;
use crate::services::timer::TimerKind;

/// Suspends the running thread until `deadline`.
///
/// Timers never fire early but may fire late (by the time the loop takes to
/// come round; see BENCHMARKS.md for the measured overshoot).
///
/// A deadline that has already passed still goes through the timer heap: the
/// thread yields, and due timers fire in deadline order, so a thread whose
/// sleep is due never runs ahead of one whose earlier deadline has not fired
/// yet. It is a blocking call like any other: an expired `with_timeout` scope
/// or a pending interrupt makes it fail, also for `sleep(Duration::ZERO)`.
///
/// # Errors
///
/// As [`park`](crate::park): a timeout of an enclosing scope or an interrupt ends the sleep
/// early.
///
/// # Panics
///
/// Outside a green thread.
#[track_caller]
pub fn sleep_until(deadline: Instant) -> Result<(), WaitError> {
    sleep_until_named(deadline, "coro::sleep_until")
}

/// [`sleep_until`]; `call` names the public call in the panic outside a
/// green thread.
#[track_caller]
fn sleep_until_named(deadline: Instant, call: &str) -> Result<(), WaitError> {
    let t = context::current_task_rc(call);
    loop {
        let gen = t.park_gen.get();
        t.timer_fired.set(false);
        context::with_sched(call, |s| {
            s.driver.timers.borrow_mut().insert(
                deadline.ticks(),
                t.clone(),
                TimerKind::Wake { gen },
            )
        });
        let r = suspend::park_as("sleep");
        let fired = t.timer_fired.get();
        if !fired {
            // Woken otherwise (or the park failed): our entry stays in the
            // heap, and can never fire (the park generation moved on).
            context::with_sched(call, |s| s.driver.timers.borrow_mut().cancel_one());
        }
        r?;
        if fired || clock::now() >= deadline {
            return Ok(());
        }
    }
}

/// Suspends the running green thread for at least `d`.
///
/// # Errors
///
/// As [`park`](crate::park): a timeout of an enclosing scope or an interrupt ends the
/// sleep early.
///
/// # Panics
///
/// Outside a green thread.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// coro::run(|| {
///     let t = coro::clock::now();
///     coro::sleep(Duration::from_millis(5)).unwrap();
///     assert!(t.elapsed() >= Duration::from_millis(5));
/// });
/// ```
#[track_caller]
pub fn sleep(d: Duration) -> Result<(), WaitError> {
    sleep_until_named(clock::now() + d, "coro::sleep")
}
