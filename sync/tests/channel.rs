//! Bounded channel: order, capacity, close semantics on both ends, FIFO
//! senders and receivers, and interrupts and timeouts in every order on both
//! sides (values are never lost: they come back in the error or stay queued).

mod util;

use std::rc::Rc;
use std::time::Duration;

use coro_runtime::{spawn, with_timeout, JoinHandle, Timeout, WaitError};
use coro_sync::{channel, Receiver, SendError, Sender, TryRecvError, TrySendError};
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
        let (tx, rx) = channel(2);
        assert_eq!(tx.capacity(), 2);
        tx.send(1).unwrap();
        tx.try_send(2).unwrap();
        assert_eq!(tx.try_send(3), Err(TrySendError::Full(3)));
        assert_eq!(rx.len(), 2);
        assert_eq!(rx.recv(), Ok(Some(1)));
        assert_eq!(rx.try_recv(), Ok(2));
        assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
        assert!(rx.is_empty());
    });
}

#[test]
fn one_producer_one_consumer_through_a_small_buffer() {
    run(|| {
        let (tx, rx) = channel(3);
        let producer = spawn(move || {
            for i in 0..1000 {
                tx.send(i).unwrap();
            }
        });
        let mut next = 0;
        while let Some(i) = rx.recv().unwrap() {
            assert_eq!(i, next);
            assert!(rx.len() <= 3);
            next += 1;
        }
        assert_eq!(next, 1000);
        producer.join().unwrap();
    });
}

#[test]
fn recv_returns_none_once_every_sender_is_gone() {
    run(|| {
        let (tx, rx) = channel(4);
        let tx2 = tx.clone();
        tx.send(1).unwrap();
        drop(tx);
        assert!(!rx.is_closed());
        tx2.send(2).unwrap();
        drop(tx2);
        assert!(rx.is_closed());
        // Buffered items are still delivered, then None.
        assert_eq!(rx.recv(), Ok(Some(1)));
        assert_eq!(rx.recv(), Ok(Some(2)));
        assert_eq!(rx.recv(), Ok(None));
        assert_eq!(rx.try_recv(), Err(TryRecvError::Disconnected));
    });
}

#[test]
fn a_waiting_receiver_gets_none_when_the_last_sender_goes() {
    run(|| {
        let (tx, rx) = channel::<u32>(4);
        let rx = Rc::new(rx);
        let log = Log::new();
        let hs = receivers(&rx, &log, 2);
        drop(tx);
        join_all(hs);
        assert_eq!(
            log.entries(),
            [(0, "None".to_string()), (1, "None".to_string())]
        );
    });
}

#[test]
fn send_to_a_dropped_receiver_returns_the_value() {
    run(|| {
        let (tx, rx) = channel(1);
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
        let (tx, rx) = channel(1);
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
        let (tx, rx) = channel(1);
        tx.send(100).unwrap();
        let log = Log::new();
        let hs = senders(&tx, &log, &[0, 1, 2, 3, 4]);
        assert!(log.order().is_empty());
        // A newcomer cannot overtake them.
        assert_eq!(tx.try_send(99), Err(TrySendError::Full(99)));
        let mut got = Vec::new();
        for _ in 0..6 {
            got.push(rx.recv().unwrap().unwrap());
        }
        join_all(hs);
        assert_eq!(got, [100, 0, 1, 2, 3, 4]);
        assert_eq!(log.order(), [0, 1, 2, 3, 4]);
    });
}

#[test]
fn waiting_receivers_get_items_in_fifo_order() {
    run(|| {
        let (tx, rx) = channel(8);
        let rx = Rc::new(rx);
        let log = Log::new();
        let hs = receivers(&rx, &log, 3);
        for v in [10, 11, 12] {
            tx.send(v).unwrap();
        }
        join_all(hs);
        let want: Vec<_> = (0..3).map(|i| (i, format!("Some({})", 10 + i))).collect();
        assert_eq!(log.entries(), want);
    });
}

#[test]
fn interrupt_then_send_six_receivers_one_gets_it() {
    run(|| {
        let (tx, rx) = channel(8);
        let rx = Rc::new(rx);
        let log = Log::new();
        let hs = receivers(&rx, &log, 6);
        interrupt(&hs, [0, 1, 2, 3, 5]);
        tx.send(7).unwrap();
        settle();
        assert_eq!(log.with("Some(7)"), [4]);
        assert_eq!(log.with("Interrupted").len(), 5);
        join_all(hs);
        assert!(rx.is_empty());
    });
}

#[test]
fn send_then_interrupt_receivers_pass_the_item_on() {
    run(|| {
        let (tx, rx) = channel(8);
        let rx = Rc::new(rx);
        let log = Log::new();
        let hs = receivers(&rx, &log, 6);
        tx.send(7).unwrap(); // handed to receiver 0, which has not run yet
        interrupt(&hs, 0..5);
        settle();
        assert_eq!(log.with("Some(7)"), [5]);
        assert_eq!(log.with("Interrupted").len(), 5);
        join_all(hs);
        assert!(rx.is_empty());
    });
}

#[test]
fn a_handed_item_not_taken_goes_back_to_the_front() {
    run(|| {
        let (tx, rx) = channel(8);
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
        let (tx, rx) = channel(1);
        tx.send(100).unwrap();
        let log = Log::new();
        let hs = senders(&tx, &log, &[0, 1, 2, 3, 4, 5]);
        interrupt(&hs, [0, 1, 3, 4, 5]);
        assert_eq!(rx.recv(), Ok(Some(100)));
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
        let (tx, rx) = channel(1);
        tx.send(100).unwrap();
        let log = Log::new();
        let hs = senders(&tx, &log, &[0, 1, 2, 3, 4, 5]);
        assert_eq!(rx.recv(), Ok(Some(100))); // room reserved for sender 0
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
        let (tx, rx) = channel(1);
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
        let (tx, rx) = channel::<u32>(1);
        let h = spawn(move || with_timeout(Duration::from_millis(5), || rx.recv()));
        assert_eq!(h.join().unwrap(), Err(Timeout));
        assert_eq!(tx.try_send(1), Err(TrySendError::Disconnected(1)));
    });
}

#[test]
#[should_panic(expected = "capacity must be at least 1")]
fn zero_capacity_panics() {
    let _ = channel::<()>(0);
}
