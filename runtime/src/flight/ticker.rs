//! The recorder's ticker: one thread per process that publishes the clock
//! every [`PERIOD`] while some runtime's recorder samples (see "Times" in
//! the module docs), and sleeps otherwise.
//!
//! A recorder that samples compares [`now`] with the value it last saw
//! after every resume: one load of a word that changes once a period, so
//! a resume during which the ticker ticked (every resume of a period or
//! longer) is seen and stamped as it ends, without a clock read on the
//! other switches.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use crate::clock;

/// How often the ticker publishes the clock.
pub(super) const PERIOD: Duration = Duration::from_millis(1);

/// A value [`now`] never returns (tick counts do not reach it): a
/// recorder that holds it as the value last seen stamps every resume.
pub(super) const NEVER: u64 = u64::MAX;

/// The last tick count published, alone on its cache line: every
/// sampling recorder reads it after every resume, and only the ticker
/// writes it.
#[repr(align(128))]
struct Published(AtomicU64);

static NOW: Published = Published(AtomicU64::new(0));

/// Recorders that sample, and whether the thread was started.
static STATE: Mutex<State> = Mutex::new(State {
    sampling: 0,
    started: false,
    failed: false,
});
/// Wakes the thread when the first recorder starts sampling.
static WAKE: Condvar = Condvar::new();

struct State {
    sampling: usize,
    started: bool,
    /// The thread could not be started: no recorder samples (none asks
    /// the OS again).
    failed: bool,
}

/// The tick count the ticker last published.
#[inline(always)]
pub(super) fn now() -> u64 {
    NOW.0.load(Ordering::Relaxed)
}

/// A recorder starts sampling: the ticker runs (started on first use).
/// Returns false when its thread cannot be started (the recorder keeps
/// stamping every resume).
pub(super) fn subscribe() -> bool {
    let mut st = STATE.lock().unwrap_or_else(|e| e.into_inner());
    if st.failed {
        return false;
    }
    if !st.started {
        let spawned = std::thread::Builder::new()
            .name("coro-flight-ticker".into())
            .spawn(run);
        if spawned.is_err() {
            st.failed = true;
            return false;
        }
        st.started = true;
    }
    st.sampling += 1;
    if st.sampling == 1 {
        WAKE.notify_one();
    }
    true
}

/// A recorder that [`subscribe`]d stops sampling.
pub(super) fn unsubscribe() {
    let mut st = STATE.lock().unwrap_or_else(|e| e.into_inner());
    st.sampling = st.sampling.saturating_sub(1);
}

/// The thread: publishes the clock every period while any recorder
/// samples.
fn run() {
    loop {
        {
            let mut st = STATE.lock().unwrap_or_else(|e| e.into_inner());
            while st.sampling == 0 {
                st = WAKE.wait(st).unwrap_or_else(|e| e.into_inner());
            }
        }
        std::thread::sleep(PERIOD);
        NOW.0.store(clock::now().ticks(), Ordering::Relaxed);
    }
}
