//! Issue #13, item 2(a): the runtime's deadlock report unwinds `block_on`
//! while a parked thread holds a lock another one waits for. The holder is
//! unwound with its runtime current, its guard hands the lock on, and
//! nothing panics inside cleanup (which aborted the whole test binary).

use std::panic;
use std::rc::Rc;
use std::sync::mpsc;
use std::time::Duration;

use coro_runtime as coro;
use coro_sync::Mutex;

#[test]
fn issue_13_deadlock_report_with_a_lock_held_and_awaited_does_not_abort() {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let r = panic::catch_unwind(|| {
            coro::run(|| {
                let m = Rc::new(Mutex::new(0));
                let m2 = m.clone();
                drop(coro::spawn(move || {
                    let _g = m2.lock().unwrap();
                    let _ = coro::park(); // holds the guard
                }));
                coro::yield_now();
                let m3 = m.clone();
                drop(coro::spawn(move || m3.lock().map(|g| *g).is_ok()));
                let _ = coro::park(); // everything parked: "coro: deadlock"
            })
        });
        let msg = r
            .err()
            .and_then(|p| p.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        let _ = tx.send(msg);
    });
    let msg = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("run returned");
    assert!(msg.contains("deadlock"), "{msg}");
}
