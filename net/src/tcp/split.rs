//! [`TcpStream`]'s halves, in tokio's shapes: [`TcpStream::split`] (borrowed)
//! and [`TcpStream::into_split`] (owned), so one green thread can read while
//! another writes.
//!
//! They add nothing a coro stream cannot already do (`Read` and `Write` are
//! implemented for `&TcpStream`, and [`TcpStream::try_clone`] is a cheap
//! second handle): they are there for the code a tokio user writes first.
//! Like the stream, the halves are `!Send`: they stay in their runtime.

use std::io::{self, IoSlice, IoSliceMut, Read, Write};
use std::net::{Shutdown, SocketAddr};

use super::TcpStream;

/// The reading half of a borrowed [`TcpStream`], from [`TcpStream::split`].
#[derive(Debug)]
pub struct ReadHalf<'a>(&'a TcpStream);

/// The writing half of a borrowed [`TcpStream`], from [`TcpStream::split`].
#[derive(Debug)]
pub struct WriteHalf<'a>(&'a TcpStream);

/// The reading half of a [`TcpStream`], from [`TcpStream::into_split`].
///
/// Like the stream, it stays in its runtime:
///
/// ```compile_fail
/// fn send<T: Send>(_: T) {}
/// fn move_to_another_os_thread(half: coro::net::OwnedReadHalf) {
///     send(half); // `Rc` inside: not `Send`
/// }
/// ```
#[derive(Debug)]
pub struct OwnedReadHalf(TcpStream);

/// The writing half of a [`TcpStream`], from [`TcpStream::into_split`].
/// Dropping it shuts the connection down for writing (the peer reads the
/// end of the stream), as tokio's does; the socket closes once both halves
/// are gone.
#[derive(Debug)]
pub struct OwnedWriteHalf(TcpStream);

impl TcpStream {
    /// Splits the stream into a reading and a writing half that borrow it
    /// (tokio's `TcpStream::split`), for two green threads of a
    /// `coro::scope`.
    /// `&TcpStream` does the same: both implement `Read` and `Write`.
    ///
    /// # Examples
    ///
    /// A scope whose two threads copy in both directions at once:
    ///
    /// ```
    /// use std::io::{Read, Write};
    /// use coro::net::{TcpListener, TcpStream};
    ///
    /// coro::run(|| -> std::io::Result<()> {
    ///     let listener = TcpListener::bind("127.0.0.1:0")?;
    ///     let mut client = TcpStream::connect(listener.local_addr()?)?;
    ///     let (server, _) = listener.accept()?;
    ///     coro::scope(|s| {
    ///         let (mut rd, mut wr) = server.split();
    ///         s.spawn(move || wr.write_all(b"hi").unwrap());
    ///         s.spawn(move || {
    ///             let mut buf = [0; 3];
    ///             rd.read_exact(&mut buf).unwrap();
    ///             assert_eq!(&buf, b"yo!");
    ///         });
    ///         client.write_all(b"yo!").unwrap();
    ///     })
    ///     .unwrap();
    ///     let mut buf = [0; 2];
    ///     client.read_exact(&mut buf)?;
    ///     assert_eq!(&buf, b"hi");
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn split(&self) -> (ReadHalf<'_>, WriteHalf<'_>) {
        (ReadHalf(self), WriteHalf(self))
    }

    /// Splits the stream into owned halves (tokio's
    /// `TcpStream::into_split`) that can move into two green threads. They
    /// share the socket (as [`try_clone`](TcpStream::try_clone) does);
    /// dropping the write half shuts the writing direction down.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::io::{Read, Write};
    /// use coro::net::{TcpListener, TcpStream};
    ///
    /// coro::run(|| -> std::io::Result<()> {
    ///     let listener = TcpListener::bind("127.0.0.1:0")?;
    ///     let mut client = TcpStream::connect(listener.local_addr()?)?;
    ///     let (server, _) = listener.accept()?;
    ///     let (mut rd, mut wr) = server.into_split();
    ///     // An echo: the reader hands each chunk to the writer's thread.
    ///     let (tx, rx) = coro::sync::channel::<Vec<u8>>();
    ///     let writer = coro::spawn(move || -> std::io::Result<()> {
    ///         for chunk in &rx {
    ///             wr.write_all(&chunk)?;
    ///         }
    ///         Ok(()) // dropping `wr` sends the end of the stream
    ///     });
    ///     let reader = coro::spawn(move || -> std::io::Result<()> {
    ///         let mut buf = [0; 64];
    ///         loop {
    ///             let n = rd.read(&mut buf)?;
    ///             if n == 0 {
    ///                 return Ok(()); // drops `tx`: the writer ends
    ///             }
    ///             tx.send(buf[..n].to_vec()).unwrap();
    ///         }
    ///     });
    ///     client.write_all(b"ping")?;
    ///     client.shutdown(std::net::Shutdown::Write)?;
    ///     let mut back = String::new();
    ///     // Ends when the write half is dropped (bounded, should it not).
    ///     let limit = std::time::Duration::from_secs(10);
    ///     coro::with_timeout(limit, || client.read_to_string(&mut back))??;
    ///     assert_eq!(back, "ping");
    ///     reader.join().unwrap()?;
    ///     writer.join().unwrap()
    /// })
    /// .unwrap();
    /// ```
    pub fn into_split(self) -> (OwnedReadHalf, OwnedWriteHalf) {
        let reader = TcpStream {
            inner: self.inner.clone(),
        };
        (OwnedReadHalf(reader), OwnedWriteHalf(self))
    }
}

/// The stream this half reads from (shared with the write half).
impl AsRef<TcpStream> for OwnedReadHalf {
    fn as_ref(&self) -> &TcpStream {
        &self.0
    }
}

impl OwnedReadHalf {
    /// The remote address.
    ///
    /// # Errors
    ///
    /// As [`TcpStream::peer_addr`].
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.0.peer_addr()
    }

    /// The local address.
    ///
    /// # Errors
    ///
    /// As [`TcpStream::local_addr`].
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.0.local_addr()
    }
}

/// The stream this half writes to (shared with the read half).
impl AsRef<TcpStream> for OwnedWriteHalf {
    fn as_ref(&self) -> &TcpStream {
        &self.0
    }
}

impl OwnedWriteHalf {
    /// The remote address.
    ///
    /// # Errors
    ///
    /// As [`TcpStream::peer_addr`].
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.0.peer_addr()
    }

    /// The local address.
    ///
    /// # Errors
    ///
    /// As [`TcpStream::local_addr`].
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.0.local_addr()
    }
}

impl Drop for OwnedWriteHalf {
    fn drop(&mut self) {
        // The peer may be gone already (NotConnected): nothing to tell it.
        let _ = self.0.shutdown(Shutdown::Write);
    }
}

/// `Read` for a half that reads from `$stream` (a `&TcpStream`).
macro_rules! read_half {
    ($t:ty, $s:ident => $stream:expr) => {
        impl Read for $t {
            #[track_caller]
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                let $s = &*self;
                let mut stream: &TcpStream = $stream;
                stream.read(buf)
            }
            #[track_caller]
            fn read_vectored(&mut self, bufs: &mut [IoSliceMut<'_>]) -> io::Result<usize> {
                let $s = &*self;
                let mut stream: &TcpStream = $stream;
                stream.read_vectored(bufs)
            }
        }
    };
}

/// `Write` for a half that writes to `$stream` (a `&TcpStream`).
macro_rules! write_half {
    ($t:ty, $s:ident => $stream:expr) => {
        impl Write for $t {
            #[track_caller]
            fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
                let $s = &*self;
                let mut stream: &TcpStream = $stream;
                stream.write(buf)
            }
            #[track_caller]
            fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
                let $s = &*self;
                let mut stream: &TcpStream = $stream;
                stream.write_vectored(bufs)
            }
            fn flush(&mut self) -> io::Result<()> {
                let $s = &*self;
                let mut stream: &TcpStream = $stream;
                stream.flush()
            }
        }
    };
}

read_half!(ReadHalf<'_>, s => s.0);
write_half!(WriteHalf<'_>, s => s.0);
read_half!(OwnedReadHalf, s => &s.0);
write_half!(OwnedWriteHalf, s => &s.0);
