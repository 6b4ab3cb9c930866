//! Issue #21: a fresh machine and a newcomer, round 2. One test per item
//! that lives in the facade's tests (the others: `self_contained.rs`,
//! `workspace.rs`, `readme.rs`, and coro-runtime's `tests/issue_21.rs`).

mod util;

use std::cell::RefCell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

thread_local! {
    /// Where the last panic on this thread happened, as its hook saw it.
    static PANICKED_AT: RefCell<Option<(String, u32)>> = const { RefCell::new(None) };
}

/// Runs `f` with a panic hook that records each panic's location for the
/// panicking thread (and prints nothing); the default hook is back after.
fn recording_panic_locations<R>(f: impl FnOnce() -> R) -> R {
    std::panic::set_hook(Box::new(|info| {
        let at = info.location().map(|l| (l.file().to_owned(), l.line()));
        PANICKED_AT.with(|p| *p.borrow_mut() = at);
    }));
    let r = catch_unwind(AssertUnwindSafe(f));
    drop(std::panic::take_hook());
    r.unwrap_or_else(|p| panic!("{}", util::panic_text(&*p)))
}

/// Calls `f`, which must panic; returns the file and line the panic names
/// (`("returned", 0)` if it did not panic).
fn panic_location<R>(f: impl FnOnce() -> R) -> (String, u32) {
    PANICKED_AT.with(|p| p.borrow_mut().take());
    if catch_unwind(AssertUnwindSafe(f)).is_ok() {
        return ("returned".into(), 0);
    }
    PANICKED_AT
        .with(|p| p.borrow_mut().take())
        .expect("the hook saw no panic")
}

/// `name`, the line this macro is invoked on, and where `$call` panicked.
macro_rules! located {
    ($name:expr, $call:expr) => {
        ($name, line!(), panic_location(|| $call))
    };
}

/// Item 7: a call made outside a runtime panics naming the caller's file and
/// line (it named `runtime/src/sched.rs:895`).
#[test]
fn issue_21_7_a_call_outside_a_runtime_panics_at_the_callers_line() {
    let ms = Duration::from_millis(1);
    let dir = std::env::temp_dir();
    let m = coro::sync::Mutex::new(0);
    let _held = m.lock().expect("an uncontended lock needs no runtime");
    let rw = coro::sync::RwLock::new(0);
    let _read = rw
        .read()
        .expect("an uncontended read lock needs no runtime");
    let group = coro::sync::WaitGroup::new();
    let _member = group.add();
    let (tx, _rx) = coro::sync::sync_channel::<u8>(1);
    tx.try_send(0).unwrap(); // full
    let fifo = coro::sync::Fifo::<u8>::new();
    let cv = coro::sync::Condvar::new();
    let calls = recording_panic_locations(|| {
        vec![
            located!("sleep", coro::sleep(ms)),
            located!("sleep_until", coro::sleep_until(coro::clock::now())),
            located!("park", coro::park()),
            located!("park_as", coro::park_as("x")),
            located!("yield_now", coro::yield_now()),
            located!("try_selfish", coro::try_selfish()),
            located!("with_timeout", coro::with_timeout(ms, || ())),
            located!(
                "with_deadline",
                coro::with_deadline(coro::clock::now(), || ())
            ),
            located!("no_suspend", coro::no_suspend(|| ())),
            located!("current", coro::current()),
            located!("set_selfishness", coro::set_selfishness(2)),
            located!("spawn", coro::spawn(|| ())),
            located!("Builder::spawn", coro::Builder::new().spawn(|| ())),
            located!("blocking", coro::blocking(|| ())),
            located!("scope", coro::scope(|_| ())),
            located!("stats", coro::stats()),
            located!("threads", coro::threads()),
            located!("handle", coro::handle()),
            located!("RemoteWaker::current", coro::RemoteWaker::current()),
            located!(
                "TcpListener::bind",
                coro::net::TcpListener::bind("127.0.0.1:0")
            ),
            located!(
                "TcpStream::connect",
                coro::net::TcpStream::connect("127.0.0.1:1")
            ),
            located!("UdpSocket::bind", coro::net::UdpSocket::bind("127.0.0.1:0")),
            located!("UnixStream::pair", coro::net::UnixStream::pair()),
            located!(
                "UnixListener::bind",
                coro::net::UnixListener::bind(dir.join("x"))
            ),
            located!("Event::wait", coro::sync::Event::new().wait()),
            located!(
                "Semaphore::acquire",
                coro::sync::Semaphore::new(0).acquire(1).map(drop)
            ),
            located!("Receiver::recv", coro::sync::channel::<u8>().1.recv()),
            located!("Sender::send", tx.send(1).map_err(|e| e.into_inner())),
            located!("Mutex::lock", m.lock().map(drop)),
            located!("RwLock::write", rw.write().map(drop)),
            located!("WaitGroup::wait", group.wait()),
            located!("Fifo::pop", fifo.pop()),
            located!("Condvar::notified", cv.notified()),
            located!("CancelScope::run", coro::CancelScope::new().run(|| ())),
            located!("on_shutdown", coro::on_shutdown(|| ())),
            located!("timers", coro::timers(1)),
            located!("latency_warnings", coro::latency_warnings()),
            located!("profile::start", coro::profile::start()),
            located!("UnixDatagram::unbound", coro::net::UnixDatagram::unbound()),
        ]
    });
    let mut wrong = Vec::new();
    for (name, line, (file, at)) in calls {
        // rustfmt may put the call a line or two below the macro's name.
        if file != file!() || !(line..line + 3).contains(&at) {
            wrong.push(format!(
                "{name} (called on line {line}) panicked at {file}:{at}"
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "these panic in coro's source, not at the caller's line:\n{}",
        wrong.join("\n")
    );
}

/// Item 3: the docs' examples used `coro_sync::...`, which a crate that
/// depends on `coro` cannot paste. No example in a doc comment of coro's
/// crates names the inner crates (the doc tests compile them against the
/// real `coro`, a dev-dependency of each).
#[test]
fn issue_21_3_doc_examples_use_the_coro_paths_a_user_writes() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut found = Vec::new();
    let mut files = Vec::new();
    for dir in ["src", "runtime/src", "sync/src", "net/src"] {
        rust_files(&root.join(dir), &mut files);
    }
    assert!(files.len() > 50, "{files:?}");
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap();
        let mut in_example = false;
        for (n, line) in text.lines().enumerate() {
            let t = line.trim_start();
            let Some(doc) = t.strip_prefix("///").or_else(|| t.strip_prefix("//!")) else {
                in_example = false;
                continue;
            };
            if doc.trim_start().starts_with("```") {
                in_example = !in_example;
                continue;
            }
            let inner = ["coro_runtime", "coro_sync", "coro_net"];
            if in_example && inner.iter().any(|c| names_crate(doc, c)) {
                found.push(format!("{}:{}: {}", path.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "doc examples that name an inner crate instead of `coro::`:\n{}",
        found.join("\n")
    );
}

/// Whether `line` names the crate `krate` (as an identifier, not inside a
/// longer one).
fn names_crate(line: &str, krate: &str) -> bool {
    line.match_indices(krate).any(|(i, _)| {
        let before = line[..i].chars().next_back();
        let after = line[i + krate.len()..].chars().next();
        let ident = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
        !ident(before) && !ident(after)
    })
}

fn rust_files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Item 6: `#[coro::main]`, in tokio's style, runs the body as the main
/// green thread of a runtime that ends with it; `?` and the signature work.
#[coro::main]
fn main_attribute_body(n: u64) -> std::io::Result<(u64, u64)> {
    let me = coro::current().id();
    let child = coro::spawn(move || n * 2).join().unwrap();
    coro::time::sleep(Duration::from_millis(1))?;
    Ok((me, child))
}

#[test]
fn issue_21_6_coro_main_runs_the_body_as_a_green_thread() {
    let (me, doubled) = main_attribute_body(21).unwrap();
    assert!(me > 0, "the body ran as green thread #{me}");
    assert_eq!(doubled, 42);
    // The runtime ended with the body.
    assert!(coro::current_id().is_none());
}
