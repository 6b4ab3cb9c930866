//! A connection's bytes: plain TCP, or rustls over it after STARTTLS, on
//! either side of SMTP (the server's sessions in `wire`, the client's
//! connections to an upstream in `delivery::smtp`).
//!
//! The TLS handshake runs in plain blocking style on the green thread; the
//! caller bounds it with `with_timeout` (see [`wire::timed`](crate::wire::timed)).

use std::io::{self, Read, Write};
use std::sync::Arc;

use coro::net::TcpStream;
use rustls::pki_types::ServerName;
use rustls::{ClientConnection, ConnectionCommon, ServerConnection, SideData, StreamOwned};

/// The socket, plain or wrapped in TLS.
pub enum Stream {
    /// Before STARTTLS (or without it).
    Plain(TcpStream),
    /// Our server side after STARTTLS.
    Server(Box<StreamOwned<ServerConnection, TcpStream>>),
    /// Our client side after STARTTLS.
    Client(Box<StreamOwned<ClientConnection, TcpStream>>),
}

impl Stream {
    /// Whether the connection is under TLS.
    pub fn is_tls(&self) -> bool {
        !matches!(self, Stream::Plain(_))
    }

    /// The TCP socket underneath.
    pub fn tcp(&self) -> &TcpStream {
        match self {
            Stream::Plain(s) => s,
            Stream::Server(s) => &s.sock,
            Stream::Client(s) => &s.sock,
        }
    }

    /// The TLS version and cipher suite, for the log (`None` in plain text).
    pub fn tls_info(&self) -> Option<String> {
        let (version, suite) = match self {
            Stream::Plain(_) => return None,
            Stream::Server(s) => (s.conn.protocol_version(), s.conn.negotiated_cipher_suite()),
            Stream::Client(s) => (s.conn.protocol_version(), s.conn.negotiated_cipher_suite()),
        };
        Some(format!(
            "{} with cipher {}",
            version.map_or("TLS".into(), |v| format!("{v:?}")),
            suite.map_or("?".into(), |s| format!("{:?}", s.suite()))
        ))
    }

    /// Queues TLS's close_notify (sent by the next flush).
    pub fn close_notify(&mut self) {
        match self {
            Stream::Plain(_) => {}
            Stream::Server(s) => s.conn.send_close_notify(),
            Stream::Client(s) => s.conn.send_close_notify(),
        }
    }
}

/// Runs the server side of a TLS handshake on `tcp` (STARTTLS was
/// answered 220). The stream is returned also when the handshake fails,
/// so that the caller can still close it.
pub fn accept_tls(tcp: TcpStream, config: Arc<rustls::ServerConfig>) -> (Stream, io::Result<()>) {
    match ServerConnection::new(config) {
        Ok(mut conn) => {
            let mut sock = tcp;
            let r = handshake(&mut conn, &mut sock);
            (Stream::Server(Box::new(StreamOwned::new(conn, sock))), r)
        }
        Err(e) => (Stream::Plain(tcp), Err(io::Error::other(e))),
    }
}

/// Runs the client side of a TLS handshake on `tcp` with the server
/// `name` (STARTTLS got its 220).
///
/// # Errors
///
/// The handshake's error (a certificate that does not verify, no common
/// protocol, the connection lost).
pub fn connect_tls(
    tcp: TcpStream,
    config: Arc<rustls::ClientConfig>,
    name: ServerName<'static>,
) -> io::Result<Stream> {
    let mut conn = ClientConnection::new(config, name).map_err(io::Error::other)?;
    let mut sock = tcp;
    handshake(&mut conn, &mut sock)?;
    Ok(Stream::Client(Box::new(StreamOwned::new(conn, sock))))
}

/// Drives a handshake to its end.
fn handshake<D: SideData>(conn: &mut ConnectionCommon<D>, sock: &mut TcpStream) -> io::Result<()> {
    while conn.is_handshaking() {
        conn.complete_io(sock)?;
    }
    // The last flight (a client's Finished) may still be queued.
    while conn.wants_write() {
        conn.write_tls(sock)?;
    }
    Ok(())
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => s.read(buf),
            Stream::Server(s) => s.read(buf),
            Stream::Client(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => s.write(buf),
            Stream::Server(s) => s.write(buf),
            Stream::Client(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Plain(s) => s.flush(),
            Stream::Server(s) => s.flush(),
            Stream::Client(s) => s.flush(),
        }
    }
}
