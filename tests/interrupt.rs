//! `Coro::interrupt` against waits of the other crates, in forced
//! interleavings: the interrupt lands after a socket's readiness (or a
//! primitive's hand-off) has already made the target ready, before it runs.
//! DESIGN §4: the interrupt wins, the target's call fails with
//! `WaitError::Interrupted` (never `ErrorKind::Interrupted`), and nothing is
//! lost: the data stays in the socket for the next read, the pending
//! connection for the next accept, the lock or permit goes to the next
//! waiter, and nobody gets it twice.
//!
//! The interleavings are forced with `yield_until` on thread states, never
//! with sleeps: the main thread yields, so it is ahead of a thread that a
//! poll or a hand-off makes ready, and it sees that thread `Ready` before
//! it runs.

mod util;

use std::cell::{Cell, RefCell};
use std::io::{self, Read, Write};
use std::rc::Rc;

use coro::net::TcpListener;
use coro::sync::{LockError, Mutex, Semaphore};
use coro::{Coro, ThreadState, WaitError};
use util::{pair, run, yield_until};

#[track_caller]
fn until_state(what: &str, t: &Coro, state: ThreadState) {
    yield_until(what, || t.state() == state);
}

/// Asserts that `e` is an interruption, and not `ErrorKind::Interrupted`.
#[track_caller]
fn assert_interrupted(e: &io::Error) {
    assert_ne!(e.kind(), io::ErrorKind::Interrupted, "{e}");
    assert_eq!(WaitError::from_io(e), Some(WaitError::Interrupted), "{e}");
}

/// Data arrives and the poll makes the parked reader ready; it is
/// interrupted before it runs. Its read fails, and its next read gets
/// every byte.
#[test]
fn interrupt_after_readiness_fails_the_read_and_keeps_the_data() -> io::Result<()> {
    run(|| {
        let (client, server) = pair()?;
        let reader = coro::spawn(move || {
            let mut buf = [0; 8];
            let first = (&server).read(&mut buf);
            let second = (&server).read(&mut buf).map(|n| buf[..n].to_vec());
            (first, second)
        });
        until_state("the reader to wait", reader.thread(), ThreadState::Parked);
        (&client).write_all(b"abc")?;
        until_state(
            "the data to wake the reader",
            reader.thread(),
            ThreadState::Ready,
        );
        reader.thread().interrupt().unwrap();
        let (first, second) = reader.join().expect("reader");
        assert_interrupted(&first.expect_err("the interrupt wins over the readiness"));
        assert_eq!(second?, b"abc");
        Ok(())
    })
}

/// Two readers wait on one socket; data wakes both; the first is
/// interrupted before it runs. It leaves with the error and does not take
/// the data: the second reader gets every byte, in order, exactly once.
#[test]
fn an_interrupted_reader_leaves_the_data_to_the_other_reader() -> io::Result<()> {
    run(|| {
        let (client, server) = pair()?;
        let server = Rc::new(server);
        let spawn_reader = |s: Rc<coro::net::TcpStream>| {
            coro::spawn(move || -> io::Result<Vec<u8>> {
                let mut all = Vec::new();
                let mut buf = [0; 8];
                loop {
                    match (&*s).read(&mut buf)? {
                        0 => return Ok(all),
                        n => all.extend_from_slice(&buf[..n]),
                    }
                }
            })
        };
        let first = spawn_reader(server.clone());
        until_state(
            "the first reader to wait",
            first.thread(),
            ThreadState::Parked,
        );
        let second = spawn_reader(server.clone());
        until_state(
            "the second reader to wait",
            second.thread(),
            ThreadState::Parked,
        );
        (&client).write_all(b"abc")?;
        until_state(
            "the data to wake the first",
            first.thread(),
            ThreadState::Ready,
        );
        first.thread().interrupt().unwrap();
        until_state(
            "the second to take the data",
            second.thread(),
            ThreadState::Parked,
        );
        (&client).write_all(b"def")?;
        client.shutdown(std::net::Shutdown::Write)?;
        assert_interrupted(&first.join().expect("first").expect_err("interrupted"));
        assert_eq!(second.join().expect("second")?, b"abcdef");
        Ok(())
    })
}

/// A connection arrives and makes the parked acceptor ready; it is
/// interrupted before it runs. Its accept fails and the connection stays
/// queued for the next accept.
#[test]
fn interrupt_after_a_connection_arrives_keeps_it_for_the_next_accept() -> io::Result<()> {
    run(|| {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let acceptor = coro::spawn(move || {
            let first = listener.accept().map(|(_, peer)| peer);
            let second = listener.accept().map(|(_, peer)| peer);
            (first, second)
        });
        until_state(
            "the acceptor to wait",
            acceptor.thread(),
            ThreadState::Parked,
        );
        // A plain std client: loopback connects complete in the kernel,
        // before anyone accepts.
        let client = std::net::TcpStream::connect(addr)?;
        until_state(
            "the connection to wake the acceptor",
            acceptor.thread(),
            ThreadState::Ready,
        );
        acceptor.thread().interrupt().unwrap();
        let (first, second) = acceptor.join().expect("acceptor");
        assert_interrupted(&first.expect_err("the interrupt wins"));
        assert_eq!(second?, client.local_addr()?);
        Ok(())
    })
}

/// A lock holder blocked in a socket read is interrupted: its read fails,
/// it returns, and dropping its guard hands the lock to the first queued
/// locker, which is interrupted in turn before it runs. That locker leaves
/// with the error and passes the lock on: the next two get it in order,
/// once each.
#[test]
fn lock_handed_to_an_interrupted_waiter_goes_to_the_next() -> io::Result<()> {
    run(|| {
        let (_client, server) = pair()?;
        let m = Rc::new(Mutex::new(Vec::new()));
        let holder = {
            let m = m.clone();
            coro::spawn(move || -> io::Result<()> {
                let mut g = m.lock()?;
                g.push("holder");
                (&server).read_exact(&mut [0; 1])?; // no request comes
                g.push("holder got a request");
                Ok(())
            })
        };
        until_state(
            "the holder to wait in its read",
            holder.thread(),
            ThreadState::Parked,
        );
        assert!(m.is_locked());
        let outcomes = Rc::new(RefCell::new(Vec::new()));
        let lockers: Vec<_> = ["a", "b", "c"]
            .into_iter()
            .map(|name| {
                let (m, outcomes) = (m.clone(), outcomes.clone());
                coro::spawn(move || {
                    let r = m.lock().map(|mut g| g.push(name));
                    outcomes.borrow_mut().push((name, r));
                })
            })
            .collect();
        yield_until("three lockers queued", || m.waiters() == 3);

        holder.thread().interrupt().unwrap();
        until_state(
            "the lock to be handed to a",
            lockers[0].thread(),
            ThreadState::Ready,
        );
        assert_eq!(m.waiters(), 2, "a was handed the lock");
        lockers[0].thread().interrupt().unwrap();

        assert_interrupted(&holder.join().expect("holder").expect_err("interrupted"));
        for l in lockers {
            l.join().expect("locker");
        }
        assert_eq!(
            *outcomes.borrow(),
            [
                ("a", Err(LockError::Wait(WaitError::Interrupted))),
                ("b", Ok(())),
                ("c", Ok(())),
            ]
        );
        assert_eq!(*m.lock()?, ["holder", "b", "c"]);
        assert_eq!(m.waiters(), 0);
        Ok(())
    })
}

/// A worker holds the only permit while it waits for its request; the
/// request arrives, the worker finishes and its permit is handed to the
/// first waiter, which is interrupted before it runs. The permit passes on:
/// the other two waiters each get it in turn, never two at once, and it is
/// back in the semaphore at the end.
#[test]
fn permit_handed_to_an_interrupted_waiter_goes_to_the_next() -> io::Result<()> {
    run(|| {
        let (client, server) = pair()?;
        let sem = Rc::new(Semaphore::new(1));
        let worker = {
            let sem = sem.clone();
            coro::spawn(move || -> io::Result<Vec<u8>> {
                let _permit = sem.acquire(1)?;
                let mut req = [0; 4];
                (&server).read_exact(&mut req)?;
                Ok(req.to_vec())
            })
        };
        until_state(
            "the worker to wait for its request",
            worker.thread(),
            ThreadState::Parked,
        );
        assert_eq!(sem.available(), 0);
        let holding = Rc::new(Cell::new(0));
        let most = Rc::new(Cell::new(0));
        let outcomes = Rc::new(RefCell::new(Vec::new()));
        let waiters: Vec<_> = (0..3)
            .map(|i| {
                let (sem, outcomes) = (sem.clone(), outcomes.clone());
                let (holding, most) = (holding.clone(), most.clone());
                coro::spawn(move || {
                    let r = sem.acquire(1).map(|_permit| {
                        holding.set(holding.get() + 1);
                        most.set(most.get().max(holding.get()));
                        for _ in 0..3 {
                            coro::yield_now();
                        }
                        holding.set(holding.get() - 1);
                    });
                    outcomes.borrow_mut().push((i, r));
                })
            })
            .collect();
        yield_until("three waiters queued", || sem.waiters() == 3);

        (&client).write_all(b"ping")?;
        until_state(
            "the permit to be handed to waiter 0",
            waiters[0].thread(),
            ThreadState::Ready,
        );
        assert_eq!((sem.waiters(), sem.available()), (2, 0));
        waiters[0].thread().interrupt().unwrap();

        assert_eq!(worker.join().expect("worker")?, b"ping");
        for w in waiters {
            w.join().expect("waiter");
        }
        assert_eq!(
            *outcomes.borrow(),
            [(0, Err(WaitError::Interrupted)), (1, Ok(())), (2, Ok(()))]
        );
        assert_eq!(most.get(), 1, "two waiters held the one permit at once");
        assert_eq!((sem.available(), sem.waiters()), (1, 0));
        Ok(())
    })
}

/// A writer blocked in `write_all` on a full socket buffer (the peer does
/// not read) is interrupted: `write_all` returns the interruption instead
/// of retrying it forever.
#[test]
fn interrupt_ends_a_write_all_blocked_on_a_full_buffer() -> io::Result<()> {
    run(|| {
        let (client, _server) = pair()?;
        let writer = coro::spawn(move || (&client).write_all(&vec![7u8; 64 << 20]));
        until_state(
            "the writer to fill the buffers",
            writer.thread(),
            ThreadState::Parked,
        );
        writer.thread().interrupt().unwrap();
        assert_interrupted(&writer.join().expect("writer").expect_err("interrupted"));
        Ok(())
    })
}
