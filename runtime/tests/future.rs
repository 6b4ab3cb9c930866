//! `coro::future`: `block_on` parks only its green thread, its `Waker` is
//! `Send + Sync` and never loses a wake (also one that comes between the
//! poll and the park, from another OS thread), late wakes are harmless,
//! timeouts / cancel scopes / interrupts drop the future on the green
//! thread; `Sleep` runs on the timer wheel and gives its entry up.

use coro_test_support as util;

use std::cell::Cell;
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use coro_runtime::{self as coro, future::block_on, CancelScope, ThreadState, WaitError};

/// A future that is pending until `done` is set, and counts its polls.
struct Flag {
    done: Arc<AtomicBool>,
    polls: Rc<Cell<u32>>,
    waker: Rc<Cell<Option<Waker>>>,
}

impl Future for Flag {
    type Output = u32;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<u32> {
        self.polls.set(self.polls.get() + 1);
        self.waker.set(Some(cx.waker().clone()));
        if self.done.load(Ordering::Acquire) {
            Poll::Ready(self.polls.get())
        } else {
            Poll::Pending
        }
    }
}

type Probes = (Arc<AtomicBool>, Rc<Cell<u32>>, Rc<Cell<Option<Waker>>>);

/// A [`Flag`] and its done flag, poll count and last waker.
fn flag() -> (Flag, Probes) {
    let done = Arc::new(AtomicBool::new(false));
    let polls = Rc::new(Cell::new(0));
    let waker = Rc::new(Cell::new(None));
    let f = Flag {
        done: done.clone(),
        polls: polls.clone(),
        waker: waker.clone(),
    };
    (f, (done, polls, waker))
}

fn state_of(id: u64) -> ThreadState {
    coro::thread_by_id(id).map_or(ThreadState::Dead, |c| c.state())
}

#[test]
fn a_ready_future_returns_its_value() {
    util::run(|| {
        assert_eq!(block_on(async { 6 * 7 }).unwrap(), 42);
    });
}

#[test]
fn a_pending_future_parks_only_its_green_thread_until_a_green_thread_wakes_it() {
    util::run(|| {
        let (f, (done, polls, waker)) = flag();
        let ran = Rc::new(Cell::new(false));
        let r2 = ran.clone();
        let h = coro::spawn(move || block_on(f));
        // The other threads run while the future is pending.
        coro::spawn(move || r2.set(true)).join().unwrap();
        assert!(ran.get());
        util::yield_until("the block_on to park", || {
            state_of(h.thread().id()) == ThreadState::Parked
        });
        assert_eq!(polls.get(), 1);
        done.store(true, Ordering::Release);
        waker.take().unwrap().wake(); // local path
        assert_eq!(h.join().unwrap().unwrap(), 2);
    });
}

#[test]
fn a_wake_from_another_os_thread_resumes_the_green_thread() {
    util::run(|| {
        let (tx, rx) = mpsc::channel::<Waker>();
        let done = Arc::new(AtomicBool::new(false));
        let d = done.clone();
        let os = std::thread::spawn(move || {
            let w = rx.recv().unwrap();
            std::thread::sleep(Duration::from_millis(20));
            d.store(true, Ordering::Release);
            w.wake();
        });
        let mut sent = false;
        let v = block_on(poll_fn(|cx| {
            if done.load(Ordering::Acquire) {
                return Poll::Ready(7);
            }
            if !sent {
                tx.send(cx.waker().clone()).unwrap();
                sent = true;
            }
            Poll::Pending
        }))
        .unwrap();
        assert_eq!(v, 7);
        os.join().unwrap();
    });
}

/// The remote wake is made to land after the poll began and before the
/// green thread parks: the poll itself waits (as an OS thread, without
/// yielding) until the other OS thread has called `wake`. A waker that only
/// scheduled a *parked* thread would find it running, do nothing, and the
/// thread would then park forever (the watchdog of `util::run` fails it).
#[test]
fn a_wake_between_the_poll_and_the_park_is_not_lost() {
    util::run(|| {
        for _ in 0..50 {
            let (tx, rx) = mpsc::channel::<Waker>();
            let (woke_tx, woke_rx) = mpsc::channel::<()>();
            let done = Arc::new(AtomicBool::new(false));
            let d = done.clone();
            let os = std::thread::spawn(move || {
                let w = rx.recv().unwrap();
                d.store(true, Ordering::Release);
                w.wake();
                woke_tx.send(()).unwrap();
            });
            let mut first = true;
            block_on(poll_fn(|cx| {
                if first {
                    first = false;
                    tx.send(cx.waker().clone()).unwrap();
                    woke_rx.recv().unwrap(); // the wake has happened
                    return Poll::Pending;
                }
                assert!(done.load(Ordering::Acquire));
                Poll::Ready(())
            }))
            .unwrap();
            os.join().unwrap();
        }
    });
}

#[test]
fn a_future_that_wakes_itself_yields_to_the_other_green_threads() {
    util::run(|| {
        let other = Rc::new(Cell::new(0u32));
        let o = other.clone();
        let h = coro::spawn(move || {
            for _ in 0..10 {
                o.set(o.get() + 1);
                coro::yield_now();
            }
        });
        let mut seen = Vec::new();
        block_on(poll_fn(|cx| {
            seen.push(other.get());
            if seen.len() == 5 {
                return Poll::Ready(());
            }
            cx.waker().wake_by_ref();
            Poll::Pending
        }))
        .unwrap();
        // Between two polls the other thread ran once.
        assert_eq!(seen, [0, 1, 2, 3, 4]);
        h.join().unwrap();
    });
}

/// Sets its flag (and records the green thread) when dropped.
struct DropProbe(Rc<Cell<Option<u64>>>);
impl Drop for DropProbe {
    fn drop(&mut self) {
        self.0.set(Some(coro::current_id().unwrap()));
    }
}

fn pending_with_probe(probe: Rc<Cell<Option<u64>>>) -> impl Future<Output = ()> {
    let p = DropProbe(probe);
    poll_fn(move |_| {
        let _keep = &p;
        Poll::Pending
    })
}

#[test]
fn with_timeout_ends_block_on_and_drops_the_future_on_the_green_thread() {
    util::run(|| {
        let probe = Rc::new(Cell::new(None));
        let p = probe.clone();
        let h = coro::spawn(move || {
            let r = coro::with_timeout(Duration::from_millis(20), || {
                block_on(pending_with_probe(p.clone()))
            });
            // The future is gone before with_timeout returns.
            assert!(p.get().is_some());
            r
        });
        let id = h.thread().id();
        let r = h.join().unwrap();
        assert!(r.is_err(), "{r:?}");
        assert_eq!(probe.get(), Some(id));
    });
}

#[test]
fn interrupt_and_cancel_scopes_end_block_on() {
    util::run(|| {
        let probe = Rc::new(Cell::new(None));
        let p = probe.clone();
        let h = coro::spawn(move || block_on(pending_with_probe(p)));
        util::yield_until("the block_on to park", || {
            state_of(h.thread().id()) == ThreadState::Parked
        });
        h.thread().interrupt().unwrap();
        let id = h.thread().id();
        assert_eq!(h.join().unwrap(), Err(WaitError::Interrupted));
        assert_eq!(probe.get(), Some(id));

        let scope = Rc::new(CancelScope::new());
        let s = scope.clone();
        let h = coro::spawn(move || s.run(|| block_on(std::future::pending::<()>())));
        util::yield_until("the block_on to park", || {
            state_of(h.thread().id()) == ThreadState::Parked
        });
        scope.cancel();
        let r = h.join().unwrap();
        assert!(r.is_err(), "{r:?}");
    });
}

/// A waker kept after its `block_on` gave up (timed out) or finished, called
/// while the same green thread is parked elsewhere (another `block_on`, a
/// plain park) or while its table slot holds another thread: it wakes
/// nothing, locally or from another OS thread.
#[test]
fn late_wakes_after_a_timeout_or_the_end_wake_nothing() {
    util::run(|| {
        let kept: Rc<Cell<Option<Waker>>> = Rc::new(Cell::new(None));
        let k = kept.clone();
        let (f2, (done2, polls2, waker2)) = flag();
        let h = coro::spawn(move || {
            let (f, (_done, _polls, waker)) = flag();
            let r = coro::with_timeout(Duration::from_millis(5), || block_on(f));
            assert!(r.is_err());
            k.set(waker.take());
            block_on(f2).unwrap()
        });
        util::yield_until("the second block_on to park", || {
            polls2.get() == 1 && state_of(h.thread().id()) == ThreadState::Parked
        });
        let stale = kept.take().unwrap();
        stale.wake_by_ref(); // local
        let s = stale.clone();
        std::thread::spawn(move || s.wake()).join().unwrap(); // remote
        for _ in 0..20 {
            coro::sleep(Duration::from_millis(1)).unwrap();
        }
        assert_eq!(polls2.get(), 1, "a stale wake polled the second future");
        assert_eq!(state_of(h.thread().id()), ThreadState::Parked);
        done2.store(true, Ordering::Release);
        waker2.take().unwrap().wake();
        assert_eq!(h.join().unwrap(), 2);

        // After the end: the thread is gone and its key is reused.
        let (f, (done, _polls, waker)) = flag();
        done.store(true, Ordering::Release);
        coro::spawn(move || block_on(f).unwrap()).join().unwrap();
        let finished = waker.take().unwrap();
        let parked = coro::spawn(coro::park);
        util::yield_until("the new thread to park", || {
            state_of(parked.thread().id()) == ThreadState::Parked
        });
        finished.wake_by_ref();
        let f2 = finished.clone();
        std::thread::spawn(move || f2.wake()).join().unwrap();
        for _ in 0..20 {
            coro::sleep(Duration::from_millis(1)).unwrap();
        }
        assert_eq!(state_of(parked.thread().id()), ThreadState::Parked);
        parked.thread().unpark().unwrap();
        parked.join().unwrap().unwrap();
    });
}

#[test]
fn the_waker_is_send_and_sync_and_outlives_its_runtime() {
    fn send_sync<T: Send + Sync>(_: &T) {}
    let kept = coro::run(|| block_on(poll_fn(|cx| Poll::Ready(cx.waker().clone()))).unwrap());
    send_sync(&kept);
    kept.wake_by_ref(); // its runtime is gone: nothing happens
    std::thread::spawn(move || kept.wake()).join().unwrap();
}

#[test]
fn block_on_outside_a_green_thread_panics_naming_the_call() {
    let p = std::panic::catch_unwind(|| block_on(async { 1 })).unwrap_err();
    let msg = util::panic_text(&*p);
    assert!(msg.contains("coro::future::block_on"), "{msg}");
}

#[test]
fn many_green_threads_woken_from_other_os_threads() {
    util::run(|| {
        let count = Arc::new(AtomicUsize::new(0));
        let (tx, rx) = mpsc::channel::<(Waker, Arc<AtomicBool>)>();
        let os = std::thread::spawn(move || {
            for (w, d) in rx {
                d.store(true, Ordering::Release);
                w.wake();
            }
        });
        let hs: Vec<_> = (0..200)
            .map(|_| {
                let tx = tx.clone();
                let count = count.clone();
                coro::spawn(move || {
                    let d = Arc::new(AtomicBool::new(false));
                    let mut sent = false;
                    block_on(poll_fn(|cx| {
                        if d.load(Ordering::Acquire) {
                            return Poll::Ready(());
                        }
                        if !sent {
                            sent = true;
                            tx.send((cx.waker().clone(), d.clone())).unwrap();
                        }
                        Poll::Pending
                    }))
                    .unwrap();
                    count.fetch_add(1, Ordering::Relaxed);
                })
            })
            .collect();
        drop(tx);
        for h in hs {
            h.join().unwrap();
        }
        assert_eq!(count.load(Ordering::Relaxed), 200);
        os.join().unwrap();
    });
}

#[test]
fn sleep_is_a_future_on_the_timer_wheel() {
    util::run(|| {
        let t = coro::clock::now();
        block_on(coro::future::sleep(Duration::from_millis(10))).unwrap();
        assert!(t.elapsed() >= Duration::from_millis(10));
        assert_eq!(coro::stats().pending_timers, 0);

        // Two sleeps raced: the later one is dropped, and gives its entry up.
        let early = coro::future::sleep(Duration::from_millis(5));
        let late = coro::future::sleep(Duration::from_secs(60));
        let mut both = (Box::pin(early), Box::pin(late));
        block_on(poll_fn(|cx| {
            if both.0.as_mut().poll(cx).is_ready() {
                return Poll::Ready(());
            }
            assert!(both.1.as_mut().poll(cx).is_pending());
            Poll::Pending
        }))
        .unwrap();
        assert_eq!(coro::stats().pending_timers, 1);
        drop(both);
        assert_eq!(coro::stats().pending_timers, 0);

        // Under a timeout, the sleep's future is dropped.
        let r = coro::with_timeout(Duration::from_millis(5), || {
            block_on(coro::future::sleep(Duration::from_secs(60)))
        });
        assert!(r.is_err());
        assert_eq!(coro::stats().pending_timers, 0);
    });
}

/// The waker state a finished `block_on` keeps for the thread's next one
/// does not count as "something outside may wake this runtime": a runtime
/// whose threads all park for good after a `block_on` still reports the
/// deadlock (instead of hanging). `util::bounded` turns a hang into a failure.
#[test]
fn a_finished_block_on_leaves_deadlock_detection_working() {
    let msg = util::bounded(|| {
        std::panic::catch_unwind(|| {
            coro::run(|| {
                block_on(async { 1 }).unwrap();
                let _ = coro::park(); // everything parked: "coro: deadlock"
            })
        })
        .expect_err("the deadlock is reported")
        .downcast_ref::<String>()
        .cloned()
        .unwrap_or_default()
    });
    assert!(msg.contains("deadlock"), "{msg}");
}

/// A waker that owns a `Sleep` (as a task that holds one is owned by its
/// wakers): dropping its last clone drops the sleep, which gives its timer
/// entry up.
struct OwnsSleep(std::sync::Mutex<Option<coro::future::Sleep>>);

impl std::task::Wake for OwnsSleep {
    fn wake(self: Arc<Self>) {}
}

impl Drop for OwnsSleep {
    fn drop(&mut self) {
        drop(self.0.lock().unwrap().take());
    }
}

/// Polls `s` once with `w`; it is pending.
#[track_caller]
fn poll_pending(s: &mut coro::future::Sleep, w: &Waker) {
    assert!(Pin::new(s).poll(&mut Context::from_waker(w)).is_pending());
}

/// A sleep of a minute, armed (polled once).
fn armed_sleep() -> coro::future::Sleep {
    let mut s = coro::future::sleep(Duration::from_secs(60));
    poll_pending(&mut s, Waker::noop());
    s
}

/// `Sleep` replaces and drops its stored waker with no borrow of the
/// timer table held: a waker whose drop drops another `Sleep` (which takes
/// its own entry out of the table) used to panic with `BorrowMutError`.
#[test]
fn a_sleeps_stored_waker_may_drop_other_sleeps() {
    util::run(|| {
        let owner = Waker::from(Arc::new(OwnsSleep(std::sync::Mutex::new(Some(
            armed_sleep(),
        )))));
        let mut outer = coro::future::sleep(Duration::from_secs(60));
        poll_pending(&mut outer, &owner);
        drop(owner); // the stored clone is the last one
        assert_eq!(coro::stats().pending_timers, 2);
        // Another waker replaces it: the owner goes, and its sleep with it.
        poll_pending(&mut outer, Waker::noop());
        assert_eq!(coro::stats().pending_timers, 1);
        // Dropping the sleep drops its stored waker the same way.
        let owner = Waker::from(Arc::new(OwnsSleep(std::sync::Mutex::new(Some(
            armed_sleep(),
        )))));
        poll_pending(&mut outer, &owner);
        drop(owner);
        assert_eq!(coro::stats().pending_timers, 2);
        drop(outer);
        assert_eq!(coro::stats().pending_timers, 0);
    });
}

thread_local! {
    /// The sleep a [`polls_on_clone`] waker polls whenever it is cloned.
    static POLLED_ON_CLONE: std::cell::RefCell<Option<coro::future::Sleep>> =
        const { std::cell::RefCell::new(None) };
}

/// A waker whose clone polls a `Sleep` (user code in a waker's clone, as
/// a `RawWaker` may run).
fn polls_on_clone() -> Waker {
    fn clone(_: *const ()) -> std::task::RawWaker {
        POLLED_ON_CLONE.with(|s| {
            if let Some(s) = s.borrow_mut().as_mut() {
                let _ = Pin::new(s).poll(&mut Context::from_waker(Waker::noop()));
            }
        });
        std::task::RawWaker::new(std::ptr::null(), &VTABLE)
    }
    fn nothing(_: *const ()) {}
    static VTABLE: std::task::RawWakerVTable =
        std::task::RawWakerVTable::new(clone, nothing, nothing, nothing);
    // SAFETY: the vtable's functions never read the data pointer, and
    // keep `RawWaker`'s contract: `clone` returns a waker of the same
    // vtable, `wake`, `wake_by_ref` and `drop` release nothing.
    unsafe { Waker::from_raw(std::task::RawWaker::new(std::ptr::null(), &VTABLE)) }
}

/// `Sleep` clones the waker it stores with no borrow of the timer table
/// held: a clone that polls another `Sleep` (which arms it, in the same
/// table) used to panic with `BorrowMutError`.
#[test]
fn a_sleeps_waker_may_poll_other_sleeps_when_cloned() {
    util::run(|| {
        POLLED_ON_CLONE
            .with(|s| *s.borrow_mut() = Some(coro::future::sleep(Duration::from_secs(60))));
        let w = polls_on_clone();
        let mut outer = coro::future::sleep(Duration::from_secs(60));
        poll_pending(&mut outer, &w); // stored: cloned
        assert_eq!(coro::stats().pending_timers, 2, "both armed");
        poll_pending(&mut outer, Waker::noop());
        poll_pending(&mut outer, &w); // replaced: cloned again
        assert_eq!(coro::stats().pending_timers, 2);
        drop(outer);
        POLLED_ON_CLONE.with(|s| s.borrow_mut().take());
        assert_eq!(coro::stats().pending_timers, 0);
    });
}

/// A future that stays pending and wakes itself at every poll (a busy
/// cooperative yield), counting its polls.
fn wakes_itself(polls: &Cell<u32>) -> impl Future<Output = ()> + '_ {
    poll_fn(move |cx| {
        polls.set(polls.get() + 1);
        cx.waker().wake_by_ref();
        Poll::Pending
    })
}

/// Inside `no_suspend` the yield after a future's own wake is refused:
/// `block_on` fails at once with `SuspendForbidden`, logged naming the
/// call and the region, as a park there does (it used to poll again
/// forever). `util::bounded` turns a spin into a failure.
#[test]
fn block_on_inside_no_suspend_fails_at_once_with_a_future_that_wakes_itself() {
    util::logs::capture();
    let (r, polls, id) = util::bounded(|| {
        coro::run(|| {
            let polls = Cell::new(0);
            let r = coro::no_suspend(|| block_on(wakes_itself(&polls)));
            (r, polls.get(), coro::current().id())
        })
    });
    assert_eq!((r, polls), (Err(WaitError::SuspendForbidden), 1));
    let line = util::logs::lines()
        .into_iter()
        .map(|(_, m)| m)
        .find(|m| m.contains("coro::future::block_on") && m.contains(&format!("#{id} ")))
        .expect("the refusal is logged");
    assert!(line.contains("no_suspend"), "{line}");
}

/// The yield after a future's own wake is a blocking call's: a passed
/// deadline ends `block_on` there (it used to poll on forever), as does
/// an interrupt.
#[test]
fn block_on_with_a_future_that_wakes_itself_ends_at_a_deadline() {
    util::bounded(|| {
        coro::run(|| {
            let polls = Cell::new(0);
            let t = coro::clock::now();
            let r =
                coro::with_timeout(Duration::from_millis(20), || block_on(wakes_itself(&polls)));
            assert!(r.is_err());
            assert!(t.elapsed() >= Duration::from_millis(20));
            assert!(polls.get() > 1, "it yielded and was polled again");
            let me = coro::current();
            let interrupter = coro::spawn(move || me.interrupt().unwrap());
            let polls = Cell::new(0);
            assert_eq!(block_on(wakes_itself(&polls)), Err(WaitError::Interrupted));
            interrupter.join().unwrap();
        })
    });
}
