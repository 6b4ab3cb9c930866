//! Fd: pipes and an eventfd driven through the reactor.

mod util;

use std::io::{self, Read, Write};

use coro::net::Fd;
use util::run;

#[test]
fn pipe_both_ends() -> io::Result<()> {
    run(|| {
        let (r, w) = io::pipe()?;
        let (r, w) = (Fd::new(r)?, Fd::new(w)?);
        let reader = coro::spawn(move || -> io::Result<usize> {
            let mut total = 0;
            let mut buf = [0; 4096];
            loop {
                match (&r).read(&mut buf)? {
                    0 => return Ok(total),
                    n => total += n,
                }
            }
        });
        // More than a pipe buffer: the writer has to wait for the reader.
        let chunk = [1u8; 8192];
        for _ in 0..64 {
            (&w).write_all(&chunk)?;
        }
        drop(w);
        assert_eq!(reader.join().unwrap()?, 64 * 8192);
        Ok(())
    })
}

// eventfd is Linux's and FreeBSD's; macOS has none (the pipe test covers Fd
// there).
#[cfg(any(target_os = "linux", target_os = "android", target_os = "freebsd"))]
mod eventfd {
    use std::io;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::time::Duration;

    use super::util::{assert_kind, run};
    use coro::net::Fd;

    #[test]
    fn eventfd_wait_readable() -> io::Result<()> {
        run(|| {
            // SAFETY: eventfd returns a new descriptor or -1, checked below.
            let raw = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
            assert!(raw >= 0, "{}", io::Error::last_os_error());
            // SAFETY: `raw` is a fresh descriptor owned by nobody else.
            let efd = Fd::new(unsafe { OwnedFd::from_raw_fd(raw) })?;
            let r = coro::with_timeout(Duration::from_millis(10), || efd.wait_readable());
            assert!(r.is_err(), "nothing signalled yet");
            let fd = efd.as_raw_fd();
            let poster = coro::spawn(move || {
                let one = 1u64.to_ne_bytes();
                // SAFETY: writes 8 bytes from a live buffer to an open eventfd.
                let n = unsafe { libc::write(fd, one.as_ptr().cast(), 8) };
                assert_eq!(n, 8);
            });
            let v = efd.read_with(|f| {
                let mut b = [0u8; 8];
                // SAFETY: reads at most 8 bytes into a live 8-byte buffer.
                let n = unsafe { libc::read(f.as_raw_fd(), b.as_mut_ptr().cast(), 8) };
                if n < 0 {
                    Err(io::Error::last_os_error())
                } else {
                    Ok(u64::from_ne_bytes(b))
                }
            })?;
            assert_eq!(v, 1);
            poster.join().unwrap();
            efd.close();
            assert_kind(efd.wait_readable(), io::ErrorKind::NotConnected);
            let back = efd.into_inner()?;
            assert_eq!(back.as_raw_fd(), fd);
            Ok(())
        })
    }
}
