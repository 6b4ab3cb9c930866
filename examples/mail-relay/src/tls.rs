//! STARTTLS's server configuration: rustls with the certificate chain and
//! key from PEM files.

use std::io;
use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// Loads `cert` (a chain, leaf first) and `key` into a rustls server
/// configuration.
///
/// # Errors
///
/// A file that cannot be read or parsed, or a key that does not fit the
/// certificate; the message names the file.
pub fn server_config(cert: &Path, key: &Path) -> io::Result<Arc<rustls::ServerConfig>> {
    let bad = |p: &Path, e: &dyn std::fmt::Display| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("tls: {}: {e}", p.display()),
        )
    };
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .map_err(|e| bad(cert, &e))?
        .collect::<Result<_, _>>()
        .map_err(|e| bad(cert, &e))?;
    if certs.is_empty() {
        return Err(bad(cert, &"no certificate in the file"));
    }
    let key_der = PrivateKeyDer::from_pem_file(key).map_err(|e| bad(key, &e))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(io::Error::other)?
        .with_no_client_auth()
        .with_single_cert(certs, key_der)
        .map_err(|e| bad(key, &e))?;
    Ok(Arc::new(config))
}
