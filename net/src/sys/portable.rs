//! The portable file transfer, for systems whose `sendfile` the crate does
//! not use (BSD, macOS): read at the offset into a buffer, then one
//! non-blocking write of what was read.
//!
//! Bytes read but not written are read again by the next call (the caller
//! advances the offset by what was sent), so a short or refused write loses
//! nothing.

use std::fs::File;
use std::io;
use std::mem::ManuallyDrop;
use std::os::fd::{FromRawFd, RawFd};
use std::os::unix::fs::FileExt;

/// The most one call reads and writes.
const CHUNK: usize = 64 * 1024;

/// Sends up to `len` bytes of `file` at `offset` into the non-blocking
/// socket `sock`; returns the count written (0 at end of file).
///
/// # Errors
///
/// The read's error, or the write's (`WouldBlock` when the socket is full).
pub(crate) fn sendfile(
    sock: RawFd,
    file: RawFd,
    offset: libc::off_t,
    len: usize,
) -> io::Result<usize> {
    let mut buf = vec![0u8; len.min(CHUNK)];
    // SAFETY: the caller keeps `file` open for the call; ManuallyDrop keeps
    // the temporary `File` from closing it.
    let f = ManuallyDrop::new(unsafe { File::from_raw_fd(file) });
    let n = f.read_at(&mut buf, offset as u64)?;
    if n == 0 {
        return Ok(0);
    }
    // SAFETY: `buf[..n]` is initialised memory we own; the caller keeps
    // `sock` open for the call.
    let w = unsafe { libc::write(sock, buf.as_ptr().cast(), n) };
    if w < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(w as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;

    /// A file of `n` bytes 0, 1, 2, ... (mod 251), removed on drop.
    struct Data(std::path::PathBuf, File);

    impl Data {
        fn new(tag: &str, n: usize) -> Data {
            let path = std::env::temp_dir()
                .join(format!("coro-net-portable-{tag}-{}", std::process::id()));
            let bytes: Vec<u8> = (0..n).map(|i| (i % 251) as u8).collect();
            std::fs::write(&path, &bytes).unwrap();
            let f = File::open(&path).unwrap();
            Data(path, f)
        }
    }

    impl Drop for Data {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    /// The bytes at the offset arrive, at most one chunk per call; the
    /// file's own position does not move; past the end, 0.
    #[test]
    fn sends_the_bytes_at_the_offset() {
        let data = Data::new("offset", 100_000);
        let (a, mut b) = UnixStream::pair().unwrap();
        a.set_nonblocking(true).unwrap();
        let n = sendfile(a.as_raw_fd(), data.1.as_raw_fd(), 10, 20).unwrap();
        assert_eq!(n, 20);
        let mut got = [0u8; 20];
        b.read_exact(&mut got).unwrap();
        assert_eq!(got.to_vec(), (10..30).map(|i| i as u8).collect::<Vec<_>>());
        let big = sendfile(a.as_raw_fd(), data.1.as_raw_fd(), 0, 100_000);
        assert!(matches!(big, Ok(n) if (1..=CHUNK).contains(&n)), "{big:?}");
        let mut pos = &data.1;
        let mut first = [0u8; 1];
        pos.read_exact(&mut first).unwrap();
        assert_eq!(first, [0], "the file position moved");
        assert_eq!(
            sendfile(a.as_raw_fd(), data.1.as_raw_fd(), 100_000, 10).unwrap(),
            0
        );
    }

    /// A full socket refuses with `WouldBlock`; nothing is lost: the same
    /// offset, sent again once there is room, arrives whole.
    #[test]
    fn a_full_socket_would_block_and_loses_nothing() {
        let data = Data::new("full", 1000);
        let (mut a, mut b) = UnixStream::pair().unwrap();
        a.set_nonblocking(true).unwrap();
        let mut filled = 0usize;
        loop {
            match a.write(&[0xee; 4096]) {
                Ok(n) => filled += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => panic!("{e}"),
            }
        }
        let e = sendfile(a.as_raw_fd(), data.1.as_raw_fd(), 500, 100).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
        let mut sink = vec![0u8; filled];
        b.read_exact(&mut sink).unwrap();
        assert_eq!(
            sendfile(a.as_raw_fd(), data.1.as_raw_fd(), 500, 100).unwrap(),
            100
        );
        let mut got = [0u8; 100];
        b.read_exact(&mut got).unwrap();
        assert_eq!(
            got.to_vec(),
            (500..600).map(|i| (i % 251) as u8).collect::<Vec<_>>()
        );
    }
}
