//! TCP stream reads take a short count as "drained" (saving the
//! `recvfrom` that would only say `EWOULDBLOCK`), so every way a read can
//! stop short with data still queued is tested here: the urgent mark, a
//! `readv` capped at `IOV_MAX` buffers (it is full, not short), a Unix
//! stream read stopped at an `SCM_RIGHTS` boundary (Unix streams keep the
//! safe rule).

use std::io::{self, IoSliceMut, Read, Write};
use std::os::fd::AsRawFd;
use std::time::Duration;

use coro::net::{TcpListener, UnixStream};

const LIMIT: Duration = Duration::from_secs(20);

/// A `read_vectored` over more buffers than the kernel takes moves only
/// the first `IOV_MAX` (1024 on Linux): that read is full, and the next one
/// gets the rest instead of waiting for an event that will not come.
#[test]
fn a_readv_capped_at_iov_max_is_full_not_short() -> io::Result<()> {
    coro::run(|| {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let (sent, all_sent) = std::sync::mpsc::channel();
        let (done, read_all) = std::sync::mpsc::channel::<()>();
        let peer = std::thread::spawn(move || -> io::Result<()> {
            let mut s = std::net::TcpStream::connect(addr)?;
            s.write_all(&[7u8; 3000])?;
            sent.send(()).unwrap();
            // Open until the reader is done: a close would be an event.
            let _ = read_all.recv();
            Ok(())
        });
        let (conn, _) = listener.accept()?;
        coro::blocking(move || all_sent.recv()).unwrap().unwrap();
        let mut bytes = vec![0u8; 2048];
        let r = coro::with_timeout(LIMIT, || -> io::Result<(usize, usize)> {
            let mut bufs: Vec<IoSliceMut<'_>> = bytes.chunks_mut(1).map(IoSliceMut::new).collect();
            let first = (&conn).read_vectored(&mut bufs)?;
            let mut rest = [0u8; 4096];
            let second = (&conn).read(&mut rest)?;
            Ok((first, second))
        });
        drop(done);
        let (first, second) = r.expect("the read after a capped readv waited forever")?;
        assert_eq!(first, 1024, "the kernel takes IOV_MAX buffers");
        assert_eq!(second, 3000 - 1024);
        peer.join().unwrap()
    })
}

/// Sends `data` with one file descriptor (`fd`) attached.
fn send_with_fd(s: &std::os::unix::net::UnixStream, data: &[u8], fd: i32) {
    let space = {
        // SAFETY: CMSG_SPACE only computes a size.
        unsafe { libc::CMSG_SPACE(std::mem::size_of::<i32>() as u32) as usize }
    };
    let mut control = vec![0u8; space];
    let mut iov = libc::iovec {
        iov_base: data.as_ptr() as *mut libc::c_void,
        iov_len: data.len(),
    };
    // SAFETY: msghdr is plain data; all-zero is a valid empty header.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = space as _;
    // SAFETY: `msg` points at `control`, which has room for one cmsg with
    // one i32 (CMSG_SPACE), so CMSG_FIRSTHDR is non-null and CMSG_DATA
    // points inside `control`; `iov` and `data` outlive the sendmsg call,
    // which only reads them.
    let n = unsafe {
        let c = libc::CMSG_FIRSTHDR(&msg);
        (*c).cmsg_level = libc::SOL_SOCKET;
        (*c).cmsg_type = libc::SCM_RIGHTS;
        (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<i32>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<i32>(), fd);
        libc::sendmsg(s.as_raw_fd(), &msg, 0)
    };
    assert_eq!(n, data.len() as isize, "{}", io::Error::last_os_error());
}

/// Linux stops a Unix stream read after a message that carried file
/// descriptors; what follows must still be read without a new event.
#[test]
fn a_unix_read_stopped_at_scm_rights_does_not_strand_the_rest() -> io::Result<()> {
    let (a, b) = std::os::unix::net::UnixStream::pair()?;
    let passed = std::fs::File::open("/dev/null")?;
    send_with_fd(&b, b"ab", passed.as_raw_fd());
    (&b).write_all(b"cd")?;
    coro::run(move || {
        let conn = UnixStream::from_std(a)?;
        let mut got = Vec::new();
        let r = coro::with_timeout(LIMIT, || -> io::Result<()> {
            let mut buf = [0u8; 64];
            while got.len() < 4 {
                let n = (&conn).read(&mut buf)?;
                assert!(n > 0, "EOF before the end");
                got.extend_from_slice(&buf[..n]);
            }
            Ok(())
        });
        r.expect("the read after the SCM_RIGHTS boundary waited forever")?;
        assert_eq!(got, b"abcd");
        drop(b);
        Ok(())
    })
}

/// A peer sends `hello`, one urgent (`MSG_OOB`) byte, `world`. Linux stops
/// the first read at the urgent mark; the second must still get `world`
/// (were readiness cleared by the short read, it would wait forever: no new
/// event comes).
#[test]
fn data_after_the_urgent_mark_is_read() -> io::Result<()> {
    coro::run(|| {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let (sent, all_sent) = std::sync::mpsc::channel();
        let (done, read_all) = std::sync::mpsc::channel::<()>();
        let peer = std::thread::spawn(move || -> io::Result<()> {
            let mut s = std::net::TcpStream::connect(addr)?;
            s.write_all(b"hello")?;
            // SAFETY: sending one byte from a valid buffer on an open socket.
            let n = unsafe { libc::send(s.as_raw_fd(), b"!".as_ptr().cast(), 1, libc::MSG_OOB) };
            assert_eq!(n, 1);
            s.write_all(b"world")?;
            // Loopback queues the bytes at the receiver during the send.
            sent.send(()).unwrap();
            // Open until the reader is done: its close would be an event
            // that sets readiness again and hides the bug.
            let _ = read_all.recv();
            Ok(())
        });
        let (mut conn, _) = listener.accept()?;
        // Everything is queued before the first read: no event can arrive
        // after it to set readiness again.
        coro::blocking(move || all_sent.recv()).unwrap().unwrap();
        let mut got = Vec::new();
        let r = coro::with_timeout(Duration::from_secs(20), || -> io::Result<()> {
            let mut buf = [0u8; 64];
            while got.len() < 10 {
                let n = conn.read(&mut buf)?;
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&buf[..n]);
            }
            Ok(())
        });
        drop(done);
        assert!(r.is_ok(), "the read after the urgent mark waited forever");
        r.unwrap()?;
        assert_eq!(got, b"helloworld");
        peer.join().unwrap()
    })
}
