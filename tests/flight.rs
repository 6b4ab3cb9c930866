//! The flight recorder: a snapshot saved as a file is Chrome
//! trace-event JSON that a JSON parser reads, with the fields Perfetto
//! needs; a latency warning saves a snapshot (rate-limited) whose trace
//! holds the hog's resume with its length; the ring stays bounded.

mod util;

use std::rc::Rc;
use std::time::Duration;

use coro::flight::{self, After, Event};
use coro_test_support::hog::{spin, spin_until_warned};
use serde_json::Value;

/// A temporary directory removed on drop.
struct Dir(std::path::PathBuf);

impl Dir {
    fn new(tag: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("coro-flight-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        Dir(d)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn a_trace_file_is_json_with_the_fields_perfetto_needs() {
    let dir = Dir::new("json");
    let path = dir.0.join("trace.json");
    let p = path.clone();
    let (waker_id, sleeper_id) = util::run(move || {
        let m = Rc::new(coro::sync::Mutex::new(()));
        let m2 = m.clone();
        let g = m.lock().unwrap();
        let sleeper = coro::Builder::new()
            .name("sleeper \"quoted\"".into())
            .spawn(move || {
                coro::sleep(Duration::from_millis(2)).unwrap();
                let _g = m2.lock().unwrap();
            })
            .unwrap();
        util::wait_until("the sleeper queues on the lock", || m.waiters() == 1);
        drop(g); // wakes the sleeper: the main thread is its waker
        let id = sleeper.thread().id();
        sleeper.join().unwrap();
        let trace = flight::snapshot();
        trace.save(&p).unwrap();
        (coro::current_id().unwrap(), id)
    });

    let text = std::fs::read_to_string(&path).unwrap();
    let json: Value = serde_json::from_str(&text).expect("the trace is JSON");
    let events = json["traceEvents"].as_array().expect("a traceEvents array");
    assert!(!events.is_empty());
    for e in events {
        let ph = e["ph"].as_str().expect("every event has ph");
        assert!(
            e["pid"].is_u64() && e["tid"].is_u64() && e["name"].is_string(),
            "{e}"
        );
        match ph {
            "X" => assert!(e["ts"].is_number() && e["dur"].is_number(), "{e}"),
            "i" => assert!(e["ts"].is_number() && e["s"] == "t", "{e}"),
            "M" => assert!(e["args"].is_object(), "{e}"),
            other => panic!("unexpected phase {other}: {e}"),
        }
    }
    let of = |ph: &str, name: &str, tid: u64| -> Vec<&Value> {
        events
            .iter()
            .filter(|e| e["ph"] == ph && e["name"] == name && e["tid"] == tid)
            .collect()
    };
    let label = format!("#{sleeper_id} sleeper \"quoted\"");
    assert_eq!(of("M", "thread_name", sleeper_id)[0]["args"]["name"], label);
    let runs = of("X", &label, sleeper_id);
    assert!(
        runs.iter()
            .any(|r| r["args"]["then"] == "park" && r["args"]["reason"] == "sleep"),
        "{runs:?}"
    );
    assert!(runs.iter().any(|r| r["args"]["reason"] == "Mutex::lock"));
    assert!(runs.iter().any(|r| r["args"]["then"] == "finish"));
    assert_eq!(of("i", "spawn", sleeper_id)[0]["args"]["parent"], waker_id);
    assert_eq!(of("i", "timer", sleeper_id)[0]["args"]["kind"], "sleep");
    let wakes = of("i", "wake", sleeper_id);
    assert!(
        wakes.iter().any(|w| w["args"]["by"] == 0),
        "the timer's wake: {wakes:?}"
    );
    assert!(
        wakes.iter().any(|w| w["args"]["by"] == waker_id),
        "the unlock's wake: {wakes:?}"
    );
    assert!(events
        .iter()
        .any(|e| e["tid"] == 0 && e["ph"] == "X" && e["name"] == "wait"));
    // Times go forward.
    let ts: Vec<f64> = events
        .iter()
        .filter(|e| e["tid"] == sleeper_id && e["ph"] == "X")
        .map(|e| e["ts"].as_f64().unwrap())
        .collect();
    assert!(ts.windows(2).all(|w| w[0] <= w[1]), "{ts:?}");
    assert_eq!(json["displayTimeUnit"], "ns");
}

#[test]
fn a_latency_warning_saves_a_snapshot_with_the_hogs_resume() {
    let mut rt = coro::Runtime::builder()
        .latency_warning(Some(Duration::from_millis(20)))
        .build()
        .unwrap();
    rt.block_on(|| {
        coro::with_timeout(util::LIMIT, || {
            assert!(flight::latency_snapshots().is_empty());
            let hog = coro::Builder::new()
                .name("hog".into())
                .spawn(|| spin_until_warned(Duration::from_millis(80)))
                .unwrap();
            let id = hog.thread().id();
            hog.join().unwrap();
            let snaps = flight::latency_snapshots();
            assert_eq!(snaps.len(), 1);
            let t = &snaps[0];
            assert!(
                t.reason.contains("#") && t.reason.contains("'hog'"),
                "{}",
                t.reason
            );
            let resume = t
                .events
                .iter()
                .find_map(|e| match e.event {
                    Event::Resume {
                        thread,
                        ran,
                        then,
                        latency_warning: true,
                    } if thread == id => Some((ran, then)),
                    _ => None,
                })
                .expect("the hog's resume is in the trace");
            assert_eq!(resume.1, After::Finish);
            assert!(resume.0 >= Duration::from_millis(20), "{:?}", resume.0);
            let json = t.to_chrome_json();
            assert!(json.contains("\"latency_warning\":true"));
            assert!(json.contains(&format!("\"name\":\"#{id} hog\"")));

            // Rate-limited: a second hog right after saves no second one.
            coro::Builder::new()
                .name("hog2".into())
                .spawn(|| spin_until_warned(Duration::from_millis(60)))
                .unwrap()
                .join()
                .unwrap();
            assert_eq!(flight::latency_snapshots().len(), 1);
            assert!(coro::stats().latency_warnings >= 2);
        })
        .unwrap();
    });
}

/// The complete events (`"ph":"X"`) of thread `id` in a trace's Chrome
/// JSON, read back with a JSON parser.
#[track_caller]
fn complete_events(trace: &flight::Trace, id: u64) -> Vec<Value> {
    let json: Value = serde_json::from_str(&trace.to_chrome_json()).expect("the trace is JSON");
    json["traceEvents"]
        .as_array()
        .expect("a traceEvents array")
        .iter()
        .filter(|e| e["ph"] == "X" && e["tid"] == id)
        .cloned()
        .collect()
}

/// A resume is stamped as it ends: a thread that spins 60 ms shows a
/// complete event of about that length, with the latency watchdog off
/// and on.
#[test]
fn a_thread_that_spins_60_ms_shows_a_complete_event_of_at_least_40_ms() {
    for warning in [None, Some(Duration::from_millis(20))] {
        let mut rt = coro::Runtime::builder()
            .latency_warning(warning)
            .build()
            .unwrap();
        let (id, trace) = rt.block_on(|| {
            let hog = coro::Builder::new()
                .name("hog".into())
                .spawn(|| spin(Duration::from_millis(60)))
                .unwrap();
            let id = hog.thread().id();
            hog.join().unwrap();
            (id, flight::snapshot())
        });
        let runs = complete_events(&trace, id);
        let name = format!("#{id} hog");
        assert!(
            runs.iter().any(|r| r["name"] == name.as_str()
                && r["args"]["then"] == "finish"
                && r["dur"].as_f64().unwrap() >= 40_000.0),
            "watchdog {warning:?}: {runs:?}"
        );
    }
}

/// Every resume has its own clock reading: the resumes that run before
/// the loop first polls the OS have real starts and lengths, not 0.
#[test]
fn events_before_the_first_poll_have_real_times() {
    let mut rt = coro::Runtime::builder()
        .latency_warning(None)
        .build()
        .unwrap();
    let (ids, trace) = rt.block_on(|| {
        let a = coro::spawn(|| spin(Duration::from_millis(30)));
        let b = coro::spawn(|| spin(Duration::from_millis(30)));
        let ids = [a.thread().id(), b.thread().id()];
        a.join().unwrap();
        b.join().unwrap();
        (ids, flight::snapshot())
    });
    assert!(
        !trace
            .events
            .iter()
            .any(|e| matches!(e.event, Event::Poll { .. })),
        "the loop polled: {:?}",
        trace.events
    );
    let run = |id: u64| -> (Duration, Duration) {
        trace
            .events
            .iter()
            .find_map(|e| match e.event {
                Event::Resume { thread, ran, .. } if thread == id => Some((e.at, ran)),
                _ => None,
            })
            .expect("the thread's resume")
    };
    let (a_at, a_ran) = run(ids[0]);
    let (b_at, b_ran) = run(ids[1]);
    let ms = Duration::from_millis;
    assert!(
        a_at > Duration::ZERO && a_ran >= ms(25),
        "{a_at:?} {a_ran:?}"
    );
    assert!(
        b_at >= a_at + ms(25) && b_ran >= ms(25),
        "{b_at:?} {b_ran:?}"
    );
    let b_run = &complete_events(&trace, ids[1])[0];
    assert!(b_run["ts"].as_f64().unwrap() >= 25_000.0, "{b_run}");
    assert!(b_run["dur"].as_f64().unwrap() >= 25_000.0, "{b_run}");
}

/// The time a runtime sits between two `block_on`s is nobody's resume:
/// the second run's first resume starts after the pause.
#[test]
fn the_pause_between_two_runs_is_no_resume() {
    let pause = Duration::from_millis(500);
    let mut rt = coro::Runtime::builder()
        .latency_warning(None)
        .build()
        .unwrap();
    let first = rt.block_on(|| {
        coro::spawn(coro::yield_now).join().unwrap();
        coro::current_id().unwrap()
    });
    std::thread::sleep(pause);
    let (second, trace) = rt.block_on(|| {
        coro::spawn(coro::yield_now).join().unwrap();
        (coro::current_id().unwrap(), flight::snapshot())
    });
    assert!(second > first + 1);
    let resumes = |run: std::ops::Range<u64>| -> Vec<(Duration, Duration)> {
        trace
            .events
            .iter()
            .filter_map(|e| match e.event {
                Event::Resume { thread, ran, .. } if run.contains(&thread) => Some((e.at, ran)),
                _ => None,
            })
            .collect()
    };
    let ended = resumes(first..second)
        .iter()
        .map(|&(at, ran)| at + ran)
        .max()
        .expect("the first run's resumes");
    let began = resumes(second..second + 1)
        .first()
        .expect("the second run's first resume")
        .0;
    assert!(
        began >= ended + pause - Duration::from_millis(50),
        "the first run ended at {ended:?}, the second began at {began:?}"
    );
}

#[test]
fn latency_snapshots_can_be_turned_off() {
    let mut rt = coro::Runtime::builder()
        .latency_warning(Some(Duration::from_millis(10)))
        .latency_snapshots(None)
        .build()
        .unwrap();
    rt.block_on(|| {
        coro::spawn(|| spin_until_warned(Duration::from_millis(40)))
            .join()
            .unwrap();
        assert!(coro::stats().latency_warnings >= 1);
        assert!(flight::latency_snapshots().is_empty());
        // The slice is still in the ring, with its length.
        let reported = flight::snapshot().events.iter().any(|e| {
            matches!(e.event, Event::Resume { latency_warning: true, ran, .. } if ran >= Duration::from_millis(10))
        });
        assert!(reported);
    });
}

#[test]
fn the_ring_keeps_the_last_events_only() {
    util::run(|| {
        let other = coro::spawn(|| {
            for _ in 0..flight::EVENTS {
                coro::yield_now();
            }
        });
        for _ in 0..flight::EVENTS {
            coro::yield_now();
        }
        other.join().unwrap();
        let t = flight::snapshot();
        assert!(t.first_event > 0);
        // The last EVENTS resumes (and the few other events among them).
        let resumes = t
            .events
            .iter()
            .filter(|e| matches!(e.event, Event::Resume { .. }))
            .count();
        assert!(
            resumes <= flight::EVENTS && resumes > flight::EVENTS - 8,
            "{resumes}"
        );
        assert!(t.events.len() < 2 * flight::EVENTS);
    });
}

/// The rings are kept per OS thread and taken over by the next runtime
/// built there: its traces show its own events only, never the entries an
/// earlier runtime left in the rings.
#[test]
fn a_runtime_after_another_sees_only_its_own_events() {
    let rt = || coro::Runtime::builder().build().unwrap();
    std::thread::spawn(move || {
        // Fill both rings: parks with a reason of their own, wakes, spawns.
        rt().block_on(|| {
            let me = coro::current();
            let parker = coro::spawn(move || {
                for _ in 0..flight::EVENTS {
                    coro::park_as("first runtime's park").unwrap();
                    me.unpark().unwrap();
                }
            });
            for _ in 0..flight::EVENTS {
                coro::yield_now();
                parker.thread().unpark().unwrap();
                coro::park().unwrap();
            }
            parker.join().unwrap();
        });
        let trace = rt().block_on(|| {
            coro::spawn(coro::yield_now).join().unwrap();
            flight::snapshot()
        });
        let stale: Vec<_> = trace
            .events
            .iter()
            .filter(|e| {
                matches!(
                    e.event,
                    Event::Resume {
                        then: After::Park("first runtime's park"),
                        ..
                    }
                )
            })
            .collect();
        assert!(stale.is_empty(), "entries of the first runtime: {stale:?}");
        // Its own: one spawn, a few resumes and wakes, no more.
        assert!(trace.events.len() < 16, "{:?}", trace.events);
        assert!(trace
            .events
            .iter()
            .any(|e| matches!(e.event, Event::Spawn { .. })));
    })
    .join()
    .unwrap();
}
