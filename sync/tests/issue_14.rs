//! Regression tests for issue #14 ("What a newcomer missed"), the parts in
//! coro-sync: std-shaped channels (item 7) and lock owner queries (item 14).
//! Its error loops (item 3) are tested with coro-net's in the root
//! `tests/issue_14.rs`.

mod util;

use std::rc::Rc;

use coro_runtime::spawn;
use coro_sync::{channel, sync_channel, Mutex, RecvError, RwLock};
use util::run;

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
