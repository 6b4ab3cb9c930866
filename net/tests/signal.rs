//! `coro::signal::Signals`: a signal raised to the process reaches the green
//! thread waiting for it while the others keep running; a wait cut short by
//! `with_timeout` or an interrupt fails with the right error and loses no
//! signal; bad signal numbers are refused.
//!
//! Signals are process-wide and the tests of this binary run in parallel,
//! so each test uses a signal of its own.

mod util;

use std::cell::Cell;
use std::io;
use std::rc::Rc;
use std::time::Duration;

use coro::signal::{Signals, SIGHUP, SIGUSR1, SIGUSR2};
use coro::ThreadState;
use util::{assert_kind, run};

/// Yields until `t` is parked (waiting in its blocking call).
fn until_parked(t: &coro::Coro) {
    for _ in 0..1_000_000 {
        if t.state() == ThreadState::Parked {
            return;
        }
        coro::yield_now();
    }
    panic!("thread never parked");
}

#[test]
fn delivered_to_waiting_green_thread_others_keep_running() -> io::Result<()> {
    run(|| {
        let signals = Rc::new(Signals::new([SIGUSR1])?);
        let ticks = Rc::new(Cell::new(0u64));
        let stop = Rc::new(Cell::new(false));
        let ticker = {
            let (ticks, stop) = (ticks.clone(), stop.clone());
            coro::spawn(move || {
                while !stop.get() {
                    ticks.set(ticks.get() + 1);
                    coro::yield_now();
                }
            })
        };
        let waiter = {
            let signals = signals.clone();
            coro::spawn(move || signals.recv())
        };
        until_parked(waiter.thread());
        // The waiter is parked; the ticker still runs.
        let before = ticks.get();
        for _ in 0..10 {
            coro::yield_now();
        }
        assert!(ticks.get() > before, "the other green thread stopped");
        assert!(!waiter.is_finished());

        signal_hook::low_level::raise(SIGUSR1)?;
        let got = waiter.join().expect("waiter panicked")?;
        assert_eq!(got, SIGUSR1);
        // The process is still alive (SIGUSR1's default action is to end it)
        // and the ticker ran while the signal was on its way.
        stop.set(true);
        ticker.join().unwrap();
        Ok(())
    })
}

#[test]
fn signal_before_recv_is_kept() -> io::Result<()> {
    run(|| {
        let signals = Signals::new([SIGUSR2])?;
        assert_eq!(signals.try_recv()?, None);
        signal_hook::low_level::raise(SIGUSR2)?;
        // Raised before anyone waits: recv returns it without a new edge.
        assert_eq!(
            coro::with_timeout(util::LIMIT, || signals.recv()).expect("lost")?,
            SIGUSR2
        );
        assert_eq!(signals.try_recv()?, None);
        Ok(())
    })
}

#[test]
fn recv_under_with_timeout_and_interrupt() -> io::Result<()> {
    run(|| {
        let signals = Rc::new(Signals::new([SIGHUP])?);

        // with_timeout: the wait fails with TimedOut, the scope says Err.
        let r = coro::with_timeout(Duration::from_millis(20), || signals.recv());
        assert!(r.is_err(), "the deadline did not end the wait: {r:?}");
        let inner = coro::with_timeout(Duration::from_millis(20), || {
            let e = signals.recv().unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        });
        assert!(inner.is_err());

        // interrupt: an error that is not ErrorKind::Interrupted (which
        // read_exact-style loops would retry forever), carrying WaitError.
        let waiter = {
            let signals = signals.clone();
            coro::spawn(move || signals.recv())
        };
        until_parked(waiter.thread());
        waiter.thread().interrupt().unwrap();
        let e = waiter.join().unwrap().unwrap_err();
        assert_ne!(e.kind(), io::ErrorKind::Interrupted);
        assert!(
            e.get_ref()
                .and_then(|s| s.downcast_ref::<coro::WaitError>())
                .is_some_and(|w| *w == coro::WaitError::Interrupted),
            "not an interruption: {e:?}"
        );

        // Nothing was lost by the cut-short waits: a signal now still arrives.
        signal_hook::low_level::raise(SIGHUP)?;
        assert_eq!(signals.recv()?, SIGHUP);

        // close wakes a waiter with NotConnected.
        let waiter = {
            let signals = signals.clone();
            coro::spawn(move || signals.recv())
        };
        until_parked(waiter.thread());
        signals.close();
        assert_kind(waiter.join().unwrap(), io::ErrorKind::NotConnected);
        assert_kind(signals.try_recv(), io::ErrorKind::NotConnected);
        Ok(())
    })
}

#[test]
fn forbidden_and_invalid_signals_are_refused() -> io::Result<()> {
    run(|| {
        let e = assert_kind(Signals::new([libc::SIGKILL]), io::ErrorKind::InvalidInput);
        assert!(e.to_string().contains("cannot be handled"), "{e}");
        assert_kind(Signals::new([0]), io::ErrorKind::InvalidInput);
        assert_kind(Signals::new([100_000]), io::ErrorKind::InvalidInput);
        assert!(Signals::new([100]).is_err(), "the OS has no signal 100");
        let s = Signals::new([SIGUSR2])?;
        assert_kind(s.add_signal(libc::SIGSTOP), io::ErrorKind::InvalidInput);
        Ok(())
    })
}
