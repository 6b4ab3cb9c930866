//! The bridge's runtime: started once per process on first use (or by a
//! `Builder`, before), shut down on request or at process exit. Each test
//! runs in a child process of its own: the bridge is one per process.

use std::io::ErrorKind;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use coro::tokio::{Builder, JoinError, DEFAULT_THREAD_NAME, WORKERS_ENV};

use crate::{child, child_ok, is_child, threads_named, util};

/// Waits until `n` threads are named `name`: a thread takes its name
/// once it runs, a moment after it was created, and leaves `/proc` a
/// moment after it ended.
#[track_caller]
fn wait_threads(name: &str, n: usize) {
    let deadline = Instant::now() + util::LIMIT;
    while threads_named(name) != n {
        assert!(
            Instant::now() < deadline,
            "{} threads named {name:?}, not {n}",
            threads_named(name)
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The worker count the bridge starts with by default on this machine.
fn default_workers() -> usize {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    cpus.min(coro::tokio::DEFAULT_WORKERS)
}

#[test]
fn the_bridge_starts_on_first_use() {
    let name = "lifecycle::the_bridge_starts_on_first_use";
    if is_child(name) {
        util::run(|| {
            assert_eq!(threads_named(DEFAULT_THREAD_NAME), 0, "started before use");
            assert_eq!(coro::tokio::run(async { 1 }).unwrap(), 1);
            wait_threads(DEFAULT_THREAD_NAME, default_workers());
            // Once: later calls use the same threads.
            for _ in 0..10 {
                coro::tokio::run(async {}).unwrap();
            }
            assert_eq!(threads_named(DEFAULT_THREAD_NAME), default_workers());
        });
        return;
    }
    child_ok(name, &[]);
}

#[test]
fn a_builder_sets_the_runtime_up_before_first_use_and_not_after() {
    let name = "lifecycle::a_builder_sets_the_runtime_up_before_first_use_and_not_after";
    if is_child(name) {
        Builder::new()
            .worker_threads(3)
            .thread_name("bridge-test")
            .start()
            .unwrap();
        wait_threads("bridge-test", 3);
        util::run(|| {
            let on = coro::tokio::run(async { std::thread::current().name().map(str::to_owned) });
            assert_eq!(on.unwrap().as_deref(), Some("bridge-test"));
        });
        let err = Builder::new().worker_threads(1).start().unwrap_err();
        assert_eq!(err.kind(), ErrorKind::AlreadyExists);
        assert!(err.to_string().contains("before its first use"), "{err}");
        assert_eq!(threads_named("bridge-test"), 3);
        return;
    }
    child_ok(name, &[]);
}

#[test]
fn the_worker_count_comes_from_the_environment() {
    let name = "lifecycle::the_worker_count_comes_from_the_environment";
    if is_child(name) {
        util::run(|| coro::tokio::run(async {}).unwrap());
        wait_threads(DEFAULT_THREAD_NAME, 3);
        return;
    }
    child_ok(name, &[(WORKERS_ENV, "3")]);
}

#[test]
fn a_bad_worker_count_in_the_environment_is_an_error_naming_it() {
    let name = "lifecycle::a_bad_worker_count_in_the_environment_is_an_error_naming_it";
    if is_child(name) {
        util::run(|| {
            let err = coro::tokio::run(async {}).unwrap_err();
            let JoinError::Unavailable(e) = &err else {
                panic!("{err:?}")
            };
            assert_eq!(e.kind(), ErrorKind::InvalidInput);
            assert!(
                err.to_string().contains("CORO_TOKIO_WORKERS=\"lots\""),
                "{err}"
            );
            assert!(coro::tokio::handle().is_err());
        });
        assert_eq!(threads_named(DEFAULT_THREAD_NAME), 0);
        return;
    }
    child_ok(name, &[(WORKERS_ENV, "lots")]);
}

#[test]
fn shutdown_cancels_the_calls_in_flight_and_refuses_later_ones() {
    let name = "lifecycle::shutdown_cancels_the_calls_in_flight_and_refuses_later_ones";
    if is_child(name) {
        util::run(|| {
            let callers: Vec<_> = (0..10)
                .map(|_| coro::spawn(|| coro::tokio::run(std::future::pending::<()>())))
                .collect();
            util::settle();
            wait_threads(DEFAULT_THREAD_NAME, default_workers());
            // From a green thread: only it waits (on coro's blocking pool).
            assert!(coro::tokio::shutdown(Duration::from_secs(10)));
            for c in callers {
                let r = c.join().unwrap();
                assert!(matches!(r, Err(JoinError::Cancelled)), "{r:?}");
            }
            wait_threads(DEFAULT_THREAD_NAME, 0);
            let err = coro::tokio::run(async { 1 }).unwrap_err();
            let JoinError::Unavailable(e) = &err else {
                panic!("{err:?}")
            };
            assert_eq!(e.kind(), ErrorKind::NotConnected);
            assert!(err.to_string().contains("shut down"), "{err}");
            assert_eq!(
                coro::tokio::handle().unwrap_err().kind(),
                ErrorKind::NotConnected
            );
            let err = Builder::new().start().unwrap_err();
            assert_eq!(err.kind(), ErrorKind::NotConnected);
            // Again: nothing left to stop.
            assert!(coro::tokio::shutdown(Duration::from_secs(1)));
        });
        return;
    }
    child_ok(name, &[]);
}

/// Where a child's task writes that it was dropped.
fn marker(test: &str) -> PathBuf {
    std::env::temp_dir().join(format!("coro-tokio-{test}-{}", std::process::id()))
}

/// Writes to the file at `MARKER` when dropped.
struct DropMarker(PathBuf);

impl Drop for DropMarker {
    fn drop(&mut self) {
        std::fs::write(&self.0, "dropped").unwrap();
    }
}

#[test]
fn at_exit_the_bridge_drops_its_tasks() {
    let name = "lifecycle::at_exit_the_bridge_drops_its_tasks";
    if is_child(name) {
        let marker = DropMarker(std::env::var_os("MARKER").unwrap().into());
        // A task in flight when the process exits: its future is dropped
        // (a connection it held would be closed in order).
        util::run(move || {
            drop(coro::tokio::spawn(async move {
                let _marker = marker;
                std::future::pending::<()>().await
            }));
        });
        return; // the test harness returns from main: exit(3)
    }
    let path = marker("exit");
    let _ = std::fs::remove_file(&path);
    child_ok(name, &[("MARKER", path.to_str().unwrap())]);
    let written = std::fs::read_to_string(&path);
    let _ = std::fs::remove_file(&path);
    assert_eq!(
        written.ok().as_deref(),
        Some("dropped"),
        "the task was not dropped"
    );
}

#[test]
fn exit_waits_for_a_blocked_worker_no_longer_than_the_shutdown_timeout() {
    let name = "lifecycle::exit_waits_for_a_blocked_worker_no_longer_than_the_shutdown_timeout";
    if is_child(name) {
        Builder::new()
            .shutdown_timeout(Duration::from_millis(300))
            .start()
            .unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        // A future that blocks its worker thread for a minute.
        drop(coro::tokio::spawn(async move {
            tx.send(()).unwrap();
            std::thread::sleep(Duration::from_secs(60));
        }));
        rx.recv().unwrap();
        println!("exiting");
        return;
    }
    let t = Instant::now();
    let out = child(name, &[]);
    let took = t.elapsed();
    assert!(out.status.success(), "{out:?}");
    assert!(out.stdout.contains("exiting"), "{out:?}");
    // Bounded by the timeout (plus start-up), never by the blocked
    // worker's minute.
    assert!(took < Duration::from_secs(30), "{took:?}");
}
