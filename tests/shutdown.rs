//! Runtime shutdown with green threads blocked all over the crates: in
//! socket reads, accepts, writes and datagram receives (coro-net), in every
//! kind of primitive wait (coro-sync), in sleeps and joins (coro-runtime).
//! When the main closure returns (or panics), `block_on` returns; every
//! thread that reacts to the error sees `WaitError::Interrupted`, the ones
//! that swallow it are unwound; every destructor runs, so every socket is
//! closed (a peer outside the runtime reads EOF, the listener refuses
//! connections) and the runtime is left clean for its next `block_on`.

mod util;

use std::cell::{Cell, RefCell};
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::rc::Rc;

use coro::net::{TcpListener, UdpSocket};
use coro::sync::{
    sync_channel, Condvar, Event, Fifo, LockError, Mutex, RwLock, Semaphore, WaitGroup,
};
use coro::{JoinError, ThreadState, WaitError};
use util::{pair, settle, yield_until, LIMIT, LONG};

/// Counts its drops.
struct Flag(Rc<Cell<usize>>);

impl Drop for Flag {
    fn drop(&mut self) {
        self.0.set(self.0.get() + 1);
    }
}

/// What each reacting thread's blocking call failed with, by what it did.
type Outcomes = Rc<RefCell<Vec<(&'static str, Option<WaitError>)>>>;

/// The green threads blocked by [`Scene::block_everywhere`] and what became
/// of them.
#[derive(Default, Clone)]
struct Scene {
    /// Destructors of the threads' flags that ran.
    drops: Rc<Cell<usize>>,
    /// Threads spawned (each owns one flag).
    spawned: Rc<Cell<usize>>,
    /// What each reacting thread's blocking call failed with (`None`: it
    /// did not fail with a `WaitError`).
    outcomes: Outcomes,
}

/// Plain `std` sockets outside the runtime, to look at it from outside
/// after it stopped.
struct Outside {
    /// Peers of connections whose runtime ends are held by blocked threads.
    peers: Vec<std::net::TcpStream>,
    /// A listener's address.
    listener: SocketAddr,
}

impl Scene {
    /// Spawns a thread that blocks in `f` once and records how it failed.
    fn reacting(&self, what: &'static str, f: impl FnOnce() -> Option<WaitError> + 'static) {
        let (flag, outcomes) = (Flag(self.drops.clone()), self.outcomes.clone());
        self.spawned.set(self.spawned.get() + 1);
        coro::spawn(move || {
            let _flag = flag;
            let e = f();
            outcomes.borrow_mut().push((what, e));
        });
    }

    /// Spawns a thread that blocks in `f`, ignores the error and blocks
    /// again, forever: shutdown has to unwind it.
    fn swallowing(&self, mut f: impl FnMut() + 'static) -> coro::JoinHandle<()> {
        let flag = Flag(self.drops.clone());
        self.spawned.set(self.spawned.get() + 1);
        coro::spawn(move || {
            let _flag = flag;
            loop {
                f();
                coro::yield_now();
            }
        })
    }

    /// Blocks green threads in every kind of wait; returns once all of them
    /// are parked.
    fn block_everywhere(&self) -> io::Result<Outside> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let io_err = |r: io::Result<()>| r.err().as_ref().and_then(WaitError::from_io);

        // Sockets. Two connections from std clients outside the runtime:
        // one reader reacts, the other swallows its errors.
        let mut peers = Vec::new();
        for swallow in [false, true] {
            peers.push(std::net::TcpStream::connect(addr)?);
            let (s, _) = listener.accept()?;
            if swallow {
                self.swallowing(move || {
                    let _ = (&s).read(&mut [0; 8]);
                });
            } else {
                self.reacting("read", move || io_err((&s).read_exact(&mut [0; 8])));
            }
        }
        self.reacting("accept", move || io_err(listener.accept().map(drop)));
        let (c, s) = pair()?;
        self.reacting("write_all", move || {
            let _unread = s;
            io_err((&c).write_all(&vec![0; 64 << 20]))
        });
        let udp = UdpSocket::bind("127.0.0.1:0")?;
        self.reacting("recv_from", move || {
            io_err(udp.recv_from(&mut [0; 8]).map(drop))
        });

        // Primitives. One thread holds a mutex, a read lock and a group
        // membership and never lets go (it swallows the interrupt).
        let m = Rc::new(Mutex::new(()));
        let rw = Rc::new(RwLock::new(()));
        let group = WaitGroup::new();
        let holder = {
            let (m, rw, member) = (m.clone(), rw.clone(), group.add());
            self.swallowing(move || {
                let _g = m.lock();
                let _r = rw.read();
                let _member = &member;
                let _ = coro::park();
            })
        };
        settle();
        assert!(m.is_locked() && rw.readers() == 1);
        let lock_err = |r: Result<(), LockError>| match r {
            Err(LockError::Wait(w)) => Some(w),
            _ => None,
        };
        self.reacting("lock", move || lock_err(m.lock().map(drop)));
        self.reacting("write lock", move || lock_err(rw.write().map(drop)));
        self.reacting("wait group", move || group.wait().err());
        self.reacting("join", move || match holder.join() {
            Err(JoinError::Wait(w)) => Some(w),
            _ => None,
        });
        let sem = Semaphore::new(0);
        self.reacting("acquire", move || sem.acquire(1).err());
        let (m2, cv) = (Mutex::new(()), Condvar::new());
        self.reacting("condvar", move || {
            let g = m2.lock().expect("free");
            lock_err(cv.wait(g).map(drop))
        });
        let (tx, rx) = sync_channel::<u8>(1);
        self.reacting("recv", move || {
            let _tx = &tx;
            rx.recv().err().and_then(|e| e.wait_error())
        });
        let (tx, rx) = sync_channel::<u8>(1);
        tx.try_send(0).expect("room for one");
        self.reacting("send", move || {
            let _rx = &rx;
            tx.send(1).err().and_then(|e| e.wait_error())
        });
        let fifo = Fifo::<u8>::new();
        self.reacting("pop", move || fifo.pop().err());
        let ev = Event::new();
        self.reacting("event", move || ev.wait().err());
        self.reacting("sleep", || coro::sleep(LONG).err());

        let spawned = self.spawned.get();
        yield_until("every thread to block", || {
            let threads = coro::threads();
            threads
                .iter()
                .filter(|t| t.state == ThreadState::Parked)
                .count()
                == spawned
        });
        Ok(Outside {
            peers,
            listener: addr,
        })
    }

    /// Checks what became of the threads after the runtime stopped.
    #[track_caller]
    fn check(&self, outside: Outside) -> io::Result<()> {
        let spawned = self.spawned.get();
        assert_eq!(self.drops.get(), spawned, "every destructor ran");
        let outcomes = self.outcomes.borrow();
        let names: Vec<_> = outcomes.iter().map(|(n, _)| *n).collect();
        assert_eq!(outcomes.len(), spawned - 2, "reacting threads: {names:?}");
        for (what, e) in outcomes.iter() {
            assert_eq!(*e, Some(WaitError::Interrupted), "{what}");
        }
        for mut peer in outside.peers {
            // Generous: EOF comes at once if the runtime's end was closed.
            peer.set_read_timeout(Some(LIMIT))?;
            assert_eq!(peer.read(&mut [0; 8])?, 0, "the runtime's end is closed");
        }
        let refused = std::net::TcpStream::connect(outside.listener);
        assert!(refused.is_err(), "the listener is closed: {refused:?}");
        Ok(())
    }
}

#[test]
fn block_on_returns_and_every_blocked_thread_is_stopped() -> io::Result<()> {
    let scene = Scene::default();
    let s = scene.clone();
    let mut rt = coro::Runtime::new()?;
    let (outside, value) = rt.block_on(move || {
        coro::with_timeout(LIMIT, || s.block_everywhere().map(|o| (o, "main's value")))
            .expect("test ran past its limit")
    })?;
    assert_eq!(value, "main's value");
    scene.check(outside)?;

    // The runtime is clean and runs again.
    let stats = rt.block_on(coro::stats);
    assert_eq!(
        (stats.live, stats.io_sources, stats.pending_timers),
        (1, 0, 0),
        "{stats:?}"
    );
    Ok(())
}

#[test]
fn a_panic_in_main_still_stops_every_blocked_thread() -> io::Result<()> {
    let scene = Scene::default();
    let outside = Rc::new(RefCell::new(None));
    let (s, o) = (scene.clone(), outside.clone());
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
        coro::run(move || {
            let out = coro::with_timeout(LIMIT, || s.block_everywhere());
            *o.borrow_mut() = Some(out.expect("test ran past its limit"));
            panic!("main gives up");
        })
    }));
    let payload = r.expect_err("the panic of main comes back from run");
    assert_eq!(util::panic_text(&*payload), "main gives up");
    let outside = outside.borrow_mut().take().expect("main ran")?;
    scene.check(outside)
}
