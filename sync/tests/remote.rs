//! The `Send` channel: OS threads and other runtimes send into a runtime,
//! a green thread's receive suspends only that thread and honours timeouts
//! and interrupts without losing items, and a plain OS thread can receive.

mod util;

use std::cell::Cell;
use std::rc::Rc;
use std::sync::mpsc;
use std::time::Duration;

use coro_runtime::{spawn, with_timeout, yield_now, Timeout, WaitError};
use coro_sync::{remote, RecvError, SendError, TryRecvError};
use util::{run, settle};

#[test]
fn an_os_thread_sends_while_the_other_green_threads_run() {
    run(|| {
        let (tx, rx) = remote::channel::<u32>();
        let (go, wait_go) = mpsc::channel::<()>();
        let sender = std::thread::spawn(move || {
            wait_go.recv().unwrap();
            for i in 0..100 {
                tx.send(i).unwrap();
            }
        });
        let ticks = Rc::new(Cell::new(0));
        let ticker = {
            let ticks = ticks.clone();
            spawn(move || {
                for _ in 0..10 {
                    ticks.set(ticks.get() + 1);
                    yield_now();
                }
                go.send(()).unwrap(); // only now may the OS thread send
            })
        };
        let got: Vec<u32> = rx.iter().collect();
        assert_eq!(got, (0..100).collect::<Vec<_>>());
        assert_eq!(ticks.get(), 10, "the runtime ran on while recv waited");
        ticker.join().unwrap();
        sender.join().unwrap();
    });
}

#[test]
fn two_runtimes_on_two_os_threads_play_ping_pong() {
    const ROUNDS: u32 = 1000;
    let (to_b, b_rx) = remote::channel::<u32>();
    let (to_a, a_rx) = remote::channel::<u32>();
    let b = std::thread::spawn(move || {
        coro_runtime::run(move || {
            while let Ok(n) = b_rx.recv() {
                if to_a.send(n + 1).is_err() {
                    break;
                }
            }
        })
    });
    let last = run(move || {
        let mut n = 0;
        for _ in 0..ROUNDS {
            to_b.send(n).unwrap();
            n = a_rx.recv().unwrap() + 1;
        }
        n
    });
    assert_eq!(last, 2 * ROUNDS);
    b.join().unwrap();
}

#[test]
fn a_plain_os_thread_receives_from_a_green_thread() {
    let (tx, rx) = remote::channel();
    let reader = std::thread::spawn(move || rx.iter().collect::<Vec<_>>());
    run(move || {
        for i in 0..5 {
            tx.send(i).unwrap();
            coro_runtime::sleep(Duration::from_millis(1)).unwrap();
        }
    });
    assert_eq!(reader.join().unwrap(), [0, 1, 2, 3, 4]);
}

#[test]
fn timeouts_and_interrupts_lose_nothing() {
    run(|| {
        let (tx, rx) = remote::channel::<&str>();
        let rx = Rc::new(rx);
        let r = with_timeout(Duration::from_millis(5), || rx.recv());
        assert_eq!(r, Err(Timeout));
        let waiter = {
            let rx = rx.clone();
            spawn(move || rx.recv())
        };
        settle();
        waiter.thread().interrupt().unwrap();
        assert_eq!(
            waiter.join().unwrap(),
            Err(RecvError::Wait(WaitError::Interrupted))
        );
        let tx2 = tx.clone();
        std::thread::spawn(move || tx2.send("after").unwrap())
            .join()
            .unwrap();
        assert_eq!(rx.recv(), Ok("after"));
        assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
    });
}

#[test]
fn green_threads_sharing_a_receiver_all_get_items() {
    run(|| {
        let (tx, rx) = remote::channel::<u32>();
        let rx = Rc::new(rx);
        let hs: Vec<_> = (0..3)
            .map(|_| {
                let rx = rx.clone();
                spawn(move || rx.recv())
            })
            .collect();
        settle();
        std::thread::spawn(move || {
            for i in 0..3 {
                tx.send(i).unwrap();
            }
        })
        .join()
        .unwrap();
        let mut got: Vec<u32> = hs.into_iter().map(|h| h.join().unwrap().unwrap()).collect();
        got.sort();
        assert_eq!(got, [0, 1, 2]);
    });
}

/// A green thread waits on a remote channel and nothing else can wake the
/// runtime: that is not a deadlock while a sender exists elsewhere; when
/// the last one goes, the receive ends with `Disconnected`.
#[test]
fn the_last_sender_leaving_ends_a_waiting_receive() {
    let (tx, rx) = remote::channel::<u32>();
    let (parked, is_parked) = mpsc::channel::<()>();
    let os = std::thread::spawn(move || {
        is_parked.recv().unwrap();
        std::thread::sleep(Duration::from_millis(20));
        drop(tx);
    });
    let r = run(move || {
        let rx = Rc::new(rx);
        let h = {
            let rx = rx.clone();
            spawn(move || rx.recv())
        };
        settle();
        parked.send(()).unwrap();
        h.join().unwrap()
    });
    assert_eq!(r, Err(RecvError::Disconnected));
    os.join().unwrap();
}

#[test]
fn sending_without_a_receiver_returns_the_value() {
    let (tx, rx) = remote::channel::<String>();
    assert!(!tx.is_closed());
    drop(rx);
    assert!(tx.is_closed());
    match tx.send("back".into()) {
        Err(SendError::Disconnected(v)) => assert_eq!(v, "back"),
        other => panic!("{other:?}"),
    }
}

/// The receiver is `Send`: make the channel on one thread, receive in a
/// runtime on another.
#[test]
fn the_receiver_moves_into_a_runtime() {
    let (tx, rx) = remote::channel::<u8>();
    tx.send(9).unwrap();
    let got = std::thread::spawn(move || coro_runtime::run(move || rx.recv()))
        .join()
        .unwrap();
    assert_eq!(got, Ok(9));
}
