//! Wall-clock dates without a date crate: RFC 5322 dates for `Received:`
//! headers and ISO 8601 stamps for the log, both in UTC.

use std::time::{SystemTime, UNIX_EPOCH};

use civil::civil_from_days;

/// The calendar arithmetic, shared with the `coro-profile` tool.
#[path = "../../../profile/src/bin/coro-profile/civil.rs"]
mod civil;

/// A UTC calendar time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Utc {
    /// Year, month (1..=12), day (1..=31).
    pub ymd: (i64, u32, u32),
    /// Hour, minute, second.
    pub hms: (u32, u32, u32),
    /// Microseconds within the second.
    pub micros: u32,
    /// Day of the week, 0 = Sunday.
    pub weekday: u32,
}

impl Utc {
    /// The calendar time of `t`.
    pub fn from(t: SystemTime) -> Utc {
        let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
        let secs = d.as_secs() as i64;
        let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400) as u32);
        Utc {
            ymd: civil_from_days(days),
            hms: (rem / 3600, rem / 60 % 60, rem % 60),
            micros: d.subsec_micros(),
            weekday: (days + 4).rem_euclid(7) as u32,
        }
    }

    /// Now.
    pub fn now() -> Utc {
        Utc::from(SystemTime::now())
    }

    /// `Mon, 23 Nov 2026 07:44:59 +0000` (RFC 5322 §3.3).
    pub fn rfc5322(&self) -> String {
        let ((y, m, d), (hh, mm, ss)) = (self.ymd, self.hms);
        format!(
            "{}, {d} {} {y} {hh:02}:{mm:02}:{ss:02} +0000",
            DAYS[self.weekday as usize],
            MONTHS[m as usize - 1]
        )
    }

    /// `Mon Nov 23 07:44:59` (as `mailq` shows arrival times).
    pub fn short(&self) -> String {
        let ((_, m, d), (hh, mm, ss)) = (self.ymd, self.hms);
        format!(
            "{} {} {d:2} {hh:02}:{mm:02}:{ss:02}",
            DAYS[self.weekday as usize],
            MONTHS[m as usize - 1]
        )
    }

    /// `2026-11-23T07:44:59.123456Z`.
    pub fn iso8601(&self) -> String {
        let ((y, m, d), (hh, mm, ss)) = (self.ymd, self.hms);
        format!(
            "{y:04}-{m:02}-{d:02}T{hh:02}:{mm:02}:{ss:02}.{:06}Z",
            self.micros
        )
    }
}

const DAYS: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn known_dates() {
        let t = |s| Utc::from(UNIX_EPOCH + Duration::from_secs(s));
        assert_eq!(t(0).rfc5322(), "Thu, 1 Jan 1970 00:00:00 +0000");
        assert_eq!(t(951_782_400).rfc5322(), "Tue, 29 Feb 2000 00:00:00 +0000");
        assert_eq!(t(1_795_419_899).iso8601(), "2026-11-23T07:44:59.000000Z");
        assert_eq!(t(1_795_419_899).short(), "Mon Nov 23 07:44:59");
        assert_eq!(t(0).short(), "Thu Jan  1 00:00:00");
        assert_eq!(
            t(1_795_419_899).rfc5322(),
            "Mon, 23 Nov 2026 07:44:59 +0000"
        );
    }
}
