//! `with_timeout` across the crates: level-triggered and nested scopes around
//! a socket read (coro-net) and a `Mutex` lock (coro-sync), as DESIGN §4
//! says: an inner deadline fires only the inner scope; when the outer one
//! fires first, the inner scope returns the error unchanged; once a deadline
//! has passed, every later blocking call inside that scope fails at once,
//! whatever it waits on; a call that completes leaves no timer behind.
//!
//! Each deadline under test is short and nothing else can finish first (no
//! data is sent, the lock is not released), so the outcomes do not depend
//! on timing.

mod util;

use std::cell::RefCell;
use std::io::{self, Read, Write};
use std::rc::Rc;
use std::time::Duration;

use coro::net::TcpListener;
use coro::sync::{sync_channel, Event, LockError, Mutex, Semaphore};
use coro::{with_timeout, JoinHandle, Timeout, WaitError};
use util::{pair, run, settle, LONG};

const SHORT: Duration = Duration::from_millis(20);

/// Spawns a green thread that holds `m` until `go` is set.
fn holder(m: &Rc<Mutex<u32>>, go: &Rc<Event>) -> JoinHandle<()> {
    let (m, go) = (m.clone(), go.clone());
    let h = coro::spawn(move || {
        let mut g = m.lock().expect("the holder takes the free lock");
        go.wait().expect("the holder is released");
        *g += 1;
    });
    settle();
    h
}

/// The `WaitError` inside an io error, if any.
fn wait_error(e: &io::Error) -> Option<WaitError> {
    WaitError::from_io(e)
}

/// The `WaitError` an io call failed with, if any.
fn io<T>(r: io::Result<T>) -> Option<WaitError> {
    r.err().as_ref().and_then(wait_error)
}

#[test]
fn inner_deadline_fires_only_the_inner_scope() -> io::Result<()> {
    run(|| {
        let (client, server) = pair()?;
        let m = Rc::new(Mutex::new(0));
        let go = Rc::new(Event::new());
        let held = holder(&m, &go);
        let outer = with_timeout(LONG, || -> io::Result<()> {
            let mut buf = [0; 1];
            let mut read_err = None;
            let inner = with_timeout(SHORT, || {
                (&server)
                    .read(&mut buf)
                    .inspect_err(|e| read_err = Some(e.kind()))
            });
            assert!(matches!(inner, Err(Timeout)), "{inner:?}");
            assert_eq!(read_err, Some(io::ErrorKind::TimedOut));

            let mut lock_err = None;
            let inner = with_timeout(SHORT, || {
                m.lock().map(drop).inspect_err(|e| lock_err = Some(*e))
            });
            assert_eq!(inner, Err(Timeout));
            assert_eq!(lock_err, Some(LockError::Wait(WaitError::TimedOut)));
            assert_eq!(m.waiters(), 0, "the timed-out locker left the queue");

            // The outer scope is untouched: the same calls block and
            // complete inside it.
            (&client).write_all(b"x")?;
            assert_eq!((&server).read(&mut buf)?, 1);
            go.set();
            *m.lock()? += 10;
            Ok(())
        });
        assert!(matches!(outer, Ok(Ok(()))), "{outer:?}");
        held.join().expect("holder");
        assert_eq!(*m.lock()?, 11);
        Ok(())
    })
}

#[test]
fn outer_deadline_first_the_inner_scope_returns_the_error_unchanged() -> io::Result<()> {
    run(|| {
        let (_client, server) = pair()?;
        let outer = with_timeout(SHORT, || {
            let inner = with_timeout(LONG, || (&server).read(&mut [0; 1]));
            match inner {
                Ok(Err(e)) => {
                    assert_eq!(e.kind(), io::ErrorKind::TimedOut);
                    assert_eq!(wait_error(&e), Some(WaitError::TimedOut));
                }
                other => panic!("the inner scope must hand the error on: {other:?}"),
            }
            "inner returned"
        });
        assert_eq!(outer, Err(Timeout));

        let m = Rc::new(Mutex::new(0));
        let go = Rc::new(Event::new());
        let held = holder(&m, &go);
        let outer = with_timeout(SHORT, || {
            let inner = with_timeout(LONG, || m.lock().map(drop));
            assert_eq!(inner, Ok(Err(LockError::Wait(WaitError::TimedOut))));
            "inner returned"
        });
        assert_eq!(outer, Err(Timeout));
        assert_eq!(m.waiters(), 0);
        go.set();
        held.join().expect("holder");
        assert!(!m.is_locked());
        Ok(())
    })
}

/// After the deadline, a read, a lock, an accept, a semaphore, an event, a
/// channel, a sleep, a join and a fresh nested scope all fail with
/// `TimedOut` without waiting (the only switches meanwhile are the forced
/// yields that failing calls earn, as succeeding ones do: an error loop must
/// not starve the others), and leave no waiter queued. After the scope, they block and work again.
#[test]
fn after_the_deadline_every_blocking_call_in_the_scope_fails_at_once() -> io::Result<()> {
    run(|| {
        let (client, server) = pair()?;
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let m = Rc::new(Mutex::new(0));
        let go = Rc::new(Event::new());
        let held = holder(&m, &go);
        let sem = Semaphore::new(0);
        let ev = Event::new();
        let (tx, rx) = sync_channel::<u8>(1);
        let mut first = None;
        let mut later: Vec<(&str, Option<WaitError>)> = Vec::new();
        let mut switches = (0, 0);
        let mut forced = (0, 0);
        let r = with_timeout(SHORT, || {
            // Blocks until the deadline.
            first = (&server).read(&mut [0; 1]).err().map(|e| e.kind());
            switches.0 = coro::stats().switches;
            forced.0 = coro::stats().forced_yields;
            later.push(("read", io((&server).read(&mut [0; 1]))));
            later.push(("read_exact", io((&server).read_exact(&mut [0; 4]))));
            later.push(("accept", io(listener.accept().map(drop))));
            later.push(("wait_readable", io(server.wait_readable())));
            later.push((
                "lock",
                match m.lock() {
                    Err(LockError::Wait(w)) => Some(w),
                    _ => None,
                },
            ));
            later.push(("acquire", sem.acquire(1).err()));
            later.push(("event", ev.wait().err()));
            later.push(("recv", rx.recv().err().and_then(|e| e.wait_error())));
            later.push(("sleep", coro::sleep(LONG).err()));
            later.push(("join", held.wait().err()));
            // A new scope opened after the deadline does not reset it: its
            // blocking call fails and it hands the error on unchanged.
            later.push((
                "nested",
                match with_timeout(LONG, || (&server).read(&mut [0; 1])) {
                    Ok(r) => io(r),
                    Err(Timeout) => None,
                },
            ));
            switches.1 = coro::stats().switches;
            forced.1 = coro::stats().forced_yields;
        });
        assert_eq!(r, Err(Timeout));
        assert_eq!(first, Some(io::ErrorKind::TimedOut));
        for (what, e) in &later {
            assert_eq!(*e, Some(WaitError::TimedOut), "{what} after the deadline");
        }
        assert_eq!(later.len(), 11);
        assert_eq!(
            switches.1 - switches.0,
            forced.1 - forced.0,
            "a call waited after the deadline (every switch should be a forced yield)"
        );
        assert!(
            forced.1 > forced.0,
            "eleven failing calls earned no forced yield"
        );
        assert_eq!((m.waiters(), sem.waiters(), ev.waiters()), (0, 0, 0));

        // Out of the scope, the same calls wait and complete.
        (&client).write_all(b"y")?;
        let mut buf = [0; 1];
        assert_eq!((&server).read(&mut buf)?, 1);
        go.set();
        *m.lock()? += 1;
        assert_eq!(*m.lock()?, 2);
        held.join().expect("holder");
        let s = coro::spawn({
            let tx = tx.clone();
            move || tx.send(7).is_ok()
        });
        assert_eq!(rx.recv()?, 7);
        assert!(s.join().expect("sender"));
        Ok(())
    })
}

/// Reads and locks that block and then complete inside `with_timeout`
/// cancel their timers: after 2 000 of them, only the test's own limit is
/// pending and the heap holds no pile of stale entries.
#[test]
fn completed_reads_and_locks_leave_no_timers() -> io::Result<()> {
    run(|| {
        let (client, server) = pair()?;
        let echo = coro::spawn(move || -> io::Result<()> {
            let mut b = [0; 1];
            while (&client).read(&mut b)? == 1 {
                (&client).write_all(&b)?;
            }
            Ok(())
        });
        let m = Rc::new(Mutex::new(0u32));
        let baseline = Rc::new(RefCell::new(None));
        for i in 0..2_000u32 {
            if i % 2 == 0 {
                // The echo thread has not answered yet: the read blocks.
                (&server).write_all(b"p")?;
                let n = with_timeout(LONG, || (&server).read(&mut [0; 1])).expect("no timeout")?;
                assert_eq!(n, 1);
            } else {
                let g = m.lock()?;
                let m2 = m.clone();
                let locker = coro::spawn(move || {
                    with_timeout(LONG, || m2.lock().map(|mut g| *g += 1)).map(|r| r.is_ok())
                });
                settle(); // the locker waits inside its scope
                drop(g);
                assert_eq!(locker.join().expect("locker"), Ok(true));
            }
            if i == 0 {
                *baseline.borrow_mut() = Some(coro::stats().pending_timers);
            }
        }
        let s = coro::stats();
        assert_eq!(Some(s.pending_timers), *baseline.borrow(), "{s:?}");
        assert!(s.timer_heap_len <= 600, "stale timers piled up: {s:?}");
        assert_eq!(*m.lock()?, 1_000);
        server.shutdown(std::net::Shutdown::Write)?;
        echo.join().expect("echo")?;
        Ok(())
    })
}
