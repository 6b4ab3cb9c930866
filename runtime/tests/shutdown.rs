//! What happens to green threads still alive when the main closure returns.

use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

use coro_runtime::{self as coro, WaitError};

struct Flag(Rc<Cell<u32>>);
impl Drop for Flag {
    fn drop(&mut self) {
        self.0.set(self.0.get() + 1);
    }
}

#[test]
fn destructors_run_for_threads_alive_when_run_returns() {
    let dropped = Rc::new(Cell::new(0));
    let d = dropped.clone();
    // Rc is !Send but run's closure need not be Send: it runs on this thread.
    coro::run(move || {
        // Parked forever, ignores errors: unwound.
        let f = Flag(d.clone());
        coro::spawn(move || {
            let _f = f;
            loop {
                let _ = coro::park();
                coro::yield_now();
            }
        });
        // Sleeping: interrupted, leaves normally.
        let f = Flag(d.clone());
        coro::spawn(move || {
            let _f = f;
            coro::sleep(Duration::from_secs(3600))
        });
        // Never started: its closure is dropped.
        let f = Flag(d.clone());
        let started = coro::spawn(move || {
            let _f = f;
        });
        drop(started);
        // Spinning on yield_now: unwound after the shutdown passes.
        let f = Flag(d.clone());
        coro::spawn(move || {
            let _f = f;
            loop {
                coro::yield_now();
            }
        });
        coro::yield_now();
    });
    assert_eq!(dropped.get(), 4);
}

#[test]
fn threads_see_interrupted_at_shutdown_and_stacks_are_reclaimed() {
    let seen = Rc::new(Cell::new(None));
    let s = seen.clone();
    let mut rt = coro::Runtime::new().unwrap();
    rt.block_on(move || {
        coro::spawn(move || s.set(Some(coro::sleep(Duration::from_secs(3600)))));
        coro::yield_now();
    });
    assert_eq!(seen.get(), Some(Err(WaitError::Interrupted)));
    // The runtime is clean and usable again.
    let live = rt.block_on(|| coro::stats().live);
    assert_eq!(live, 1);
}

#[test]
fn blocking_in_a_destructor_during_unwinding_is_refused() {
    struct BlocksOnDrop(Rc<Cell<Option<Result<(), WaitError>>>>);
    impl Drop for BlocksOnDrop {
        fn drop(&mut self) {
            self.0.set(Some(coro::sleep(Duration::from_millis(1))));
        }
    }
    let got = Rc::new(Cell::new(None));
    let g = got.clone();
    coro::run(move || {
        let h = coro::spawn(move || {
            let _b = BlocksOnDrop(g);
            panic!("unwind through a blocking destructor");
        });
        assert!(h.join().unwrap_err().is_panic());
    });
    assert_eq!(got.get(), Some(Err(WaitError::SuspendForbidden)));
}
