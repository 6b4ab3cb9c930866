//! The file format between the two sides: what `coro::profile` records and
//! saves, this crate reads back as the same `Profile`, field for field.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use coro::profile;
use coro_test_support::hog::spin_until_warned;
use coro_test_support::TempDir;

/// Times are kept to the nanosecond, which `SystemTime` may go below.
fn unix_ns(t: SystemTime) -> u128 {
    t.duration_since(UNIX_EPOCH).unwrap().as_nanos()
}

#[test]
fn a_saved_profile_reads_back_field_for_field() {
    let mut rt = coro::Runtime::builder()
        .latency_warning(Some(Duration::from_millis(20)))
        .build()
        .unwrap();
    let p = rt.block_on(|| {
        profile::start().unwrap();
        coro::Builder::new()
            .name("quote \" and \\ é\n\ttab".into())
            .spawn(|| spin_until_warned(Duration::from_millis(50)))
            .unwrap()
            .join()
            .unwrap();
        coro::spawn(|| profile::region("r", || coro::sleep(Duration::from_millis(5))))
            .join()
            .unwrap()
            .unwrap();
        coro::sleep(Duration::from_millis(20)).unwrap();
        profile::stop().unwrap()
    });
    assert!(
        p.latency_warnings
            .iter()
            .any(|w| w.name.as_deref() == Some("quote \" and \\ é\n\ttab")),
        "{p:#?}"
    );
    assert!(
        !p.timeline.is_empty(),
        "the flight recorder's spans are kept"
    );
    let dir = TempDir::new("profile-format");
    let path = dir.path("p.jsonl");
    p.save(&path).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.starts_with(r#"{"type":"header","format":"coro-profile","version":1,"#));
    assert_eq!(
        text.lines().count(),
        1 + p.entries.len() + p.latency_warnings.len() + p.timeline.len()
    );

    let back = coro_profile::load(&path).unwrap();
    // Times are kept to the nanosecond, which `SystemTime` may go below.
    assert_eq!(unix_ns(back.start), unix_ns(p.start));
    assert_eq!(back.latency_warnings.len(), p.latency_warnings.len());
    for (b, w) in back.latency_warnings.iter().zip(&p.latency_warnings) {
        assert_eq!(unix_ns(b.started), unix_ns(w.started));
    }
    let mut same = back.clone();
    same.start = p.start;
    for (b, w) in same.latency_warnings.iter_mut().zip(&p.latency_warnings) {
        b.started = w.started;
    }
    assert_eq!(same, p);
}
