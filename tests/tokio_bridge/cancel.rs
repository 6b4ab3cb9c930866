//! A wait cut short (a deadline, an interrupt, a cancelled scope) returns
//! at once and drops the tokio task; `abort` drops it too, and dropping a
//! handle leaves it running.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use coro::tokio::JoinError;
use coro::{CancelScope, WaitError};

use crate::util;

/// Set when the future that holds it is dropped, wherever that happens.
struct DropFlag(Arc<AtomicBool>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// A future that never finishes and reports its drop, and the flag.
fn forever() -> (
    impl std::future::Future<Output = ()> + Send + 'static,
    Arc<AtomicBool>,
) {
    let dropped = Arc::new(AtomicBool::new(false));
    let flag = DropFlag(dropped.clone());
    let fut = async move {
        let _flag = flag;
        std::future::pending::<()>().await
    };
    (fut, dropped)
}

#[track_caller]
fn wait_dropped(dropped: &AtomicBool) {
    util::wait_until("the tokio task to be dropped", || {
        dropped.load(Ordering::SeqCst)
    });
}

#[test]
fn a_timeout_returns_at_once_and_drops_the_tokio_task() {
    util::run(|| {
        coro::tokio::run(async {}).unwrap();
        let (fut, dropped) = forever();
        let t = Instant::now();
        let r = coro::with_timeout(Duration::from_millis(50), || coro::tokio::run(fut));
        let waited = t.elapsed();
        assert!(matches!(r, Err(coro::Timeout)), "{r:?}");
        assert!(waited >= Duration::from_millis(50), "{waited:?}");
        assert!(waited < crate::AT_ONCE, "{waited:?}");
        wait_dropped(&dropped);
    });
}

#[test]
fn the_error_inside_the_timeout_is_the_wait_error() {
    util::run(|| {
        let (fut, dropped) = forever();
        let r = coro::with_timeout(Duration::from_millis(10), || {
            let inner = coro::tokio::run(fut);
            assert!(
                matches!(inner, Err(JoinError::Wait(WaitError::TimedOut))),
                "{inner:?}"
            );
            let io: std::io::Error = inner.unwrap_err().into();
            assert_eq!(io.kind(), std::io::ErrorKind::TimedOut);
        });
        assert!(r.is_err());
        wait_dropped(&dropped);
    });
}

#[test]
fn an_interrupt_returns_at_once_and_drops_the_tokio_task() {
    util::run(|| {
        let (fut, dropped) = forever();
        let caller = coro::spawn(move || coro::tokio::run(fut));
        util::settle(); // parked in the call
        assert!(!caller.is_finished());
        caller.thread().interrupt().unwrap();
        let r = caller.join().unwrap();
        assert!(
            matches!(r, Err(JoinError::Wait(WaitError::Interrupted))),
            "{r:?}"
        );
        wait_dropped(&dropped);
    });
}

#[test]
fn a_cancelled_scope_returns_at_once_and_drops_the_tokio_task() {
    util::run(|| {
        let (fut, dropped) = forever();
        let scope = CancelScope::new();
        let s = scope.clone();
        let caller = coro::spawn(move || s.run(|| coro::tokio::run(fut)));
        util::settle();
        assert!(!caller.is_finished());
        scope.cancel();
        let r = caller.join().unwrap();
        assert!(r.is_err(), "{r:?}"); // the scope's own cancellation
        wait_dropped(&dropped);
    });
}

#[test]
fn abort_drops_the_task_and_join_says_cancelled() {
    util::run(|| {
        let (fut, dropped) = forever();
        let h = coro::tokio::spawn(fut);
        h.abort();
        let r = h.join();
        assert!(matches!(r, Err(JoinError::Cancelled)), "{r:?}");
        assert!(dropped.load(Ordering::SeqCst));
    });
}

#[test]
fn dropping_the_handle_leaves_the_task_running() {
    util::run(|| {
        let (tx, rx) = tokio::sync::oneshot::channel::<u32>();
        let done = Arc::new(AtomicBool::new(false));
        let d = done.clone();
        drop(coro::tokio::spawn(async move {
            let v = rx.await.unwrap();
            d.store(v == 9, Ordering::SeqCst);
        }));
        tx.send(9).unwrap();
        util::wait_until("the detached task to finish", || {
            done.load(Ordering::SeqCst)
        });
    });
}

#[test]
fn an_expired_scope_refuses_the_call_and_drops_the_future() {
    util::run(|| {
        let (fut, dropped) = forever();
        let r = coro::with_timeout(Duration::ZERO, || coro::tokio::run(fut));
        assert!(r.is_err(), "{r:?}");
        wait_dropped(&dropped);
    });
}
