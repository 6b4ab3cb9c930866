//! `sendfile`: a real file's bytes reach a loopback peer unchanged, the
//! file position never moves, only the calling green thread waits while the
//! peer is slow, transfers that need no waiting spend selfishness, and
//! timeouts, a closed socket and bad arguments fail clearly.

mod util;

use std::cell::Cell;
use std::fs::File;
use std::io::{self, Read, Seek, Write};
use std::rc::Rc;
use std::time::Duration;

use coro::net::{TcpListener, TcpStream, UnixStream};
use util::{assert_kind, pattern, run, TempDir};

fn pair() -> io::Result<(TcpStream, TcpStream)> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let c = TcpStream::connect(listener.local_addr()?)?;
    let (s, _) = listener.accept()?;
    Ok((c, s))
}

/// A file of `len` pattern bytes, fsynced, opened for reading.
fn file(dir: &TempDir, len: usize) -> io::Result<(File, Vec<u8>)> {
    let data = pattern(len, 7);
    let path = dir.path("data");
    let mut f = File::create(&path)?;
    f.write_all(&data)?;
    f.sync_all()?;
    Ok((File::open(&path)?, data))
}

#[test]
fn a_file_region_arrives_unchanged_and_the_file_position_stays() -> io::Result<()> {
    let dir = TempDir::new("sendfile")?;
    run(move || {
        let (mut f, data) = file(&dir, 4 << 20)?;
        let (tx, rx) = pair()?;
        let reader = coro::spawn(move || -> io::Result<Vec<u8>> {
            let mut got = Vec::new();
            (&rx).read_to_end(&mut got)?;
            Ok(got)
        });
        let (offset, len) = (12_345u64, 3 << 20);
        assert_eq!(tx.sendfile_all(&f, offset, len)?, len);
        // Past the end: only what is there.
        let tail = data.len() as u64 - 10;
        assert_eq!(tx.sendfile_all(&f, tail, 1000)?, 10);
        assert_eq!(tx.sendfile(&f, data.len() as u64, 10)?, 0, "at EOF");
        assert_eq!(tx.sendfile(&f, 0, 0)?, 0);
        tx.shutdown(std::net::Shutdown::Write)?;
        let got = reader.join().unwrap()?;
        let o = offset as usize;
        let mut want = data[o..o + len as usize].to_vec();
        want.extend_from_slice(&data[data.len() - 10..]);
        assert!(
            got == want,
            "bytes differ ({} vs {})",
            got.len(),
            want.len()
        );
        assert_eq!(f.stream_position()?, 0, "sendfile moved the file position");
        Ok(())
    })
}

/// The peer reads slowly: the sender waits for room, and only it waits.
#[test]
fn only_the_sending_green_thread_waits_for_a_slow_peer() -> io::Result<()> {
    let dir = TempDir::new("sendfile-slow")?;
    run(move || {
        let (f, data) = file(&dir, 8 << 20)?;
        let (tx, rx) = pair()?;
        let ticks = Rc::new(Cell::new(0u32));
        let done = Rc::new(Cell::new(false));
        let ticker = {
            let (ticks, done) = (ticks.clone(), done.clone());
            coro::spawn(move || {
                while !done.get() {
                    ticks.set(ticks.get() + 1);
                    coro::sleep(Duration::from_millis(1)).unwrap();
                }
            })
        };
        let reader = coro::spawn(move || -> io::Result<usize> {
            let mut buf = vec![0; 256 * 1024];
            let mut n = 0;
            loop {
                match (&rx).read(&mut buf)? {
                    0 => return Ok(n),
                    k => n += k,
                }
                coro::sleep(Duration::from_millis(1)).unwrap();
            }
        });
        let before = coro::stats().switches;
        assert_eq!(
            tx.sendfile_all(&f, 0, data.len() as u64)?,
            data.len() as u64
        );
        assert!(
            coro::stats().switches > before + 10,
            "the sender never waited"
        );
        tx.shutdown(std::net::Shutdown::Write)?;
        assert_eq!(reader.join().unwrap()?, data.len());
        done.set(true);
        ticker.join().unwrap();
        assert!(ticks.get() > 1, "the other green threads stopped");
        Ok(())
    })
}

/// A peer on another OS thread drains as fast as it can: transfers that
/// need no waiting spend selfishness, so a second green thread still runs.
#[test]
fn transfers_that_need_no_waiting_spend_selfishness() -> io::Result<()> {
    let dir = TempDir::new("sendfile-selfish")?;
    run(move || {
        let (f, _) = file(&dir, 16 * 1024)?;
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let drain = std::thread::spawn(move || -> io::Result<u64> {
            let mut s = std::net::TcpStream::connect(addr)?;
            io::copy(&mut s, &mut io::sink())
        });
        let (tx, _) = listener.accept()?;
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
        let forced = coro::stats().forced_yields;
        for _ in 0..200 {
            assert_eq!(tx.sendfile_all(&f, 0, 16 * 1024)?, 16 * 1024);
        }
        assert!(
            coro::stats().forced_yields > forced || ticks.get() > 40,
            "200 transfers never let the other thread run"
        );
        stop.set(true);
        ticker.join().unwrap();
        drop(tx);
        assert_eq!(drain.join().unwrap()?, 200 * 16 * 1024);
        Ok(())
    })
}

#[test]
fn timeouts_bound_a_transfer_to_a_peer_that_never_reads() -> io::Result<()> {
    let dir = TempDir::new("sendfile-timeout")?;
    run(move || {
        let (f, data) = file(&dir, 32 << 20)?;
        let (tx, _rx) = pair()?;
        let r = coro::with_timeout(Duration::from_millis(50), || {
            tx.sendfile_all(&f, 0, data.len() as u64)
        });
        assert!(matches!(r, Err(coro::Timeout)), "{r:?}");
        tx.set_write_timeout(Some(Duration::from_millis(20)))?;
        assert_kind(
            tx.sendfile_all(&f, 0, data.len() as u64),
            io::ErrorKind::TimedOut,
        );
        Ok(())
    })
}

#[test]
fn bad_arguments_and_closed_sockets_fail_clearly() -> io::Result<()> {
    let dir = TempDir::new("sendfile-errors")?;
    run(move || {
        let (f, _) = file(&dir, 100)?;
        let (a, _b) = UnixStream::pair()?;
        let e = assert_kind(a.sendfile(&f, u64::MAX, 10), io::ErrorKind::InvalidInput);
        assert!(e.to_string().contains("offset"), "{e}");
        let not_a_file = File::open(&dir.0)?;
        assert!(a.sendfile(&not_a_file, 0, 10).is_err());
        a.close();
        assert_kind(a.sendfile(&f, 0, 10), io::ErrorKind::NotConnected);
        Ok(())
    })
}

/// `sendfile` from a real file on a green thread.
#[test]
fn sendfile_sends_a_file() -> io::Result<()> {
    let dir = TempDir::new("sendfile-file")?;
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
