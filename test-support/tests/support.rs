//! The shared helpers do what the tests rely on: a temp dir is fresh and
//! goes with its handle, captured records are read per thread, forced
//! interleavings wait for the other thread, a test re-runs itself in a
//! child process.

use std::cell::Cell;
use std::rc::Rc;

use coro_test_support::child::{child_ok, child_with_env, is_child, skip, RUNNER};
use coro_test_support::{bounded, logs, run, settle, wait_until, within, yield_until, TempDir};

#[test]
fn a_temp_dir_is_fresh_and_removed_on_drop() {
    let a = TempDir::new("support");
    let b = TempDir::new("support");
    assert_ne!(a.0, b.0, "two dirs with one tag are distinct");
    std::fs::write(a.path("f"), b"x").unwrap();
    assert!(a.path("f").is_file());
    let p = a.0.clone();
    drop(a);
    assert!(!p.exists(), "{} outlived its handle", p.display());
}

#[test]
fn take_reads_only_the_calling_threads_records() {
    logs::capture();
    log::warn!(target: "support::take", "mine");
    std::thread::spawn(|| log::warn!(target: "support::take", "theirs"))
        .join()
        .unwrap();
    assert_eq!(
        logs::take("support::take"),
        [(log::Level::Warn, "mine".to_owned())]
    );
    assert_eq!(logs::take("support::take"), [], "taken records are gone");
    assert_eq!(logs::logged(log::Level::Warn, "theirs"), ["theirs"]);
}

#[test]
fn yield_until_and_settle_let_the_other_threads_run() {
    run(|| {
        let n = Rc::new(Cell::new(0));
        let m = n.clone();
        let t = coro_runtime::spawn(move || {
            for _ in 0..10 {
                m.set(m.get() + 1);
                coro_runtime::yield_now();
            }
        });
        yield_until("five steps", || n.get() >= 5);
        assert!(n.get() >= 5);
        settle();
        assert_eq!(n.get(), 10, "settle runs the chain to its end");
        t.join().unwrap();
    });
}

#[test]
fn wait_until_sees_what_an_os_thread_does() {
    run(|| {
        let flag = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let f = flag.clone();
        let os = std::thread::spawn(move || f.store(true, std::sync::atomic::Ordering::SeqCst));
        wait_until("the OS thread's store", || {
            flag.load(std::sync::atomic::Ordering::SeqCst)
        });
        os.join().unwrap();
    });
}

#[test]
fn within_returns_the_value_and_resumes_a_panic() {
    assert_eq!(bounded(|| 7), 7);
    let p = std::panic::catch_unwind(|| within(|| panic!("inner")));
    assert_eq!(
        coro_test_support::panic_text(&*p.unwrap_err()),
        "inner",
        "the body's panic reaches the caller"
    );
}

#[test]
fn a_test_reruns_itself_in_a_child_process() {
    const ME: &str = "a_test_reruns_itself_in_a_child_process";
    if is_child(ME) {
        println!("in the child");
        return;
    }
    let out = child_ok(ME);
    assert!(out.contains("in the child"), "{out}");
}

/// What the next test's grandchild reports.
const GRANDCHILD: &str = "a_grandchild_reports_how_it_was_started";
/// The grandchild's skip line, which the suite's log shows too.
const GRANDCHILD_SKIP: &str =
    "not a test of its own: a line the runner test checks is passed on to the parent";

#[test]
fn a_child_runs_through_the_named_runner_and_its_skips_reach_the_parent() {
    const ME: &str = "a_child_runs_through_the_named_runner_and_its_skips_reach_the_parent";
    if is_child(ME) {
        // This process's children start through the runner it was given.
        print!("{}", child_ok(GRANDCHILD));
        return;
    }
    let out = child_with_env(ME, &[(RUNNER, "env CORO_TEST_RUNNER_MARK=1")]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("runner mark: Some(\"1\")"),
        "the grandchild did not run through the runner:\n{stdout}"
    );
    assert!(
        stderr.contains(&format!("SKIPPED {GRANDCHILD}: {GRANDCHILD_SKIP}")),
        "the grandchild's skip was not passed on:\n{stderr}"
    );
}

#[test]
fn a_grandchild_reports_how_it_was_started() {
    if is_child(GRANDCHILD) {
        let mark = std::env::var("CORO_TEST_RUNNER_MARK").ok();
        println!("runner mark: {mark:?}");
        skip(GRANDCHILD, GRANDCHILD_SKIP);
    }
}
