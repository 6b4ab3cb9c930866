//! What the MTA-STS tests run against: a test CA (rcgen) issuing server
//! certificates, an HTTPS server for policies (rustls over std sockets,
//! one thread per connection), and an SMTP sink offering STARTTLS with a
//! certificate from the CA (or none), which keeps what it receives.

#![allow(dead_code)]

use std::collections::HashMap;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// A test certificate authority.
pub struct Ca {
    issuer: Issuer<'static, KeyPair>,
    der: CertificateDer<'static>,
    /// Its certificate, PEM (the relay's `[mta_sts] ca_file`).
    pub file: PathBuf,
}

impl Ca {
    /// A new CA, its certificate written into `dir`.
    pub fn new(dir: &Path) -> Ca {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, "mail-relay MTA-STS test CA");
        let cert = params.self_signed(&key).unwrap();
        let file = dir.join("sts-ca.pem");
        std::fs::write(&file, cert.pem()).unwrap();
        Ca {
            der: cert.der().clone(),
            issuer: Issuer::new(params, key),
            file,
        }
    }

    /// A rustls server configuration with a certificate for `names`.
    pub fn server(&self, names: &[&str]) -> Arc<rustls::ServerConfig> {
        let key = KeyPair::generate().unwrap();
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let cert = CertificateParams::new(names)
            .unwrap()
            .signed_by(&key, &self.issuer)
            .unwrap();
        let chain = vec![cert.der().clone(), self.der.clone()];
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .unwrap();
        Arc::new(config)
    }
}

/// What the policy server answers for one host.
#[derive(Clone)]
pub enum Answer {
    /// A status line's code and reason, headers, a body.
    Http(u16, Vec<(String, String)>, Vec<u8>),
    /// Nothing: the request is read and never answered.
    Stall,
}

impl Answer {
    /// 200, `text/plain`, `policy`.
    pub fn policy(policy: &str) -> Answer {
        Answer::typed("text/plain; charset=utf-8", policy.as_bytes())
    }

    /// 200 with this content type and body.
    pub fn typed(content_type: &str, body: &[u8]) -> Answer {
        Answer::Http(
            200,
            vec![("Content-Type".into(), content_type.into())],
            body.to_vec(),
        )
    }
}

/// A listener whose connections each get a thread running `serve`, until
/// it is stopped (then its port is refused).
struct Acceptor {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Acceptor {
    fn start(listener: TcpListener, serve: impl Fn(TcpStream) + Send + Sync + 'static) -> Acceptor {
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let serve = Arc::new(serve);
        let thread = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if s.load(Ordering::SeqCst) {
                    return; // the listener closes here
                }
                let Ok(conn) = conn else { continue };
                let serve = serve.clone();
                std::thread::spawn(move || serve(conn));
            }
        });
        Acceptor {
            addr,
            stop,
            thread: Some(thread),
        }
    }

    fn stop(&mut self) {
        if let Some(t) = self.thread.take() {
            self.stop.store(true, Ordering::SeqCst);
            let _ = TcpStream::connect(self.addr); // wakes the accept
            let _ = t.join();
        }
    }
}

impl Drop for Acceptor {
    fn drop(&mut self) {
        self.stop();
    }
}

/// An HTTPS server for policies on 127.0.0.1, answering by `Host:`.
pub struct PolicyServer {
    pub port: u16,
    answers: Arc<Mutex<HashMap<String, Answer>>>,
    /// Requests seen, as `host path`.
    pub requests: Arc<Mutex<Vec<String>>>,
    acceptor: Acceptor,
}

impl PolicyServer {
    /// Starts on a free port with `tls` (a certificate for the hosts).
    pub fn start(tls: Arc<rustls::ServerConfig>) -> PolicyServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        PolicyServer::serve(listener, tls)
    }

    /// Starts on `port` (after a stop).
    pub fn start_on(port: u16, tls: Arc<rustls::ServerConfig>) -> PolicyServer {
        let listener = TcpListener::bind(("127.0.0.1", port)).unwrap();
        PolicyServer::serve(listener, tls)
    }

    fn serve(listener: TcpListener, tls: Arc<rustls::ServerConfig>) -> PolicyServer {
        let port = listener.local_addr().unwrap().port();
        let answers: Arc<Mutex<HashMap<String, Answer>>> = Arc::default();
        let requests: Arc<Mutex<Vec<String>>> = Arc::default();
        let (a, r) = (answers.clone(), requests.clone());
        let acceptor = Acceptor::start(listener, move |conn| {
            let _ = answer(conn, tls.clone(), &a, &r);
        });
        PolicyServer {
            port,
            answers,
            requests,
            acceptor,
        }
    }

    /// What to answer for `host` from now on.
    pub fn set(&self, host: &str, answer: Answer) {
        self.answers.lock().unwrap().insert(host.to_owned(), answer);
    }

    /// Requests for `host` so far.
    pub fn requests_for(&self, host: &str) -> usize {
        let prefix = format!("{host} ");
        let r = self.requests.lock().unwrap();
        r.iter().filter(|l| l.starts_with(&prefix)).count()
    }

    /// Stops accepting (the port is then refused).
    pub fn stop(&mut self) {
        self.acceptor.stop();
    }
}

/// One connection: TLS, one request, the answer for its host.
fn answer(
    conn: TcpStream,
    tls: Arc<rustls::ServerConfig>,
    answers: &Mutex<HashMap<String, Answer>>,
    requests: &Mutex<Vec<String>>,
) -> io::Result<()> {
    conn.set_read_timeout(Some(Duration::from_secs(30)))?;
    let server = rustls::ServerConnection::new(tls).map_err(io::Error::other)?;
    let mut s = BufReader::new(rustls::StreamOwned::new(server, conn));
    let mut head = Vec::new();
    loop {
        let mut line = String::new();
        if s.read_line(&mut line)? == 0 {
            return Ok(());
        }
        if line == "\r\n" {
            break;
        }
        head.push(line.trim_end().to_owned());
    }
    let path = head
        .first()
        .and_then(|l| l.split(' ').nth(1))
        .unwrap_or("")
        .to_owned();
    let host = head
        .iter()
        .find_map(|l| {
            l.split_once(':')
                .filter(|(k, _)| k.eq_ignore_ascii_case("host"))
        })
        .map(|(_, v)| v.trim().to_owned())
        .unwrap_or_default();
    requests.lock().unwrap().push(format!("{host} {path}"));
    let a = answers.lock().unwrap().get(&host).cloned();
    let (code, headers, body) = match a {
        Some(Answer::Http(code, headers, body)) => (code, headers, body),
        Some(Answer::Stall) => {
            std::thread::sleep(Duration::from_secs(60));
            return Ok(());
        }
        None => (404, vec![], b"no policy here\n".to_vec()),
    };
    let mut out = format!(
        "HTTP/1.1 {code} X\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (k, v) in headers {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    out.push_str("\r\n");
    let w = s.get_mut();
    w.write_all(out.as_bytes())?;
    w.write_all(&body)?;
    w.flush()?;
    w.conn.send_close_notify();
    w.flush()
}

/// An SMTP sink on `ip`:`port` offering STARTTLS with `tls` (none: no
/// STARTTLS), keeping each message it is given.
pub struct TlsSink {
    /// Messages received (their data), with whether TLS carried them.
    pub messages: Arc<Mutex<Vec<(bool, String)>>>,
    /// Connections accepted.
    pub connections: Arc<Mutex<usize>>,
    _acceptor: Acceptor,
}

impl TlsSink {
    /// Starts the sink.
    pub fn start(ip: [u8; 4], port: u16, tls: Option<Arc<rustls::ServerConfig>>) -> TlsSink {
        let listener = TcpListener::bind(SocketAddr::from((Ipv4Addr::from(ip), port))).unwrap();
        let messages: Arc<Mutex<Vec<(bool, String)>>> = Arc::default();
        let connections: Arc<Mutex<usize>> = Arc::default();
        let (m, c) = (messages.clone(), connections.clone());
        let acceptor = Acceptor::start(listener, move |conn| {
            *c.lock().unwrap() += 1;
            let _ = smtp(conn, tls.clone(), &m);
        });
        TlsSink {
            messages,
            connections,
            _acceptor: acceptor,
        }
    }

    /// The messages received so far.
    pub fn received(&self) -> Vec<(bool, String)> {
        self.messages.lock().unwrap().clone()
    }
}

/// A stream before or after STARTTLS.
trait Io: Read + Write {}
impl<T: Read + Write> Io for T {}

/// One SMTP session.
fn smtp(
    conn: TcpStream,
    tls: Option<Arc<rustls::ServerConfig>>,
    messages: &Mutex<Vec<(bool, String)>>,
) -> io::Result<()> {
    conn.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut plain = Some(conn.try_clone()?);
    let mut s: BufReader<Box<dyn Io>> = BufReader::new(Box::new(conn));
    let mut secure = false;
    s.get_mut().write_all(b"220 sink.test ESMTP\r\n")?;
    loop {
        let mut line = String::new();
        if s.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let verb = line.trim_end().to_ascii_uppercase();
        let reply: &[u8] = if verb.starts_with("EHLO") {
            if tls.is_some() && !secure {
                b"250-sink.test\r\n250-8BITMIME\r\n250 STARTTLS\r\n"
            } else {
                b"250-sink.test\r\n250 8BITMIME\r\n"
            }
        } else if verb == "STARTTLS" && tls.is_some() && !secure {
            s.get_mut().write_all(b"220 2.0.0 go ahead\r\n")?;
            let server =
                rustls::ServerConnection::new(tls.clone().unwrap()).map_err(io::Error::other)?;
            let tcp = plain.take().unwrap();
            s = BufReader::new(Box::new(rustls::StreamOwned::new(server, tcp)));
            secure = true;
            continue;
        } else if verb == "DATA" {
            s.get_mut().write_all(b"354 go on\r\n")?;
            let mut data = String::new();
            loop {
                let mut l = String::new();
                if s.read_line(&mut l)? == 0 {
                    return Ok(());
                }
                if l == ".\r\n" {
                    break;
                }
                data.push_str(&l);
            }
            messages.lock().unwrap().push((secure, data));
            b"250 2.0.0 kept\r\n"
        } else if verb.starts_with("QUIT") {
            s.get_mut().write_all(b"221 bye\r\n")?;
            return Ok(());
        } else {
            b"250 ok\r\n"
        };
        s.get_mut().write_all(reply)?;
    }
}
