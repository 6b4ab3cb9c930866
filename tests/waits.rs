//! Who waits on whom: a parked thread's wait names the object,
//! its holder, the time waited and the caller; `deadlocks` finds a two-lock
//! cycle and names its threads and calls; the periodic check logs it at
//! ERROR once; a thread waiting on a lock whose holder finished without
//! releasing it, and a thread joining that one, are reported as leaked.

mod util;

use std::rc::Rc;
use std::sync::{Mutex as StdMutex, Once};
use std::time::Duration;

use coro::sync::Mutex;

static LOGS: StdMutex<Vec<(log::Level, String)>> = StdMutex::new(Vec::new());

struct Capture;
impl log::Log for Capture {
    fn enabled(&self, _: &log::Metadata<'_>) -> bool {
        true
    }
    fn log(&self, r: &log::Record<'_>) {
        LOGS.lock().unwrap().push((r.level(), r.args().to_string()));
    }
    fn flush(&self) {}
}

fn capture_logs() {
    static INIT: Once = Once::new();
    INIT.call_once(|| {
        log::set_logger(&Capture).unwrap();
        log::set_max_level(log::LevelFilter::Info);
    });
}

fn logged(level: log::Level, needle: &str) -> Vec<String> {
    LOGS.lock()
        .unwrap()
        .iter()
        .filter(|(l, m)| *l == level && m.contains(needle))
        .map(|(_, m)| m.clone())
        .collect()
}

/// Spawns `name`, which takes `first`, lets the other run, then takes
/// `second`.
fn locker(
    name: &str,
    first: &Rc<Mutex<()>>,
    second: &Rc<Mutex<()>>,
) -> coro::JoinHandle<Result<(), coro::sync::LockError>> {
    let (a, b) = (first.clone(), second.clone());
    coro::Builder::new()
        .name(name.into())
        .spawn(move || {
            let _g = a.lock()?;
            coro::yield_now();
            let _h = b.lock()?; // the line the deadlock names
            Ok(())
        })
        .unwrap()
}

/// Makes `alice` and `bob` deadlock on two locks; returns their handles.
fn deadlock() -> [coro::JoinHandle<Result<(), coro::sync::LockError>>; 2] {
    let m1 = Rc::new(Mutex::new(()));
    let m2 = Rc::new(Mutex::new(()));
    let a = locker("alice", &m1, &m2);
    let b = locker("bob", &m2, &m1);
    util::yield_until("both parked", || {
        a.thread().state() == coro::ThreadState::Parked
            && b.thread().state() == coro::ThreadState::Parked
    });
    [a, b]
}

/// Breaks the cycle: alice's lock fails, which lets bob through.
fn untangle([a, b]: [coro::JoinHandle<Result<(), coro::sync::LockError>>; 2]) {
    a.thread().interrupt().unwrap();
    assert!(a.join().unwrap().is_err());
    b.join().unwrap().unwrap();
}

#[test]
fn a_two_lock_deadlock_is_found_and_named() {
    util::run(|| {
        assert!(coro::deadlocks().is_empty());
        let pair = deadlock();
        let (ida, idb) = (pair[0].thread().id(), pair[1].thread().id());

        // `threads`: what each waits on, who holds it, where it was called.
        let list = coro::threads();
        let wait_of = |id| {
            list.iter()
                .find(|t| t.id == id)
                .and_then(|t| t.wait.clone())
                .unwrap()
        };
        let (wa, wb) = (wait_of(ida), wait_of(idb));
        assert_eq!((wa.call, wa.kind), ("Mutex::lock", "Mutex"));
        assert_eq!(wa.holder, Some(idb));
        assert_eq!(wa.holder_name.as_deref(), Some("bob"));
        assert_eq!(wb.holder_name.as_deref(), Some("alice"));
        assert_ne!(wa.object, wb.object);
        assert!(wa.site.unwrap().file().ends_with("waits.rs"), "{wa:?}");

        let found = coro::deadlocks();
        assert_eq!(found.len(), 1, "{found:?}");
        let d = &found[0];
        let names: Vec<_> = d.threads.iter().map(|t| t.name.clone().unwrap()).collect();
        assert_eq!(names, ["alice", "bob"]);
        assert!(d.threads.iter().all(|t| t.call == "Mutex::lock"));
        assert_eq!(d.threads[0].holder, idb);
        assert_eq!(d.threads[1].holder, ida);
        let text = d.to_string();
        assert!(
            text.contains(&format!("#{ida} 'alice' waits in Mutex::lock at ")),
            "{text}"
        );
        assert!(text.contains("waits.rs:"), "{text}");

        untangle(pair);
        assert!(coro::deadlocks().is_empty());
    });
}

#[test]
fn the_periodic_check_logs_each_deadlock_once_at_error() {
    capture_logs();
    let mut rt = coro::Runtime::builder()
        .deadlock_check(Some(Duration::from_millis(2)))
        .build()
        .unwrap();
    rt.block_on(|| {
        coro::with_timeout(util::LIMIT, check_logs_once).expect("test ran past its limit");
    });
}

fn check_logs_once() {
    {
        let pair = deadlock();
        // Several checks run while the main thread sleeps.
        util::wait_until("the check's report", || {
            !logged(log::Level::Error, "'alice' waits in Mutex::lock").is_empty()
        });
        coro::sleep(Duration::from_millis(20)).unwrap();
        let lines = logged(log::Level::Error, "'alice' waits in Mutex::lock");
        assert_eq!(lines.len(), 1, "reported once: {lines:?}");
        assert!(
            lines[0].contains("deadlock of 2 green threads"),
            "{}",
            lines[0]
        );
        assert!(
            lines[0].contains("'bob' waits in Mutex::lock"),
            "{}",
            lines[0]
        );
        untangle(pair);
    }
}

#[test]
fn a_zero_deadlock_check_interval_is_refused() {
    let e = coro::Runtime::builder()
        .deadlock_check(Some(Duration::ZERO))
        .build()
        .unwrap_err();
    assert!(e.to_string().contains("deadlock_check"), "{e}");
}

#[test]
fn waiters_on_a_lock_whose_holder_finished_are_leaked() {
    capture_logs();
    util::run(|| {
        let m = Rc::new(Mutex::new(0));
        let m2 = m.clone();
        // The holder: parks (so the waiter queues), then ends with its
        // guard forgotten: nothing will ever unlock the mutex.
        let holder = coro::Builder::new()
            .name("forgetful".into())
            .spawn(move || {
                let g = m2.lock().unwrap();
                coro::park_as("test: until the waiter queues").unwrap();
                std::mem::forget(g);
            })
            .unwrap();
        coro::yield_now();
        let m3 = m.clone();
        let waiter = Rc::new(
            coro::Builder::new()
                .name("stuck-waiter".into())
                .spawn(move || m3.lock().map(|_| ()))
                .unwrap(),
        );
        let w = waiter.clone();
        let joiner = coro::Builder::new()
            .name("stuck-joiner".into())
            .spawn(move || w.wait())
            .unwrap();
        util::yield_until("the waiter and the joiner park", || {
            waiter.thread().state() == coro::ThreadState::Parked
                && joiner.thread().state() == coro::ThreadState::Parked
        });
        assert!(coro::leaks().is_empty());
        assert_eq!(coro::stats().leaked, 0);

        holder.thread().unpark().unwrap();
        holder.join().unwrap();

        let leaks = coro::leaks();
        let names: Vec<_> = leaks.iter().map(|t| t.name.clone().unwrap()).collect();
        assert_eq!(names, ["stuck-waiter", "stuck-joiner"], "{leaks:?}");
        assert_eq!(leaks[0].call, "Mutex::lock");
        assert!(leaks[0].site.unwrap().file().ends_with("waits.rs"));
        assert!(leaks[0].reason.contains("Mutex"), "{}", leaks[0].reason);
        assert_eq!(leaks[1].call, "join");
        assert_eq!(coro::stats().leaked, 2);
        let warned = logged(log::Level::Warn, "'stuck-waiter' is leaked");
        assert_eq!(warned.len(), 1, "{warned:?}");
        assert!(
            warned[0].contains("parked in Mutex::lock at "),
            "{}",
            warned[0]
        );
        assert!(
            warned[0].contains("finished without releasing it"),
            "{}",
            warned[0]
        );
        assert_eq!(
            logged(log::Level::Warn, "'stuck-joiner' is leaked").len(),
            1
        );

        // Only an interrupt ends a leaked wait; it is no longer listed.
        waiter.thread().interrupt().unwrap();
        joiner.join().unwrap().unwrap();
        assert!(coro::leaks().is_empty());
        assert_eq!(coro::stats().leaked, 2); // a count since start
    });
}

#[test]
fn a_waiter_with_a_deadline_is_not_leaked() {
    util::run(|| {
        let m = Rc::new(Mutex::new(0));
        let m2 = m.clone();
        let holder = coro::spawn(move || {
            let g = m2.lock().unwrap();
            coro::park_as("test").unwrap();
            std::mem::forget(g);
        });
        coro::yield_now();
        let m3 = m.clone();
        let waiter = coro::spawn(move || {
            coro::with_timeout(Duration::from_millis(50), || m3.lock().map(|_| ()))
        });
        util::yield_until("the waiter parks", || {
            waiter.thread().state() == coro::ThreadState::Parked
        });
        holder.thread().unpark().unwrap();
        holder.join().unwrap();
        assert!(coro::leaks().is_empty());
        assert!(waiter.join().unwrap().is_err()); // its deadline ended it
    });
}
