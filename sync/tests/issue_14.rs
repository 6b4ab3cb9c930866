//! Regression tests for issue #14 ("What a newcomer missed"), the parts in
//! coro-sync: error loops that cannot starve the other green threads (item
//! 3), std-shaped channels (item 7) and lock owner queries (item 14).

mod util;

use std::cell::Cell;
use std::rc::Rc;

use coro_runtime::{spawn, yield_now};
use coro_sync::{channel, remote, sync_channel, LockError, Mutex, RecvError, RwLock, SendError};
use util::run;

/// Failing calls made in a row by the error loops below.
const CALLS: u32 = 1000;

/// Runs `call` [`CALLS`] times (every call fails at once) while another
/// green thread yields in a loop; returns how often that thread ran. A
/// call that fails without waiting spends selfishness (4 by default), so
/// the other thread gets about a turn every four calls.
fn ticks_during(mut call: impl FnMut()) -> u32 {
    let ticks = Rc::new(Cell::new(0u32));
    let stop = Rc::new(Cell::new(false));
    let ticker = {
        let (ticks, stop) = (ticks.clone(), stop.clone());
        spawn(move || {
            while !stop.get() {
                ticks.set(ticks.get() + 1);
                yield_now();
            }
        })
    };
    yield_now(); // the ticker is in its loop
    let start = ticks.get();
    for _ in 0..CALLS {
        call();
    }
    let ran = ticks.get() - start;
    stop.set(true);
    ticker.join().unwrap();
    ran
}

#[track_caller]
fn assert_kept_its_schedule(what: &str, ticks: u32) {
    assert!(
        ticks >= CALLS / 4 - 2,
        "{what}: the other thread ran {ticks} times during {CALLS} failing calls"
    );
}

/// Item 3: `while let Ok(m) = rx.recv()` on a closed channel used to spin
/// (recv returned `Ok(None)` at once, forever, without yielding).
#[test]
fn issue_14_3_an_error_loop_on_a_closed_channel_yields() {
    run(|| {
        let (tx, rx) = sync_channel::<u32>(4);
        drop(tx);
        let ticks = ticks_during(|| assert_eq!(rx.recv(), Err(RecvError::Disconnected)));
        assert_kept_its_schedule("recv on a closed channel", ticks);

        let (tx, rx) = channel::<u32>();
        drop(rx);
        let ticks = ticks_during(|| assert!(matches!(tx.send(1), Err(SendError::Disconnected(1)))));
        assert_kept_its_schedule("send without a receiver", ticks);

        let (tx, rx) = remote::channel::<u32>();
        drop(tx);
        let ticks = ticks_during(|| assert_eq!(rx.recv(), Err(RecvError::Disconnected)));
        assert_kept_its_schedule("recv on a closed remote channel", ticks);
    });
}

/// Item 3: a lock that fails at once (the caller already holds it) yields
/// in a loop too.
#[test]
fn issue_14_3_an_error_loop_on_a_held_lock_yields() {
    run(|| {
        let m = Mutex::new(0);
        let _g = m.lock().unwrap();
        let ticks = ticks_during(|| assert!(matches!(m.lock(), Err(LockError::WouldDeadlock))));
        assert_kept_its_schedule("Mutex::lock held by the caller", ticks);
        let l = RwLock::new(0);
        let _w = l.write().unwrap();
        let ticks = ticks_during(|| assert!(matches!(l.read(), Err(LockError::WouldDeadlock))));
        assert_kept_its_schedule("RwLock::read under the caller's write", ticks);
    });
}

/// Item 7: `channel()` is unbounded as std's, `sync_channel(0)` is a
/// rendezvous (it used to panic), and `recv` says "disconnected" the std
/// way; `while let Ok(..)` ends.
#[test]
fn issue_14_7_channels_have_std_shapes() {
    run(|| {
        let (tx, rx) = channel();
        for i in 0..100 {
            tx.send(i).unwrap();
        }
        drop(tx);
        let mut n = 0;
        while let Ok(i) = rx.recv() {
            assert_eq!(i, n);
            n += 1;
        }
        assert_eq!(n, 100);

        let (tx, rx) = sync_channel(0);
        let h = spawn(move || rx.recv());
        tx.send("rendezvous").unwrap();
        assert_eq!(h.join().unwrap(), Ok("rendezvous"));
        assert_eq!(
            RecvError::Disconnected.to_string(),
            "receiving on a closed channel"
        );
    });
}

/// Item 14: a lock says whether it is held and by whom.
#[test]
fn issue_14_14_locks_report_their_owner() {
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
