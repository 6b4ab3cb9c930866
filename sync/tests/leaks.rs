//! Leaked threads when nothing can ever run again ("a receiver whose
//! senders are gone"): a receiver that keeps its own channel's last
//! sender (or whose sender was forgotten), in a runtime with nothing else
//! that could wake a thread, is reported as leaked (WARN, `stats().leaked`,
//! `leaks()`) and the runtime stops with a deadlock panic. A receiver whose
//! sender sleeps on a timer, waits on a socket read, or lives on another OS
//! thread is not reported while that can still happen: each of those tests
//! then lets the sender send, and only the wait after that is reported.
//!
//! A runtime that would wait forever cannot be bounded by a deadline of
//! its own (a timer would keep it from being found asleep): each runs on
//! an OS thread of its own, which the test waits for at most [`LIMIT`].
//! What `leaks()` and `stats()` say is read by an `on_shutdown` hook, which
//! runs while the leaked threads are still parked.

use std::cell::RefCell;
use std::io::{Read, Write};
use std::panic::{self, AssertUnwindSafe};
use std::rc::Rc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{mpsc, Mutex, Once};
use std::time::Duration;

use coro::sync::{channel, remote};

/// No test may run longer than this.
const LIMIT: Duration = Duration::from_secs(30);

/// How a runtime that fell asleep ended.
#[derive(Debug)]
struct Asleep {
    /// `block_on`'s panic message.
    panic: String,
    /// `coro::leaks()`, read in a shutdown hook.
    leaks: Vec<coro::LeakedThread>,
    /// `coro::stats().leaked`, read there too.
    leaked: u64,
}

/// `leaks()` and `stats().leaked` as a shutdown hook saw them.
type Seen = (Vec<coro::LeakedThread>, u64);

/// Runs `f` as the main thread of a fresh runtime on an OS thread of its
/// own and returns how it ended: it must panic (nothing could run any
/// more). Fails the test if it is still running after [`LIMIT`].
fn until_asleep(f: impl FnOnce() + Send + 'static) -> Asleep {
    until_asleep_with(|b| b, f)
}

/// [`until_asleep`] in a runtime built with the settings `config` adds.
fn until_asleep_with(
    config: fn(coro::RuntimeBuilder) -> coro::RuntimeBuilder,
    f: impl FnOnce() + Send + 'static,
) -> Asleep {
    capture_logs();
    let (done_tx, done_rx) = mpsc::channel();
    std::thread::spawn(move || {
        let seen: Rc<RefCell<Option<Seen>>> = Rc::default();
        let s = seen.clone();
        let r = panic::catch_unwind(AssertUnwindSafe(|| {
            config(coro::Runtime::builder().latency_warning(None))
                .build()
                .unwrap()
                .block_on(move || {
                    coro::on_shutdown(move || {
                        *s.borrow_mut() = Some((coro::leaks(), coro::stats().leaked));
                    });
                    f()
                })
        }));
        let panic = match r {
            Ok(()) => "block_on returned".to_owned(),
            Err(p) => p
                .downcast_ref::<String>()
                .cloned()
                .unwrap_or_else(|| "<not a String>".into()),
        };
        let (leaks, leaked) = seen.take().expect("the shutdown hook ran");
        let _ = done_tx.send(Asleep {
            panic,
            leaks,
            leaked,
        });
    });
    done_rx
        .recv_timeout(LIMIT)
        .expect("the runtime is still waiting: nothing reported it asleep")
}

static LOGS: Mutex<Vec<(log::Level, String, String)>> = Mutex::new(Vec::new());

struct Capture;
impl log::Log for Capture {
    fn enabled(&self, _: &log::Metadata<'_>) -> bool {
        true
    }
    fn log(&self, r: &log::Record<'_>) {
        LOGS.lock()
            .unwrap()
            .push((r.level(), r.target().to_owned(), r.args().to_string()));
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

/// The WARN lines of target `coro::leak` that report thread `name`.
fn leak_warnings(name: &str) -> Vec<String> {
    let needle = format!("'{name}' is leaked");
    LOGS.lock()
        .unwrap()
        .iter()
        .filter(|(l, t, m)| *l == log::Level::Warn && t == "coro::leak" && m.contains(&needle))
        .map(|(_, _, m)| m.clone())
        .collect()
}

/// `(name, call)` of each leaked thread, by id.
fn names_and_calls(a: &Asleep) -> Vec<(String, &'static str)> {
    a.leaks
        .iter()
        .map(|t| (t.name.clone().unwrap_or_default(), t.call))
        .collect()
}

/// Checks the one report of `name`, parked in `call` on a line of this
/// file, as nothing in the runtime being able to wake it.
fn assert_reported_asleep(a: &Asleep, name: &str, call: &str) {
    let t = a
        .leaks
        .iter()
        .find(|t| t.name.as_deref() == Some(name))
        .unwrap_or_else(|| panic!("{name} is not in leaks(): {a:?}"));
    assert_eq!(t.call, call, "{t:?}");
    assert!(
        t.reason.contains("nothing in the runtime can wake it"),
        "{t:?}"
    );
    let warned = leak_warnings(name);
    assert_eq!(warned.len(), 1, "{warned:?}");
    let w = &warned[0];
    assert!(w.contains(&format!("parked in {call}")), "{w}");
    assert!(w.contains("nothing in the runtime can wake it"), "{w}");
    if call == "Receiver::recv" {
        let site = t.site.expect("the caller of recv is known");
        assert!(site.file().ends_with("leaks.rs"), "{site}");
        assert!(w.contains(&format!(" at {site}")), "{w}");
    }
    assert!(a.panic.contains("deadlock"), "{}", a.panic);
    assert!(
        a.panic.contains(&format!("'{name}' waiting on {call}")),
        "{}",
        a.panic
    );
}

/// The classic: `for x in rx` in a thread that forgot to drop its own
/// sender. Its last sender never goes, so no `Disconnected` comes; nothing
/// else in the runtime can run, so it is leaked, and so is `main`, which
/// joins it.
#[test]
fn a_receiver_holding_its_own_last_sender_is_reported_as_leaked() {
    let a = until_asleep(|| {
        let (tx, rx) = channel::<u32>();
        let h = coro::Builder::new()
            .name("own-sender".into())
            .spawn(move || {
                tx.send(1).unwrap();
                let _kept = tx; // forgot `drop(tx)`
                while rx.recv().is_ok() {}
            })
            .unwrap();
        h.join().unwrap();
    });
    assert_eq!(
        names_and_calls(&a),
        [
            ("main".to_owned(), "join"),
            ("own-sender".to_owned(), "Receiver::recv")
        ],
        "{a:?}"
    );
    assert_reported_asleep(&a, "own-sender", "Receiver::recv");
    assert_eq!(a.leaked, 2);
}

/// Its only sender was `mem::forget`-ten: held by nobody, never dropped.
#[test]
fn a_receiver_whose_sender_was_forgotten_is_reported_as_leaked() {
    let a = until_asleep(|| {
        let (tx, rx) = channel::<u32>();
        std::mem::forget(tx);
        let h = coro::Builder::new()
            .name("forgotten-sender".into())
            .spawn(move || {
                let _ = rx.recv();
            })
            .unwrap();
        h.join().unwrap();
    });
    assert_reported_asleep(&a, "forgotten-sender", "Receiver::recv");
    assert_eq!(a.leaked, 2);
}

/// The sender is held by a thread sleeping on a timer: the receiver waits
/// but is not leaked (the timer will fire). Once the sender has sent and
/// parks for good, keeping its sender, the receiver's next wait is.
#[test]
fn a_receiver_whose_sender_sleeps_on_a_timer_is_not_reported() {
    static GOT: AtomicU32 = AtomicU32::new(0);
    let a = until_asleep(|| {
        let (tx, rx) = channel::<u32>();
        let _sleeper = coro::Builder::new()
            .name("sleepy-sender".into())
            .spawn(move || {
                coro::sleep(Duration::from_millis(20)).unwrap();
                tx.send(7).unwrap();
                let _ = coro::park_as("test: keeps its sender");
                drop(tx);
            })
            .unwrap();
        let receiver = coro::Builder::new()
            .name("timer-receiver".into())
            .spawn(move || {
                GOT.store(rx.recv().unwrap(), Ordering::SeqCst);
                let _ = rx.recv();
            })
            .unwrap();
        receiver.join().unwrap();
    });
    assert_eq!(GOT.load(Ordering::SeqCst), 7, "{a:?}");
    assert_eq!(
        names_and_calls(&a),
        [
            ("main".to_owned(), "join"),
            ("sleepy-sender".to_owned(), "test: keeps its sender"),
            ("timer-receiver".to_owned(), "Receiver::recv"),
        ],
        "{a:?}"
    );
    assert_reported_asleep(&a, "timer-receiver", "Receiver::recv");
    assert_reported_asleep(&a, "sleepy-sender", "test: keeps its sender");
    assert_eq!(a.leaked, 3);
}

/// The sender is held by a thread parked on a socket read: not leaked
/// while the read can complete. The peer (an OS thread) writes only once
/// both threads are parked; then the sender sends and parks for good,
/// keeping its socket (registered, but nobody waits on it now) and its
/// sender, and the receiver's next wait is leaked.
#[test]
fn a_receiver_whose_sender_waits_on_a_socket_read_is_not_reported() {
    static GOT: AtomicU32 = AtomicU32::new(0);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let peer = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        go_rx.recv().unwrap();
        s.write_all(b"x").unwrap();
        s
    });
    let a = until_asleep(move || {
        let (tx, rx) = channel::<u32>();
        let reader = coro::Builder::new()
            .name("socket-reader".into())
            .spawn(move || {
                let mut s = coro::net::TcpStream::connect(addr).unwrap();
                let mut b = [0u8];
                s.read_exact(&mut b).unwrap();
                tx.send(u32::from(b[0])).unwrap();
                let _ = coro::park_as("test: keeps its socket and sender");
                drop((s, tx));
            })
            .unwrap();
        let receiver = coro::Builder::new()
            .name("socket-receiver".into())
            .spawn(move || {
                GOT.store(rx.recv().unwrap(), Ordering::SeqCst);
                let _ = rx.recv();
            })
            .unwrap();
        let id = reader.thread().id();
        for _ in 0..1_000_000 {
            let reading = coro::threads()
                .iter()
                .any(|t| t.id == id && t.waiting_on == "readable");
            if reading && receiver.thread().state() == coro::ThreadState::Parked {
                break;
            }
            coro::yield_now();
        }
        go_tx.send(()).unwrap();
        receiver.join().unwrap();
    });
    drop(peer.join().unwrap());
    assert_eq!(GOT.load(Ordering::SeqCst), u32::from(b'x'), "{a:?}");
    assert_eq!(
        names_and_calls(&a),
        [
            ("main".to_owned(), "join"),
            (
                "socket-reader".to_owned(),
                "test: keeps its socket and sender"
            ),
            ("socket-receiver".to_owned(), "Receiver::recv"),
        ],
        "{a:?}"
    );
    assert_reported_asleep(&a, "socket-receiver", "Receiver::recv");
    assert_eq!(a.leaked, 3);
}

/// A receiver of a `coro::sync::remote` channel whose sender lives on
/// another OS thread: not leaked while that sender may send. The OS thread
/// sends once the receiver is parked and drops its sender; the receiver
/// then waits on a channel of its own whose sender it keeps, and that
/// wait is leaked.
#[test]
fn a_receiver_whose_sender_is_on_another_os_thread_is_not_reported() {
    static GOT: AtomicU32 = AtomicU32::new(0);
    let (rtx, rrx) = remote::channel::<u32>();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let os = std::thread::spawn(move || {
        go_rx.recv().unwrap();
        rtx.send(5).unwrap();
    });
    let a = until_asleep(move || {
        let receiver = coro::Builder::new()
            .name("remote-receiver".into())
            .spawn(move || {
                GOT.store(rrx.recv().unwrap(), Ordering::SeqCst);
                let (tx, rx) = channel::<u32>();
                let _kept = tx;
                let _ = rx.recv();
            })
            .unwrap();
        for _ in 0..1_000_000 {
            if receiver.thread().state() == coro::ThreadState::Parked {
                break;
            }
            coro::yield_now();
        }
        go_tx.send(()).unwrap();
        receiver.join().unwrap();
    });
    os.join().unwrap();
    assert_eq!(GOT.load(Ordering::SeqCst), 5, "{a:?}");
    assert_eq!(
        names_and_calls(&a),
        [
            ("main".to_owned(), "join"),
            ("remote-receiver".to_owned(), "Receiver::recv"),
        ],
        "{a:?}"
    );
    assert_reported_asleep(&a, "remote-receiver", "Receiver::recv");
    assert_eq!(a.leaked, 2);
}

/// A `Handle` kept on another OS thread may spawn into the runtime, so
/// while it exists nothing is reported, and the loop blocks in the poller
/// with nothing else to wait for. Dropping it there (once the runtime's OS
/// thread is seen blocked in `epoll_wait`) wakes the loop, which looks
/// again and reports, instead of sleeping forever. (The sweep of idle
/// threads' stacks is off: it would wake the loop after a while anyway.)
#[test]
fn the_last_handle_dropped_on_another_os_thread_lets_the_loop_report() {
    static SAW_POLLER: AtomicU32 = AtomicU32::new(0);
    let (h_tx, h_rx) = mpsc::channel::<(coro::Handle, std::path::PathBuf)>();
    let os = std::thread::spawn(move || {
        let (handle, task) = h_rx.recv().unwrap();
        // The runtime's OS thread blocked in the poller (the kernel names
        // the function it sleeps in).
        let wchan = task.join("wchan");
        for _ in 0..10_000 {
            let w = std::fs::read_to_string(&wchan).unwrap_or_default();
            if w.trim() == "do_epoll_wait" {
                SAW_POLLER.store(1, Ordering::SeqCst);
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        drop(handle);
    });
    let a = until_asleep_with(
        |b| b.idle_stack_release(None),
        move || {
            // "PID/task/TID" of the runtime's OS thread.
            let me = std::fs::read_link("/proc/thread-self").unwrap();
            h_tx.send((coro::handle(), std::path::Path::new("/proc").join(me)))
                .unwrap();
            let (tx, rx) = channel::<u32>();
            let h = coro::Builder::new()
                .name("handle-kept".into())
                .spawn(move || {
                    let _kept = tx;
                    let _ = rx.recv();
                })
                .unwrap();
            h.join().unwrap();
        },
    );
    os.join().unwrap();
    assert_eq!(
        SAW_POLLER.load(Ordering::SeqCst),
        1,
        "the runtime's OS thread was never seen blocked in epoll_wait: {a:?}"
    );
    assert_reported_asleep(&a, "handle-kept", "Receiver::recv");
    assert_eq!(a.leaked, 2);
}
