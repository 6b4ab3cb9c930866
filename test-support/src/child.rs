//! Child processes in tests.
//!
//! - This test, re-run in a child process ([`child`], [`child_ok`],
//!   [`is_child`]): for behaviour that aborts or faults, or that must
//!   measure the whole process; through the emulator the tests run under,
//!   if any ([`RUNNER`]); [`skip`] states that a test checks nothing here.
//! - A chatty command (cargo, a shell snippet), [`run`]: its stdout and
//!   stderr are drained by threads while it runs, so it never blocks on a
//!   full pipe, and its run time is bounded.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What a child printed, and how it ended.
#[derive(Debug)]
pub struct Finished {
    /// Its exit status.
    pub status: ExitStatus,
    /// Everything it wrote to stdout.
    pub stdout: String,
    /// Everything it wrote to stderr.
    pub stderr: String,
}

/// The child, leading a process group of its own (see [`run`]). Dropping
/// it (a panic too) kills the group while the child is unreaped, so nothing
/// it started in the background outlives the test.
struct Group {
    child: Child,
    /// Set once `try_wait` has reaped the child: its pid (the group's id)
    /// may then be reused, so the group is not signalled again.
    reaped: bool,
}

impl Group {
    fn kill(&self) {
        // kill(1) rather than libc: no unsafe for a test helper.
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.child.id())])
            .stderr(Stdio::null())
            .status();
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        if !self.reaped {
            self.kill();
            let _ = self.child.wait();
        }
    }
}

/// Is `name` one of the variables cargo sets for the test binary it runs
/// (cargo's "Environment variables Cargo sets for crates", plus the dynamic
/// library path)? Those describe this package, not the user's setup, and
/// would change build scripts' fingerprints if passed on. Everything else
/// (`CARGO_TARGET_DIR`, `CARGO_HOME`, `CARGO_BUILD_*`, `CARGO_PROFILE_*`,
/// `RUSTFLAGS`, ...) is the user's configuration and is kept.
fn set_by_cargo_for_the_test(name: &str) -> bool {
    const PREFIXES: [&str; 4] = [
        "CARGO_PKG_",
        "CARGO_BIN_",
        "CARGO_MANIFEST_",
        "CARGO_CRATE_",
    ];
    const NAMES: [&str; 7] = [
        "CARGO",
        "CARGO_PRIMARY_PACKAGE",
        "CARGO_TARGET_TMPDIR",
        "CARGO_RUSTC_CURRENT_DIR",
        "CARGO_MAKEFLAGS",
        "RUST_RECURSION_COUNT",
        "LD_LIBRARY_PATH",
    ];
    PREFIXES.iter().any(|p| name.starts_with(p)) || NAMES.contains(&name)
}

/// Runs `cmd` in the user's environment: without the variables cargo set
/// for this test binary (`CARGO_PKG_*`, `CARGO_MANIFEST_*`, the dynamic
/// library path, ...), with everything else (`CARGO_TARGET_DIR`,
/// `RUSTFLAGS`, ...).
pub fn as_user(cmd: &mut Command) -> &mut Command {
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy().into_owned();
        if set_by_cargo_for_the_test(&k) {
            cmd.env_remove(k);
        }
    }
    cmd
}

fn drain(pipe: impl Read + Send + 'static) -> JoinHandle<String> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let mut pipe = pipe;
        let _ = pipe.read_to_end(&mut bytes);
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

/// Runs `cmd` with stdin closed and stdout/stderr captured, both read by
/// threads as the child writes. The child leads a process group of its own;
/// when it has exited, whatever it left running is killed with the group.
/// Panics (after killing the group, with what it had printed) when it runs
/// past `limit`: a hang is a failure, not a stuck CI.
#[track_caller]
pub fn run(cmd: &mut Command, limit: Duration) -> Finished {
    let what = format!("{cmd:?}");
    let mut group = Group {
        child: cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {what}: {e}")),
        reaped: false,
    };
    let out = drain(group.child.stdout.take().unwrap());
    let err = drain(group.child.stderr.take().unwrap());
    let deadline = Instant::now() + limit;
    let mut status = None;
    while Instant::now() < deadline {
        if status.is_none() {
            status = group.child.try_wait().unwrap();
            if status.is_some() {
                // What it left in the background would hold the pipes. The
                // pid was reaped just now; while any member of the group
                // lives, its id cannot be handed out again.
                group.kill();
                group.reaped = true;
            }
        }
        if status.is_some() && out.is_finished() && err.is_finished() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    if status.is_none() {
        drop(group); // kills the group, reaps the child
    }
    // Killed processes close their pipes as they exit: a short grace.
    let grace = Instant::now() + Duration::from_secs(5);
    while !(out.is_finished() && err.is_finished()) && Instant::now() < grace {
        std::thread::sleep(Duration::from_millis(20));
    }
    if !(out.is_finished() && err.is_finished()) {
        panic!(
            "{what}: something it started holds its stdout/stderr open (it left its process group)"
        );
    }
    let stdout = out.join().unwrap();
    let stderr = err.join().unwrap();
    match status {
        Some(status) => Finished {
            status,
            stdout,
            stderr,
        },
        None => panic!("{what} ran past {limit:?}; stdout:\n{stdout}\nstderr:\n{stderr}"),
    }
}

/// The variable that tells a child process which test it runs.
const CHILD: &str = "CORO_TEST_CHILD";

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

/// The emulator this test binary runs under, as named in [`RUNNER`].
pub fn emulator() -> Option<String> {
    std::env::var(RUNNER).ok().filter(|r| !r.trim().is_empty())
}

/// Runs the test named `test` of this test binary in a child process (see
/// [`child_with_env`]).
#[track_caller]
pub fn child(test: &str) -> Output {
    child_with_env(test, &[])
}

/// [`child`] with extra environment variables.
///
/// The child runs through [`this_binary`] (so under the emulator the tests
/// run under), as [`run`] runs a command: its pipes drained, its process
/// group killed once it exits, bounded by [`LIMIT`](crate::LIMIT) (a hang,
/// an overflow that nothing catches, is a failure). A skip the child
/// states ([`skip`]) is stated again by the parent, whose output is the one
/// shown.
#[track_caller]
pub fn child_with_env(test: &str, env: &[(&str, &str)]) -> Output {
    let mut cmd = this_binary();
    cmd.args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(CHILD, test)
        .envs(env.iter().copied());
    let out = run(&mut cmd, crate::LIMIT);
    for line in out.stderr.lines() {
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
    Output {
        status: out.status,
        stdout: out.stdout.into_bytes(),
        stderr: out.stderr.into_bytes(),
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

/// Whether this process is the child running `test`.
pub fn is_child(test: &str) -> bool {
    std::env::var(CHILD).as_deref() == Ok(test)
}

/// Says on stderr, past the test harness's capture (so it shows in every
/// run's output), that `test` checks nothing here, and why.
pub fn skip(test: &str, why: &str) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {why}");
}
