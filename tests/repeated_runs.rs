//! Three `block_on`s on one `Runtime`: the first ends with a green thread
//! left in every kind of wait (a sleep, a `Sleep` future, socket
//! readiness, a channel, a remote channel, a mutex, a condvar, an event, a
//! semaphore, a join, a blocking-pool job and its queue, a remote wake, a
//! cancel scope, a nursery, a yield loop), the objects they waited on kept
//! for the later runs. The second run sees a runtime as fresh as a new
//! one (its counters of the whole life aside) and every kept object
//! working; the third deadlocks and reports it, as a fresh runtime would.

use std::cell::{Cell, RefCell};
use std::io::{Read, Write};
use std::panic::{self, AssertUnwindSafe};
use std::rc::Rc;
use std::sync::mpsc;
use std::time::Duration;

use coro::future::block_on;
use coro::net::TcpListener;
use coro::sync::{remote, Condvar, Event, Mutex, Semaphore};
use coro::CancelScope;

mod util;

/// Runs `f` on an OS thread of its own; fails if it does not finish
/// within `secs` (the defects these runs look for are hangs).
fn bounded<T: Send + 'static>(secs: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let r = panic::catch_unwind(AssertUnwindSafe(f));
        let _ = tx.send(r);
    });
    match rx.recv_timeout(Duration::from_secs(secs)) {
        Ok(Ok(v)) => v,
        Ok(Err(p)) => panic::resume_unwind(p),
        Err(_) => panic!("did not finish within {secs} s"),
    }
}

/// What the first run waits on, kept for the others.
struct Kept {
    mutex: Rc<Mutex<u32>>,
    condvar: Rc<Condvar>,
    event: Rc<Event>,
    semaphore: Rc<Semaphore>,
    channel: (coro::sync::Sender<u32>, Rc<coro::sync::Receiver<u32>>),
    remote: (remote::Sender<u32>, Rc<remote::Receiver<u32>>),
    listener: Rc<TcpListener>,
    sleep: Rc<RefCell<coro::future::Sleep>>,
    scope: CancelScope,
}

/// Sets everything waiting, lets it wait, and returns what was waited on.
fn first_run(job_gate: mpsc::Receiver<()>, remote_waker: mpsc::Sender<coro::RemoteWaker>) -> Kept {
    let kept = Kept {
        mutex: Rc::new(Mutex::new(0)),
        condvar: Rc::new(Condvar::new()),
        event: Rc::new(Event::new()),
        semaphore: Rc::new(Semaphore::new(0)),
        channel: {
            let (tx, rx) = coro::sync::channel();
            (tx, Rc::new(rx))
        },
        remote: {
            let (tx, rx) = remote::channel();
            (tx, Rc::new(rx))
        },
        listener: Rc::new(TcpListener::bind("127.0.0.1:0").unwrap()),
        sleep: Rc::new(RefCell::new(coro::future::sleep(Duration::from_secs(3600)))),
        scope: CancelScope::after(Duration::from_secs(3600)),
    };
    let sleeper = coro::spawn(|| coro::sleep(Duration::from_secs(3600)));
    let s = kept.sleep.clone();
    coro::spawn(move || block_on(&mut *s.borrow_mut()));
    let l = kept.listener.clone();
    coro::spawn(move || l.accept().map(|_| ()));
    let rx = kept.channel.1.clone();
    coro::spawn(move || rx.recv().map(|_| ()));
    let rx = kept.remote.1.clone();
    coro::spawn(move || rx.recv().map(|_| ()));
    // A holder parks with the lock; a second thread queues for it, a
    // third waits on the condvar under it.
    let m = kept.mutex.clone();
    coro::spawn(move || {
        let mut g = m.lock().unwrap();
        *g = 1;
        let _ = coro::park();
    });
    coro::yield_now();
    let m = kept.mutex.clone();
    coro::spawn(move || m.lock().map(|_| ()).map_err(|e| e.to_string()));
    let e = kept.event.clone();
    coro::spawn(move || e.wait());
    let sem = kept.semaphore.clone();
    coro::spawn(move || sem.acquire(1).map(|_| ()));
    coro::spawn(move || sleeper.join().map(|_| ()).map_err(|e| e.to_string()));
    // One job holds the pool's only worker until the second run; one waits
    // in the queue behind it.
    coro::spawn(move || coro::blocking(move || job_gate.recv()));
    util::yield_until("the worker takes the job", || {
        coro::stats().blocking_queued == 0 && coro::stats().blocking_in_flight == 1
    });
    coro::spawn(|| coro::blocking(|| ()));
    coro::spawn(move || {
        remote_waker.send(coro::RemoteWaker::current()).unwrap();
        let _ = coro::park();
    });
    let sc = kept.scope.clone();
    coro::spawn(move || sc.run(|| coro::sleep(Duration::from_secs(3600))));
    coro::spawn(|| {
        coro::scope(|s| {
            s.spawn(|| coro::park());
            s.spawn(|| coro::sleep(Duration::from_secs(3600)));
        })
        .map(|_| ())
        .map_err(|e| e.to_string())
    });
    let forever = Rc::new(Cell::new(true));
    coro::spawn(move || {
        while forever.get() {
            coro::yield_now();
        }
    });
    // The condvar's waiter needs the lock: it queues for it too.
    let (m, cv) = (kept.mutex.clone(), kept.condvar.clone());
    coro::spawn(move || {
        let g = m.lock().map_err(|e| e.to_string())?;
        cv.wait(g).map(|_| ()).map_err(|e| e.to_string())
    });
    util::settle();
    let st = coro::stats();
    assert!(st.live >= 18, "{st:?}");
    assert!(
        st.pending_timers >= 4 && st.blocking_in_flight == 2,
        "{st:?}"
    );
    kept
}

/// The runtime looks as a fresh one does.
#[track_caller]
fn looks_fresh() {
    let st = coro::stats();
    assert_eq!(
        (
            st.live,
            st.ready,
            st.pending_timers,
            st.timer_heap_len,
            st.blocking_in_flight,
            st.blocking_queued,
            st.idle_stacks
        ),
        (1, 0, 0, 0, 0, 0, 0),
        "{st:?}"
    );
    let threads = coro::threads();
    assert_eq!(threads.len(), 1, "{threads:?}");
    assert!(coro::leaks().is_empty());
    assert!(coro::deadlocks().is_empty());
    assert!(coro::timers(usize::MAX).is_empty());
}

#[test]
fn later_runs_start_fresh_after_a_run_that_ended_with_every_kind_of_wait() {
    let outcome = bounded(60, || {
        let mut rt = coro::Runtime::builder()
            .blocking_threads(1)
            .build()
            .unwrap();
        let (gate, job_gate) = mpsc::channel::<()>();
        let (waker_tx, waker_rx) = mpsc::channel::<coro::RemoteWaker>();
        let kept = rt.block_on(|| first_run(job_gate, waker_tx));
        // Another OS thread holds the first run's remote waker throughout,
        // and uses it during the second run.
        let waker = waker_rx.recv().unwrap();
        let (use_it, when) = mpsc::channel::<()>();
        let holder = std::thread::spawn(move || {
            when.recv().unwrap();
            assert!(waker.wake(), "the runtime is alive");
            waker
        });

        rt.block_on(|| {
            looks_fresh();
            // Late completions and wakes from the first run wake nothing.
            gate.send(()).unwrap();
            use_it.send(()).unwrap();
            coro::sleep(Duration::from_millis(30)).unwrap();
            looks_fresh();
            // Every kept object works.
            assert_eq!(*kept.mutex.lock().unwrap(), 1);
            let (m, cv) = (kept.mutex.clone(), kept.condvar.clone());
            let notified = coro::spawn(move || {
                let g = m.lock().unwrap();
                *cv.wait(g).unwrap()
            });
            coro::yield_now();
            *kept.mutex.lock().unwrap() = 2;
            assert_eq!(kept.condvar.notify_one(), 1);
            assert_eq!(notified.join().unwrap(), 2);
            let e = kept.event.clone();
            let waiter = coro::spawn(move || e.wait());
            coro::yield_now();
            kept.event.set();
            waiter.join().unwrap().unwrap();
            kept.semaphore.release(1);
            drop(kept.semaphore.acquire(1).unwrap());
            kept.channel.0.send(5).unwrap();
            assert_eq!(kept.channel.1.recv().unwrap(), 5);
            let tx = kept.remote.0.clone();
            std::thread::spawn(move || tx.send(6).unwrap());
            assert_eq!(kept.remote.1.recv().unwrap(), 6);
            let addr = kept.listener.local_addr().unwrap();
            let client = std::thread::spawn(move || {
                let mut c = std::net::TcpStream::connect(addr).unwrap();
                c.write_all(b"hi").unwrap();
            });
            let (mut conn, _) = kept.listener.accept().unwrap();
            let mut buf = [0u8; 2];
            conn.read_exact(&mut buf).unwrap();
            assert_eq!(&buf, b"hi");
            client.join().unwrap();
            let t = coro::clock::now();
            let mut sleep = kept.sleep.borrow_mut();
            sleep.reset(t + Duration::from_millis(20));
            block_on(&mut *sleep).unwrap();
            assert!(t.elapsed() >= Duration::from_millis(20));
            drop(sleep);
            // The scope left by its thread's unwind: a cancel is a latch.
            kept.scope.cancel();
            assert!(kept.scope.cancel_called());
            assert_eq!(coro::stats().pending_timers, 0);
            assert_eq!(coro::blocking(|| 3).unwrap(), 3);
            looks_fresh();
        });

        // Everything parks for good: reported, not a hang, though the first
        // run's remote waker is still held.
        let deadlock = panic::catch_unwind(AssertUnwindSafe(|| {
            rt.block_on(|| {
                let _ = coro::park();
            })
        }));
        let waker = holder.join().unwrap();
        drop(waker);
        drop(kept);
        deadlock.err().map(|p| util::panic_text(&*p))
    });
    let msg = outcome.expect("the third run deadlocks");
    assert!(msg.contains("coro: deadlock"), "{msg}");
}
