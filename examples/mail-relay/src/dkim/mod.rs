//! DKIM signing of outgoing mail (RFC 6376; ed25519-sha256, RFC 8463):
//! the configured domains' keys, and a [`Transport`] wrapper that signs
//! each message before it leaves over SMTP.
//!
//! # Design
//!
//! A message is signed when the domain of its `From:` header is one of
//! `[dkim]`'s, with that domain's key (`d=` is the domain, `s=` its
//! selector), relaxed/relaxed, over the header fields of RFC 6376
//! §5.4.1's list that the message has. The `DKIM-Signature:` field goes on
//! top. Signing happens at each delivery attempt to an SMTP destination
//! (relayhost, routes, MX), so the spooled message stays as it was
//! received and local (Maildir) delivery is never signed. Keys are read
//! and checked at start.
//!
//! The crypto is ring's (RSASSA-PKCS1-v1_5 with SHA-256; Ed25519 over the
//! SHA-256 of the signed data, as RFC 8463 says); the canonicalisation is
//! [`canon`]'s, from the RFC's text. Every signature is checked by an
//! independent verifier (dkimpy) in `tests/dkim.rs`.

pub mod canon;

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use ring::rand::SystemRandom;
use ring::signature::{Ed25519KeyPair, RsaKeyPair, RSA_PKCS1_SHA256};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::PrivateKeyDer;

use crate::config::DkimDomain;
use crate::delivery::{Detail, Job, Outcome, Status, Transport};
use crate::spool::Message;

/// The header fields signed when present (RFC 6376 §5.4.1's list).
pub const SIGNED_HEADERS: &[&str] = &[
    "From",
    "Reply-To",
    "Subject",
    "Date",
    "To",
    "Cc",
    "Resent-Date",
    "Resent-From",
    "Resent-To",
    "Resent-Cc",
    "In-Reply-To",
    "References",
    "List-Id",
    "List-Help",
    "List-Unsubscribe",
    "List-Subscribe",
    "List-Post",
    "List-Owner",
    "List-Archive",
    "Message-ID",
    "MIME-Version",
    "Content-Type",
    "Content-Transfer-Encoding",
];

/// A private key.
enum Key {
    /// rsa-sha256.
    Rsa(RsaKeyPair),
    /// ed25519-sha256.
    Ed25519(Ed25519KeyPair),
}

impl Key {
    /// The `a=` tag's value.
    fn algorithm(&self) -> &'static str {
        match self {
            Key::Rsa(_) => "rsa-sha256",
            Key::Ed25519(_) => "ed25519-sha256",
        }
    }

    /// The signature of `data` (the canonical header fields).
    fn sign(&self, data: &[u8], rng: &SystemRandom) -> Result<Vec<u8>, String> {
        match self {
            Key::Rsa(k) => {
                let mut sig = vec![0; k.public().modulus_len()];
                k.sign(&RSA_PKCS1_SHA256, rng, data, &mut sig)
                    .map_err(|_| "RSA signing failed".to_owned())?;
                Ok(sig)
            }
            Key::Ed25519(k) => {
                let hash = ring::digest::digest(&ring::digest::SHA256, data);
                Ok(k.sign(hash.as_ref()).as_ref().to_vec())
            }
        }
    }
}

/// One signing domain.
struct Signer {
    selector: String,
    key: Key,
}

/// The signing domains and their keys.
pub struct Dkim {
    /// By lower-cased domain.
    signers: HashMap<String, Signer>,
    rng: SystemRandom,
}

impl fmt::Debug for Dkim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut domains: Vec<&String> = self.signers.keys().collect();
        domains.sort();
        f.debug_struct("Dkim").field("domains", &domains).finish()
    }
}

impl Dkim {
    /// Reads every domain's key.
    ///
    /// # Errors
    ///
    /// Naming the domain and the file: a key file that is missing,
    /// unreadable, not PEM, or not an RSA (2048 to 4096 bits) or Ed25519
    /// private key.
    pub fn load(domains: &BTreeMap<String, DkimDomain>) -> Result<Dkim, String> {
        let mut signers = HashMap::new();
        for (domain, d) in domains {
            let what = format!("dkim.{domain:?}.key_file {}", d.key_file.display());
            let pem = std::fs::read(&d.key_file).map_err(|e| format!("{what}: {e}"))?;
            let key = key_from_pem(&pem).map_err(|e| format!("{what}: {e}"))?;
            signers.insert(
                domain.to_lowercase(),
                Signer {
                    selector: d.selector.clone(),
                    key,
                },
            );
        }
        Ok(Dkim {
            signers,
            rng: SystemRandom::new(),
        })
    }

    /// `data` with a `DKIM-Signature:` field on top, when its `From:`
    /// domain signs; `Ok(None)` when it does not.
    ///
    /// # Errors
    ///
    /// When the crypto fails.
    pub fn sign(&self, data: &[u8]) -> Result<Option<Vec<u8>>, String> {
        let Some(domain) = from_domain(data) else {
            return Ok(None);
        };
        let Some(signer) = self.signers.get(&domain) else {
            return Ok(None);
        };
        let (fields, body) = canon::split_message(data);
        let bh = ring::digest::digest(&ring::digest::SHA256, &canon::relaxed_body(body));
        let (names, chosen) = canon::select(&fields, SIGNED_HEADERS);
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        // Folded between tags; relaxed canonicalisation unfolds it the same
        // way for the verifier.
        let field = format!(
            "DKIM-Signature: v=1; a={}; c=relaxed/relaxed; d={domain}; s={};\r\n\tt={now}; h={};\r\n\tbh={};\r\n\tb=",
            signer.key.algorithm(),
            signer.selector,
            names.join(":"),
            canon::base64(bh.as_ref())
        );
        let mut signed: Vec<u8> = chosen
            .iter()
            .flat_map(|f| canon::relaxed_header(f))
            .collect();
        let mut own = canon::relaxed_header(field.as_bytes());
        own.truncate(own.len() - 2); // the signature's own field has no CRLF
        signed.extend_from_slice(&own);
        let sig = signer
            .key
            .sign(&signed, &self.rng)
            .map_err(|e| format!("DKIM signing for {domain} failed: {e}"))?;
        let b = canon::base64(&sig);
        let mut out = Vec::with_capacity(field.len() + b.len() + data.len() + 16);
        out.extend_from_slice(field.as_bytes());
        for (i, chunk) in b.as_bytes().chunks(72).enumerate() {
            if i > 0 {
                out.extend_from_slice(b"\r\n\t ");
            }
            out.extend_from_slice(chunk);
        }
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(data);
        Ok(Some(out))
    }
}

/// An RSA or Ed25519 private key from PEM.
fn key_from_pem(pem: &[u8]) -> Result<Key, String> {
    let der =
        PrivateKeyDer::from_pem_slice(pem).map_err(|e| format!("not a PEM private key ({e:?})"))?;
    match der {
        PrivateKeyDer::Pkcs8(p8) => {
            let der = p8.secret_pkcs8_der();
            if let Ok(k) = Ed25519KeyPair::from_pkcs8_maybe_unchecked(der) {
                return Ok(Key::Ed25519(k));
            }
            RsaKeyPair::from_pkcs8(der)
                .map(Key::Rsa)
                .map_err(|e| format!("neither an Ed25519 nor a usable RSA key ({e})"))
        }
        PrivateKeyDer::Pkcs1(p1) => RsaKeyPair::from_der(p1.secret_pkcs1_der())
            .map(Key::Rsa)
            .map_err(|e| format!("not a usable RSA key ({e}; 2048 to 4096 bits)")),
        _ => Err("an EC (SEC1) key: DKIM signs with RSA or Ed25519".into()),
    }
}

/// The lower-cased domain of the first address of the `From:` header.
pub fn from_domain(data: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(data);
    let mut value: Option<String> = None;
    for line in text.split("\r\n") {
        if line.is_empty() {
            break; // end of the header
        }
        match &mut value {
            Some(v) if line.starts_with([' ', '\t']) => v.push_str(line),
            Some(_) => break,
            None => {
                if let Some((name, v)) = line.split_once(':') {
                    if name.trim().eq_ignore_ascii_case("from") {
                        value = Some(v.to_owned());
                    }
                }
            }
        }
    }
    let value = value?;
    // The first address: inside <...> if there is one.
    let addr = match (value.find('<'), value.find('>')) {
        (Some(a), Some(b)) if a < b => &value[a + 1..b],
        _ => value.split(',').next().unwrap_or(""),
    };
    let domain = addr.rsplit_once('@')?.1;
    let domain: String = domain
        .chars()
        .take_while(|c| !c.is_whitespace() && !matches!(c, '>' | ',' | ';' | '(' | ')'))
        .collect();
    let domain = domain.trim_end_matches('.').to_ascii_lowercase();
    (!domain.is_empty()).then_some(domain)
}

/// A transport whose messages are signed before `inner` sends them.
pub struct Signing {
    inner: Rc<dyn Transport>,
    dkim: Rc<Dkim>,
}

impl fmt::Debug for Signing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Signing")
            .field("inner", &self.inner.describe())
            .field("dkim", &self.dkim)
            .finish()
    }
}

impl Signing {
    /// `inner`, signing with `dkim`.
    pub fn new(inner: Rc<dyn Transport>, dkim: Rc<Dkim>) -> Signing {
        Signing { inner, dkim }
    }
}

impl Transport for Signing {
    fn deliver(&self, jobs: &[Job]) -> Vec<Outcome> {
        let mut signed = Vec::with_capacity(jobs.len());
        let mut failed: Vec<Option<Outcome>> = Vec::with_capacity(jobs.len());
        for job in jobs {
            match self.dkim.sign(&job.msg.data) {
                Ok(Some(data)) => {
                    let msg = Arc::new(Message {
                        env: job.msg.env.clone(),
                        data,
                    });
                    signed.push(Job {
                        msg,
                        rcpts: job.rcpts.clone(),
                    });
                    failed.push(None);
                }
                Ok(None) => {
                    signed.push(job.clone());
                    failed.push(None);
                }
                Err(e) => {
                    // Not sent unsigned: a receiver applying DMARC would
                    // reject or quarantine it.
                    log::error!("{}: {e}", job.msg.env.id);
                    let d = Detail::local("4.7.0", e);
                    failed.push(Some(Outcome::all("none", job, Status::Deferred(d))));
                }
            }
        }
        let mut sent = self
            .inner
            .deliver(
                &signed
                    .into_iter()
                    .zip(&failed)
                    .filter(|(_, f)| f.is_none())
                    .map(|(j, _)| j)
                    .collect::<Vec<_>>(),
            )
            .into_iter();
        failed
            .into_iter()
            .map(|f| f.unwrap_or_else(|| sent.next().expect("one outcome per job")))
            .collect()
    }

    fn describe(&self) -> String {
        format!("{} (DKIM-signed)", self.inner.describe())
    }

    fn batch_limit(&self) -> usize {
        self.inner.batch_limit()
    }

    fn concurrency(&self) -> usize {
        self.inner.concurrency()
    }

    fn resume(&self) {
        self.inner.resume();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn from_domains() {
        let d = |h: &str| from_domain(format!("{h}\r\n\r\nbody\r\n").as_bytes());
        assert_eq!(d("From: a@Example.ORG").as_deref(), Some("example.org"));
        assert_eq!(
            d("Subject: x\r\nfrom: \"A, B\" <a@b.test>").as_deref(),
            Some("b.test")
        );
        assert_eq!(
            d("From: A\r\n <a@folded.test>").as_deref(),
            Some("folded.test")
        );
        assert_eq!(
            d("From: a@x.test (comment), b@y.test").as_deref(),
            Some("x.test")
        );
        assert_eq!(d("Subject: no from"), None);
        assert_eq!(
            from_domain(b"Subject: x\r\n\r\nFrom: a@body.test\r\n"),
            None
        );
    }

    #[test]
    fn bad_keys_are_named() {
        let dir = std::env::temp_dir().join(format!("relay-dkim-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let junk = dir.join("junk.pem");
        std::fs::write(&junk, "not a key").unwrap();
        for (file, want) in [
            (dir.join("missing.pem"), "No such file"),
            (junk, "not a PEM private key"),
        ] {
            let domains = BTreeMap::from([(
                "example.test".to_owned(),
                DkimDomain {
                    selector: "s".into(),
                    key_file: file.clone(),
                },
            )]);
            let e = Dkim::load(&domains).unwrap_err();
            assert!(
                e.contains("dkim.\"example.test\".key_file") && e.contains(want),
                "{e}"
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
