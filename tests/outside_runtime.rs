//! Calls made where no runtime runs (DESIGN §4, "Outside a runtime"): on a
//! plain OS thread, on a thread of the blocking-offload pool, and on the
//! runtime's own OS thread after `block_on` returned. A call that would
//! suspend panics (the documented misuse behaviour, `# Panics` on each
//! item) with a message that says a runtime or a green thread is needed;
//! it never hangs. Calls of `coro::sync` that need not wait still work
//! there, as std's do.
//!
//! A call made outside a runtime panics naming the caller's file and line,
//! not a line of coro's source.
//!
//! Each test body runs on its own OS thread and the test waits for it with
//! a generous bound, so a call that hung would fail the test.

mod util;

use std::cell::RefCell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc;
use std::time::Duration;

use coro::sync::{sync_channel, Event, Mutex, RecvError, Semaphore, WaitGroup};
use coro::{JoinError, WaitError};
use util::{panic_text, LIMIT, LONG};

/// Runs `f` on a new OS thread; fails if it takes longer than [`LIMIT`]
/// (it hung) and passes its panic on.
#[track_caller]
fn on_os_thread<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(catch_unwind(AssertUnwindSafe(f)));
    });
    match rx.recv_timeout(LIMIT) {
        Ok(Ok(v)) => v,
        Ok(Err(p)) => std::panic::resume_unwind(p),
        Err(e) => panic!("the OS thread hung ({e})"),
    }
}

/// The message `f` panics with; fails if it returns.
#[track_caller]
fn refusal<R>(what: &str, f: impl FnOnce() -> R) -> String {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(_) => panic!("{what} returned outside a runtime instead of refusing"),
        Err(p) => panic_text(&*p),
    }
}

const NEEDS_RUNTIME: &str = "needs a coro runtime, but none runs on this OS thread";
const NEEDS_GREEN_THREAD: &str = "would block, and that needs a green thread";

/// The message names the call the user made (`sleep`, not
/// `coro::sleep_until`; a socket constructor, not "registering a socket").
#[track_caller]
fn assert_names(msg: &str, call: &str, needs: &str) {
    assert!(msg.contains(needs), "{msg}");
    assert!(
        msg.starts_with(&format!("coro: {call} ")),
        "the message names {call}: {msg}"
    );
}

coro::green_local! {
    static LOCAL: std::cell::Cell<u8> = std::cell::Cell::new(0);
}

#[test]
fn runtime_and_socket_calls_on_a_plain_os_thread_say_a_runtime_is_needed() {
    let refusals = on_os_thread(|| {
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = std_listener.local_addr().unwrap();
        let ms = Duration::from_millis(1);
        let dir = std::env::temp_dir();
        vec![
            ("coro::sleep", refusal("sleep", || coro::sleep(ms))),
            (
                "coro::sleep_until",
                refusal("sleep_until", || coro::sleep_until(coro::clock::now())),
            ),
            ("coro::park", refusal("park", coro::park)),
            ("coro::park_as", refusal("park_as", || coro::park_as("x"))),
            ("coro::yield_now", refusal("yield_now", coro::yield_now)),
            (
                "coro::try_selfish",
                refusal("try_selfish", coro::try_selfish),
            ),
            (
                "coro::with_timeout",
                refusal("with_timeout", || coro::with_timeout(ms, || ())),
            ),
            (
                "coro::no_suspend",
                refusal("no_suspend", || coro::no_suspend(|| ())),
            ),
            ("coro::current", refusal("current", coro::current)),
            (
                "coro::set_selfishness",
                refusal("set_selfishness", || coro::set_selfishness(2)),
            ),
            ("coro::spawn", refusal("spawn", || coro::spawn(|| ()))),
            (
                "Builder::spawn",
                refusal("Builder::spawn", || coro::Builder::new().spawn(|| ())),
            ),
            (
                "coro::blocking",
                refusal("blocking", || coro::blocking(|| ())),
            ),
            ("coro::stats", refusal("stats", coro::stats)),
            ("coro::threads", refusal("threads", coro::threads)),
            ("coro::handle", refusal("handle", coro::handle)),
            (
                "coro::RemoteWaker::current",
                refusal("RemoteWaker", coro::RemoteWaker::current),
            ),
            (
                "TcpListener::bind",
                refusal("bind", || coro::net::TcpListener::bind("127.0.0.1:0")),
            ),
            (
                "TcpListenerBuilder::bind",
                refusal("builder bind", || {
                    coro::net::TcpListener::builder().bind("127.0.0.1:0")
                }),
            ),
            (
                "TcpStream::connect",
                refusal("connect", || coro::net::TcpStream::connect(addr)),
            ),
            (
                "TcpStream::connect_timeout",
                refusal("connect_timeout", || {
                    coro::net::TcpStream::connect_timeout(&addr, ms)
                }),
            ),
            (
                "TcpListener::from_std",
                refusal("from_std", || {
                    coro::net::TcpListener::from_std(std_listener)
                }),
            ),
            (
                "UdpSocket::bind",
                refusal("udp bind", || coro::net::UdpSocket::bind("127.0.0.1:0")),
            ),
            (
                "UnixStream::pair",
                refusal("unix pair", coro::net::UnixStream::pair),
            ),
            (
                "UnixListener::bind",
                refusal("unix bind", || coro::net::UnixListener::bind(dir.join("x"))),
            ),
            (
                "UnixDatagram::unbound",
                refusal("unix unbound", coro::net::UnixDatagram::unbound),
            ),
            (
                "coro::net::lookup_host",
                refusal("lookup_host", || coro::net::lookup_host("localhost:80")),
            ),
        ]
    });
    for (name, msg) in refusals {
        assert_names(&msg, name, NEEDS_RUNTIME);
    }
}

#[test]
fn primitive_waits_on_a_plain_os_thread_say_a_green_thread_is_needed() {
    let refusals = on_os_thread(|| {
        let m = Mutex::new(0);
        let _held = m.lock().expect("an uncontended lock needs no runtime");
        let group = WaitGroup::new();
        let _member = group.add();
        let (tx, _rx) = sync_channel::<u8>(1);
        tx.try_send(0).unwrap(); // full
        let (_tx, empty) = sync_channel::<u8>(1);
        let fifo = coro::sync::Fifo::<u8>::new();
        let cv = coro::sync::Condvar::new();
        let free = Mutex::new(true);
        vec![
            ("Mutex::lock", refusal("lock", || m.lock().map(drop))),
            (
                "Semaphore::acquire",
                refusal("acquire", || Semaphore::new(0).acquire(1).map(drop)),
            ),
            ("Event::wait", refusal("event", || Event::new().wait())),
            ("WaitGroup::wait", refusal("wait group", || group.wait())),
            ("Receiver::recv", refusal("recv", || empty.recv())),
            ("Receiver::iter", refusal("iter", || empty.iter().next())),
            (
                "Sender::send",
                refusal("send", || tx.send(1).map_err(|e| e.into_inner())),
            ),
            ("Fifo::pop", refusal("pop", || fifo.pop())),
            ("Fifo::pop_all", refusal("pop_all", || fifo.pop_all())),
            ("Condvar::notified", refusal("notified", || cv.notified())),
            (
                "Condvar::wait_while",
                refusal("wait_while", || {
                    cv.wait_while(free.lock().unwrap(), |f| *f).map(drop)
                }),
            ),
        ]
    });
    for (name, msg) in refusals {
        assert_names(&msg, name, NEEDS_GREEN_THREAD);
    }
}

/// A green-thread local used where no green thread runs says so.
#[test]
fn a_green_local_on_a_plain_os_thread_says_a_green_thread_is_needed() {
    let msg = on_os_thread(|| refusal("green local", || LOCAL.get()));
    assert!(msg.contains("LocalKey::with"), "{msg}");
    assert!(msg.contains("needs a green thread"), "{msg}");
}

/// A socket that outlived its runtime: a call that need not wait works, one
/// that would wait names itself.
#[test]
fn a_socket_after_its_runtime_names_the_call_that_would_wait() {
    let msg = on_os_thread(|| {
        let (a, b) = coro::run(|| coro::net::UnixStream::pair().unwrap());
        use std::io::{Read, Write};
        (&b).write_all(b"x")
            .expect("a write that need not wait works");
        let mut buf = [0; 1];
        assert_eq!((&a).read(&mut buf).unwrap(), 1);
        refusal("read", || (&a).read(&mut buf))
    });
    assert_names(&msg, "UnixStream::read", "would block");
}

/// What needs no waiting works outside a runtime, as with std.
#[test]
fn calls_that_need_not_wait_work_on_a_plain_os_thread() {
    on_os_thread(|| {
        assert!(!coro::in_green_thread());
        let m = Mutex::new(1);
        *m.lock().unwrap() += 1;
        assert_eq!(*m.try_lock().unwrap(), 2);
        let sem = Semaphore::new(2);
        assert_eq!(sem.acquire(2).unwrap().count(), 2);
        let ev = Event::new();
        assert_eq!(ev.set(), 0);
        ev.wait().unwrap();
        let group = WaitGroup::new();
        group.add().done();
        group.wait().unwrap();
        let (tx, rx) = sync_channel(2);
        tx.send(5).unwrap();
        assert_eq!(rx.recv(), Ok(5));
        drop(tx);
        assert_eq!(rx.recv(), Err(RecvError::Disconnected));
        let addrs: Vec<_> = coro::net::lookup_host("127.0.0.1:80").unwrap().collect();
        assert_eq!(addrs, ["127.0.0.1:80".parse().unwrap()]);
    });
}

/// A job on the blocking-offload pool runs on an OS thread without a
/// runtime: a `coro::sleep` there panics with the message, and the panic
/// comes back to the green thread that waited for the job. The runtime
/// carries on.
#[test]
fn a_blocking_job_that_sleeps_fails_in_its_caller() {
    on_os_thread(|| {
        coro::run(|| {
            let caller = coro::spawn(|| coro::blocking(|| coro::sleep(Duration::from_millis(1))));
            match caller.join() {
                Err(e @ JoinError::Panicked(_)) => {
                    let msg = e.panic_message().unwrap_or_default().to_owned();
                    assert!(msg.contains(NEEDS_RUNTIME), "{msg}");
                }
                other => panic!("expected the job's panic, got {other:?}"),
            }
            coro::sleep(Duration::from_millis(1)).expect("the runtime carries on");
        });
    });
}

/// After `block_on` returns, its OS thread is outside a runtime again:
/// suspending calls refuse, and handles that escaped the runtime report
/// how their threads ended without needing it.
#[test]
fn after_block_on_returns_the_thread_is_outside_again() {
    on_os_thread(|| {
        let mut rt = coro::Runtime::new().unwrap();
        let (reacted, unwound) = rt.block_on(|| {
            let reacted = coro::spawn(|| coro::sleep(LONG));
            let unwound = coro::spawn(|| loop {
                let _ = coro::park();
                coro::yield_now();
            });
            coro::yield_now();
            (reacted, unwound)
        });
        let msg = refusal("sleep", || coro::sleep(Duration::from_millis(1)));
        assert!(msg.contains(NEEDS_RUNTIME), "{msg}");
        assert_eq!(reacted.join().unwrap(), Err(WaitError::Interrupted));
        assert!(matches!(unwound.join(), Err(JoinError::Cancelled)));
        // And it can enter the runtime again.
        assert_eq!(rt.block_on(|| coro::spawn(|| 7).join().unwrap()), 7);
    });
}

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

/// A call made outside a runtime panics naming the caller's file and line
/// (not a line of coro's source, such as `runtime/src/sched.rs`).
#[test]
fn a_call_outside_a_runtime_panics_at_the_callers_line() {
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
