//! The profiler: every moment of the interval is charged to one entry, so
//! the entries add up to the wall time; time a region spends parked shows
//! under `<wait>`, time it spins as its own user time; regions nest and
//! close on panics. (The file format is tested where it is read, in the
//! `coro-profile` package.)

use std::io;
use std::time::{Duration, Instant};

use coro::profile::{self, Kind, Profile};
use coro_runtime as coro;
use coro_test_support::hog::{spin, spin_until_warned};

/// This OS thread's CPU time.
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the clock id exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Spins until this OS thread has used `d` of CPU time (however long a
/// loaded machine makes that take).
fn spin_cpu(d: Duration) {
    let t = thread_cpu();
    let mut x = 1u64;
    // Reading the thread's CPU clock is a system call: do it rarely, so the
    // spin is user time.
    while thread_cpu() - t < d {
        for _ in 0..100_000 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
    }
}

fn rt(latency: Option<Duration>) -> coro::Runtime {
    coro::Runtime::builder()
        .latency_warning(latency)
        .build()
        .unwrap()
}

#[track_caller]
fn entry<'a>(p: &'a Profile, kind: Kind, name: &str) -> &'a profile::Entry {
    p.entry_of(kind, name)
        .unwrap_or_else(|| panic!("no {kind:?} entry {name:?} in {:#?}", p.entries))
}

#[test]
fn entries_add_up_to_the_wall_time_of_the_interval() {
    let (p, outside, inside) = rt(None).block_on(|| {
        let t0 = Instant::now();
        profile::start().unwrap();
        let t1 = Instant::now();
        let spinner = coro::Builder::new()
            .name("spinner".into())
            .spawn(|| {
                for _ in 0..20 {
                    spin(Duration::from_millis(5));
                    coro::yield_now();
                }
            })
            .unwrap();
        let sleeper = coro::Builder::new()
            .name("sleeper".into())
            .spawn(|| {
                for _ in 0..10 {
                    coro::sleep(Duration::from_millis(10)).unwrap();
                }
            })
            .unwrap();
        profile::region("join", || {
            spinner.join().unwrap();
            sleeper.join().unwrap();
        });
        coro::sleep(Duration::from_millis(50)).unwrap();
        let t2 = Instant::now();
        let p = profile::stop().unwrap();
        (p, t0.elapsed(), t2 - t1)
    });
    let sum: Duration = p.entries.iter().map(|e| e.wall).sum();
    assert!(
        sum.abs_diff(p.wall) < Duration::from_micros(1),
        "entries {sum:?} vs interval {:?}",
        p.wall
    );
    // The interval itself is the wall time between start and stop: no more
    // than std's clock read before `start` and after `stop`, no less than
    // read after `start` returned and before `stop` was called (the calls
    // themselves can be slow the first time, under an emulator).
    assert!(p.wall <= outside + Duration::from_millis(1), "{p:#?}");
    assert!(
        p.wall.as_secs_f64() >= inside.as_secs_f64() * 0.97 - 0.002,
        "profile {:?} vs measured {inside:?} inside, {outside:?} outside",
        p.wall
    );
    // Usage adds up exactly too, and CPU time never exceeds wall time.
    let mut total = profile::Usage::default();
    for e in &p.entries {
        total += e.usage;
    }
    assert_eq!(total, p.usage);
    assert!(
        p.usage.cpu() <= p.wall + Duration::from_millis(10),
        "{p:#?}"
    );
    // Every account is there.
    assert!(entry(&p, Kind::Thread, "spinner").wall >= Duration::from_millis(100));
    assert_eq!(entry(&p, Kind::Thread, "spinner").calls, 20 + 1); // 21 slices
    assert!(entry(&p, Kind::Wait, "<wait>").wall >= Duration::from_millis(40));
    assert!(entry(&p, Kind::Scheduler, "<scheduler>").wall > Duration::ZERO);
    assert!(entry(&p, Kind::Thread, "sleeper").calls >= 10);
    assert_eq!(entry(&p, Kind::Region, "join").calls, 1);
}

#[test]
fn a_sleeping_region_shows_under_wait_and_a_spinning_one_as_user_time() {
    let p = rt(None).block_on(|| {
        // A first pass through the sleep path, unmeasured: running code for
        // the first time (cold caches; translation under an emulator) can
        // cost tens of milliseconds, which is not what this test is about.
        profile::region("nap", || coro::sleep(Duration::from_millis(1))).unwrap();
        profile::start().unwrap();
        profile::region("nap", || coro::sleep(Duration::from_millis(200))).unwrap();
        profile::region("spin", || spin_cpu(Duration::from_millis(200)));
        profile::stop().unwrap()
    });
    let nap = entry(&p, Kind::Region, "nap");
    let spin = entry(&p, Kind::Region, "spin");
    let wait = entry(&p, Kind::Wait, "<wait>");
    let sched = entry(&p, Kind::Scheduler, "<scheduler>");
    assert!(nap.wall * 4 < wait.wall, "{p:#?}");
    // The 200 ms asleep are the wait's, but for what the region itself and
    // the scheduler ran meanwhile (more on a slow machine).
    assert!(
        wait.wall + nap.wall + sched.wall >= Duration::from_millis(195),
        "{p:#?}"
    );
    assert!(wait.usage.cpu() * 4 < wait.wall, "{p:#?}");
    // 200 ms of CPU, in user mode (the kernel's accounting advances at its
    // ticks: allow one or two).
    assert!(spin.wall >= Duration::from_millis(200), "{p:#?}");
    assert!(spin.usage.cpu() >= Duration::from_millis(190), "{p:#?}");
    assert!(
        spin.usage.utime.as_secs_f64() >= spin.usage.cpu().as_secs_f64() * 0.8,
        "{p:#?}"
    );
    assert_eq!((nap.calls, spin.calls), (1, 1));
}

#[test]
fn regions_nest_charge_the_innermost_and_close_on_panic() {
    let p = rt(None).block_on(|| {
        coro::Builder::new()
            .name("worker".into())
            .spawn(|| {
                // A first pass through the same code, unmeasured (see
                // `a_sleeping_region_shows_under_wait_and_a_spinning_one_as_user_time`).
                profile::region("outer", || {
                    profile::region("inner", || spin(Duration::from_millis(1)))
                });
                profile::start().unwrap();
                profile::region("outer", || {
                    spin(Duration::from_millis(30));
                    profile::region("inner", || spin(Duration::from_millis(120)));
                });
                let caught = std::panic::catch_unwind(|| {
                    profile::region("panics", || panic!("in a region"))
                });
                assert!(caught.is_err());
                spin(Duration::from_millis(40)); // back in the thread's own account
                profile::stop().unwrap()
            })
            .unwrap()
            .join()
            .unwrap()
    });
    let ms = |k, n| entry(&p, k, n).wall.as_millis();
    // Outer spun 30 ms itself, inner 120 ms inside it: outer is not
    // charged with inner's time.
    assert!(ms(Kind::Region, "outer") >= 30, "{p:#?}");
    assert!(ms(Kind::Region, "inner") >= 120, "{p:#?}");
    assert!(
        ms(Kind::Region, "outer") < ms(Kind::Region, "inner"),
        "{p:#?}"
    );
    // The panic itself (the hook, a backtrace) is the region's; what runs
    // after it is the thread's again.
    assert_eq!(entry(&p, Kind::Region, "panics").calls, 1);
    assert!(ms(Kind::Thread, "worker") >= 40, "{p:#?}");
}

#[test]
fn off_by_default_one_recording_at_a_time_and_regions_work_anywhere() {
    assert_eq!(profile::region("no runtime", || 7), 7);
    assert!(!profile::is_running());
    rt(None).block_on(|| {
        assert!(!profile::is_running());
        assert!(profile::stop().is_none());
        assert!(profile::snapshot().is_none());
        assert_eq!(profile::region("off", || 1), 1);
        profile::start().unwrap();
        assert!(profile::is_running());
        let e = profile::start().unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
        let snap = profile::snapshot().unwrap();
        assert!(profile::is_running());
        coro::sleep(Duration::from_millis(5)).unwrap();
        let p = profile::stop().unwrap();
        assert!(p.wall > snap.wall);
        assert!(!profile::is_running());
        // A region opened before a recording started does not disturb it.
        profile::region("before", || {
            profile::start().unwrap();
            spin(Duration::from_millis(5));
        });
        spin(Duration::from_millis(5));
        let p = profile::stop().unwrap();
        assert!(p.entry("before").is_none(), "{p:#?}");
        assert!(p.entry_of(Kind::Thread, "main").unwrap().wall >= Duration::from_millis(10));
    });
}

#[test]
fn the_interval_carries_its_latency_warnings() {
    let p = rt(Some(Duration::from_millis(40))).block_on(|| {
        coro::Builder::new()
            .name("early-hog".into())
            .spawn(|| spin(Duration::from_millis(100)))
            .unwrap()
            .join()
            .unwrap();
        coro::sleep(Duration::from_millis(150)).unwrap();
        profile::start().unwrap();
        // Warned at 40 ms of its slice (as the watchdog measures it), then
        // 60 ms more: the warning's final length is at least 100 ms.
        coro::Builder::new()
            .name("hog".into())
            .spawn(|| {
                spin_until_warned(Duration::from_millis(50));
                spin(Duration::from_millis(60));
            })
            .unwrap()
            .join()
            .unwrap();
        coro::sleep(Duration::from_millis(100)).unwrap(); // the watchdog's last look
        profile::stop().unwrap()
    });
    assert_eq!(p.latency_threshold, Some(Duration::from_millis(40)));
    let names: Vec<_> = p
        .latency_warnings
        .iter()
        .map(|w| w.name.as_deref().unwrap_or(""))
        .collect();
    // (A loaded machine may add a warning for another thread; never the
    // early hog, whose slice ended before the interval.)
    assert_eq!(names.iter().filter(|n| **n == "hog").count(), 1, "{p:#?}");
    assert!(!names.contains(&"early-hog"), "{p:#?}");
    let w = p
        .latency_warnings
        .iter()
        .find(|w| w.name.as_deref() == Some("hog"))
        .unwrap();
    assert!(w.ran >= Duration::from_millis(100) && !w.running, "{w:?}");
}

#[test]
fn the_recent_warnings_ring_is_bounded_and_newest_last() {
    let (w, total) = rt(Some(Duration::from_millis(5))).block_on(|| {
        for i in 0..coro::RECENT_WARNINGS + 6 {
            coro::Builder::new()
                .name(format!("hog-{i}"))
                .spawn(|| spin_until_warned(Duration::from_millis(20)))
                .unwrap()
                .join()
                .unwrap();
            coro::sleep(Duration::from_millis(2)).unwrap();
        }
        (coro::latency_warnings(), coro::stats().latency_warnings)
    });
    assert_eq!(w.len(), coro::RECENT_WARNINGS.min(total as usize));
    assert!(total as usize > coro::RECENT_WARNINGS, "{total}");
    // The newest hogs are kept, oldest first (a loaded machine may add a
    // warning for `main` between them, or its watchdog, waiting for a CPU,
    // may miss a hog): the last is one of the hogs past the ring's size,
    // which a ring keeping its oldest entries would not hold.
    let hogs: Vec<_> = w
        .iter()
        .filter(|w| w.name.as_deref().is_some_and(|n| n.starts_with("hog-")))
        .collect();
    let index = |w: &coro::LatencyWarning| -> usize {
        w.name.as_deref().unwrap()["hog-".len()..].parse().unwrap()
    };
    let last = index(hogs.last().unwrap());
    assert!(
        last >= coro::RECENT_WARNINGS,
        "the newest kept is hog-{last}"
    );
    assert!(hogs.windows(2).all(|p| p[0].thread < p[1].thread));
}

#[test]
fn threads_report_their_age() {
    rt(None).block_on(|| {
        let h = coro::spawn(|| coro::sleep(Duration::from_millis(500)));
        coro::sleep(Duration::from_millis(30)).unwrap();
        let t = coro::threads();
        let info = t.iter().find(|t| t.id == h.thread().id()).unwrap();
        assert!(info.age >= Duration::from_millis(30), "{info:?}");
        h.thread().interrupt().unwrap();
        let _ = h.join();
    });
}
