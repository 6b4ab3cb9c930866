//! Mutex: FIFO hand-off, no barging, self-lock error, try_lock, every
//! interleaving of interrupts, timeouts and releases, owner queries (also
//! RwLock's), and a deadlock report while a lock is held and awaited.

mod util;

use std::panic;
use std::rc::Rc;
use std::sync::mpsc;
use std::time::Duration;

use coro_runtime::{self as coro, spawn, with_timeout, yield_now, JoinHandle, Timeout, WaitError};
use coro_sync::{LockError, Mutex, RwLock, TryLockError};
use util::{interrupt, join_all, run, settle, Log};

/// Spawns `n` threads that each lock `m` once, log the outcome and unlock.
/// Returns once all of them are queued.
fn lockers(m: &Rc<Mutex<Vec<usize>>>, log: &Log, n: usize) -> Vec<JoinHandle<()>> {
    let hs: Vec<_> = (0..n)
        .map(|i| {
            let (m, log) = (m.clone(), log.clone());
            spawn(move || match m.lock() {
                Ok(mut g) => {
                    g.push(i);
                    log.push(i, "Ok");
                }
                Err(e) => log.push(i, e),
            })
        })
        .collect();
    settle();
    assert_eq!(m.waiters(), n);
    hs
}

#[test]
fn smoke() {
    run(|| {
        let mut m = Mutex::new(1);
        *m.lock().unwrap() += 1;
        assert!(!m.is_locked());
        {
            let g = m.try_lock().unwrap();
            assert_eq!(*g, 2);
            assert!(m.is_locked());
            assert_eq!(format!("{m:?}"), "Mutex { data: <locked>, waiters: 0, .. }");
        }
        assert_eq!(format!("{m:?}"), "Mutex { data: 2, waiters: 0, .. }");
        *m.get_mut() = 5;
        assert_eq!(m.into_inner(), 5);
    });
}

#[test]
fn waiters_get_the_lock_in_fifo_order() {
    run(|| {
        let m = Rc::new(Mutex::new(Vec::new()));
        let log = Log::new();
        let g = m.lock().unwrap();
        let hs = lockers(&m, &log, 5);
        drop(g);
        join_all(hs);
        assert_eq!(*m.lock().unwrap(), [0, 1, 2, 3, 4]);
        assert_eq!(log.with("Ok"), [0, 1, 2, 3, 4]);
    });
}

#[test]
fn unlock_hands_over_without_barging() {
    run(|| {
        let m = Rc::new(Mutex::new(Vec::new()));
        let log = Log::new();
        let g = m.lock().unwrap();
        let hs = lockers(&m, &log, 1);
        drop(g);
        // Ownership went to the waiter, which has not run yet.
        assert!(m.is_locked());
        assert_eq!(m.try_lock().err(), Some(TryLockError::WouldBlock));
        // Relocking at once queues behind it.
        m.lock().unwrap().push(99);
        join_all(hs);
        assert_eq!(*m.lock().unwrap(), [0, 99]);
    });
}

#[test]
fn self_lock_is_an_error_not_a_hang() {
    run(|| {
        let m = Mutex::new(());
        let g = m.lock().unwrap();
        assert_eq!(m.lock().err(), Some(LockError::WouldDeadlock));
        assert_eq!(m.try_lock().err(), Some(TryLockError::WouldBlock));
        drop(g);
        assert!(m.lock().is_ok());
    });
}

#[test]
fn try_lock() {
    run(|| {
        let m = Rc::new(Mutex::new(0));
        let g = m.try_lock().unwrap();
        let m2 = m.clone();
        let other = spawn(move || m2.try_lock().map(|_| ()));
        assert_eq!(other.join().unwrap(), Err(TryLockError::WouldBlock));
        drop(g);
        assert!(m.try_lock().is_ok());
    });
}

#[test]
fn interrupt_then_release_six_waiters_one_proceeds() {
    run(|| {
        let m = Rc::new(Mutex::new(Vec::new()));
        let log = Log::new();
        let g = m.lock().unwrap();
        let hs = lockers(&m, &log, 6);
        interrupt(&hs, [0, 1, 2, 4, 5]);
        drop(g);
        settle();
        assert_eq!(log.with("Ok"), [3]);
        assert_eq!(log.with("Wait(Interrupted)").len(), 5);
        join_all(hs);
        assert!(!m.is_locked());
        assert_eq!(m.waiters(), 0);
        assert_eq!(*m.try_lock().unwrap(), [3]);
    });
}

#[test]
fn release_then_interrupt_passes_ownership_on() {
    run(|| {
        let m = Rc::new(Mutex::new(Vec::new()));
        let log = Log::new();
        let g = m.lock().unwrap();
        let hs = lockers(&m, &log, 6);
        drop(g); // hands the lock to waiter 0, which has not run yet
        interrupt(&hs, [0, 1, 2, 3, 4]); // the interrupt wins over the hand-off
        settle();
        assert_eq!(log.with("Ok"), [5]);
        assert_eq!(log.with("Wait(Interrupted)").len(), 5);
        join_all(hs);
        assert!(!m.is_locked());
        assert_eq!(m.waiters(), 0);
        assert_eq!(*m.try_lock().unwrap(), [5]);
    });
}

#[test]
fn handed_then_interrupted_goes_to_the_next_in_line() {
    run(|| {
        let m = Rc::new(Mutex::new(Vec::new()));
        let log = Log::new();
        let g = m.lock().unwrap();
        let hs = lockers(&m, &log, 3);
        drop(g);
        interrupt(&hs, [0]);
        join_all(hs);
        assert_eq!(log.entries()[0], (0, "Wait(Interrupted)".to_string()));
        assert_eq!(*m.lock().unwrap(), [1, 2]);
    });
}

#[test]
fn all_waiters_interrupted_leaves_it_unlocked() {
    run(|| {
        let m = Rc::new(Mutex::new(Vec::new()));
        let log = Log::new();
        let g = m.lock().unwrap();
        let hs = lockers(&m, &log, 3);
        interrupt(&hs, 0..3);
        drop(g);
        assert!(!m.is_locked());
        join_all(hs);
        assert_eq!(log.with("Wait(Interrupted)").len(), 3);
        assert!(m.try_lock().unwrap().is_empty());
    });
}

#[test]
fn timeout_while_waiting() {
    run(|| {
        let m = Rc::new(Mutex::new(0));
        let g = m.lock().unwrap();
        let m2 = m.clone();
        let waiter =
            spawn(move || with_timeout(Duration::from_millis(5), || m2.lock().map(|_| ())));
        assert_eq!(waiter.join().unwrap(), Err(Timeout));
        assert_eq!(m.waiters(), 0);
        drop(g);
        assert!(!m.is_locked());
    });
}

#[test]
fn handed_then_timed_out_passes_ownership_on() {
    run(|| {
        let m = Rc::new(Mutex::new(Vec::new()));
        let (m1, m2) = (m.clone(), m.clone());
        let g = m.lock().unwrap();
        let first = spawn(move || {
            with_timeout(Duration::from_millis(1), || {
                m1.lock().map(|mut g| g.push(1))
            })
        });
        let second = spawn(move || m2.lock().map(|mut g| g.push(2)));
        settle();
        // Let the first waiter's deadline pass without running the loop,
        // then hand it the lock: its timeout wins when it runs.
        std::thread::sleep(Duration::from_millis(5));
        drop(g);
        assert_eq!(first.join().unwrap(), Err(Timeout));
        assert_eq!(second.join().unwrap(), Ok(()));
        assert_eq!(*m.lock().unwrap(), [2]);
    });
}

#[test]
fn panicking_holder_unlocks() {
    run(|| {
        let m = Rc::new(Mutex::new(0));
        let m2 = m.clone();
        let h = spawn(move || {
            let _g = m2.lock().unwrap();
            panic!("boom");
        });
        assert!(h.join().unwrap_err().is_panic());
        assert!(!m.is_locked());
        *m.lock().unwrap() += 1;
    });
}

#[test]
fn wait_error_is_reported_not_swallowed() {
    run(|| {
        let m = Rc::new(Mutex::new(()));
        let _g = m.lock().unwrap();
        let m2 = m.clone();
        let h = spawn(move || {
            coro_runtime::current().interrupt().unwrap();
            m2.lock().map(|_| ())
        });
        yield_now();
        assert_eq!(
            h.join().unwrap(),
            Err(LockError::Wait(WaitError::Interrupted))
        );
        assert_eq!(m.waiters(), 0);
    });
}

#[test]
fn runtime_shutdown_with_waiters_queued_is_clean() {
    let m = Rc::new(Mutex::new(0));
    let log = Log::new();
    let (m2, log2) = (m.clone(), log.clone());
    coro_runtime::run(move || {
        let g = m2.lock().unwrap();
        let m3 = m2.clone();
        let l = log2.clone();
        spawn(move || l.push(0, m3.lock().map(drop)));
        settle();
        assert_eq!(m2.waiters(), 1);
        drop(g); // handed to the waiter; then main returns and shutdown stops it
    });
    assert_eq!(log.entries(), [(0, "Err(Wait(Interrupted))".to_string())]);
    assert!(!m.is_locked());
    assert_eq!(m.waiters(), 0);
}

/// The runtime's deadlock report unwinds `block_on` while a parked thread
/// holds a lock another one waits for. The holder is unwound with its
/// runtime current, its guard hands the lock on, and nothing panics inside
/// cleanup (a panic there would abort the whole test binary).
#[test]
fn a_deadlock_report_with_a_lock_held_and_awaited_does_not_abort() {
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

/// A lock says whether it is held and by whom.
#[test]
fn locks_report_their_owner() {
    run(|| {
        let m = Rc::new(Mutex::new(()));
        assert_eq!(m.owner(), None);
        let g = m.lock().unwrap();
        assert!(m.is_owned_by_current_thread());
        assert_eq!(m.owner(), coro_runtime::current_id());
        let other = {
            let m = m.clone();
            spawn(move || (m.is_locked(), m.is_owned_by_current_thread()))
        };
        assert_eq!(other.join().unwrap(), (true, false));
        drop(g);
        assert!(!m.is_owned_by_current_thread());

        let l = Rc::new(RwLock::new(()));
        let w = l.write().unwrap();
        assert!(l.is_locked() && l.is_write_owned_by_current_thread());
        assert_eq!(l.writer(), coro_runtime::current_id());
        let other = {
            let l = l.clone();
            spawn(move || l.is_write_owned_by_current_thread())
        };
        assert!(!other.join().unwrap());
        drop(w);
        assert_eq!(l.writer(), None);
        let r = l.read().unwrap();
        assert!(l.is_read_owned_by_current_thread() && !l.is_write_owned_by_current_thread());
        drop(r);
        assert!(!l.is_locked());
    });
}
