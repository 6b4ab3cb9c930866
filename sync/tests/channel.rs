//! Channels of one runtime: order, capacity, close semantics on both ends,
//! FIFO senders and receivers, interrupts and timeouts in every order on both
//! sides (values are never lost: they come back in the error or stay
//! queued), the unbounded `channel()` and the rendezvous `sync_channel(0)`.

mod util;

use std::rc::Rc;
use std::time::Duration;

use coro_runtime::{spawn, with_timeout, JoinHandle, Timeout, WaitError};
use coro_sync::{
    channel, sync_channel, Receiver, RecvError, SendError, Sender, TryRecvError, TrySendError,
};
use util::{interrupt, join_all, run, settle, Log};

/// Spawns one blocked sender per value, logging the outcome; returns once all
/// are queued. The channel must be full.
fn senders(tx: &Sender<u32>, log: &Log, values: &[u32]) -> Vec<JoinHandle<()>> {
    let hs = values
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            let (tx, log) = (tx.clone(), log.clone());
            spawn(move || match tx.send(v) {
                Ok(()) => log.push(i, "Ok"),
                Err(e) => log.push(i, e),
            })
        })
        .collect();
    settle();
    hs
}

/// Spawns `n` receivers on a shared receiver, logging what they got; returns
/// once all are queued. The channel must be empty.
fn receivers(rx: &Rc<Receiver<u32>>, log: &Log, n: usize) -> Vec<JoinHandle<()>> {
    let hs = (0..n)
        .map(|i| {
            let (rx, log) = (rx.clone(), log.clone());
            spawn(move || match rx.recv() {
                Ok(v) => log.push(i, v),
                Err(e) => log.push(i, e),
            })
        })
        .collect();
    settle();
    hs
}

#[test]
fn send_recv_in_order_within_capacity() {
    run(|| {
        let (tx, rx) = sync_channel(2);
        assert_eq!(tx.capacity(), Some(2));
        tx.send(1).unwrap();
        tx.try_send(2).unwrap();
        assert_eq!(tx.try_send(3), Err(TrySendError::Full(3)));
        assert_eq!(rx.len(), 2);
        assert_eq!(rx.recv(), Ok(1));
        assert_eq!(rx.try_recv(), Ok(2));
        assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
        assert!(rx.is_empty());
    });
}

#[test]
fn one_producer_one_consumer_through_a_small_buffer() {
    run(|| {
        let (tx, rx) = sync_channel(3);
        let producer = spawn(move || {
            for i in 0..1000 {
                tx.send(i).unwrap();
            }
        });
        let mut next = 0;
        while let Ok(i) = rx.recv() {
            assert_eq!(i, next);
            assert!(rx.len() <= 3);
            next += 1;
        }
        assert_eq!(next, 1000);
        producer.join().unwrap();
    });
}

#[test]
fn recv_fails_disconnected_once_every_sender_is_gone() {
    run(|| {
        let (tx, rx) = sync_channel(4);
        let tx2 = tx.clone();
        tx.send(1).unwrap();
        drop(tx);
        assert!(!rx.is_closed());
        tx2.send(2).unwrap();
        drop(tx2);
        assert!(rx.is_closed());
        // Buffered items are still delivered, then Disconnected.
        assert_eq!(rx.recv(), Ok(1));
        assert_eq!(rx.recv(), Ok(2));
        assert_eq!(rx.recv(), Err(RecvError::Disconnected));
        assert_eq!(rx.try_recv(), Err(TryRecvError::Disconnected));
    });
}

#[test]
fn a_waiting_receiver_fails_disconnected_when_the_last_sender_goes() {
    run(|| {
        let (tx, rx) = sync_channel::<u32>(4);
        let rx = Rc::new(rx);
        let log = Log::new();
        let hs = receivers(&rx, &log, 2);
        drop(tx);
        join_all(hs);
        assert_eq!(
            log.entries(),
            [
                (0, "Disconnected".to_string()),
                (1, "Disconnected".to_string())
            ]
        );
    });
}

#[test]
fn send_to_a_dropped_receiver_returns_the_value() {
    run(|| {
        let (tx, rx) = sync_channel(1);
        tx.send(String::from("queued")).unwrap();
        drop(rx);
        assert!(tx.is_closed());
        assert_eq!(tx.len(), 0); // queued items were dropped with the receiver
        assert_eq!(
            tx.send("a".into()),
            Err(SendError::Disconnected("a".into()))
        );
        assert_eq!(
            tx.try_send("b".into()),
            Err(TrySendError::Disconnected("b".into()))
        );
        assert_eq!(tx.send("c".into()).unwrap_err().into_inner(), "c");
    });
}

#[test]
fn blocked_senders_fail_with_their_value_when_the_receiver_goes() {
    run(|| {
        let (tx, rx) = sync_channel(1);
        tx.send(0).unwrap();
        let log = Log::new();
        let hs = senders(&tx, &log, &[1, 2]);
        drop(rx);
        join_all(hs);
        assert_eq!(
            log.entries(),
            [
                (0, "Disconnected(..)".to_string()),
                (1, "Disconnected(..)".to_string())
            ]
        );
        let tx2 = tx.clone();
        let h = spawn(move || tx2.send(9));
        assert_eq!(h.join().unwrap(), Err(SendError::Disconnected(9)));
    });
}

#[test]
fn blocked_senders_get_room_in_fifo_order() {
    run(|| {
        let (tx, rx) = sync_channel(1);
        tx.send(100).unwrap();
        let log = Log::new();
        let hs = senders(&tx, &log, &[0, 1, 2, 3, 4]);
        assert!(log.order().is_empty());
        // A newcomer cannot overtake them.
        assert_eq!(tx.try_send(99), Err(TrySendError::Full(99)));
        let mut got = Vec::new();
        for _ in 0..6 {
            got.push(rx.recv().unwrap());
        }
        join_all(hs);
        assert_eq!(got, [100, 0, 1, 2, 3, 4]);
        assert_eq!(log.order(), [0, 1, 2, 3, 4]);
    });
}

#[test]
fn waiting_receivers_get_items_in_fifo_order() {
    run(|| {
        let (tx, rx) = sync_channel(8);
        let rx = Rc::new(rx);
        let log = Log::new();
        let hs = receivers(&rx, &log, 3);
        for v in [10, 11, 12] {
            tx.send(v).unwrap();
        }
        join_all(hs);
        let want: Vec<_> = (0..3).map(|i| (i, format!("{}", 10 + i))).collect();
        assert_eq!(log.entries(), want);
    });
}

#[test]
fn interrupt_then_send_six_receivers_one_gets_it() {
    run(|| {
        let (tx, rx) = sync_channel(8);
        let rx = Rc::new(rx);
        let log = Log::new();
        let hs = receivers(&rx, &log, 6);
        interrupt(&hs, [0, 1, 2, 3, 5]);
        tx.send(7).unwrap();
        settle();
        assert_eq!(log.with("7"), [4]);
        assert_eq!(log.with("Wait(Interrupted)").len(), 5);
        join_all(hs);
        assert!(rx.is_empty());
    });
}

#[test]
fn send_then_interrupt_receivers_pass_the_item_on() {
    run(|| {
        let (tx, rx) = sync_channel(8);
        let rx = Rc::new(rx);
        let log = Log::new();
        let hs = receivers(&rx, &log, 6);
        tx.send(7).unwrap(); // handed to receiver 0, which has not run yet
        interrupt(&hs, 0..5);
        settle();
        assert_eq!(log.with("7"), [5]);
        assert_eq!(log.with("Wait(Interrupted)").len(), 5);
        join_all(hs);
        assert!(rx.is_empty());
    });
}

#[test]
fn a_handed_item_not_taken_goes_back_to_the_front() {
    run(|| {
        let (tx, rx) = sync_channel(8);
        let rx = Rc::new(rx);
        let log = Log::new();
        let hs = receivers(&rx, &log, 1);
        tx.send(1).unwrap(); // handed to the receiver
        tx.send(2).unwrap(); // buffered
        interrupt(&hs, [0]);
        join_all(hs);
        assert_eq!(rx.try_recv(), Ok(1));
        assert_eq!(rx.try_recv(), Ok(2));
    });
}

#[test]
fn interrupt_then_recv_six_senders_one_gets_in() {
    run(|| {
        let (tx, rx) = sync_channel(1);
        tx.send(100).unwrap();
        let log = Log::new();
        let hs = senders(&tx, &log, &[0, 1, 2, 3, 4, 5]);
        interrupt(&hs, [0, 1, 3, 4, 5]);
        assert_eq!(rx.recv(), Ok(100));
        settle();
        assert_eq!(log.with("Ok"), [2]);
        assert_eq!(log.with("Wait(\"..\", Interrupted)").len(), 5);
        join_all(hs);
        assert_eq!(rx.try_recv(), Ok(2));
        assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
        // Full capacity is available again.
        tx.try_send(1).unwrap();
    });
}

#[test]
fn recv_then_interrupt_senders_pass_the_room_on() {
    run(|| {
        let (tx, rx) = sync_channel(1);
        tx.send(100).unwrap();
        let log = Log::new();
        let hs = senders(&tx, &log, &[0, 1, 2, 3, 4, 5]);
        assert_eq!(rx.recv(), Ok(100)); // room reserved for sender 0
        interrupt(&hs, 0..5);
        settle();
        assert_eq!(log.with("Ok"), [5]);
        join_all(hs);
        assert_eq!(rx.try_recv(), Ok(5));
        tx.try_send(1).unwrap();
        assert_eq!(tx.try_send(2), Err(TrySendError::Full(2)));
    });
}

#[test]
fn send_timeout_returns_the_value() {
    run(|| {
        let (tx, rx) = sync_channel(1);
        tx.send(String::from("first")).unwrap();
        let tx2 = tx.clone();
        let h = spawn(move || {
            let mut back = None;
            let r = with_timeout(Duration::from_millis(5), || {
                if let Err(e) = tx2.send(String::from("second")) {
                    back = Some((e.wait_error(), e.into_inner()));
                }
            });
            (r, back)
        });
        let (r, back) = h.join().unwrap();
        assert_eq!(r, Err(Timeout));
        assert_eq!(
            back,
            Some((Some(WaitError::TimedOut), String::from("second")))
        );
        assert_eq!(rx.try_recv().as_deref(), Ok("first"));
        assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
    });
}

#[test]
fn recv_timeout() {
    run(|| {
        let (tx, rx) = sync_channel::<u32>(1);
        let h = spawn(move || with_timeout(Duration::from_millis(5), || rx.recv()));
        assert_eq!(h.join().unwrap(), Err(Timeout));
        assert_eq!(tx.try_send(1), Err(TrySendError::Disconnected(1)));
    });
}

#[test]
fn unbounded_send_never_waits() {
    run(|| {
        let (tx, rx) = channel();
        assert_eq!(tx.capacity(), None);
        let before = coro_runtime::stats().switches;
        for i in 0..10_000 {
            tx.send(i).unwrap();
        }
        tx.try_send(10_000).unwrap();
        assert_eq!(coro_runtime::stats().switches, before, "a send waited");
        assert_eq!(rx.len(), 10_001);
        drop(tx);
        assert!(rx.iter().eq(0..=10_000));
        assert_eq!(rx.recv(), Err(RecvError::Disconnected));
    });
}

#[test]
fn iterators_end_where_std_users_expect() {
    run(|| {
        let (tx, rx) = channel();
        for i in 0..3 {
            tx.send(i).unwrap();
        }
        assert_eq!(rx.try_iter().collect::<Vec<_>>(), [0, 1, 2]);
        assert_eq!(rx.try_iter().next(), None); // empty, senders alive
        let producer = spawn(move || {
            for i in 3..6 {
                tx.send(i).unwrap();
                coro_runtime::yield_now();
            }
        });
        let mut got = Vec::new();
        for i in &rx {
            got.push(i);
        }
        assert_eq!(got, [3, 4, 5]);
        producer.join().unwrap();
        let (tx, rx) = channel();
        tx.send("owned").unwrap();
        drop(tx);
        assert_eq!(rx.into_iter().collect::<Vec<_>>(), ["owned"]);
    });
}

#[test]
fn recv_error_reads_like_std() {
    assert_eq!(
        RecvError::Disconnected.to_string(),
        "receiving on a closed channel"
    );
    let e: std::io::Error = RecvError::Disconnected.into();
    assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe);
    let e: std::io::Error = RecvError::Wait(WaitError::TimedOut).into();
    assert_eq!(e.kind(), std::io::ErrorKind::TimedOut);
    assert_eq!(
        RecvError::Wait(WaitError::Interrupted).wait_error(),
        Some(WaitError::Interrupted)
    );
}

#[test]
fn rendezvous_send_waits_until_a_receiver_takes_the_value() {
    run(|| {
        let (tx, rx) = sync_channel(0);
        assert_eq!(tx.capacity(), Some(0));
        assert_eq!(tx.try_send(1), Err(TrySendError::Full(1)));
        let sender = spawn(move || tx.send(2));
        settle();
        assert!(
            !sender.is_finished(),
            "a rendezvous send returned unreceived"
        );
        assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
        assert_eq!(rx.len(), 0);
        assert_eq!(rx.recv(), Ok(2));
        assert_eq!(sender.join().unwrap(), Ok(()));
        assert_eq!(rx.recv(), Err(RecvError::Disconnected));
    });
}

#[test]
fn rendezvous_try_send_reaches_a_waiting_receiver() {
    run(|| {
        let (tx, rx) = sync_channel(0);
        let rx = Rc::new(rx);
        let log = Log::new();
        let hs = receivers(&rx, &log, 2);
        tx.try_send(7).unwrap();
        tx.try_send(8).unwrap();
        assert_eq!(tx.try_send(9), Err(TrySendError::Full(9)));
        join_all(hs);
        assert_eq!(log.entries(), [(0, "7".to_string()), (1, "8".to_string())]);
    });
}

#[test]
fn rendezvous_senders_are_served_in_fifo_order() {
    run(|| {
        let (tx, rx) = sync_channel(0);
        let log = Log::new();
        let hs = senders(&tx, &log, &[0, 1, 2, 3, 4]);
        assert_eq!(tx.try_send(99), Err(TrySendError::Full(99)));
        let got: Vec<u32> = (0..5).map(|_| rx.recv().unwrap()).collect();
        join_all(hs);
        assert_eq!(got, [0, 1, 2, 3, 4]);
        assert_eq!(log.order(), [0, 1, 2, 3, 4]);
        assert!(log.entries().iter().all(|(_, r)| r == "Ok"));
    });
}

/// The receiver a sender was woken for is interrupted before the sender
/// runs: the sender keeps its value and its place and waits for the next
/// receiver; its send does not return until a receiver has the value.
#[test]
fn rendezvous_sender_whose_receiver_left_waits_again_at_the_front() {
    run(|| {
        let (tx, rx) = sync_channel(0);
        let rx = Rc::new(rx);
        let log = Log::new();
        let hs = senders(&tx, &log, &[10, 11]);
        let first = {
            let rx = rx.clone();
            spawn(move || rx.recv())
        };
        // The receiver queued and woke sender 0 for it; neither has run on.
        coro_runtime::yield_now();
        first.thread().interrupt().unwrap();
        assert_eq!(
            first.join().unwrap(),
            Err(RecvError::Wait(WaitError::Interrupted))
        );
        settle();
        assert!(log.order().is_empty(), "a send returned without a receiver");
        assert_eq!(rx.recv(), Ok(10), "sender 0 lost its place");
        assert_eq!(rx.recv(), Ok(11));
        join_all(hs);
        assert_eq!(log.order(), [0, 1]);
    });
}

/// A rendezvous sender interrupted after a receiver woke it passes the
/// receiver on to the next sender and gets its value back.
#[test]
fn rendezvous_interrupted_sender_passes_the_receiver_on() {
    run(|| {
        let (tx, rx) = sync_channel(0);
        let rx = Rc::new(rx);
        let log = Log::new();
        let hs = senders(&tx, &log, &[10, 11]);
        let r = {
            let rx = rx.clone();
            spawn(move || rx.recv())
        };
        coro_runtime::yield_now(); // the receiver queued and woke sender 0
        hs[0].thread().interrupt().unwrap();
        assert_eq!(r.join().unwrap(), Ok(11));
        join_all(hs);
        assert_eq!(
            log.entries(),
            [
                (0, "Wait(\"..\", Interrupted)".to_string()),
                (1, "Ok".to_string())
            ]
        );
        assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
    });
}

#[test]
fn rendezvous_send_timeout_returns_the_value_and_a_dropped_receiver_fails_senders() {
    run(|| {
        let (tx, rx) = sync_channel(0);
        let mut back = None;
        let r = with_timeout(Duration::from_millis(5), || {
            if let Err(e) = tx.send(String::from("late")) {
                back = Some((e.wait_error(), e.into_inner()));
            }
        });
        assert_eq!(r, Err(Timeout));
        assert_eq!(back, Some((Some(WaitError::TimedOut), "late".into())));
        assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
        let (tx, rx) = sync_channel::<u32>(0);
        let log = Log::new();
        let hs = senders(&tx, &log, &[1, 2]);
        drop(rx);
        join_all(hs);
        assert_eq!(log.with("Disconnected(..)"), [0, 1]);
    });
}

/// `channel()` is unbounded as std's, `sync_channel(0)` is a
/// rendezvous (not a panic), and `recv` says "disconnected" the std
/// way; `while let Ok(..)` ends.
#[test]
fn channels_have_std_shapes() {
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
