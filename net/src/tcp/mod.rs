//! TCP: [`TcpListener`] (with its builder) and [`TcpStream`] (with its
//! halves).

mod listener;
mod split;
mod stream;

pub use listener::{Incoming, TcpListener, TcpListenerBuilder, DEFAULT_BACKLOG};
pub use split::{OwnedReadHalf, OwnedWriteHalf, ReadHalf, WriteHalf};
pub use stream::TcpStream;
