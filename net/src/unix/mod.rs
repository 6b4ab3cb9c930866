//! Unix-domain sockets: [`UnixListener`], [`UnixStream`] and
//! [`UnixDatagram`], with the shapes of `std::os::unix::net`.

mod datagram;
mod listener;
mod stream;

pub use datagram::UnixDatagram;
pub use listener::{Incoming, UnixListener};
pub use stream::UnixStream;

/// The address of a Unix socket (std's type).
pub use std::os::unix::net::SocketAddr;
