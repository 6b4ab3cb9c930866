//! Selfishness: a writer on a fast socket whose calls all succeed at once
//! is forcibly yielded, so other green threads run between its writes.

mod util;

use std::cell::Cell;
use std::io::{self, Read, Write};
use std::rc::Rc;

use coro::net::{TcpListener, TcpStream};

#[test]
fn budget_one_lets_another_thread_run_between_writes() -> io::Result<()> {
    let mut rt = coro::Runtime::builder().selfishness(1).build()?;
    rt.block_on(|| -> io::Result<()> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let mut c = TcpStream::connect(listener.local_addr()?)?;
        let (mut s, _) = listener.accept()?;
        let ticks = Rc::new(Cell::new(0u64));
        let done = Rc::new(Cell::new(false));
        let (t, d) = (ticks.clone(), done.clone());
        let ticker = coro::spawn(move || {
            while !d.get() {
                t.set(t.get() + 1);
                coro::yield_now();
            }
        });
        let before = coro::stats().forced_yields;
        let mut seen = Vec::new();
        for _ in 0..50 {
            seen.push(ticks.get());
            // 64 bytes into an empty socket buffer: never blocks.
            c.write_all(&[7; 64])?;
        }
        done.set(true);
        ticker.join().unwrap();
        assert!(
            seen.windows(2).all(|w| w[1] > w[0]),
            "the ticker did not run between every two writes: {seen:?}"
        );
        assert!(coro::stats().forced_yields - before >= 49);
        let mut buf = vec![0; 50 * 64];
        s.read_exact(&mut buf)?;
        assert!(buf.iter().all(|&b| b == 7));
        Ok(())
    })
}
