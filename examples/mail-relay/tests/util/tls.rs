//! A test CA (made with rcgen) and a server certificate it signs, as PEM
//! files: what a client verifies the relay's TLS against.

use std::path::{Path, PathBuf};

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};

/// The CA's certificate and a server certificate and key it issued.
pub struct TestCa {
    /// The CA's certificate (what clients trust).
    pub ca: PathBuf,
    /// The server's certificate chain (its own, then the CA's).
    pub cert: PathBuf,
    /// The server's private key.
    pub key: PathBuf,
}

impl TestCa {
    /// A CA in `dir` and a certificate from it for `names` (host names or
    /// IP addresses).
    pub fn new(dir: &Path, names: &[&str]) -> TestCa {
        let ca_key = KeyPair::generate().unwrap();
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "mail-relay test CA");
        let ca_cert = ca_params.self_signed(&ca_key).unwrap();
        let issuer = Issuer::new(ca_params, ca_key);
        let key = KeyPair::generate().unwrap();
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let mut params = CertificateParams::new(names).unwrap();
        params
            .distinguished_name
            .push(DnType::CommonName, "relay.test");
        let cert = params.signed_by(&key, &issuer).unwrap();
        let out = TestCa {
            ca: dir.join("ca.pem"),
            cert: dir.join("cert.pem"),
            key: dir.join("key.pem"),
        };
        std::fs::write(&out.ca, ca_cert.pem()).unwrap();
        std::fs::write(&out.cert, format!("{}{}", cert.pem(), ca_cert.pem())).unwrap();
        std::fs::write(&out.key, key.serialize_pem()).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&out.key, std::fs::Permissions::from_mode(0o600)).unwrap();
        out
    }

    /// The relay's `[tls]` table for this certificate.
    pub fn tls_table(&self) -> String {
        format!(
            "[tls]\ncert = \"{}\"\nkey = \"{}\"\n",
            self.cert.display(),
            self.key.display()
        )
    }
}
