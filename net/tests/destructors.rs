//! Socket operations where a green thread may not switch: in a destructor
//! while its thread unwinds (from a panic, or at shutdown), and on a socket
//! that outlived its runtime. A non-blocking write there must not spend
//! selfishness by yielding, and data a syscall already returned is never
//! lost to a panic afterwards.

mod util;

use std::cell::Cell;
use std::io::{self, Read, Write};
use std::panic::{self, AssertUnwindSafe};
use std::rc::Rc;
use std::time::Duration;

use coro::net::{TcpListener, TcpStream};
use util::run;

fn pair() -> io::Result<(TcpStream, TcpStream)> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let c = TcpStream::connect(listener.local_addr()?)?;
    let (s, _) = listener.accept()?;
    Ok((c, s))
}

/// Says goodbye on its connection when dropped: one write that does not
/// block, so it spends selfishness.
struct Bye {
    stream: TcpStream,
    wrote: Rc<Cell<Option<bool>>>,
}

impl Drop for Bye {
    fn drop(&mut self) {
        self.wrote.set(Some((&self.stream).write(b"bye\n").is_ok()));
    }
}

#[test]
fn a_destructor_writes_while_its_thread_panics() -> io::Result<()> {
    run(|| {
        let (c, mut s) = pair()?;
        let wrote = Rc::new(Cell::new(None));
        let bye = Bye {
            stream: c,
            wrote: wrote.clone(),
        };
        // Budget 1: the write's success would yield mid-unwind.
        let h = coro::Builder::new().selfishness(1).spawn(move || {
            let _bye = bye;
            panic!("handler failed");
        })?;
        let other = coro::spawn(|| coro::sleep(Duration::from_millis(1)));
        assert!(h.join().unwrap_err().is_panic());
        assert_eq!(wrote.get(), Some(true));
        assert_eq!(other.join().unwrap(), Ok(()), "the unwind leaked");
        let mut got = [0u8; 4];
        s.read_exact(&mut got)?;
        assert_eq!(&got, b"bye\n");
        Ok(())
    })
}

#[test]
fn a_destructor_writes_while_shutdown_unwinds_its_thread() -> io::Result<()> {
    let wrote = Rc::new(Cell::new(None));
    let w = wrote.clone();
    let mut peer = coro::run(move || -> io::Result<std::net::TcpStream> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        // A plain std socket as the peer, to read after the runtime is gone
        // (a loopback connect completes at once, into the backlog).
        let peer = std::net::TcpStream::connect(listener.local_addr()?)?;
        let (c, _) = listener.accept()?;
        let bye = Bye {
            stream: c,
            wrote: w,
        };
        coro::Builder::new().selfishness(1).spawn(move || {
            let _bye = bye;
            loop {
                // Ignores every error, so shutdown has to unwind it.
                let _ = coro::park();
                coro::yield_now();
            }
        })?;
        coro::yield_now();
        Ok(peer)
    })?;
    // Reaching this line is half the test: a switch mid-unwind aborts.
    assert_eq!(wrote.get(), Some(true));
    peer.set_read_timeout(Some(util::LIMIT))?;
    let mut got = Vec::new();
    peer.read_to_end(&mut got)?;
    assert_eq!(got, b"bye\n");
    Ok(())
}

#[test]
fn a_socket_read_after_its_runtime_keeps_the_data() -> io::Result<()> {
    let (c, _s) = coro::run(|| -> io::Result<_> {
        let (c, mut s) = pair()?;
        s.write_all(b"hello")?;
        // Wait until the reader has seen the data arrive.
        let mut first = [0u8; 1];
        c.peek(&mut first)?;
        Ok((c, s))
    })?;
    // Outside any runtime: the read succeeds at once and returns the data
    // (there is no selfishness budget to spend here) ...
    let mut buf = [0u8; 16];
    let n = (&c).read(&mut buf)?;
    assert_eq!(&buf[..n], b"hello");
    // ... and a read that would have to wait says why instead of hanging.
    let e = panic::catch_unwind(AssertUnwindSafe(|| (&c).read(&mut buf)))
        .expect_err("a read that must wait cannot wait here");
    let msg = e
        .downcast_ref::<String>()
        .map(String::as_str)
        .unwrap_or_default();
    assert!(
        msg.contains("coro: TcpStream::read would block"),
        "message: {msg}"
    );
    Ok(())
}
