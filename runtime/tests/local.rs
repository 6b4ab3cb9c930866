//! Green-thread-local storage: a value per green thread, made lazily, kept
//! across blocking calls, dropped on the thread's own stack when it ends
//! (returning, panicking, or unwound at shutdown), before its joiners wake.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Duration;

use coro_runtime::{self as coro, AccessError};

coro::green_local! {
    static COUNTER: Cell<u32> = Cell::new(0);
    static NAMES: RefCell<Vec<String>> = RefCell::new(Vec::new());
}

thread_local! {
    /// What the values' destructors saw, on this OS thread.
    static DROPPED: RefCell<Vec<(u32, Option<u64>)>> = const { RefCell::new(Vec::new()) };
    static INITS: Cell<u32> = const { Cell::new(0) };
}

/// Records its tag and the green thread it was dropped on.
struct Tracked(u32);

impl Drop for Tracked {
    fn drop(&mut self) {
        DROPPED.with_borrow_mut(|d| d.push((self.0, coro::current_id())));
    }
}

coro::green_local! {
    static TRACKED: Cell<Option<Tracked>> = {
        INITS.set(INITS.get() + 1);
        Cell::new(None)
    };
}

fn dropped() -> Vec<(u32, Option<u64>)> {
    DROPPED.with_borrow_mut(std::mem::take)
}

#[test]
fn each_green_thread_has_its_own_value_across_blocking_calls() {
    coro::run(|| {
        let hs: Vec<_> = (1..=3)
            .map(|i| {
                coro::spawn(move || {
                    COUNTER.set(i);
                    NAMES.with_borrow_mut(|n| n.push(format!("t{i}")));
                    coro::sleep(Duration::from_millis(3 - u64::from(i))).unwrap();
                    (COUNTER.get(), NAMES.with_borrow(|n| n.clone()))
                })
            })
            .collect();
        COUNTER.set(100);
        for (i, h) in (1..=3).zip(hs) {
            assert_eq!(h.join().unwrap(), (i, vec![format!("t{i}")]));
        }
        assert_eq!(COUNTER.get(), 100);
        assert!(NAMES.with_borrow(Vec::is_empty));
    });
}

#[test]
fn values_are_made_lazily_once_per_thread() {
    coro::run(|| {
        INITS.set(0);
        let h = coro::spawn(|| ());
        h.join().unwrap();
        assert_eq!(
            INITS.get(),
            0,
            "a thread that never used the key made a value"
        );
        TRACKED.with(|_| ());
        TRACKED.with(|_| ());
        assert_eq!(INITS.get(), 1);
        coro::spawn(|| TRACKED.with(|_| ())).join().unwrap();
        assert_eq!(INITS.get(), 2);
    });
}

#[test]
fn values_drop_on_their_thread_before_its_joiners_wake() {
    coro::run(|| {
        dropped();
        let h = coro::spawn(|| {
            TRACKED.set(Some(Tracked(1)));
            coro::current().id()
        });
        let id = h.thread().id();
        assert_eq!(h.join().unwrap(), id);
        assert_eq!(
            dropped(),
            [(1, Some(id))],
            "dropped on the ending thread, before join returned"
        );

        let h = coro::spawn(|| {
            TRACKED.set(Some(Tracked(2)));
            panic!("boom");
        });
        let id = h.thread().id();
        assert!(h.join().unwrap_err().is_panic());
        assert_eq!(
            dropped(),
            [(2, Some(id))],
            "a panicking thread's values drop too"
        );
    });
}

#[test]
fn values_of_threads_unwound_at_shutdown_are_dropped() {
    let parked_id = Rc::new(Cell::new(0));
    let p = parked_id.clone();
    dropped();
    coro::run(move || {
        let h = coro::spawn(|| {
            TRACKED.set(Some(Tracked(3)));
            // Swallows every error: shutdown has to unwind it.
            loop {
                let _ = coro::park();
            }
        });
        p.set(h.thread().id());
        coro::yield_now();
        TRACKED.set(Some(Tracked(4))); // main's own
    });
    let mut d = dropped();
    d.sort();
    assert_eq!(d, [(3, Some(parked_id.get())), (4, Some(1))]);
}

#[test]
fn a_destructor_may_not_block_and_may_use_locals_again() {
    struct Blocks;
    impl Drop for Blocks {
        fn drop(&mut self) {
            // Blocking is refused in a destructor at thread end...
            assert_eq!(
                coro::sleep(Duration::from_millis(1)),
                Err(coro::WaitError::SuspendForbidden)
            );
            // ...and a local used again is made anew and dropped too.
            TRACKED.set(Some(Tracked(5)));
        }
    }
    coro::green_local! {
        static BLOCKS: RefCell<Option<Blocks>> = RefCell::new(None);
    }
    coro::run(|| {
        dropped();
        let h = coro::spawn(|| BLOCKS.with_borrow_mut(|b| *b = Some(Blocks)));
        let id = h.thread().id();
        h.join().unwrap();
        assert_eq!(dropped(), [(5, Some(id))]);
    });
}

#[test]
fn outside_a_green_thread_access_fails_clearly() {
    let e: AccessError = COUNTER.try_with(|c| c.get()).unwrap_err();
    assert!(e.to_string().contains("outside a green thread"));
    let r = std::panic::catch_unwind(|| COUNTER.get());
    let p = r.unwrap_err();
    let msg = coro_test_support::panic_text(&*p);
    assert!(msg.contains("needs a green thread"), "{msg}");
}
