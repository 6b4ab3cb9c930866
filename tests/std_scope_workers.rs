//! The pattern coro's docs recommend: OS workers fill a green thread's
//! local array (borrowed through `std::thread::scope`) while it waits for
//! them on `coro::sync::remote`, under plain `coro::run` defaults. The
//! workers wait until the green thread has been parked across the idle
//! sweep before they touch its stack; they must read what it holds (not
//! zeros, as from a stack copied out) and their writes must stay.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Sets the returned flag once the idle sweep has visited a parked thread
/// (the test's main thread: this watcher wakes every 5 ms, so it never is).
fn watch_sweeps() -> Arc<AtomicBool> {
    let swept = Arc::new(AtomicBool::new(false));
    let flag = swept.clone();
    coro::spawn(move || loop {
        let st = coro::stats();
        if st.idle_stack_trims + st.idle_stacks as u64 >= 1 {
            flag.store(true, Ordering::SeqCst);
            return;
        }
        if coro::sleep(Duration::from_millis(5)).is_err() {
            return;
        }
    });
    swept
}

#[test]
fn workers_fill_a_parked_green_threads_array_through_remote_channels() {
    let (dog_done, dog) = std::sync::mpsc::channel::<()>();
    let watchdog = std::thread::spawn(move || {
        if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
            dog.recv_timeout(Duration::from_secs(60))
        {
            eprintln!("workers_fill_a_parked_green_threads_array ran past 60 s; aborting");
            std::process::abort();
        }
    });
    let (buf, seen) = coro::run(|| {
        let swept = watch_sweeps();
        let mut buf = [0xffu8; 4 * 4096];
        let (tx, rx) = coro::sync::remote::channel::<(usize, bool)>();
        let seen = std::thread::scope(|s| {
            for (i, chunk) in buf.chunks_mut(4096).enumerate() {
                let (tx, swept) = (tx.clone(), swept.clone());
                s.spawn(move || {
                    while !swept.load(Ordering::SeqCst) {
                        std::thread::sleep(Duration::from_millis(5));
                    }
                    let intact = chunk.iter().all(|&b| b == 0xff);
                    chunk.fill(i as u8);
                    tx.send((i, intact)).unwrap();
                });
            }
            drop(tx);
            // Only this green thread waits; it parks until a worker sends.
            rx.iter().collect::<Vec<(usize, bool)>>()
        });
        (buf, seen)
    });
    drop(dog_done);
    watchdog.join().unwrap();
    assert_eq!(seen.len(), 4);
    assert!(
        seen.iter().all(|&(_, intact)| intact),
        "a worker read a released stack: {seen:?}"
    );
    for (i, chunk) in buf.chunks(4096).enumerate() {
        assert!(
            chunk.iter().all(|&b| b == i as u8),
            "worker {i}'s writes were lost"
        );
    }
}
