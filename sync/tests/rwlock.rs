//! RwLock: shared readers, FIFO admission, writer preference (a stream of
//! readers cannot starve a writer), self-deadlock errors, try_*, and
//! interrupts and timeouts in every order.

mod util;

use std::rc::Rc;
use std::time::Duration;

use coro_runtime::{spawn, with_timeout, yield_now, JoinHandle, Timeout};
use coro_sync::{LockError, RwLock, TryLockError};
use util::{interrupt, join_all, run, settle, Log};

#[derive(Clone, Copy)]
enum Kind {
    R,
    W,
}

/// Spawns one thread per entry of `kinds`; each takes the lock in that mode,
/// logs `R<readers>` or `W`, holds it for `hold` yields and releases it.
/// Returns once all are queued.
fn queue(lock: &Rc<RwLock<()>>, log: &Log, kinds: &[Kind], hold: usize) -> Vec<JoinHandle<()>> {
    let hs: Vec<_> = kinds
        .iter()
        .enumerate()
        .map(|(i, &k)| {
            let (lock, log) = (lock.clone(), log.clone());
            spawn(move || {
                match k {
                    Kind::R => match lock.read() {
                        Ok(_g) => {
                            log.push(i, format!("R{}", lock.readers()));
                            for _ in 0..hold {
                                yield_now();
                            }
                        }
                        Err(e) => log.push(i, e),
                    },
                    Kind::W => match lock.write() {
                        Ok(_g) => {
                            log.push(i, "W");
                            for _ in 0..hold {
                                yield_now();
                            }
                        }
                        Err(e) => log.push(i, e),
                    },
                };
            })
        })
        .collect();
    settle();
    hs
}

#[test]
fn smoke() {
    run(|| {
        let mut l = RwLock::new(5);
        {
            let a = l.read().unwrap();
            let b = l.try_read().unwrap();
            assert_eq!(*a + *b, 10);
            assert_eq!(l.readers(), 2);
            assert_eq!(l.try_write().err(), Some(TryLockError::WouldBlock));
            assert_eq!(
                format!("{l:?}"),
                "RwLock { data: 5, readers: 2, waiters: 0, .. }"
            );
        }
        {
            let mut w = l.write().unwrap();
            *w += 1;
            assert!(l.is_write_locked());
            assert_eq!(l.try_read().err(), Some(TryLockError::WouldBlock));
            assert_eq!(l.try_write().err(), Some(TryLockError::WouldBlock));
            assert_eq!(
                format!("{l:?}"),
                "RwLock { data: <locked>, readers: 0, waiters: 0, .. }"
            );
        }
        *l.try_write().unwrap() += 1;
        *l.get_mut() += 1;
        assert_eq!(l.into_inner(), 8);
    });
}

#[test]
fn waiters_are_admitted_in_fifo_order_readers_together() {
    use Kind::*;
    run(|| {
        let lock = Rc::new(RwLock::new(()));
        let log = Log::new();
        let w = lock.write().unwrap();
        let hs = queue(&lock, &log, &[R, W, R, R, W, R], 2);
        assert_eq!(lock.waiters(), 6);
        drop(w);
        join_all(hs);
        assert_eq!(log.order(), [0, 1, 2, 3, 4, 5]);
        // Readers 2 and 3 were admitted together.
        let e = log.entries();
        assert_eq!(e[2].1, "R2");
        assert_eq!(e[3].1, "R2");
        assert_eq!(e[0].1, "R1");
        assert_eq!(lock.readers(), 0);
        assert!(!lock.is_write_locked());
    });
}

#[test]
fn readers_arriving_behind_a_waiting_writer_queue() {
    use Kind::*;
    run(|| {
        let lock = Rc::new(RwLock::new(()));
        let log = Log::new();
        let r = lock.read().unwrap();
        let hs = queue(&lock, &log, &[W], 0);
        assert_eq!(lock.waiters(), 1);
        // The lock is only read-held, but a writer waits.
        assert_eq!(lock.try_read().err(), Some(TryLockError::WouldBlock));
        assert_eq!(lock.try_write().err(), Some(TryLockError::WouldBlock));
        let late = queue(&lock, &log, &[R], 0);
        assert_eq!(lock.waiters(), 2);
        drop(r);
        join_all(hs);
        join_all(late);
        assert_eq!(log.order(), [0, 0]);
        assert_eq!(log.entries()[0].1, "W");
        assert_eq!(log.entries()[1].1, "R1");
    });
}

#[test]
fn a_stream_of_readers_cannot_starve_a_writer() {
    run(|| {
        let lock = Rc::new(RwLock::new(()));
        let log = Log::new();
        let mut readers = Vec::new();
        let mut writer = None;
        // A new reader every turn, each holding the lock for 3 turns, so
        // without writer preference the read count would never reach zero.
        for i in 0..30 {
            let (l, lg) = (lock.clone(), log.clone());
            readers.push(spawn(move || {
                let _g = l.read().unwrap();
                lg.push(i, "R");
                for _ in 0..3 {
                    yield_now();
                }
            }));
            if i == 5 {
                let (l, lg) = (lock.clone(), log.clone());
                writer = Some(spawn(move || {
                    let _g = l.write().unwrap();
                    lg.push(100, "W");
                }));
            }
            yield_now();
        }
        writer.unwrap().join().unwrap();
        join_all(readers);
        let order = log.order();
        let w = order.iter().position(|&i| i == 100).unwrap();
        // Every reader that came after the writer got in after it.
        assert!(order[..w].iter().all(|&i| i <= 6), "{order:?}");
        assert!(w <= 7, "writer admitted late: {order:?}");
    });
}

#[test]
fn holding_and_asking_again_is_an_error_when_it_would_wait() {
    use Kind::*;
    run(|| {
        let lock = Rc::new(RwLock::new(()));
        {
            let _w = lock.write().unwrap();
            assert_eq!(lock.read().err(), Some(LockError::WouldDeadlock));
            assert_eq!(lock.write().err(), Some(LockError::WouldDeadlock));
        }
        {
            let _r = lock.read().unwrap();
            assert_eq!(lock.write().err(), Some(LockError::WouldDeadlock));
            // A second read that need not wait is fine.
            let _r2 = lock.read().unwrap();
            let log = Log::new();
            let hs = queue(&lock, &log, &[W], 0);
            // With a writer queued, a second read would wait for ourselves.
            assert_eq!(lock.read().err(), Some(LockError::WouldDeadlock));
            drop((_r, _r2));
            join_all(hs);
        }
        assert_eq!(lock.readers(), 0);
        assert_eq!(lock.waiters(), 0);
    });
}

#[test]
fn interrupt_then_release_six_writers_one_proceeds() {
    use Kind::*;
    run(|| {
        let lock = Rc::new(RwLock::new(()));
        let log = Log::new();
        let w = lock.write().unwrap();
        let hs = queue(&lock, &log, &[W, W, W, W, W, W], 0);
        interrupt(&hs, [0, 1, 3, 4, 5]);
        drop(w);
        settle();
        assert_eq!(log.with("W"), [2]);
        assert_eq!(log.with("Wait(Interrupted)").len(), 5);
        join_all(hs);
        assert!(!lock.is_write_locked());
        assert_eq!(lock.waiters(), 0);
        assert!(lock.try_write().is_ok());
    });
}

#[test]
fn release_then_interrupt_passes_the_lock_on() {
    use Kind::*;
    run(|| {
        let lock = Rc::new(RwLock::new(()));
        let log = Log::new();
        let w = lock.write().unwrap();
        let hs = queue(&lock, &log, &[W, W, W, W, W, W], 0);
        drop(w); // admits writer 0, which has not run yet
        interrupt(&hs, 0..5);
        settle();
        assert_eq!(log.with("W"), [5]);
        assert_eq!(log.with("Wait(Interrupted)").len(), 5);
        join_all(hs);
        assert!(!lock.is_write_locked());
        assert!(lock.try_write().is_ok());
    });
}

#[test]
fn admitted_reader_interrupted_releases_its_share() {
    use Kind::*;
    run(|| {
        let lock = Rc::new(RwLock::new(()));
        let log = Log::new();
        let w = lock.write().unwrap();
        let hs = queue(&lock, &log, &[R, R, W], 2);
        drop(w); // admits readers 0 and 1
        assert_eq!(lock.readers(), 2);
        interrupt(&hs, [0]);
        join_all(hs);
        assert_eq!(log.order(), [0, 1, 2]);
        assert_eq!(log.entries()[0].1, "Wait(Interrupted)");
        assert_eq!(log.entries()[1].1, "R1");
        assert_eq!(log.entries()[2].1, "W");
        assert_eq!(lock.readers(), 0);
        assert!(lock.try_write().is_ok());
    });
}

#[test]
fn writer_timing_out_at_the_head_lets_readers_behind_it_in() {
    run(|| {
        let lock = Rc::new(RwLock::new(()));
        let log = Log::new();
        let r = lock.read().unwrap();
        let l = lock.clone();
        // Long enough that the readers queue behind it first, even on a
        // slow machine (or an emulator).
        let writer =
            spawn(move || with_timeout(Duration::from_millis(300), || l.write().map(drop)));
        yield_now();
        let readers = queue(&lock, &log, &[Kind::R, Kind::R], 0);
        assert_eq!(lock.waiters(), 3);
        assert_eq!(writer.join().unwrap(), Err(Timeout));
        settle();
        // Admitted while our read guard is still held.
        assert_eq!(log.order(), [0, 1]);
        assert_eq!(lock.waiters(), 0);
        drop(r);
        join_all(readers);
        assert_eq!(lock.readers(), 0);
    });
}

#[test]
fn timeout_while_waiting_to_read() {
    run(|| {
        let lock = Rc::new(RwLock::new(()));
        let w = lock.write().unwrap();
        let l = lock.clone();
        let reader = spawn(move || with_timeout(Duration::from_millis(5), || l.read().map(drop)));
        assert_eq!(reader.join().unwrap(), Err(Timeout));
        assert_eq!(lock.waiters(), 0);
        drop(w);
        assert!(lock.try_write().is_ok());
    });
}
