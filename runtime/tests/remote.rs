//! The `Send` side of a runtime: `Handle::spawn` from other OS threads
//! (while it runs, before it runs, after it is gone) and `RemoteWaker`
//! (wakes only the park it was made for, from any thread).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use coro_runtime::{self as coro, Builder, RemoteWaker, Timeout};
use coro_test_support::LIMIT;

#[test]
fn an_os_thread_spawns_named_green_threads_into_a_running_runtime() {
    coro::run(|| {
        let handle = coro::handle();
        let (tx, rx) = mpsc::channel();
        let os = std::thread::spawn(move || {
            for i in 0..3 {
                let tx = tx.clone();
                handle
                    .spawn_with(Builder::new().name(format!("remote-{i}")), move || {
                        let me = coro::current();
                        coro::sleep(Duration::from_millis(1)).unwrap(); // a real green thread
                        tx.send(me.name().map(str::to_owned)).unwrap();
                    })
                    .unwrap();
            }
        });
        let mut names: Vec<String> =
            coro::blocking(move || rx.iter().take(3).map(Option::unwrap).collect()).unwrap();
        names.sort();
        assert_eq!(names, ["remote-0", "remote-1", "remote-2"]);
        os.join().unwrap();
    });
}

#[test]
fn closures_sent_before_block_on_run_once_it_runs() {
    let mut rt = coro::Runtime::new().unwrap();
    let handle = rt.handle();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || handle.spawn(move || tx.send(coro::current().id()).unwrap()))
        .join()
        .unwrap()
        .unwrap();
    let id = rt.block_on(move || {
        coro::with_timeout(LIMIT, || loop {
            match rx.try_recv() {
                Ok(id) => return id,
                Err(_) => coro::sleep(Duration::from_millis(1)).unwrap(),
            }
        })
        .expect("the remote closure ran")
    });
    assert!(id > 1);
}

#[test]
fn a_handle_of_a_dropped_runtime_refuses() {
    let rt = coro::Runtime::new().unwrap();
    let handle = rt.handle();
    assert!(!handle.is_closed());
    drop(rt);
    assert!(handle.is_closed());
    let e = handle.spawn(|| ()).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::NotConnected);
    assert!(e.to_string().contains("dropped"), "{e}");
}

#[test]
fn a_remote_waker_wakes_its_park_from_another_os_thread() {
    coro::run(|| {
        let done = Arc::new(AtomicBool::new(false));
        let waker = RemoteWaker::current();
        let d = done.clone();
        let os = std::thread::spawn(move || {
            d.store(true, Ordering::Release);
            assert!(waker.wake());
        });
        coro::with_timeout(LIMIT, || {
            while !done.load(Ordering::Acquire) {
                coro::park().unwrap();
            }
        })
        .expect("woken");
        os.join().unwrap();
    });
}

/// A wake for a park that ended (here by a timeout) does not wake the
/// thread's next park.
#[test]
fn a_late_remote_wake_wakes_nothing() {
    coro::run(|| {
        let stale = RemoteWaker::current();
        assert_eq!(
            coro::with_timeout(Duration::from_millis(2), coro::park),
            Err(Timeout)
        );
        let os = std::thread::spawn(move || stale.wake());
        assert!(os.join().unwrap());
        coro::yield_now(); // the loop polls and drains the wake-up
                           // The next park is not woken by it: it runs into its own deadline.
        assert_eq!(
            coro::with_timeout(Duration::from_millis(20), coro::park),
            Err(Timeout)
        );
    });
}

#[test]
fn a_remote_waker_is_a_std_waker() {
    coro::run(|| {
        let waker = RemoteWaker::current().into_waker();
        let os = std::thread::spawn(move || waker.wake());
        coro::with_timeout(LIMIT, coro::park)
            .expect("woken")
            .unwrap();
        os.join().unwrap();
    });
}
