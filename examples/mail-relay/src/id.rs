//! Queue ids: unique per accepted message, across restarts.
//!
//! An id is the wall-clock time in microseconds (hex) followed by a
//! per-process sequence number (hex): two ids of one process differ in the
//! sequence, and a restart takes far longer than a microsecond. Ids sort by
//! arrival, like Postfix's long queue ids, and are safe as file names.

use std::cell::Cell;
use std::time::{SystemTime, UNIX_EPOCH};

thread_local! {
    /// The next sequence number (the relay runs on one OS thread).
    static SEQ: Cell<u32> = const { Cell::new(0) };
}

/// A new queue id.
pub fn next() -> String {
    let micros = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_micros();
    let seq = SEQ.with(|s| {
        let n = s.get();
        s.set(n.wrapping_add(1));
        n
    });
    format!("{micros:013X}{:05X}", seq & 0xF_FFFF)
}

#[cfg(test)]
mod tests {
    #[test]
    fn unique_and_file_safe() {
        let ids: std::collections::HashSet<String> = (0..10_000).map(|_| super::next()).collect();
        assert_eq!(ids.len(), 10_000);
        assert!(ids.iter().all(|i| i.chars().all(|c| c.is_ascii_hexdigit())));
    }
}
