//! Formatting shared by the report and the diff: durations, percentages,
//! UTC timestamps, HTML escaping.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::civil::civil_from_days;

/// Milliseconds with three decimals.
pub fn ms(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64() * 1e3)
}

/// A duration in the unit that suits it (`12.3 µs`, `4.56 ms`, `1.234 s`).
pub fn human(d: Duration) -> String {
    let ns = d.as_nanos();
    if ns < 1_000 {
        format!("{ns} ns")
    } else if ns < 1_000_000 {
        format!("{:.1} µs", ns as f64 / 1e3)
    } else if ns < 1_000_000_000 {
        format!("{:.2} ms", ns as f64 / 1e6)
    } else {
        format!("{:.3} s", ns as f64 / 1e9)
    }
}

/// `part` as a percentage of `whole`.
pub fn percent(part: Duration, whole: Duration) -> f64 {
    if whole.is_zero() {
        0.0
    } else {
        part.as_secs_f64() * 100.0 / whole.as_secs_f64()
    }
}

/// Per-call wall time (zero calls: zero).
pub fn per_call(total: Duration, calls: u64) -> Duration {
    if calls == 0 {
        Duration::ZERO
    } else {
        total / calls.min(u32::MAX as u64) as u32
    }
}

/// `2026-11-23 07:32:15.123 UTC`.
pub fn utc(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs();
    let (y, m, day) = civil_from_days((secs / 86_400) as i64);
    let s = secs % 86_400;
    format!(
        "{y:04}-{m:02}-{day:02} {:02}:{:02}:{:02}.{:03} UTC",
        s / 3600,
        s / 60 % 60,
        s % 60,
        d.subsec_millis()
    )
}

/// Escapes text for HTML content and attribute values.
pub fn html(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_and_units() {
        assert_eq!(utc(UNIX_EPOCH), "1970-01-01 00:00:00.000 UTC");
        let t = UNIX_EPOCH + Duration::from_millis(1_709_251_199_500); // 2024-02-29 23:59:59.5
        assert_eq!(utc(t), "2024-02-29 23:59:59.500 UTC");
        assert_eq!(human(Duration::from_nanos(999)), "999 ns");
        assert_eq!(human(Duration::from_micros(12)), "12.0 µs");
        assert_eq!(human(Duration::from_millis(1500)), "1.500 s");
        assert_eq!(
            html("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
        assert_eq!(per_call(Duration::from_secs(1), 0), Duration::ZERO);
        assert_eq!(percent(Duration::from_secs(1), Duration::ZERO), 0.0);
    }
}
