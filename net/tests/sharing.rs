//! Two green threads waiting on the same direction of one socket queue in
//! order: both are woken by readiness and retry in the order they started
//! waiting; the one that finds nothing waits again. No error, no one lost.

mod util;

use std::cell::RefCell;
use std::io::{self, Read, Write};
use std::rc::Rc;
use std::time::Duration;

use coro::net::{TcpListener, TcpStream};
use util::run;

#[test]
fn two_readers_queue_in_order() -> io::Result<()> {
    run(|| {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let mut c = TcpStream::connect(listener.local_addr()?)?;
        let (s, _) = listener.accept()?;
        let log = Rc::new(RefCell::new(Vec::new()));
        let mut readers = Vec::new();
        for name in ["first", "second"] {
            let s = s.try_clone()?;
            let log = log.clone();
            readers.push(coro::spawn(move || -> io::Result<()> {
                let mut b = [0; 1];
                (&s).read_exact(&mut b)?;
                log.borrow_mut().push((name, b[0]));
                Ok(())
            }));
            coro::sleep(Duration::from_millis(5)).unwrap(); // parked in this order
        }
        c.write_all(b"a")?;
        coro::sleep(Duration::from_millis(20)).unwrap();
        assert_eq!(*log.borrow(), [("first", b'a')], "one byte, one reader");
        c.write_all(b"b")?;
        for r in readers {
            r.join().unwrap()?;
        }
        assert_eq!(*log.borrow(), [("first", b'a'), ("second", b'b')]);
        Ok(())
    })
}
