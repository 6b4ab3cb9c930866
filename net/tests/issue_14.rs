//! Regression tests for issue #14 ("What a newcomer missed"), the parts in
//! coro-net: `incoming()` ends after `close()` and error loops on sockets
//! cannot starve the other green threads (item 3), and `sendfile` (item 16).

mod util;

use std::cell::Cell;
use std::io::{self, Read};
use std::rc::Rc;

use coro::net::{TcpListener, UdpSocket, UnixListener, UnixStream};
use util::{run, TempDir};

/// Failing calls made in a row by the error loops below.
const CALLS: u32 = 1000;

/// Runs `call` [`CALLS`] times (every call fails at once) while another
/// green thread yields in a loop; returns how often that thread ran.
fn ticks_during(mut call: impl FnMut()) -> u32 {
    let ticks = Rc::new(Cell::new(0u32));
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
    coro::yield_now();
    let start = ticks.get();
    for _ in 0..CALLS {
        call();
    }
    let ran = ticks.get() - start;
    stop.set(true);
    ticker.join().unwrap();
    ran
}

#[track_caller]
fn assert_kept_its_schedule(what: &str, ticks: u32) {
    assert!(
        ticks >= CALLS / 4 - 2,
        "{what}: the other thread ran {ticks} times during {CALLS} failing calls"
    );
}

/// `for s in listener.incoming()` used to go on forever after `close()`,
/// one `NotConnected` error after another.
#[test]
fn issue_14_3_incoming_ends_after_close() -> io::Result<()> {
    run(|| {
        let listener = Rc::new(TcpListener::bind("127.0.0.1:0")?);
        let addr = listener.local_addr()?;
        let acceptor = {
            let listener = listener.clone();
            coro::spawn(move || {
                let mut accepted = 0;
                let mut errors = 0;
                for s in listener.incoming() {
                    match s {
                        Ok(_) => accepted += 1,
                        Err(_) => errors += 1,
                    }
                    assert!(errors < 100, "incoming() did not end after close()");
                }
                (accepted, errors)
            })
        };
        let _c = coro::net::TcpStream::connect(addr)?;
        coro::yield_now();
        // The acceptor waits in incoming() again; close it from here.
        listener.close();
        assert_eq!(acceptor.join().unwrap(), (1, 0));
        assert!(listener.incoming().next().is_none());

        let dir = TempDir::new("issue14")?;
        let unix = UnixListener::bind(dir.path("sock"))?;
        unix.close();
        assert!(unix.incoming().next().is_none());
        Ok(())
    })
}

/// A loop that ignores errors on a closed listener or a socket whose
/// syscall fails at once (`EDESTADDRREQ`) yields every few calls.
#[test]
fn issue_14_3_an_error_loop_on_a_socket_lets_others_run() -> io::Result<()> {
    run(|| {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        listener.close();
        let ticks = ticks_during(|| assert!(listener.accept().is_err()));
        assert_kept_its_schedule("accept on a closed listener", ticks);

        let udp = UdpSocket::bind("127.0.0.1:0")?;
        let ticks = ticks_during(|| assert!(udp.send(b"nowhere").is_err()));
        assert_kept_its_schedule("send on an unconnected UDP socket", ticks);

        let (a, _b) = coro::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| Ok((coro::net::TcpStream::connect(l.local_addr()?)?, l)))?;
        a.close();
        let ticks = ticks_during(|| assert!(a.wait_readable().is_err()));
        assert_kept_its_schedule("wait_readable on a closed stream", ticks);
        Ok(())
    })
}

/// Item 16: `sendfile` from a real file on a green thread.
#[test]
fn issue_14_16_sendfile_sends_a_file() -> io::Result<()> {
    let dir = TempDir::new("issue14-sendfile")?;
    run(move || {
        let path = dir.path("f");
        std::fs::write(&path, b"zero-copy")?;
        let f = std::fs::File::open(&path)?;
        let (a, mut b) = UnixStream::pair()?;
        assert_eq!(a.sendfile(&f, 5, 100)?, 4);
        drop(a);
        let mut got = String::new();
        b.read_to_string(&mut got)?;
        assert_eq!(got, "copy");
        Ok(())
    })
}
