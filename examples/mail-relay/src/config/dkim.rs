//! The `[dkim]` table: the domains whose outgoing mail is signed, each
//! with its selector and private key file.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::ConfigError;

/// One signing domain (`[dkim."example.org"]`).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct DkimDomain {
    /// The selector: the public key is published at
    /// `<selector>._domainkey.<domain>`.
    pub selector: String,
    /// The private key, PEM: RSA (PKCS#1 or PKCS#8; signs rsa-sha256) or
    /// Ed25519 (PKCS#8; signs ed25519-sha256). Read at start: a key that
    /// is missing or unreadable stops the relay there.
    pub key_file: PathBuf,
}

/// Checks the names (the keys are read when the relay starts).
pub(super) fn check(domains: &BTreeMap<String, DkimDomain>) -> Result<(), ConfigError> {
    let label = |s: &str| {
        !s.is_empty()
            && s.split('.').all(|l| {
                !l.is_empty()
                    && l.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            })
    };
    for (domain, d) in domains {
        if !label(domain) {
            return Err(ConfigError(format!("dkim.{domain:?}: not a domain name")));
        }
        if !label(&d.selector) {
            return Err(ConfigError(format!(
                "dkim.{domain:?}.selector: {:?} is not a selector",
                d.selector
            )));
        }
    }
    Ok(())
}
