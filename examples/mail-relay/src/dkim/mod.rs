//! DKIM signing of outgoing mail (RFC 6376; ed25519-sha256, RFC 8463):
//! the configured domains' keys, and a [`Transport`] wrapper that signs
//! each message before it leaves over SMTP.
//!
//! # What is signed
//!
//! Only mail from a trusted source
//! ([`Envelope::trusted`](crate::spool::Envelope::trusted): a client in
//! `mynetworks`, an authenticated submission, or the relay's own bounces),
//! as OpenDKIM's `InternalHosts`: a signature says the domain vouches for
//! the message, and a stranger who writes `From: ceo@<our domain>` must
//! not get one. Such a message is signed when the domain of its `From:`
//! header is one of `[dkim]`'s, with that domain's key (`d=` is the
//! domain, `s=` its selector), relaxed/relaxed, over the header fields of
//! RFC 6376 §5.4.1's list that the message has. The `DKIM-Signature:`
//! field goes on top. Signing happens at each delivery attempt to an SMTP
//! destination (relayhost, routes, MX), so the spooled message stays as
//! it was received and local (Maildir) delivery is never signed.
//!
//! # Design
//!
//! The content is read from the spool in one pass on the blocking pool
//! ([`scan`]): the header fields to sign are kept, the body is hashed as
//! it goes, so a message of any size costs a chunk of memory, and the
//! hashing and the signature stay off the relay's thread. The keys are
//! read at start and again at every SIGHUP ([`Dkim::reload`]): a new key
//! is used from the next message on, a key that does not load keeps the
//! old set.
//!
//! The crypto is ring's (RSASSA-PKCS1-v1_5 with SHA-256; Ed25519 over the
//! SHA-256 of the signed data, as RFC 8463 says); the canonicalisation is
//! [`canon`]'s, from the RFC's text. Every signature is checked by an
//! independent verifier (dkimpy) in `tests/dkim.rs`.

pub mod canon;
mod scan;

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::Path;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use ring::rand::SystemRandom;
use ring::signature::{Ed25519KeyPair, RsaKeyPair, RSA_PKCS1_SHA256};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::PrivateKeyDer;

use crate::config::DkimDomain;
use crate::delivery::{Detail, Job, Outcome, Status, Transport};
use crate::spool::{Content, Stored};

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

/// A set of signing domains and their keys, as read from their files
/// (shared with the blocking pool's threads, which sign).
pub struct Keys {
    /// By lower-cased domain.
    signers: HashMap<String, Signer>,
    rng: SystemRandom,
}

impl fmt::Debug for Keys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut domains: Vec<(&String, &str)> = self
            .signers
            .iter()
            .map(|(d, s)| (d, s.selector.as_str()))
            .collect();
        domains.sort();
        f.debug_struct("Keys").field("domains", &domains).finish()
    }
}

impl Keys {
    /// Reads every domain's key; with `require_safe`, a key file its
    /// group or others may read or write is refused (else warned about).
    ///
    /// # Errors
    ///
    /// Naming the domain and the file: a key file that is missing,
    /// unreadable, not PEM, or not an RSA (2048 to 4096 bits) or Ed25519
    /// private key; an unsafe one (see [`crate::files::check_private_key`]).
    pub fn load(
        domains: &BTreeMap<String, DkimDomain>,
        require_safe: bool,
    ) -> Result<Keys, String> {
        let mut signers = HashMap::new();
        for (domain, d) in domains {
            let setting = format!("dkim.{domain:?}.key_file");
            crate::files::check_private_key(&setting, &d.key_file, require_safe)?;
            let what = format!("{setting} {}", d.key_file.display());
            let key = read_key(&d.key_file).map_err(|e| format!("{what}: {e}"))?;
            signers.insert(
                domain.to_lowercase(),
                Signer {
                    selector: d.selector.clone(),
                    key,
                },
            );
        }
        Ok(Keys {
            signers,
            rng: SystemRandom::new(),
        })
    }

    /// No domain signs.
    pub fn is_empty(&self) -> bool {
        self.signers.is_empty()
    }

    /// The `DKIM-Signature:` field (with its CRLF) for the message whose
    /// content is `content`, when its `From:` domain signs; `Ok(None)`
    /// when it does not. Reads the content right here, in one pass: for
    /// the blocking pool.
    ///
    /// # Errors
    ///
    /// Reading the content, a header field too long to sign, the crypto.
    pub fn sign(&self, content: &Content) -> Result<Option<Vec<u8>>, String> {
        let mut scanner = scan::Scanner::new(SIGNED_HEADERS);
        let mut signer = None;
        let r = content.read_sync(|chunk| {
            scanner.feed(chunk);
            if scanner.header_done() && signer.is_none() {
                signer = scanner
                    .sender_domain()
                    .and_then(|d| self.signers.get_key_value(d));
                // A domain that does not sign needs no body hash.
                return Ok(signer.is_some());
            }
            Ok(true)
        });
        r.map_err(|e| format!("cannot read the message from the spool: {e}"))?;
        if scanner.header_done() && signer.is_none() {
            return Ok(None);
        }
        let scanned = scanner.finish()?;
        let Some((domain, signer)) = scanned
            .from_domain
            .as_deref()
            .and_then(|d| self.signers.get_key_value(d))
        else {
            return Ok(None);
        };
        let names: Vec<String> = SIGNED_HEADERS
            .iter()
            .zip(&scanned.fields)
            .filter(|(_, f)| f.is_some())
            .map(|(n, _)| n.to_ascii_lowercase())
            .collect();
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
            canon::base64(&scanned.body_hash)
        );
        let mut signed: Vec<u8> = scanned
            .fields
            .iter()
            .flatten()
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
        let mut out = Vec::with_capacity(field.len() + b.len() + 16);
        out.extend_from_slice(field.as_bytes());
        for (i, chunk) in b.as_bytes().chunks(72).enumerate() {
            if i > 0 {
                out.extend_from_slice(b"\r\n\t ");
            }
            out.extend_from_slice(chunk);
        }
        out.extend_from_slice(b"\r\n");
        Ok(Some(out))
    }
}

/// The signing keys in force: read at start, read again at SIGHUP.
pub struct Dkim {
    keys: RefCell<Arc<Keys>>,
}

impl fmt::Debug for Dkim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Dkim").field(&self.keys.borrow()).finish()
    }
}

impl Dkim {
    /// Reads every domain's key (as [`Keys::load`]).
    ///
    /// # Errors
    ///
    /// As [`Keys::load`].
    pub fn load(
        domains: &BTreeMap<String, DkimDomain>,
        require_safe: bool,
    ) -> Result<Dkim, String> {
        Ok(Dkim {
            keys: RefCell::new(Arc::new(Keys::load(domains, require_safe)?)),
        })
    }

    /// The keys in force now.
    pub fn keys(&self) -> Arc<Keys> {
        self.keys.borrow().clone()
    }

    /// Reads the keys of `domains` again (a rotated key file, a domain
    /// added or removed) and puts them in force for the next message;
    /// returns how many domains sign now.
    ///
    /// # Errors
    ///
    /// As [`Keys::load`]: the keys in force stay.
    pub fn reload(
        &self,
        domains: &BTreeMap<String, DkimDomain>,
        require_safe: bool,
    ) -> Result<usize, String> {
        let keys = Keys::load(domains, require_safe)?;
        let n = keys.signers.len();
        *self.keys.borrow_mut() = Arc::new(keys);
        Ok(n)
    }
}

/// Reads a private key file (PEM).
fn read_key(path: &Path) -> Result<Key, String> {
    let pem = std::fs::read(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::PermissionDenied => {
            format!("{e}{}", crate::privilege::dropped_note())
        }
        _ => e.to_string(),
    })?;
    key_from_pem(&pem)
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

impl Signing {
    /// The signed form of `job`: `Ok(None)` to send it as it is.
    fn sign(&self, keys: &Arc<Keys>, job: &Job) -> Result<Option<Job>, String> {
        if !job.msg.env.trusted {
            return Ok(None);
        }
        let (k, content) = (keys.clone(), job.msg.content.clone());
        let field = coro::blocking(move || k.sign(&content))
            .map_err(|e| format!("DKIM signing cut short: {e}"))??;
        Ok(field.map(|field| Job {
            msg: Arc::new(Stored {
                env: job.msg.env.clone(),
                content: job.msg.content.with_head(&field),
            }),
            rcpts: job.rcpts.clone(),
        }))
    }
}

impl Transport for Signing {
    fn deliver(&self, jobs: &[Job]) -> Vec<Outcome> {
        let keys = self.dkim.keys();
        if keys.is_empty() {
            return self.inner.deliver(jobs);
        }
        let mut signed = Vec::with_capacity(jobs.len());
        let mut failed: Vec<Option<Outcome>> = Vec::with_capacity(jobs.len());
        for job in jobs {
            match self.sign(&keys, job) {
                Ok(Some(j)) => {
                    signed.push(j);
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
        if self.dkim.keys().is_empty() {
            self.inner.describe()
        } else {
            format!("{} (DKIM-signed)", self.inner.describe())
        }
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
            let e = Dkim::load(&domains, false).unwrap_err();
            assert!(
                e.contains("dkim.\"example.test\".key_file") && e.contains(want),
                "{e}"
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
