//! The file format between the two sides: what `coro::profile` records and
//! saves, this crate reads back field for field, and it reads every version
//! the runtime writes.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use coro::profile;
use coro_test_support::hog::spin_until_warned;
use coro_test_support::TempDir;

fn kind(k: profile::Kind) -> coro_profile::Kind {
    match k {
        profile::Kind::Thread => coro_profile::Kind::Thread,
        profile::Kind::Region => coro_profile::Kind::Region,
        profile::Kind::Wait => coro_profile::Kind::Wait,
        profile::Kind::Scheduler => coro_profile::Kind::Scheduler,
    }
}

fn usage(u: &profile::Usage) -> (Duration, Duration, [u64; 4]) {
    (u.utime, u.stime, [u.minflt, u.majflt, u.nvcsw, u.nivcsw])
}

fn usage_read(u: &coro_profile::Usage) -> (Duration, Duration, [u64; 4]) {
    (u.utime, u.stime, [u.minflt, u.majflt, u.nvcsw, u.nivcsw])
}

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

    let back = coro_profile::Profile::load(&path).unwrap();
    assert_eq!(back.version, profile::FORMAT_VERSION);
    assert_eq!(back.program, p.program);
    assert_eq!(back.pid, p.pid);
    assert_eq!(unix_ns(back.start), unix_ns(p.start));
    assert_eq!(back.wall, p.wall);
    assert_eq!(back.latency_threshold, p.latency_threshold);
    assert_eq!(usage_read(&back.usage), usage(&p.usage));
    assert_eq!(back.entries.len(), p.entries.len());
    for (b, e) in back.entries.iter().zip(&p.entries) {
        assert_eq!(
            (b.kind, &b.name, b.calls, b.wall, usage_read(&b.usage)),
            (kind(e.kind), &e.name, e.calls, e.wall, usage(&e.usage))
        );
    }
    assert_eq!(back.latency_warnings.len(), p.latency_warnings.len());
    for (b, w) in back.latency_warnings.iter().zip(&p.latency_warnings) {
        assert_eq!(
            (b.thread, &b.name, unix_ns(b.started), b.ran, b.running),
            (w.thread, &w.name, unix_ns(w.started), w.ran, w.running)
        );
    }
    assert_eq!(back.timeline.len(), p.timeline.len());
    for (b, s) in back.timeline.iter().zip(&p.timeline) {
        assert_eq!(
            (b.track, &b.name, b.start, b.dur, &b.what, b.latency_warning),
            (s.track, &s.name, s.start, s.dur, &s.what, s.latency_warning)
        );
    }
}

#[test]
fn the_reader_reads_the_version_the_runtime_writes() {
    assert_eq!(coro_profile::FORMAT_VERSION, profile::FORMAT_VERSION);
}
