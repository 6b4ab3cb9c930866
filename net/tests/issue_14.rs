//! Regression tests for issue #14 ("What a newcomer missed"), the parts in
//! coro-net: `incoming()` ends after `close()` (item 3; error loops on
//! sockets are tested in the root `tests/issue_14.rs`) and `sendfile`
//! (item 16).

mod util;

use std::io::{self, Read};
use std::rc::Rc;

use coro::net::{TcpListener, UnixListener, UnixStream};
use util::{run, TempDir};

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
