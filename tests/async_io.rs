//! Sockets as async I/O objects (features `futures-io` and
//! `tokio-io`): a pending read is woken by the reactor when the peer writes
//! (only the reading green thread waits), writes that fill the socket
//! buffer wait for room, shutdown gives the peer EOF, and a socket closed
//! while a read is pending fails that read.

mod util;

use std::future::poll_fn;
use std::io;
use std::pin::Pin;

use coro::future::block_on;
use coro::net::UnixStream;

/// Reads to EOF through `futures_io::AsyncRead`.
fn read_all_futures(mut s: UnixStream) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        let n = block_on(poll_fn(|cx| {
            futures_io::AsyncRead::poll_read(Pin::new(&mut s), cx, &mut buf)
        }))??;
        if n == 0 {
            return Ok(out);
        }
        out.extend_from_slice(&buf[..n]);
    }
}

/// Writes all of `data` through tokio's `AsyncWrite`, then shuts down.
fn write_all_tokio(mut s: UnixStream, data: &[u8]) -> io::Result<()> {
    let mut at = 0;
    while at < data.len() {
        at += block_on(poll_fn(|cx| {
            tokio::io::AsyncWrite::poll_write(Pin::new(&mut s), cx, &data[at..])
        }))??;
    }
    block_on(poll_fn(|cx| {
        tokio::io::AsyncWrite::poll_shutdown(Pin::new(&mut s), cx)
    }))??;
    Ok(())
}

#[test]
fn a_pending_async_read_is_woken_by_the_reactor_and_big_writes_wait_for_room() -> io::Result<()> {
    util::run(|| {
        let (a, b) = UnixStream::pair()?;
        // 8 MB: far beyond the socket buffer, so the writer's polls return
        // Pending and its green thread parks until the reader makes room.
        let data: Vec<u8> = (0..8u32 << 20).map(|i| (i % 239) as u8).collect();
        let expect = data.clone();
        let reader = coro::spawn(move || read_all_futures(b));
        let writer = coro::spawn(move || write_all_tokio(a, &data));
        writer.join().unwrap()?;
        let got = reader.join().unwrap()?;
        assert!(got == expect, "{} bytes read", got.len());
        Ok(())
    })
}

#[test]
fn tokio_read_and_futures_write_on_tcp() -> io::Result<()> {
    util::run(|| {
        let (mut c, mut s) = util::pair()?;
        let reader = coro::spawn(move || -> io::Result<Vec<u8>> {
            let mut store = vec![0u8; 64];
            let mut buf = tokio::io::ReadBuf::new(&mut store);
            block_on(poll_fn(|cx| {
                tokio::io::AsyncRead::poll_read(Pin::new(&mut s), cx, &mut buf)
            }))??;
            Ok(buf.filled().to_vec())
        });
        coro::sleep(std::time::Duration::from_millis(5))?; // the read is pending
        block_on(poll_fn(|cx| {
            futures_io::AsyncWrite::poll_write(Pin::new(&mut c), cx, b"ping")
        }))??;
        assert_eq!(reader.join().unwrap()?, b"ping");
        Ok(())
    })
}

#[test]
fn close_fails_a_pending_async_read() -> io::Result<()> {
    util::run(|| {
        let (a, mut b) = UnixStream::pair()?;
        let b2 = b.try_clone()?;
        let reader = coro::spawn(move || {
            let mut buf = [0u8; 16];
            block_on(poll_fn(|cx| {
                futures_io::AsyncRead::poll_read(Pin::new(&mut b), cx, &mut buf)
            }))
        });
        coro::sleep(std::time::Duration::from_millis(5))?;
        b2.close();
        let r = reader.join().unwrap().unwrap();
        util::assert_kind(r, io::ErrorKind::NotConnected);
        drop(a);
        Ok(())
    })
}
