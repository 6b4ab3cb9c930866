//! A small TCP service built the way a user program builds one: an accept
//! loop, a `Semaphore` bounding the handlers in flight, a per-read idle
//! timeout (`with_timeout` around `BufRead::read_line`), a `WaitGroup` that
//! counts the handlers so that stop can wait for them, and clients on green
//! threads of the same runtime.
//!
//! The protocol: the client sends lines, the server answers each `line` with
//! `ok line`; the client shuts its write side down to finish. Each test
//! drives the clients step by step (an `Event` per client releases it) and
//! checks the service's counters at points where nothing is moving, so no
//! outcome depends on timing.

mod util;

use std::cell::{Cell, RefCell};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr};
use std::rc::Rc;
use std::time::Duration;

use coro::net::{TcpListener, TcpStream};
use coro::sync::{Event, Semaphore, WaitGroup};
use coro::JoinHandle;
use util::{run, settle, wait_until, LONG};

/// What the service's handlers did, for the test to check.
#[derive(Default)]
struct State {
    /// Idle timeout of each read of connections accepted from now on.
    idle: Cell<Duration>,
    /// Handlers that started (queued for a permit or in flight).
    started: Cell<usize>,
    /// Handlers holding a permit now.
    in_flight: Cell<usize>,
    /// Most handlers ever in flight at once.
    max_in_flight: Cell<usize>,
    /// How each handler ended, by peer address: lines served, or the kind
    /// of its error.
    ended: RefCell<Vec<(SocketAddr, Result<usize, io::ErrorKind>)>>,
    /// Kinds of the errors `read_line` itself returned.
    read_errors: RefCell<Vec<io::ErrorKind>>,
}

impl State {
    fn ended_with(&self, peer: SocketAddr) -> Option<Result<usize, io::ErrorKind>> {
        let ended = self.ended.borrow();
        ended.iter().find(|(p, _)| *p == peer).map(|(_, r)| *r)
    }
}

/// Counts a handler in flight while alive.
struct InFlight<'a>(&'a State);

impl<'a> InFlight<'a> {
    fn enter(state: &'a State) -> InFlight<'a> {
        let n = state.in_flight.get() + 1;
        state.in_flight.set(n);
        state.max_in_flight.set(state.max_in_flight.get().max(n));
        InFlight(state)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.set(self.0.in_flight.get() - 1);
    }
}

/// The running service.
struct Service {
    addr: SocketAddr,
    listener: Rc<TcpListener>,
    acceptor: JoinHandle<io::Result<()>>,
    handlers: WaitGroup,
    permits: Rc<Semaphore>,
    state: Rc<State>,
}

impl Service {
    /// Starts listening on a loopback port with at most `bound` handlers in
    /// flight and an idle timeout of `idle` per read.
    fn start(bound: usize, idle: Duration) -> io::Result<Service> {
        let listener = Rc::new(TcpListener::bind("127.0.0.1:0")?);
        let addr = listener.local_addr()?;
        let handlers = WaitGroup::new();
        let permits = Rc::new(Semaphore::new(bound));
        let state = Rc::new(State::default());
        state.idle.set(idle);
        let acceptor = {
            let (listener, handlers) = (listener.clone(), handlers.clone());
            let (permits, state) = (permits.clone(), state.clone());
            coro::spawn(move || accept_loop(&listener, &handlers, &permits, &state))
        };
        Ok(Service {
            addr,
            listener,
            acceptor,
            handlers,
            permits,
            state,
        })
    }

    /// Stops accepting and waits for every handler to finish.
    fn stop(self) -> io::Result<()> {
        self.listener.close();
        self.acceptor
            .join()
            .map_err(|e| io::Error::other(e.to_string()))??;
        Ok(self.handlers.wait()?)
    }
}

fn accept_loop(
    listener: &TcpListener,
    handlers: &WaitGroup,
    permits: &Rc<Semaphore>,
    state: &Rc<State>,
) -> io::Result<()> {
    loop {
        match listener.accept() {
            Ok((stream, peer)) => {
                let (permits, state) = (permits.clone(), state.clone());
                let idle = state.idle.get();
                handlers.spawn(move || {
                    state.started.set(state.started.get() + 1);
                    let r = handle(stream, idle, &permits, &state);
                    state
                        .ended
                        .borrow_mut()
                        .push((peer, r.map_err(|e| e.kind())));
                });
            }
            Err(_) if listener.is_closed() => return Ok(()),
            Err(e) => return Err(e),
        }
    }
}

/// Serves one connection: takes a permit, then answers lines until EOF. A
/// read that waits longer than `idle` ends the connection with `TimedOut`.
fn handle(
    stream: TcpStream,
    idle: Duration,
    permits: &Semaphore,
    state: &State,
) -> io::Result<usize> {
    let _permit = permits.acquire(1)?;
    let _in_flight = InFlight::enter(state);
    let mut reader = BufReader::new(&stream);
    let mut line = String::new();
    let mut served = 0;
    loop {
        line.clear();
        let n = coro::with_timeout(idle, || {
            reader
                .read_line(&mut line)
                .inspect_err(|e| state.read_errors.borrow_mut().push(e.kind()))
        })??;
        if n == 0 {
            return Ok(served);
        }
        (&stream).write_all(format!("ok {line}").as_bytes())?;
        served += 1;
    }
}

/// A client on its own green thread: sends `hello <i>`, checks the answer,
/// records `i` in `answered`, waits for `go`, then finishes (shuts its write
/// side down and reads the server's EOF). Returns its local address.
fn client(
    addr: SocketAddr,
    i: usize,
    go: Rc<Event>,
    answered: Rc<RefCell<Vec<usize>>>,
) -> JoinHandle<io::Result<SocketAddr>> {
    coro::spawn(move || {
        let stream = TcpStream::connect(addr)?;
        let mut reader = BufReader::new(&stream);
        (&stream).write_all(format!("hello {i}\n").as_bytes())?;
        let mut line = String::new();
        reader.read_line(&mut line)?;
        assert_eq!(line, format!("ok hello {i}\n"));
        answered.borrow_mut().push(i);
        go.wait()?;
        stream.shutdown(Shutdown::Write)?;
        line.clear();
        assert_eq!(reader.read_line(&mut line)?, 0, "server closes after EOF");
        stream.local_addr()
    })
}

/// Spawns `n` clients; returns their handles, their `go` events and the
/// list of those answered so far.
#[allow(clippy::type_complexity)]
fn clients(
    addr: SocketAddr,
    n: usize,
) -> (
    Vec<JoinHandle<io::Result<SocketAddr>>>,
    Vec<Rc<Event>>,
    Rc<RefCell<Vec<usize>>>,
) {
    let answered = Rc::new(RefCell::new(Vec::new()));
    let gates: Vec<_> = (0..n).map(|_| Rc::new(Event::new())).collect();
    let handles = (0..n)
        .map(|i| client(addr, i, gates[i].clone(), answered.clone()))
        .collect();
    (handles, gates, answered)
}

/// Releases the first answered client that was not released yet.
#[track_caller]
fn release_one(gates: &[Rc<Event>], answered: &RefCell<Vec<usize>>) {
    let next = answered
        .borrow()
        .iter()
        .copied()
        .find(|&i| !gates[i].is_set())
        .expect("an answered client is waiting");
    gates[next].set();
}

/// With 10 clients and 3 permits, exactly 3 handlers are in flight at every
/// quiet point (the other 7 wait for a permit), and each finished handler
/// lets exactly one more in, until all are served.
#[test]
fn handlers_in_flight_never_exceed_the_semaphore_bound() -> io::Result<()> {
    const BOUND: usize = 3;
    const CLIENTS: usize = 10;
    run(|| {
        let svc = Service::start(BOUND, LONG)?;
        let (handles, gates, answered) = clients(svc.addr, CLIENTS);
        let st = svc.state.clone();
        for released in 0..=CLIENTS {
            // A quiet point: every handler has started; each is waiting for
            // a permit, or in flight and has answered, or ended (only the
            // released ones).
            wait_until("a quiet point", || {
                st.started.get() == CLIENTS
                    && st.ended.borrow().len() == released
                    && svc.permits.waiters() + st.in_flight.get() + released == CLIENTS
                    && answered.borrow().len() == released + st.in_flight.get()
            });
            assert_eq!(st.in_flight.get(), BOUND.min(CLIENTS - released));
            assert_eq!(
                svc.permits.waiters(),
                CLIENTS - released - st.in_flight.get()
            );
            if released < CLIENTS {
                release_one(&gates, &answered);
            }
        }
        assert_eq!(st.max_in_flight.get(), BOUND);
        for h in handles {
            let local = h.join().expect("client panicked")?;
            assert_eq!(st.ended_with(local), Some(Ok(1)));
        }
        let permits = svc.permits.clone();
        svc.stop()?;
        assert_eq!(st.in_flight.get(), 0);
        assert_eq!(permits.available(), BOUND);
        Ok(())
    })
}

/// A client that sends nothing is cut off by its connection's idle timeout:
/// the handler's `read_line` fails with `TimedOut`, the handler ends with
/// it and closes, and the client reads EOF. A connection accepted earlier
/// under a long timeout is not affected and still served afterwards.
#[test]
fn an_idle_client_is_cut_off_with_timed_out() -> io::Result<()> {
    const SHORT: Duration = Duration::from_millis(50);
    run(|| {
        let svc = Service::start(2, LONG)?;
        let active = TcpStream::connect(svc.addr)?;
        let mut active_reader = BufReader::new(&active);
        let mut line = String::new();
        (&active).write_all(b"one\n")?;
        active_reader.read_line(&mut line)?;
        assert_eq!(line, "ok one\n");

        // Connections accepted from now on get the short idle timeout.
        svc.state.idle.set(SHORT);
        let idle = TcpStream::connect(svc.addr)?;
        let mut buf = [0; 16];
        assert_eq!(
            (&idle).read(&mut buf)?,
            0,
            "the server closed the idle connection"
        );
        let (st, permits) = (svc.state.clone(), svc.permits.clone());
        assert_eq!(
            st.ended_with(idle.local_addr()?),
            Some(Err(io::ErrorKind::TimedOut))
        );
        assert_eq!(*st.read_errors.borrow(), [io::ErrorKind::TimedOut]);
        assert_eq!(
            permits.available(),
            1,
            "the idle handler gave its permit back"
        );

        // The first connection is still served.
        line.clear();
        (&active).write_all(b"two\n")?;
        active_reader.read_line(&mut line)?;
        assert_eq!(line, "ok two\n");
        active.shutdown(Shutdown::Write)?;
        line.clear();
        assert_eq!(active_reader.read_line(&mut line)?, 0);
        svc.stop()?;
        assert_eq!(st.ended_with(active.local_addr()?), Some(Ok(2)));
        assert_eq!(permits.available(), 2);
        Ok(())
    })
}

/// Stop closes the listener (the accept loop ends at once, new connections
/// are refused) and then waits for every handler, both those in flight and
/// those still queued for a permit; it returns only after the last one.
#[test]
fn stop_waits_for_every_handler() -> io::Result<()> {
    const CLIENTS: usize = 4;
    run(|| {
        let svc = Service::start(2, LONG)?;
        let addr = svc.addr;
        let (handles, gates, answered) = clients(addr, CLIENTS);
        let st = svc.state.clone();
        let permits = svc.permits.clone();
        wait_until("two handlers in flight and two queued", || {
            st.started.get() == CLIENTS && answered.borrow().len() == 2 && permits.waiters() == 2
        });

        let accepting = Rc::new(Cell::new(true));
        let (a, s) = (accepting.clone(), st.clone());
        let stopper = coro::spawn(move || -> io::Result<usize> {
            svc.listener.close();
            let acceptor = svc.acceptor.join();
            acceptor.map_err(|e| io::Error::other(e.to_string()))??;
            a.set(false);
            svc.handlers.wait()?;
            Ok(s.ended.borrow().len())
        });
        settle();
        assert!(
            !accepting.get(),
            "the accept loop ended when the listener closed"
        );
        assert!(
            TcpStream::connect(addr).is_err(),
            "new connections are refused"
        );

        for released in 1..=CLIENTS {
            wait_until("a client waiting to be released", || {
                answered.borrow().len() >= released
            });
            assert!(
                !stopper.is_finished(),
                "stop returned with {} handlers left",
                CLIENTS - released + 1
            );
            release_one(&gates, &answered);
            wait_until("its handler to end", || st.ended.borrow().len() == released);
            settle();
        }
        assert_eq!(stopper.join().expect("stopper panicked")?, CLIENTS);
        for h in handles {
            let local = h.join().expect("client panicked")?;
            assert_eq!(st.ended_with(local), Some(Ok(1)));
        }
        Ok(())
    })
}
