//! A cancelled `CancelScope` fails every kind of wait, and keeps
//! failing them (level-triggered): each primitive of `coro::sync`, the
//! sockets of `coro::net`, a blocking-pool job, a join. Each wait is
//! cancelled while it is blocked (from another green thread); the call
//! fails at once with `WaitError::Cancelled` (for sockets an `io::Error` of
//! kind `Other`, never `Interrupted`, so std's retry loops stop), the next
//! call fails without blocking, and the primitive is left as it was (no
//! waiter left behind, a hand-off passes on).

mod util;

use std::cell::Cell;
use std::io::{self, Read};
use std::rc::Rc;
use std::time::Duration;

use coro::net::{TcpListener, UdpSocket};
use coro::sync::{
    sync_channel, Condvar, Event, Fifo, InvertedSemaphore, LockError, Mutex, RwLock, Semaphore,
    WaitGroup,
};
use coro::{CancelScope, Coro, ThreadState, WaitError};
use util::{pair, run, yield_until};

#[track_caller]
fn until_state(t: &Coro, state: ThreadState) {
    yield_until("the thread's state", || t.state() == state);
}

/// Runs `wait` twice in a cancel scope on a new thread; once the thread is
/// blocked in the first call, cancels the scope from here. Both calls must
/// fail with a cancellation, the first at once, the second without
/// blocking; the scope catches it.
#[track_caller]
fn cancelled_while_blocked(wait: impl Fn() -> Option<WaitError> + 'static) {
    let scope = CancelScope::new();
    let inside = {
        let scope = scope.clone();
        coro::spawn(move || scope.run(|| (wait(), wait())))
    };
    until_state(inside.thread(), ThreadState::Parked);
    scope.cancel();
    assert_eq!(inside.thread().state(), ThreadState::Ready, "woken at once");
    let r = inside.join().unwrap();
    assert!(r.is_err(), "the scope caught its cancellation: {r:?}");
    assert!(scope.cancelled_caught());
}

/// The wait error inside a lock error.
fn lock_err<T>(r: Result<T, LockError>) -> Option<WaitError> {
    match r {
        Ok(_) => None,
        Err(LockError::Wait(e)) => Some(e),
        Err(e) => panic!("unexpected {e}"),
    }
}

/// The wait error inside an `io::Error`, checking it is not `Interrupted`.
fn io_err<T>(r: io::Result<T>) -> Option<WaitError> {
    let e = r.err()?;
    assert_ne!(e.kind(), io::ErrorKind::Interrupted, "{e}");
    assert_eq!(e.kind(), io::ErrorKind::Other, "{e}");
    Some(WaitError::from_io(&e).expect("a wait error"))
}

#[test]
fn locks_and_semaphores() {
    run(|| {
        let m = Rc::new(Mutex::new(0));
        let held = m.lock().unwrap();
        let w = m.clone();
        cancelled_while_blocked(move || lock_err(w.lock()));
        assert_eq!(m.waiters(), 0);
        drop(held);
        assert!(m.try_lock().is_ok());

        let rw = Rc::new(RwLock::new(0));
        let read = rw.read().unwrap();
        let w = rw.clone();
        cancelled_while_blocked(move || lock_err(w.write()));
        drop(read);
        let write = rw.write().unwrap();
        let w = rw.clone();
        cancelled_while_blocked(move || lock_err(w.read()));
        drop(write);
        assert_eq!(rw.waiters(), 0);

        let sem = Rc::new(Semaphore::new(0));
        let w = sem.clone();
        cancelled_while_blocked(move || w.acquire(1).err());
        assert_eq!(sem.waiters(), 0);

        let inv = Rc::new(InvertedSemaphore::new());
        inv.acquire(1);
        let w = inv.clone();
        cancelled_while_blocked(move || w.block_till_zero().err());
        assert_eq!(inv.waiters(), 0);
    });
}

#[test]
fn condvars_events_wait_groups_and_queues() {
    run(|| {
        let cv = Rc::new(Condvar::new());
        let w = cv.clone();
        cancelled_while_blocked(move || w.notified().err());
        let m = Rc::new(Mutex::new(()));
        let (w, wm) = (cv.clone(), m.clone());
        cancelled_while_blocked(move || lock_err(w.wait(wm.lock().unwrap())));
        assert_eq!(cv.waiters(), 0);
        assert!(m.try_lock().is_ok(), "not held after a failed wait");

        let ev = Rc::new(Event::new());
        let w = ev.clone();
        cancelled_while_blocked(move || w.wait().err());

        let wg = Rc::new(WaitGroup::new());
        let member = wg.add();
        let w = wg.clone();
        cancelled_while_blocked(move || w.wait().err());
        member.done();

        let q = Rc::new(Fifo::<u32>::new());
        let w = q.clone();
        cancelled_while_blocked(move || w.pop().err());
        assert_eq!(q.waiters(), 0);

        let (tx, rx) = sync_channel::<u32>(1);
        let rx = Rc::new(rx);
        let w = rx.clone();
        cancelled_while_blocked(move || w.recv().err().and_then(|e| e.wait_error()));
        tx.try_send(1).unwrap();
        let tx = Rc::new(tx);
        let w = tx.clone();
        cancelled_while_blocked(move || w.send(2).err().and_then(|e| e.wait_error()));
        assert_eq!(rx.try_recv().unwrap(), 1);
    });
}

#[test]
fn sockets() -> io::Result<()> {
    run(|| {
        let (client, server) = pair()?;
        let server = Rc::new(server);
        let s = server.clone();
        cancelled_while_blocked(move || io_err((&*s).read(&mut [0; 8])));
        let s = server.clone();
        // std's read_exact retries `Interrupted`; a cancellation stops it.
        cancelled_while_blocked(move || io_err((&*s).read_exact(&mut [0; 8])));
        // Nothing was lost: the next read outside the scope gets the data.
        use std::io::Write;
        (&client).write_all(b"hello")?;
        let mut buf = [0; 5];
        (&*server).read_exact(&mut buf)?;
        assert_eq!(&buf, b"hello");

        let listener = Rc::new(TcpListener::bind("127.0.0.1:0")?);
        let l = listener.clone();
        cancelled_while_blocked(move || io_err(l.accept()));

        let udp = Rc::new(UdpSocket::bind("127.0.0.1:0")?);
        let u = udp.clone();
        cancelled_while_blocked(move || io_err(u.recv_from(&mut [0; 8])));
        Ok(())
    })
}

#[test]
fn blocking_jobs_and_joins() {
    run(|| {
        cancelled_while_blocked(|| {
            coro::blocking(|| std::thread::sleep(Duration::from_millis(20))).err()
        });
        let sleeper = Rc::new(coro::spawn(|| coro::sleep(util::LONG)));
        let s = sleeper.clone();
        cancelled_while_blocked(move || s.wait().err());
        sleeper.thread().interrupt().unwrap();
        cancelled_while_blocked(|| coro::sleep(util::LONG).err());
        cancelled_while_blocked(|| coro::park().err());
    });
}

/// The lock is handed to a waiter, which is cancelled before it runs: its
/// call fails, and the lock passes on to the next waiter (as for an
/// interrupt; never two holders, never lost).
#[test]
fn a_cancel_after_a_hand_off_passes_the_lock_on() {
    run(|| {
        let m = Rc::new(Mutex::new(0));
        let held = m.lock().unwrap();
        let scope = CancelScope::new();
        let first = {
            let (m, scope) = (m.clone(), scope.clone());
            coro::spawn(move || scope.run(|| lock_err(m.lock())))
        };
        until_state(first.thread(), ThreadState::Parked);
        let got = Rc::new(Cell::new(false));
        let second = {
            let (m, got) = (m.clone(), got.clone());
            coro::spawn(move || {
                let mut g = m.lock().unwrap();
                *g += 1;
                got.set(true);
            })
        };
        until_state(second.thread(), ThreadState::Parked);
        drop(held); // hands the lock to `first`
        assert_eq!(first.thread().state(), ThreadState::Ready);
        scope.cancel();
        assert!(first.join().unwrap().is_err());
        second.join().unwrap();
        assert!(got.get());
        assert_eq!(*m.lock().unwrap(), 1);
    });
}
