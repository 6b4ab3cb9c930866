//! Helpers shared by the runtime's integration tests: running one test in a
//! child process (for behaviour that aborts, faults or must measure the whole
//! process's memory; through an emulator when the tests run under one),
//! stating a skip, and the pages of a stack. The workspace's
//! `coro-test-support` gives the rest (a runtime bounded by a watchdog,
//! forced interleavings, bodies bounded on an OS thread of their own,
//! captured logs), named here.

#![allow(dead_code, unused_imports)]

use std::io::Read;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const CHILD: &str = "CORO_TEST_CHILD";

pub use coro_test_support::{bounded, logs, run, wait_until, within, yield_until, LIMIT};

/// Runs the test named `test` of this binary in a child process.
#[track_caller]
pub fn child(test: &str) -> Output {
    child_with_env(test, &[])
}

/// Upper bound on a child process's run time: only turns a hang (an
/// overflow that nothing catches, say) into a failure.
pub const CHILD_LIMIT: Duration = Duration::from_secs(120);

/// [`child`] with extra environment variables.
#[track_caller]
pub fn child_with_env(test: &str, env: &[(&str, &str)]) -> Output {
    let mut running = this_binary()
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(CHILD, test)
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Drained as they come (a full pipe would stop the child).
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = r.read_to_end(&mut v);
            v
        })
    };
    let stdout = drain(Box::new(running.stdout.take().unwrap()));
    let stderr = drain(Box::new(running.stderr.take().unwrap()));
    let start = Instant::now();
    let status = loop {
        if let Some(status) = running.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > CHILD_LIMIT {
            let _ = running.kill();
            let _ = running.wait();
            panic!(
                "the child running {test} ran past {CHILD_LIMIT:?} and was killed; stderr:\n{}",
                String::from_utf8_lossy(&stderr.join().unwrap())
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let out = Output {
        status,
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
    };
    // A skip the child states is the parent's to state.
    for line in String::from_utf8_lossy(&out.stderr).lines() {
        if let Some(why) = line.strip_prefix("SKIPPED ") {
            if let Some((test, why)) = why.split_once(": ") {
                skip(test, why);
            }
        }
    }
    // 127 with no output: the exec itself failed in the forked child.
    assert!(
        !(out.status.code() == Some(127) && out.stdout.is_empty() && out.stderr.is_empty()),
        "could not run the test binary again (exit 127, no output); under an emulator \
         (qemu-user without binfmt), name it in {RUNNER}, as cargo's runner"
    );
    out
}

/// Names the program (and its arguments, split at spaces as cargo splits a
/// target's `runner`) that runs this test binary again: an emulator such as
/// `qemu-aarch64` when the binary is built for another architecture.
pub const RUNNER: &str = "CORO_TEST_RUNNER";

/// A command that runs this test binary: directly, or through [`RUNNER`].
pub fn this_binary() -> Command {
    let exe = std::env::current_exe().unwrap();
    let runner = std::env::var(RUNNER).unwrap_or_default();
    let mut words = runner.split_whitespace();
    match words.next() {
        Some(program) => {
            let mut cmd = Command::new(program);
            cmd.args(words).arg(exe);
            cmd
        }
        None => Command::new(exe),
    }
}

/// Runs `test` in a child process that must exit successfully; returns its
/// standard output.
#[track_caller]
pub fn child_ok(test: &str) -> String {
    let out = child(test);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The emulator this test binary runs under, as named in [`RUNNER`].
pub fn emulator() -> Option<String> {
    std::env::var(RUNNER).ok().filter(|r| !r.trim().is_empty())
}

/// Says on stderr, past the test harness's capture (so it shows in every
/// run's output), that `test` checks nothing here, and why.
pub fn skip(test: &str, why: &str) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {why}");
}

/// Whether this process is the child running `test`.
pub fn is_child(test: &str) -> bool {
    std::env::var(CHILD).as_deref() == Ok(test)
}

/// The page size.
pub fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) as usize }
}

/// Of the pages the `len`-byte buffers at `bufs` lie on (whatever the page
/// size): how many, and how many are resident (`mincore`). Unlike the
/// process's resident set, this counts only those pages: not the
/// allocator's, nor an emulator's own memory.
pub fn resident_pages(bufs: &[usize], len: usize) -> (usize, usize) {
    let page = page_size();
    let (mut total, mut resident) = (0, 0);
    for &b in bufs {
        let lo = b / page * page;
        let hi = (b + len).next_multiple_of(page);
        let mut vec = vec![0u8; (hi - lo) / page];
        // SAFETY: a query on memory of a green thread's stack, which stays
        // mapped while the thread lives (the caller keeps it alive); `vec`
        // has one entry per page.
        let rc =
            unsafe { libc::mincore(lo as *mut libc::c_void, hi - lo, vec.as_mut_ptr().cast()) };
        assert_eq!(rc, 0, "mincore: {}", std::io::Error::last_os_error());
        total += vec.len();
        resident += vec.iter().filter(|&&v| v & 1 != 0).count();
    }
    (total, resident)
}
