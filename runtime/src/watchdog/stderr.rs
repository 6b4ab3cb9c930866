//! Latency warnings on stderr, for programs whose `log` logger would not
//! show them (none installed, or coro's target filtered out).
//!
//! # Design
//!
//! Every warning is shown, not only the first of the process: a stall often
//! comes as several warnings in a row (one per thread the blocked OS thread
//! delayed), and the later ones are as telling as the first. A token bucket
//! bounds the flood from a thread that hogs again and again: a burst of
//! [`BURST`] lines, then one per [`REFILL`]; a warning without a token is
//! counted, and the next line shown (or the watchdog's stop) says how many
//! were suppressed. The bucket is per process, as stderr is.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Lines the bucket holds: a stall's burst of warnings is shown whole.
pub(crate) const BURST: u32 = 10;

/// One more line may be shown per this much time.
pub(crate) const REFILL: Duration = Duration::from_secs(1);

/// The process's token bucket.
static BUCKET: Mutex<Option<Bucket>> = Mutex::new(None);

/// A token bucket that counts what it refuses.
#[derive(Debug)]
pub(crate) struct Bucket {
    /// Lines that may be shown now (at most [`BURST`]).
    tokens: u32,
    /// When `tokens` was last refilled.
    refilled: Instant,
    /// Warnings refused since the last line shown.
    suppressed: u64,
    /// Whether a line has been shown yet (the first carries the hint about
    /// loggers).
    shown_any: bool,
}

/// What to print for one warning.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Admit {
    /// Show it; `suppressed` warnings were refused since the last one shown,
    /// `first` says whether it is the process's first.
    Show { suppressed: u64, first: bool },
    /// Refused (counted).
    Suppressed,
}

impl Bucket {
    pub(crate) fn new(now: Instant) -> Bucket {
        Bucket {
            tokens: BURST,
            refilled: now,
            suppressed: 0,
            shown_any: false,
        }
    }

    /// Takes a token for a warning at `now`, or counts it as suppressed.
    pub(crate) fn admit(&mut self, now: Instant) -> Admit {
        let periods = now.saturating_duration_since(self.refilled).as_nanos() / REFILL.as_nanos();
        if periods > 0 {
            let periods = u32::try_from(periods).unwrap_or(u32::MAX);
            self.tokens = self.tokens.saturating_add(periods).min(BURST);
            self.refilled += REFILL * periods.min(BURST);
            if self.tokens == BURST {
                self.refilled = now;
            }
        }
        if self.tokens == 0 {
            self.suppressed += 1;
            return Admit::Suppressed;
        }
        self.tokens -= 1;
        let first = !std::mem::replace(&mut self.shown_any, true);
        Admit::Show {
            suppressed: std::mem::take(&mut self.suppressed),
            first,
        }
    }

    /// The count of warnings refused since the last line shown, reset.
    pub(crate) fn take_suppressed(&mut self) -> u64 {
        std::mem::take(&mut self.suppressed)
    }
}

/// Shows `text` (one warning) on stderr, subject to the rate limit.
pub(crate) fn warn(text: &str) {
    let admit = {
        let mut b = BUCKET.lock().unwrap_or_else(|e| e.into_inner());
        b.get_or_insert_with(|| Bucket::new(Instant::now()))
            .admit(Instant::now())
    };
    let Admit::Show { suppressed, first } = admit else {
        return;
    };
    let mut line = format!("coro: {text}");
    if suppressed > 0 {
        line.push_str(&format!(
            "\ncoro: ({suppressed} latency warnings before this one were not shown: at most \
             {BURST} in a row, then one a second)"
        ));
    }
    if first {
        line.push_str(
            "\ncoro: (no `log` logger shows coro's warnings, so they go to stderr, rate-limited; \
             install one, e.g. env_logger, to see them all; coro::stats().latency_warnings \
             counts them)",
        );
    }
    eprintln!("{line}");
}

/// Says on stderr how many warnings went unshown since the last line, if
/// any (the watchdog stops: nothing later would report them).
pub(crate) fn flush() {
    let n = BUCKET
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_mut()
        .map_or(0, Bucket::take_suppressed);
    if n > 0 {
        eprintln!("coro: {n} more latency warnings were not shown (rate limit)");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stall's burst is shown whole; past the burst,
    /// one line per refill period, and the line after a gap counts what it
    /// skipped.
    #[test]
    fn bursts_are_shown_whole_then_one_a_second_with_a_count() {
        let t0 = Instant::now();
        let mut b = Bucket::new(t0);
        assert_eq!(
            b.admit(t0),
            Admit::Show {
                suppressed: 0,
                first: true
            }
        );
        for _ in 1..BURST {
            assert_eq!(
                b.admit(t0),
                Admit::Show {
                    suppressed: 0,
                    first: false
                }
            );
        }
        assert_eq!(b.admit(t0), Admit::Suppressed);
        assert_eq!(b.admit(t0 + REFILL / 2), Admit::Suppressed);
        assert_eq!(
            b.admit(t0 + REFILL),
            Admit::Show {
                suppressed: 2,
                first: false
            }
        );
        assert_eq!(b.admit(t0 + REFILL), Admit::Suppressed);
        assert_eq!(b.take_suppressed(), 1);
        assert_eq!(b.take_suppressed(), 0);
        // A long quiet fills the bucket again, and no further.
        let later = t0 + REFILL * 1000;
        for _ in 0..BURST {
            assert!(matches!(b.admit(later), Admit::Show { .. }));
        }
        assert_eq!(b.admit(later), Admit::Suppressed);
    }
}
