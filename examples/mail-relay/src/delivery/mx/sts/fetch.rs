//! Fetching a policy: `GET https://mta-sts.DOMAIN/.well-known/mta-sts.txt`
//! (RFC 8461 §3.3), on the calling green thread.
//!
//! hyper's HTTP/1.1 client runs on a coro socket (coro's `hyper`
//! feature), its connection driven by a green thread of its own, ended
//! with the fetch;
//! TLS is tokio-rustls over the socket's tokio io traits, verifying the
//! certificate for `mta-sts.DOMAIN` against the trusted roots. Only a 200
//! with a `text/plain` body of at most [`MAX_POLICY`] octets is a policy:
//! a redirect is not followed, no cache is consulted, and the whole fetch
//! (address lookup, connection, handshake, request, body) ends within the
//! fetch timeout. The policy host's addresses pass the MX policy: a
//! loopback or private one is used only with `[mx]
//! allow_private_addresses`.

use std::future::poll_fn;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use coro::future::block_on;
use coro::net::dns::Resolver;
use coro::net::TcpStream;
use hyper::body::Body;
use hyper::header::{CONTENT_LENGTH, CONTENT_TYPE, HOST};
use hyper::{Request, StatusCode};
use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::delivery::mx::policy::{non_public, unusable};

/// The largest policy read (RFC 8461 §3.3 recommends 64 KiB).
pub const MAX_POLICY: usize = 64 * 1024;

/// Addresses of a policy host tried at most.
const ADDRESS_LIMIT: usize = 3;

/// How policies are fetched.
#[derive(Debug)]
pub struct Fetcher {
    /// Verifies the policy host's certificate.
    pub tls: Arc<rustls::ClientConfig>,
    /// The HTTPS port (443).
    pub port: u16,
    /// The whole fetch ends within this.
    pub timeout: Duration,
    /// Loopback and private addresses may be used.
    pub allow_private: bool,
}

impl Fetcher {
    /// The policy text of `domain`, fetched now.
    ///
    /// # Errors
    ///
    /// Why there is no policy to parse: the host's address, the
    /// connection, TLS, the HTTP status or type, the size, the timeout.
    pub fn fetch(&self, resolver: &Resolver, domain: &str) -> Result<String, String> {
        let host = format!("mta-sts.{domain}");
        let mut got = None;
        let expired =
            coro::with_timeout(self.timeout, || got = Some(self.get(resolver, &host))).is_err();
        let got = got.expect("the fetch runs to its end");
        match got {
            Err(e) if expired => Err(format!(
                "{e} (the fetch ran out of time, mta_sts.fetch_timeout = {:?})",
                self.timeout
            )),
            r => r,
        }
    }

    /// The host's addresses in turn until one connects; the request there.
    fn get(&self, resolver: &Resolver, host: &str) -> Result<String, String> {
        let addrs = resolver
            .lookup_ip(&format!("{host}."))
            .map_err(|e| format!("{host}: {e}"))?;
        let mut failures = Vec::new();
        for ip in addrs.into_iter().take(ADDRESS_LIMIT) {
            let refused = non_public(ip).filter(|_| !self.allow_private || unusable(ip));
            if let Some(kind) = refused {
                failures.push(format!("{host}[{ip}]: {kind}, not used"));
                continue;
            }
            match TcpStream::connect((ip, self.port)) {
                Ok(tcp) => return self.request(tcp, host, ip),
                Err(e) => failures.push(format!("connect to {host}[{ip}]:{}: {e}", self.port)),
            }
        }
        Err(failures.join("; "))
    }

    /// TLS on `tcp`, then the GET and its checks.
    fn request(&self, tcp: TcpStream, host: &str, ip: IpAddr) -> Result<String, String> {
        let at = format!("https://{host}[{ip}]:{}", self.port);
        let name = ServerName::try_from(host.to_owned()).map_err(|e| format!("{host}: {e}"))?;
        let connector = tokio_rustls::TlsConnector::from(self.tls.clone());
        let tls = block_on(connector.connect(name, tcp))
            .map_err(|e| format!("{at}: {e}"))?
            .map_err(|e| format!("{at}: TLS: {e}"))?;
        let (mut sender, conn) = block_on(hyper::client::conn::http1::handshake::<_, String>(
            HyperIo(tls),
        ))
        .map_err(|e| format!("{at}: {e}"))?
        .map_err(|e| format!("{at}: {e}"))?;
        let conn = coro::Builder::new()
            .name("mta-sts fetch".into())
            .spawn(move || block_on(conn))
            .map_err(|e| format!("{at}: {e}"))?;
        let got = get_policy(&mut sender, host).map_err(|e| format!("{at}: {e}"));
        // The connection is not kept: its thread drops it now (a join
        // past the fetch's deadline returns at once; the interrupted
        // thread ends by itself).
        drop(sender);
        let _ = conn.thread().interrupt();
        let _ = conn.join();
        got
    }
}

/// The request on an open connection, and the response's checks.
fn get_policy(
    sender: &mut hyper::client::conn::http1::SendRequest<String>,
    host: &str,
) -> Result<String, String> {
    let req = Request::get("/.well-known/mta-sts.txt")
        .header(HOST, host)
        .body(String::new())
        .map_err(|e| e.to_string())?;
    let resp = block_on(sender.send_request(req))
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
    let status = resp.status();
    if status != StatusCode::OK {
        let why = if status.is_redirection() {
            " (redirects are not followed, RFC 8461 §3.3)"
        } else {
            ""
        };
        return Err(format!("HTTP status {status}{why}"));
    }
    let media = resp
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let essence = media.split(';').next().unwrap_or("").trim();
    if !essence.eq_ignore_ascii_case("text/plain") {
        return Err(format!("the policy is of type {media:?}, not text/plain"));
    }
    let length = resp
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if length.is_some_and(|n| n > MAX_POLICY as u64) {
        return Err(format!("the policy is larger than {MAX_POLICY} octets"));
    }
    let mut body = resp.into_body();
    let mut text = Vec::new();
    loop {
        let frame = block_on(poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)))
            .map_err(|e| e.to_string())?;
        let Some(frame) = frame else { break };
        let frame = frame.map_err(|e| e.to_string())?;
        if let Ok(data) = frame.into_data() {
            if text.len() + data.len() > MAX_POLICY {
                return Err(format!("the policy is larger than {MAX_POLICY} octets"));
            }
            text.extend_from_slice(&data);
        }
    }
    String::from_utf8(text).map_err(|_| "the policy is not UTF-8".into())
}

/// A tokio io stream (tokio-rustls') as hyper's `rt::Read` and
/// `rt::Write`: the role of hyper-util's `TokioIo`, without its unsafe
/// code, reads going through a buffer on the stack.
struct HyperIo<T>(T);

impl<T: AsyncRead + Unpin> hyper::rt::Read for HyperIo<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        let mut chunk = [0u8; 8192];
        let n = buf.remaining().min(chunk.len());
        let mut rb = ReadBuf::new(&mut chunk[..n]);
        ready!(Pin::new(&mut self.get_mut().0).poll_read(cx, &mut rb))?;
        buf.put_slice(rb.filled());
        Poll::Ready(Ok(()))
    }
}

impl<T: AsyncWrite + Unpin> hyper::rt::Write for HyperIo<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().0).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_shutdown(cx)
    }
}
