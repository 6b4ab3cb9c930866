//! rustls configurations: the server's for STARTTLS (the certificate chain
//! and key from PEM files), the SMTP client's for upstreams (opportunistic
//! without certificate checks, or verified against a CA bundle), and the
//! verifying one of MTA-STS (the system's trusted roots and an extra CA
//! file).

use std::io;
use std::path::Path;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

use crate::config::TlsLevel;

/// Where Debian, Fedora and the BSDs keep the system's CA bundle.
const SYSTEM_BUNDLES: [&str; 3] = [
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/cert.pem",
];

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn bad(p: &Path, e: &dyn std::fmt::Display) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("tls: {}: {e}", p.display()),
    )
}

/// The certificates in the PEM file `path`.
fn certificates(path: &Path) -> io::Result<Vec<CertificateDer<'static>>> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
        .map_err(|e| bad(path, &e))?
        .collect::<Result<_, _>>()
        .map_err(|e| bad(path, &e))?;
    if certs.is_empty() {
        return Err(bad(path, &"no certificate in the file"));
    }
    Ok(certs)
}

/// Loads `cert` (a chain, leaf first) and `key` into a rustls server
/// configuration.
///
/// # Errors
///
/// A file that cannot be read or parsed, or a key that does not fit the
/// certificate; the message names the file.
pub fn server_config(cert: &Path, key: &Path) -> io::Result<Arc<rustls::ServerConfig>> {
    let certs = certificates(cert)?;
    let key_der = PrivateKeyDer::from_pem_file(key).map_err(|e| bad(key, &e))?;
    let config = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(io::Error::other)?
        .with_no_client_auth()
        .with_single_cert(certs, key_der)
        .map_err(|e| bad(key, &e))?;
    Ok(Arc::new(config))
}

/// The SMTP client's configuration for `level`; `None` for
/// [`TlsLevel::None`]. `verify` checks certificates against `ca_file`, or
/// the system's bundle when it is not set.
///
/// # Errors
///
/// A CA file that cannot be read or holds no certificate; no system bundle
/// for `verify` without `ca_file`. The message names the setting.
pub fn client_config(
    level: TlsLevel,
    ca_file: Option<&Path>,
) -> io::Result<Option<Arc<rustls::ClientConfig>>> {
    let builder = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(io::Error::other)?;
    let config = match level {
        TlsLevel::None => return Ok(None),
        TlsLevel::May | TlsLevel::Encrypt => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(Unchecked(provider())))
            .with_no_client_auth(),
        TlsLevel::Verify => {
            let path = match ca_file {
                Some(p) => p.to_owned(),
                None => SYSTEM_BUNDLES
                    .iter()
                    .map(Path::new)
                    .find(|p| p.exists())
                    .ok_or_else(|| {
                        io::Error::new(
                            io::ErrorKind::NotFound,
                            "smtp.tls_ca_file: not set, and no system CA bundle found",
                        )
                    })?
                    .to_owned(),
            };
            let mut roots = rustls::RootCertStore::empty();
            let certs = certificates(&path)
                .map_err(|e| io::Error::new(e.kind(), format!("smtp.tls_ca_file: {e}")))?;
            let (added, _) = roots.add_parsable_certificates(certs);
            if added == 0 {
                return Err(bad(&path, &"smtp.tls_ca_file: no usable CA certificate"));
            }
            builder.with_root_certificates(roots).with_no_client_auth()
        }
    };
    Ok(Some(Arc::new(config)))
}

/// A client configuration that verifies certificates against the
/// system's trusted roots (read by rustls-native-certs: the store that
/// `ca-certificates` and the operator maintain, or `SSL_CERT_FILE` /
/// `SSL_CERT_DIR`) and the CA certificates in `extra` (PEM), for
/// MTA-STS: policy hosts, and mail exchangers under a policy. Returns it
/// with the number of roots (0: nothing can be verified; the caller
/// warns).
///
/// # Errors
///
/// An `extra` file that cannot be read or holds no usable CA certificate;
/// the message names `setting`.
pub fn trusted_config(
    extra: Option<&Path>,
    setting: &str,
) -> io::Result<(Arc<rustls::ClientConfig>, usize)> {
    let mut roots = rustls::RootCertStore::empty();
    let native = rustls_native_certs::load_native_certs();
    for e in &native.errors {
        log::warn!("tls: reading the system's trusted certificates: {e}");
    }
    roots.add_parsable_certificates(native.certs);
    if let Some(path) = extra {
        let certs =
            certificates(path).map_err(|e| io::Error::new(e.kind(), format!("{setting}: {e}")))?;
        let (added, _) = roots.add_parsable_certificates(certs);
        if added == 0 {
            return Err(bad(path, &format!("{setting}: no usable CA certificate")));
        }
    }
    let n = roots.len();
    let config = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(io::Error::other)?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok((Arc::new(config), n))
}

/// The name to check a server's certificate against: its host name, or
/// its address when it was given as one.
pub fn server_name(host: &str) -> io::Result<ServerName<'static>> {
    ServerName::try_from(host.to_owned()).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{host:?} cannot be checked against a certificate: {e}"),
        )
    })
}

/// Opportunistic TLS's certificate "check": any certificate is taken
/// (an unauthenticated channel still defeats passive eavesdroppers), but
/// the handshake's signatures are verified, so the peer must hold the key
/// of the certificate it shows.
#[derive(Debug)]
struct Unchecked(Arc<CryptoProvider>);

impl ServerCertVerifier for Unchecked {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
