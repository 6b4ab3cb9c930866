//! Shutdown hooks: they run after main returns and before the other threads
//! are interrupted, may block, are bounded in time, and survive a panic of
//! one of them.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use coro_runtime as coro;

type Log = Rc<RefCell<Vec<String>>>;

#[test]
fn hooks_run_before_threads_are_interrupted() {
    let log: Log = Rc::default();
    let l = log.clone();
    coro::run(move || {
        // A thread parked for good: it sees Interrupted only after the hooks.
        let l2 = l.clone();
        let parked = coro::spawn(move || {
            let r = coro::park();
            l2.borrow_mut().push(format!("parked thread: {r:?}"));
        });
        let t = parked.thread().clone();
        let l3 = l.clone();
        coro::on_shutdown(move || {
            l3.borrow_mut()
                .push(format!("hook 1 sees the thread {:?}", t.state()));
            // A hook may block: the other threads still run meanwhile.
            coro::sleep(Duration::from_millis(2)).unwrap();
            l3.borrow_mut().push("hook 1 slept".into());
        });
        let l4 = l.clone();
        coro::on_shutdown(move || l4.borrow_mut().push("hook 2".into()));
        coro::yield_now();
    });
    assert_eq!(
        *log.borrow(),
        [
            "hook 1 sees the thread Parked",
            "hook 1 slept",
            "hook 2",
            "parked thread: Err(Interrupted)"
        ]
    );
}

#[test]
fn a_panicking_hook_does_not_stop_the_others() {
    let log: Log = Rc::default();
    let l = log.clone();
    coro::run(move || {
        coro::on_shutdown(|| panic!("hook failure"));
        coro::on_shutdown(move || l.borrow_mut().push("second hook ran".into()));
    });
    assert_eq!(*log.borrow(), ["second hook ran"]);
}

#[test]
fn a_hook_that_blocks_too_long_is_cut_off() {
    let log: Log = Rc::default();
    let l = log.clone();
    let t = std::time::Instant::now();
    coro::run(move || {
        coro::on_shutdown(move || {
            let r = coro::sleep(Duration::from_secs(3600));
            l.borrow_mut().push(format!("{r:?}"));
        });
    });
    assert_eq!(*log.borrow(), ["Err(TimedOut)"]);
    assert!(t.elapsed() >= coro::HOOKS_LIMIT);
}

#[test]
fn hooks_belong_to_one_run() {
    let count = Rc::new(RefCell::new(0));
    let mut rt = coro::Runtime::new().unwrap();
    let c = count.clone();
    rt.block_on(move || coro::on_shutdown(move || *c.borrow_mut() += 1));
    assert_eq!(*count.borrow(), 1);
    rt.block_on(|| ());
    assert_eq!(*count.borrow(), 1, "a hook runs once");
}

#[test]
fn hooks_registered_by_hooks_run_too() {
    let log: Log = Rc::default();
    let l = log.clone();
    coro::run(move || {
        coro::on_shutdown(move || {
            coro::on_shutdown(move || l.borrow_mut().push("late hook".into()))
        });
    });
    assert_eq!(*log.borrow(), ["late hook"]);
}
