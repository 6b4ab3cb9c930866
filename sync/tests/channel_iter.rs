//! The channel iterators (`Receiver::iter`, `Receiver::into_iter`,
//! `remote::Receiver::iter`) end once the receiving thread's wait is cut
//! short, with a sender still alive: an expired `with_timeout`, an
//! interrupt (pending, or arriving while it waits), a cancelled scope. They
//! end at once, after the items queued before, and stay ended: an item sent
//! afterwards is not taken by the ended iterator.
//!
//! Interleavings are forced with `yield_until` on thread states; every loop
//! counts its turns, and `util::run` bounds a wait that would not end.

mod util;

use std::time::Duration;

use coro_runtime::{current, spawn, with_timeout, CancelScope, Coro, ThreadState};
use coro_sync::{channel, remote};
use util::{run, yield_until};

/// More items than any test sends: a loop past it spins.
const TURNS: usize = 100;

/// A channel's sender and an iterator over its receiver.
struct Chan {
    name: &'static str,
    send: Box<dyn Fn(u32)>,
    iter: Box<dyn Iterator<Item = u32>>,
}

/// One of each iterator, on a fresh channel.
fn chans() -> Vec<Chan> {
    let (tx, rx) = channel::<u32>();
    // `iter` borrows its receiver: leaked for the test's length.
    let rx: &'static _ = Box::leak(Box::new(rx));
    let local = Chan {
        name: "Receiver::iter",
        send: Box::new(move |v| tx.send(v).unwrap()),
        iter: Box::new(rx.iter()),
    };
    let (tx, rx) = channel::<u32>();
    let owned = Chan {
        name: "Receiver::into_iter",
        send: Box::new(move |v| tx.send(v).unwrap()),
        iter: Box::new(rx.into_iter()),
    };
    let (tx, rx) = remote::channel::<u32>();
    let rx: &'static _ = Box::leak(Box::new(rx));
    let bridged = Chan {
        name: "remote::Receiver::iter",
        send: Box::new(move |v| tx.send(v).unwrap()),
        iter: Box::new(rx.iter()),
    };
    vec![local, owned, bridged]
}

/// Drains `c`'s iterator in a loop, as a consumer does; returns what it got.
#[track_caller]
fn drain(c: &mut Chan) -> Vec<u32> {
    let mut got = Vec::new();
    for v in &mut c.iter {
        got.push(v);
        assert!(got.len() < TURNS, "{}: it does not end", c.name);
    }
    got
}

/// Sends 1 and 2, lets `cut` end the loop that drains them; then checks
/// that the loop got both and ended, and that the iterator stays ended
/// with an item queued.
#[track_caller]
fn ends_after_what_was_queued(cut: impl Fn(&mut Chan) -> Vec<u32>) {
    for mut c in chans() {
        (c.send)(1);
        (c.send)(2);
        assert_eq!(cut(&mut c), [1, 2], "{}", c.name);
        (c.send)(3);
        assert_eq!(c.iter.next(), None, "{}: it did not stay ended", c.name);
    }
}

#[track_caller]
fn until_parked(t: &Coro) {
    yield_until("the receiver to wait", || t.state() == ThreadState::Parked);
}

#[test]
fn they_end_once_the_deadline_passed() {
    run(|| {
        ends_after_what_was_queued(|c| {
            let mut got = Vec::new();
            let r = with_timeout(Duration::from_millis(20), || got = drain(c));
            assert!(r.is_err(), "{}: the deadline's error was seen", c.name);
            got
        });
        ends_after_what_was_queued(|c| {
            let mut got = Vec::new();
            let _ = with_timeout(Duration::ZERO, || got = drain(c));
            got
        });
    });
}

#[test]
fn they_end_when_the_thread_is_interrupted() {
    run(|| {
        // While it waits.
        ends_after_what_was_queued(|c| {
            let me = current();
            let interrupter = spawn(move || {
                until_parked(&me);
                me.interrupt().unwrap();
            });
            let got = drain(c);
            interrupter.join().unwrap();
            got
        });
        // Pending when the loop begins (after the queued items, it waits).
        ends_after_what_was_queued(|c| {
            let mut got = vec![c.iter.next().unwrap(), c.iter.next().unwrap()];
            current().interrupt().unwrap();
            got.extend(drain(c));
            got
        });
    });
}

#[test]
fn they_end_when_the_scope_is_cancelled() {
    run(|| {
        ends_after_what_was_queued(|c| {
            let scope = CancelScope::new();
            let canceller = {
                let (me, scope) = (current(), scope.clone());
                spawn(move || {
                    until_parked(&me);
                    scope.cancel();
                })
            };
            let mut got = Vec::new();
            let r = scope.run(|| got = drain(c));
            assert!(r.is_err(), "{}: the cancellation was seen", c.name);
            canceller.join().unwrap();
            got
        });
    });
}
