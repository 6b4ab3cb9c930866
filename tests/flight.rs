//! The flight recorder: a snapshot saved as a file is Chrome
//! trace-event JSON that a JSON parser reads, with the fields Perfetto
//! needs; a latency warning saves a snapshot (rate-limited) whose trace
//! holds the hog's resume with its length; the ring stays bounded.

mod util;

use std::rc::Rc;
use std::time::Duration;

use coro::flight::{self, After, Event};
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

fn spin(d: Duration) {
    let t = std::time::Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
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
                .spawn(|| spin(Duration::from_millis(80)))
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
                .spawn(|| spin(Duration::from_millis(60)))
                .unwrap()
                .join()
                .unwrap();
            assert_eq!(flight::latency_snapshots().len(), 1);
            assert!(coro::stats().latency_warnings >= 2);
        })
        .unwrap();
    });
}

#[test]
fn latency_snapshots_can_be_turned_off() {
    let mut rt = coro::Runtime::builder()
        .latency_warning(Some(Duration::from_millis(10)))
        .latency_snapshots(None)
        .build()
        .unwrap();
    rt.block_on(|| {
        coro::spawn(|| spin(Duration::from_millis(40)))
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
