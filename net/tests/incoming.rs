//! `incoming()` of every listener ends once the accepting thread's wait is
//! cut short, as it ends when the listener is closed: a loop that skips
//! errors (`for s in l.incoming() { if s.is_err() { continue } }`) stops
//! after an expired `with_timeout`, an interrupt, a cancelled scope and at
//! runtime shutdown, having seen the error once. And a loop over `accept`
//! or `read` that skips those errors itself is named, with its call site,
//! by the runtime's spin warning.
//!
//! Each loop counts its turns and fails past [`TURNS`] (a loop that spins
//! fails instead of running on); a loop that would wait forever is bounded
//! by a `with_timeout` around the join of its thread.

mod util;

use std::cell::{Cell, RefCell};
use std::io::{self, Read};
use std::rc::Rc;
use std::time::Duration;

use coro::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use coro::{with_timeout, CancelScope, ThreadState, WaitError};
use util::{capture_logs, run, TempDir, LOGS};

/// More turns than a loop that ends makes here: it spins.
const TURNS: usize = 100;

/// A listener of either kind, accepting connections whose stream is
/// dropped at once.
enum Listener {
    Tcp(TcpListener),
    Unix(UnixListener, TempDir),
}

impl Listener {
    fn both() -> io::Result<[Listener; 2]> {
        let dir = TempDir::new("incoming")?;
        Ok([
            Listener::Tcp(TcpListener::bind("127.0.0.1:0")?),
            Listener::Unix(UnixListener::bind(dir.path("l.sock"))?, dir),
        ])
    }

    fn name(&self) -> &'static str {
        match self {
            Listener::Tcp(_) => "TcpListener",
            Listener::Unix(..) => "UnixListener",
        }
    }

    fn incoming(&self) -> Box<dyn Iterator<Item = io::Result<()>> + '_> {
        match self {
            Listener::Tcp(l) => Box::new(l.incoming().map(|s| s.map(drop))),
            Listener::Unix(l, _) => Box::new(l.incoming().map(|s| s.map(drop))),
        }
    }

    /// A client connected to it (kept open while the value lives).
    fn connect(&self) -> io::Result<Box<dyn std::any::Any>> {
        Ok(match self {
            Listener::Tcp(l) => Box::new(TcpStream::connect(l.local_addr()?)?),
            Listener::Unix(_, dir) => Box::new(UnixStream::connect(dir.path("l.sock"))?),
        })
    }

    fn close(&self) {
        match self {
            Listener::Tcp(l) => l.close(),
            Listener::Unix(l, _) => l.close(),
        }
    }
}

/// The loop of every server tutorial: skips errors. Returns the errors it
/// skipped; panics if it spins.
#[track_caller]
fn skip_errors(l: &Listener) -> Vec<io::Error> {
    let mut errors = Vec::new();
    for (turn, s) in l.incoming().enumerate() {
        assert!(turn < TURNS, "{}: incoming() spins", l.name());
        if let Err(e) = s {
            errors.push(e);
            continue;
        }
    }
    errors
}

/// `errors` is the one error of a wait cut short for `why`.
#[track_caller]
fn one_cut_short(errors: &[io::Error], why: WaitError, l: &Listener) {
    let whys: Vec<_> = errors.iter().map(WaitError::from_io).collect();
    assert_eq!(whys, [Some(why)], "{}: {errors:?}", l.name());
}

#[test]
fn a_loop_that_skips_errors_ends_once_the_deadline_passed() -> io::Result<()> {
    run(|| {
        for l in Listener::both()? {
            // Passes while it waits.
            let mut errors = Vec::new();
            let r = with_timeout(Duration::from_millis(20), || errors = skip_errors(&l));
            assert!(r.is_err(), "{}: the deadline's error was seen", l.name());
            one_cut_short(&errors, WaitError::TimedOut, &l);
            assert_eq!(errors[0].kind(), io::ErrorKind::TimedOut);
            // Passed before the loop began.
            let _ = with_timeout(Duration::ZERO, || errors = skip_errors(&l));
            one_cut_short(&errors, WaitError::TimedOut, &l);
        }
        Ok(())
    })
}

#[test]
fn the_iterator_yields_the_error_once_then_stays_ended() -> io::Result<()> {
    run(|| {
        for l in Listener::both()? {
            let mut it = l.incoming();
            let r = with_timeout(Duration::ZERO, || {
                assert!(matches!(it.next(), Some(Err(_))), "{}", l.name());
                for _ in 0..3 {
                    assert!(it.next().is_none(), "{}", l.name());
                }
            });
            assert!(r.is_err());
            // Out of the scope, with a connection waiting, it stays ended
            // (fused); a new iterator accepts.
            let _client = l.connect()?;
            assert!(it.next().is_none(), "{}", l.name());
            assert!(matches!(l.incoming().next(), Some(Ok(()))), "{}", l.name());
        }
        Ok(())
    })
}

#[test]
fn a_loop_that_skips_errors_ends_when_its_thread_is_interrupted() -> io::Result<()> {
    run(|| {
        for l in Listener::both()? {
            let l = Rc::new(l);
            // Interrupted while it waits in accept.
            let acceptor = {
                let l = l.clone();
                coro::spawn(move || skip_errors(&l))
            };
            until_parked(acceptor.thread());
            acceptor.thread().interrupt().unwrap();
            let errors = join_or_close(acceptor, &l)?;
            one_cut_short(&errors, WaitError::Interrupted, &l);
            // Interrupted before the loop began.
            coro::current().interrupt().unwrap();
            one_cut_short(&skip_errors(&l), WaitError::Interrupted, &l);
        }
        Ok(())
    })
}

#[test]
fn a_loop_that_skips_errors_ends_when_its_scope_is_cancelled() -> io::Result<()> {
    run(|| {
        for l in Listener::both()? {
            let l = Rc::new(l);
            let scope = CancelScope::new();
            let acceptor = {
                let (l, scope) = (l.clone(), scope.clone());
                coro::spawn(move || {
                    let mut errors = Vec::new();
                    let r = scope.run(|| errors = skip_errors(&l));
                    assert!(r.is_err(), "the cancellation was seen");
                    errors
                })
            };
            until_parked(acceptor.thread());
            scope.cancel();
            let errors = join_or_close(acceptor, &l)?;
            one_cut_short(&errors, WaitError::Cancelled, &l);
        }
        Ok(())
    })
}

#[test]
fn a_loop_that_skips_errors_ends_at_runtime_shutdown() -> io::Result<()> {
    let ended: Rc<RefCell<Vec<(&str, usize)>>> = Rc::default();
    let seen = ended.clone();
    coro::run(move || -> io::Result<()> {
        for l in Listener::both()? {
            let seen = seen.clone();
            coro::spawn(move || {
                let mut skipped = 0;
                for s in l.incoming() {
                    if s.is_err() {
                        skipped += 1;
                        continue;
                    }
                }
                // Reached only if the loop ended (not unwound by shutdown).
                seen.borrow_mut().push((l.name(), skipped));
            });
        }
        coro::yield_now();
        Ok(()) // the runtime shuts down with both acceptors waiting
    })?;
    assert_eq!(*ended.borrow(), [("TcpListener", 1), ("UnixListener", 1)]);
    Ok(())
}

#[test]
fn a_spinning_accept_loop_is_named_with_its_call_site() -> io::Result<()> {
    capture_logs();
    run(|| {
        let l = TcpListener::bind("127.0.0.1:0")?;
        let line = Cell::new(0);
        let spinner = coro::Builder::new()
            .name("accept spinner".into())
            .spawn(move || {
                let _ = with_timeout(Duration::ZERO, || {
                    for _ in 0..coro::SPIN_LIMIT {
                        let (r, at) = (l.accept(), line!());
                        line.set(at);
                        match r {
                            Ok(_) => {}
                            Err(_) => continue,
                        }
                    }
                });
                line.get()
            })?;
        let line = spinner.join().unwrap();
        let w = spin_warnings("accept spinner");
        assert_eq!(w.len(), 1, "{w:?}");
        let site = format!("{}:{line}:", file!());
        assert!(w[0].contains(&site), "{site} not in: {}", w[0]);
        Ok(())
    })
}

#[test]
fn a_spinning_read_loop_is_named_with_its_call_site() -> io::Result<()> {
    capture_logs();
    run(|| {
        let l = TcpListener::bind("127.0.0.1:0")?;
        let mut c = TcpStream::connect(l.local_addr()?)?;
        let (_server, _) = l.accept()?;
        let spinner = coro::Builder::new()
            .name("read spinner".into())
            .spawn(move || {
                let mut buf = [0; 16];
                let mut line = 0;
                let _ = with_timeout(Duration::ZERO, || {
                    for _ in 0..coro::SPIN_LIMIT {
                        let (r, at) = (c.read(&mut buf), line!());
                        line = at;
                        if r.is_err() {
                            continue;
                        }
                    }
                });
                line
            })?;
        let line = spinner.join().unwrap();
        let w = spin_warnings("read spinner");
        assert_eq!(w.len(), 1, "{w:?}");
        let site = format!("{}:{line}:", file!());
        assert!(w[0].contains(&site), "{site} not in: {}", w[0]);
        Ok(())
    })
}

/// The spin warnings logged so far that name green thread `name`.
fn spin_warnings(name: &str) -> Vec<String> {
    let tag = format!("'{name}' spins");
    LOGS.lock()
        .unwrap()
        .iter()
        .filter(|(level, text)| *level == log::Level::Warn && text.contains(&tag))
        .map(|(_, text)| text.clone())
        .collect()
}

/// Yields until `t` is parked (in accept).
#[track_caller]
fn until_parked(t: &coro::Coro) {
    for _ in 0..100_000 {
        if t.state() == ThreadState::Parked {
            return;
        }
        coro::yield_now();
    }
    panic!("the acceptor never waited");
}

/// Joins the acceptor; if it does not end within a loose bound, closes the
/// listener (so that it does) and fails.
#[track_caller]
fn join_or_close<T: 'static>(acceptor: coro::JoinHandle<T>, l: &Listener) -> io::Result<T> {
    match with_timeout(Duration::from_secs(10), || acceptor.wait()) {
        Ok(_) => Ok(acceptor.join().unwrap()),
        Err(_) => {
            l.close();
            let _ = acceptor.join();
            panic!("{}: incoming() did not end", l.name());
        }
    }
}
