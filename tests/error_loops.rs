//! Regression tests for issue #14 ("What a newcomer missed") that need both
//! coro-sync and coro-net, written against the facade as a user would:
//! error loops that cannot starve the other green threads (item 3), and an
//! OS thread that spawns into a running runtime and sends into it (item 2).

mod util;

use std::cell::Cell;
use std::io;
use std::rc::Rc;

use coro::net::{TcpListener, TcpStream, UdpSocket};
use coro::sync::{channel, remote, sync_channel, LockError, Mutex, RecvError, RwLock, SendError};

/// Failing calls made in a row by the error loops below.
const CALLS: u32 = 1000;

/// Runs `call` [`CALLS`] times (every call fails at once) while another
/// green thread yields in a loop; returns how often that thread ran. A call
/// that fails without waiting spends selfishness (4 by default), so the
/// other thread gets about a turn every four calls; before the fix it got
/// none.
fn ticks_during(mut call: impl FnMut()) -> u32 {
    let ticks = Rc::new(Cell::new(0u32));
    let stop = Rc::new(Cell::new(false));
    let ticker = {
        let (ticks, stop) = (ticks.clone(), stop.clone());
        coro::spawn(move || {
            while !stop.get() {
                ticks.set(ticks.get() + 1);
                coro::yield_now();
            }
        })
    };
    coro::yield_now(); // the ticker is in its loop
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
    util::run(|| {
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
    util::run(|| {
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

/// Item 3: a loop that ignores errors on a closed listener, on a closed
/// stream, or on a socket whose syscall fails at once (`EDESTADDRREQ`)
/// yields every few calls.
#[test]
fn issue_14_3_an_error_loop_on_a_socket_lets_others_run() -> io::Result<()> {
    util::run(|| {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let stream = TcpStream::connect(listener.local_addr()?)?;
        listener.close();
        let ticks = ticks_during(|| assert!(listener.accept().is_err()));
        assert_kept_its_schedule("accept on a closed listener", ticks);

        stream.close();
        let ticks = ticks_during(|| assert!(stream.wait_readable().is_err()));
        assert_kept_its_schedule("wait_readable on a closed stream", ticks);

        let udp = UdpSocket::bind("127.0.0.1:0")?;
        let ticks = ticks_during(|| assert!(udp.send(b"nowhere").is_err()));
        assert_kept_its_schedule("send on an unconnected UDP socket", ticks);
        Ok(())
    })
}

/// Item 2: a plain OS thread (a library callback, say) spawns a green
/// thread into a running runtime and sends it data over a `Send` channel;
/// `std::thread::spawn(move || tx.send(1))` used to fail with E0277 on
/// `Rc<Chan>`.
#[test]
fn issue_14_2_an_os_thread_spawns_into_a_runtime_and_sends_into_it() {
    let total = util::run(|| {
        let handle = coro::handle();
        let (tx, rx) = remote::channel::<u64>();
        let (results, from_green) = remote::channel::<u64>();
        let os = std::thread::spawn(move || {
            // Spawn a green thread that sums what the OS thread sends.
            handle
                .spawn(move || {
                    let sum: u64 = rx.iter().sum();
                    results.send(sum).unwrap();
                })
                .unwrap();
            for i in 1..=100 {
                tx.send(i).unwrap();
            }
        });
        let total = from_green.recv().unwrap();
        os.join().unwrap();
        total
    });
    assert_eq!(total, 5050);
}
