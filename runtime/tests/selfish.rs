//! Selfishness: a budget of immediate successes before a forced yield.

use std::cell::RefCell;
use std::rc::Rc;

use coro_runtime as coro;

fn trace(budget_a: u32, ops: usize) -> Vec<&'static str> {
    coro::run(move || {
        let log = Rc::new(RefCell::new(Vec::new()));
        let l = log.clone();
        let a = coro::Builder::new()
            .selfishness(budget_a)
            .spawn(move || {
                for _ in 0..ops {
                    l.borrow_mut().push("a");
                    coro::try_selfish();
                }
            })
            .unwrap();
        let l = log.clone();
        let b = coro::spawn(move || {
            for _ in 0..3 {
                l.borrow_mut().push("b");
                coro::yield_now();
            }
        });
        a.join().unwrap();
        b.join().unwrap();
        let v = log.borrow().clone();
        v
    })
}

#[test]
fn budget_of_four_forces_a_yield_every_fourth_operation() {
    let t = trace(4, 8);
    assert_eq!(t, ["a", "a", "a", "a", "b", "a", "a", "a", "a", "b", "b"]);
}

#[test]
fn budget_of_one_yields_after_every_operation() {
    let t = trace(1, 3);
    assert_eq!(t, ["a", "b", "a", "b", "a", "b"]);
}

#[test]
fn forced_yields_are_counted_and_a_real_block_refills() {
    coro::run(|| {
        coro::set_selfishness(3).unwrap();
        assert!(!coro::try_selfish());
        assert!(!coro::try_selfish());
        // A real block refills the budget.
        coro::sleep(std::time::Duration::from_millis(1)).unwrap();
        assert!(!coro::try_selfish());
        assert!(!coro::try_selfish());
        assert!(coro::try_selfish());
        assert_eq!(coro::stats().forced_yields, 1);
    });
}

#[test]
fn runtime_default_and_range() {
    let mut rt = coro::Runtime::builder().selfishness(2).build().unwrap();
    rt.block_on(|| {
        assert!(!coro::try_selfish());
        assert!(coro::try_selfish());
        assert!(coro::set_selfishness(0).is_err());
        assert!(coro::set_selfishness(32_769).is_err());
        coro::set_selfishness(32_768).unwrap();
    });
}
