//! Scheduling order: FIFO round robin, batches fixed at their start, yield_now.

use std::cell::RefCell;
use std::rc::Rc;

use coro_runtime as coro;

#[test]
fn three_yielding_threads_interleave_in_order() {
    let log = coro::run(|| {
        let log = Rc::new(RefCell::new(Vec::new()));
        let hs: Vec<_> = ["a", "b", "c"]
            .into_iter()
            .map(|name| {
                let log = log.clone();
                coro::spawn(move || {
                    for round in 0..4 {
                        log.borrow_mut().push(format!("{name}{round}"));
                        coro::yield_now();
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        let v = log.borrow().clone();
        v
    });
    let expected: Vec<String> = (0..4)
        .flat_map(|r| ["a", "b", "c"].map(|n| format!("{n}{r}")))
        .collect();
    assert_eq!(log, expected);
}

#[test]
fn spawned_thread_runs_after_the_spawner_yields() {
    coro::run(|| {
        let ran = Rc::new(RefCell::new(false));
        let r = ran.clone();
        let h = coro::spawn(move || *r.borrow_mut() = true);
        assert!(!*ran.borrow(), "spawn must not run the thread inline");
        coro::yield_now();
        assert!(*ran.borrow());
        h.join().unwrap();
    });
}

#[test]
fn a_thread_made_ready_during_a_pass_runs_in_the_next_pass() {
    // `a` wakes `b` while the pass that contains `c` is running: `c` still
    // runs before `b`, because the batch was fixed when the pass began.
    let order = coro::run(|| {
        let order = Rc::new(RefCell::new(Vec::new()));
        let o = order.clone();
        let b = coro::spawn(move || {
            coro::park().unwrap();
            o.borrow_mut().push("b");
        });
        coro::yield_now(); // let b park
        let bt = b.thread().clone();
        let o = order.clone();
        let a = coro::spawn(move || {
            o.borrow_mut().push("a");
            bt.unpark().unwrap();
        });
        let o = order.clone();
        let c = coro::spawn(move || o.borrow_mut().push("c"));
        a.join().unwrap();
        b.join().unwrap();
        c.join().unwrap();
        let v = order.borrow().clone();
        v
    });
    assert_eq!(order, ["a", "c", "b"]);
}

#[test]
fn main_value_is_returned_and_ids_count_from_one() {
    let (id, name, child) = coro::run(|| {
        let me = coro::current();
        let child = coro::spawn(|| coro::current().id()).join().unwrap();
        (me.id(), me.name().map(str::to_owned), child)
    });
    assert_eq!(id, 1);
    assert_eq!(name.as_deref(), Some("main"));
    assert_eq!(child, 2);
}

#[test]
fn many_threads_spawn_and_join() {
    let sum = coro::run(|| {
        let hs: Vec<_> = (0..10_000u64)
            .map(|i| {
                coro::spawn(move || {
                    coro::yield_now();
                    i
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).sum::<u64>()
    });
    assert_eq!(sum, (0..10_000).sum());
}

#[test]
fn runtime_can_run_twice() {
    let mut rt = coro::Runtime::new().unwrap();
    assert_eq!(rt.block_on(|| coro::spawn(|| 1).join().unwrap()), 1);
    assert_eq!(rt.block_on(|| coro::spawn(|| 2).join().unwrap()), 2);
}

#[test]
fn calls_outside_a_runtime_panic_with_a_clear_message() {
    let e =
        std::panic::catch_unwind(|| coro::sleep(std::time::Duration::from_millis(1))).unwrap_err();
    let msg = coro_test_support::panic_text(&*e);
    assert!(msg.contains("needs a coro runtime"), "{msg}");
    let e = std::panic::catch_unwind(coro::park).unwrap_err();
    assert!(e.downcast_ref::<String>().unwrap().contains("coro runtime"));
}

#[test]
fn nested_run_is_refused() {
    coro::run(|| {
        let r = std::panic::catch_unwind(|| coro::run(|| ()));
        assert!(r.is_err());
    });
}

#[test]
fn deadlock_is_reported_not_hung() {
    let r = std::panic::catch_unwind(|| {
        coro::run(|| {
            let _ = coro::park();
        })
    });
    let e = r.unwrap_err();
    let msg = e.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(msg.contains("deadlock"), "{msg}");
}
