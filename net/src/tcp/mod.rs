//! TCP: [`TcpListener`] (with its builder) and [`TcpStream`].

mod listener;
mod stream;

pub use listener::{Incoming, TcpListener, TcpListenerBuilder, DEFAULT_BACKLOG};
pub use stream::TcpStream;
