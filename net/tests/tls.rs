//! TLS through std::io: rustls' `StreamOwned` over coro's `TcpStream`, a
//! certificate made in the test with rcgen. A synchronous library runs on
//! green threads unchanged.

mod util;

use std::io::{self, BufRead, BufReader, Read, Write};
use std::sync::Arc;

use coro::net::{TcpListener, TcpStream};
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use rustls::{
    ClientConfig, ClientConnection, RootCertStore, ServerConfig, ServerConnection, StreamOwned,
};
use util::{pattern, run};

fn configs() -> (Arc<ServerConfig>, Arc<ClientConfig>) {
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let cert_der = cert.cert.der().clone();
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(cert.signing_key.serialize_der()));
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let server = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert_der.clone()], key)
        .unwrap();
    let mut roots = RootCertStore::empty();
    roots.add(cert_der).unwrap();
    let client = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    (Arc::new(server), Arc::new(client))
}

#[test]
fn tls_echo() -> io::Result<()> {
    let (server_cfg, client_cfg) = configs();
    run(move || {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let server = coro::spawn(move || -> io::Result<()> {
            for _ in 0..2 {
                let (tcp, _) = listener.accept()?;
                let cfg = server_cfg.clone();
                coro::spawn(move || -> io::Result<()> {
                    let conn = ServerConnection::new(cfg).map_err(io::Error::other)?;
                    // Line-oriented echo through BufReader, all plain std::io.
                    let mut tls = BufReader::new(StreamOwned::new(conn, tcp));
                    let mut line = Vec::new();
                    loop {
                        line.clear();
                        if tls.read_until(b'\n', &mut line)? == 0 {
                            return Ok(());
                        }
                        tls.get_mut().write_all(&line)?;
                        tls.get_mut().flush()?;
                    }
                });
            }
            Ok(())
        });

        // Two clients at once, each sending many lines (64 KiB in all).
        let mut clients = Vec::new();
        for id in 0..2u8 {
            let cfg = client_cfg.clone();
            clients.push(coro::spawn(move || -> io::Result<()> {
                let name = ServerName::try_from("localhost").unwrap();
                let conn = ClientConnection::new(cfg, name).map_err(io::Error::other)?;
                let mut tls = StreamOwned::new(conn, TcpStream::connect(addr)?);
                let mut sent = Vec::new();
                for i in 0..64 {
                    let mut line: Vec<u8> = pattern(1023, id.wrapping_add(i))
                        .into_iter()
                        .map(|b| b'a' + b % 26)
                        .collect();
                    line.push(b'\n');
                    tls.write_all(&line)?;
                    sent.extend_from_slice(&line);
                }
                tls.flush()?;
                let mut back = vec![0; sent.len()];
                tls.read_exact(&mut back)?;
                assert!(back == sent, "TLS echo corrupted");
                tls.conn.send_close_notify();
                tls.flush()?;
                Ok(())
            }));
        }
        for c in clients {
            c.join().unwrap()?;
        }
        server.join().unwrap()
    })
}
