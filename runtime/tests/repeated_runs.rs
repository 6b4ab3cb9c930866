//! One `Runtime`, several `block_on`s: what a run leaves waiting when it
//! ends (a `Sleep` armed, a waker kept, a socket's stored waker, a hook
//! registered too late, a spawn queued while it shut down, a cancel scope
//! of a leaked thread) must not change how the next run behaves. Each
//! test bounds its run time: what these defects cause is a hang.

use std::cell::{Cell, RefCell};
use std::future::{poll_fn, Future};
use std::panic::{self, AssertUnwindSafe};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use coro_runtime::{
    self as coro, future::block_on, CancelScope, Direction, Interest, Registration,
};

use coro_test_support as util;

/// The message of a `block_on` that panicked, or `None` if it returned.
fn panic_of(rt: &mut coro::Runtime, f: impl FnOnce()) -> Option<String> {
    let p = panic::catch_unwind(AssertUnwindSafe(|| rt.block_on(f))).err()?;
    Some(util::panic_text(&*p))
}

/// Runs a `block_on` in which everything parks for good, and checks that
/// it reports the deadlock (a hang is the defect).
#[track_caller]
fn deadlock_is_reported(rt: &mut coro::Runtime) {
    let msg = panic_of(rt, || {
        let _ = coro::park();
    });
    let msg = msg.expect("the run deadlocks");
    assert!(msg.contains("coro: deadlock"), "{msg}");
}

/// A `Sleep` polled once (armed) and left pending: what a `block_on` cut
/// short by a timeout leaves.
fn armed(d: Duration) -> coro::future::Sleep {
    let mut s = coro::future::sleep(d);
    let r = coro::with_timeout(Duration::from_millis(1), || block_on(&mut s));
    assert!(r.is_err(), "the sleep is still pending");
    s
}

#[test]
fn a_sleep_armed_in_one_run_fires_when_awaited_in_the_next() {
    util::bounded(|| {
        let mut rt = coro::Runtime::new().unwrap();
        let mut sleep = rt.block_on(|| armed(Duration::from_millis(200)));
        rt.block_on(|| {
            assert_eq!(coro::stats().pending_timers, 0);
            block_on(&mut sleep).unwrap();
            assert!(sleep.is_elapsed());
            assert_eq!(coro::stats().pending_timers, 0);
        });
        // Armed in this run and awaited across a third.
        let mut again = rt.block_on(|| armed(Duration::from_millis(200)));
        rt.block_on(|| block_on(&mut again).unwrap());
    });
}

#[test]
fn a_pending_sleep_dropped_between_runs_leaves_deadlock_detection_working() {
    util::bounded(|| {
        let mut rt = coro::Runtime::new().unwrap();
        let sleep = rt.block_on(|| armed(Duration::from_secs(3600)));
        drop(sleep); // outside the runtime: it cannot reach its table
        deadlock_is_reported(&mut rt);
    });
}

/// Wakers of a run kept past it (in a channel's waiter list, by another
/// OS thread) can wake nothing of a later run: they must not keep it from
/// reporting its deadlock.
#[test]
fn wakers_kept_from_an_earlier_run_leave_deadlock_detection_working() {
    util::bounded(|| {
        let mut rt = coro::Runtime::new().unwrap();
        let (remote, future) = rt.block_on(|| {
            let kept: Rc<Cell<Option<Waker>>> = Rc::default();
            let k = kept.clone();
            let r = coro::with_timeout(Duration::from_millis(1), || {
                block_on(poll_fn(|cx| {
                    k.set(Some(cx.waker().clone()));
                    Poll::<()>::Pending
                }))
            });
            assert!(r.is_err());
            (coro::RemoteWaker::current(), kept.take().unwrap())
        });
        // Held (and used) by another OS thread meanwhile.
        let (tx, rx) = mpsc::channel::<()>();
        let holder = std::thread::spawn(move || {
            let _ = rx.recv();
            future.wake_by_ref();
            remote.wake();
            (remote, future)
        });
        rt.block_on(|| {
            tx.send(()).unwrap();
            coro::sleep(Duration::from_millis(20)).unwrap();
        });
        deadlock_is_reported(&mut rt);
        drop(holder.join().unwrap());
    });
}

/// A socket kept for the next run: the waiters and the stored task waker
/// of a run that ended are forgotten (a stored waker counts as a possible
/// wake, so the next run could not report its deadlock).
#[test]
fn a_socket_kept_between_runs_forgets_what_the_last_run_left_waiting_on_it() {
    util::bounded(|| {
        let mut rt = coro::Runtime::new().unwrap();
        let kept = rt.block_on(|| {
            let mut listener = mio::net::TcpListener::bind("127.0.0.1:0".parse().unwrap()).unwrap();
            let reg = Rc::new(Registration::new(&mut listener, Interest::READABLE).unwrap());
            let (r1, r2) = (reg.clone(), reg.clone());
            // One thread waits in a blocking wait, one polls as a future.
            coro::spawn(move || r1.wait(Direction::Read));
            coro::spawn(move || block_on(poll_fn(|cx| r2.poll_ready(Direction::Read, cx))));
            coro::yield_now(); // both wait
            assert_eq!(coro::stats().io_sources, 1);
            (listener, reg)
        });
        deadlock_is_reported(&mut rt);
        drop(kept);
    });
}

/// A hook registered while a run shut down, too late for its hooks to
/// run it, belongs to that run: it is dropped, not run at the end of the
/// next one.
#[test]
fn a_hook_registered_during_shutdown_is_not_run_by_the_next_run() {
    struct Registers(Rc<Cell<u32>>, Rc<Cell<u32>>);
    impl Drop for Registers {
        fn drop(&mut self) {
            let (ran, dropped) = (self.0.clone(), self.1.clone());
            struct Counted(Rc<Cell<u32>>);
            impl Drop for Counted {
                fn drop(&mut self) {
                    self.0.set(self.0.get() + 1);
                }
            }
            let counted = Counted(dropped);
            coro::on_shutdown(move || {
                let _keep = &counted;
                ran.set(ran.get() + 1);
            });
        }
    }
    let (ran, dropped) = (Rc::new(Cell::new(0)), Rc::new(Cell::new(0)));
    let mut rt = coro::Runtime::new().unwrap();
    let (r, d) = (ran.clone(), dropped.clone());
    rt.block_on(move || {
        coro::spawn(move || {
            let _registers = Registers(r, d);
            let _ = coro::park(); // interrupted at shutdown
        });
        coro::yield_now();
    });
    assert_eq!((ran.get(), dropped.get()), (0, 1), "dropped with its run");
    rt.block_on(|| ());
    assert_eq!(ran.get(), 0, "not run by the next run");
}

/// A spawn through a `Handle` that came while the runtime shut down
/// waits for its next run, and starts there even if nothing else wakes
/// the loop (its wake of the loop was spent on the shutdown's last poll).
#[test]
fn a_spawn_that_came_during_shutdown_starts_in_the_next_run() {
    thread_local! {
        static MAIN: RefCell<Option<coro::Coro>> = const { RefCell::new(None) };
    }
    util::bounded(|| {
        // Nothing else that wakes the loop: no idle sweep, and no freed
        // stack waits to be trimmed.
        let mut rt = coro::Runtime::builder()
            .idle_stack_release(None)
            .stack_pool(0)
            .build()
            .unwrap();
        rt.block_on(|| {
            let handle = coro::handle();
            coro::spawn(move || {
                // Interrupted by the shutdown, it spawns: the job waits.
                assert!(coro::park().is_err());
                handle
                    .spawn(|| MAIN.with(|m| m.borrow().as_ref().unwrap().unpark().unwrap()))
                    .unwrap();
            });
            coro::yield_now();
        });
        rt.block_on(|| {
            MAIN.with(|m| *m.borrow_mut() = Some(coro::current()));
            // Only the queued job can wake this.
            coro::park().unwrap();
            MAIN.with(|m| m.borrow_mut().take());
        });
    });
}

/// A thread leaked at shutdown inside a cancel scope with a deadline: its
/// timer went with its run, and using the scope's handle in the next run
/// leaves that run's timers alone.
#[test]
fn a_cancel_scope_of_a_leaked_thread_leaves_the_next_runs_timers_alone() {
    util::bounded(|| {
        let scope = CancelScope::after(Duration::from_secs(3600));
        let mut rt = coro::Runtime::new().unwrap();
        let sc = scope.clone();
        rt.block_on(move || {
            // Catches its shutdown unwind and parks again: leaked.
            coro::spawn(move || {
                let _ = sc.run(|| loop {
                    let _ = panic::catch_unwind(|| loop {
                        let _ = coro::park();
                    });
                });
            });
            coro::yield_now();
            assert_eq!(coro::stats().pending_timers, 1, "the scope's deadline");
        });
        rt.block_on(move || {
            let sleeper = coro::spawn(|| coro::sleep(Duration::from_millis(50)));
            coro::yield_now();
            assert_eq!(coro::stats().pending_timers, 1, "the sleep");
            // Earlier than the deadline its leaked entry was armed for.
            scope.set_deadline(Some(coro::clock::now() + Duration::from_secs(1800)));
            scope.cancel();
            assert_eq!(coro::stats().pending_timers, 1, "still the sleep");
            sleeper.join().unwrap().unwrap();
            assert_eq!(coro::stats().pending_timers, 0);
            assert_eq!(coro::stats().timer_heap_len, 0);
        });
    });
}

/// A thread leaked at shutdown while it waited for a blocking-pool job:
/// its wait and its queued job belong to its run, and the next run starts
/// with neither (a fresh runtime's counts).
#[test]
fn a_thread_leaked_in_a_blocking_call_leaves_no_wait_behind() {
    util::bounded(|| {
        let mut rt = coro::Runtime::builder()
            .blocking_threads(1)
            .build()
            .unwrap();
        let (tx, rx) = mpsc::channel::<()>();
        rt.block_on(move || {
            // Holds the one worker past the run.
            coro::spawn(move || coro::blocking(move || rx.recv()));
            util::yield_until("the worker takes the job", || {
                coro::stats().blocking_queued == 0 && coro::stats().blocking_in_flight == 1
            });
            // Catches its shutdown unwind and waits again: leaked, its
            // job queued behind the busy worker.
            coro::spawn(|| loop {
                let _ = panic::catch_unwind(|| loop {
                    let _ = coro::blocking(|| ());
                });
            });
            coro::yield_now();
            assert_eq!(coro::stats().blocking_in_flight, 2);
            assert_eq!(coro::stats().blocking_queued, 1);
        });
        rt.block_on(move || {
            let st = coro::stats();
            assert_eq!(
                (st.blocking_in_flight, st.blocking_queued),
                (0, 0),
                "{st:?}"
            );
            tx.send(()).unwrap();
            // The pool still works.
            assert_eq!(coro::blocking(|| 7).unwrap(), 7);
        });
    });
}

/// A waker that spawns a green thread when woken (an executor that runs
/// each woken task on a thread of its own).
struct SpawnsOnWake(Arc<AtomicUsize>);

impl std::task::Wake for SpawnsOnWake {
    fn wake(self: Arc<Self>) {
        /// Counts its drop.
        struct Counted(Arc<AtomicUsize>);
        impl Drop for Counted {
            fn drop(&mut self) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        let counted = Counted(self.0.clone());
        coro::spawn(move || {
            let _keep = &counted;
            // Its run is stopping: it is stopped with it.
            assert!(coro::park().is_err());
        });
    }
}

/// The end of a run wakes the wakers its timers left: one that spawns a
/// thread then gets it stopped with the run's, not left for the next run.
#[test]
fn a_thread_spawned_by_a_waker_at_the_end_of_a_run_does_not_outlive_it() {
    util::bounded(move || {
        let dropped = Arc::new(AtomicUsize::new(0));
        let d = dropped.clone();
        let mut rt = coro::Runtime::new().unwrap();
        let sleep = rt.block_on(move || {
            let waker = Waker::from(Arc::new(SpawnsOnWake(d)));
            let mut sleep = coro::future::sleep(Duration::from_secs(3600));
            let polled = Pin::new(&mut sleep).poll(&mut Context::from_waker(&waker));
            assert!(polled.is_pending());
            sleep
        });
        assert_eq!(dropped.load(Ordering::SeqCst), 1, "stopped with its run");
        rt.block_on(|| {
            let st = coro::stats();
            assert_eq!((st.live, st.ready, st.panicked), (1, 0, 0), "{st:?}");
        });
        drop(sleep);
    });
}
