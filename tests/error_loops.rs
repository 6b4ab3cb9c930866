//! Error loops cannot starve the other green threads: a loop that ignores
//! the errors of calls that fail at once (closed channels, held locks,
//! closed or unusable sockets) yields every few calls. Written against the
//! facade as a user would, across coro-sync and coro-net.

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
/// other thread gets about a turn every four calls rather than none.
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

/// An error loop around `recv` or `send` on a closed channel (local or
/// remote), as `while let Ok(m) = rx.recv()` becomes when its error is
/// ignored, yields every few calls instead of spinning.
#[test]
fn an_error_loop_on_a_closed_channel_yields() {
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

/// A lock that fails at once (the caller already holds it) yields
/// in a loop too.
#[test]
fn an_error_loop_on_a_held_lock_yields() {
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

/// A loop that ignores errors on a closed listener, on a closed
/// stream, or on a socket whose syscall fails at once (`EDESTADDRREQ`)
/// yields every few calls.
#[test]
fn an_error_loop_on_a_socket_lets_others_run() -> io::Result<()> {
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
