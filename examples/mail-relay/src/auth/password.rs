//! Password hashes: argon2id (RFC 9106) through RustCrypto's `argon2`
//! crate, as PHC strings (`$argon2id$v=19$m=19456,t=2,p=1$SALT$HASH`),
//! and `mail-relay passwd`, which makes a users-file line.
//!
//! # Why argon2id
//!
//! A leaked users file is attacked offline, on GPUs. argon2id is
//! memory-hard: each guess needs its 19 MiB (the crate's default, OWASP's
//! recommendation for argon2id), which is what makes GPUs and ASICs no
//! better at it than the server. SHA-512-crypt (`$6$`, what Dovecot and
//! Postfix setups often keep) is compute-hard only: each guess is 5 000
//! rounds of SHA-512 in a few bytes of memory, which GPUs do by the
//! billion. Taking such files as they are would be a convenience for a
//! migration, and a weaker hash for every user who never changes their
//! password; the users file here holds argon2id only, and
//! `mail-relay passwd` makes its lines.
//!
//! # Cost
//!
//! One verification takes tens of milliseconds of CPU and its memory
//! cost; it runs on the blocking pool, never on the scheduler's thread
//! (see [`super::Auth::verify`], which also bounds how many run at once).

use std::io::{BufRead, IsTerminal, Write};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use argon2::password_hash::phc::PasswordHash;
use argon2::password_hash::{PasswordHasher, PasswordVerifier};
use argon2::Argon2;
use ring::rand::SecureRandom;

use super::users::{check_name, parse_addresses};

/// Octets of random salt in a new hash (RFC 9106 recommends 16).
const SALT_LEN: usize = 16;

/// A new argon2id hash of `password` with a random salt and the crate's
/// default costs (m = 19 MiB, t = 2, p = 1).
///
/// # Errors
///
/// The system's random source failing, or the hasher's error.
pub fn hash(password: &[u8]) -> Result<String, String> {
    let mut salt = [0u8; SALT_LEN];
    ring::rand::SystemRandom::new()
        .fill(&mut salt)
        .map_err(|_| "the system's random source failed".to_owned())?;
    Argon2::default()
        .hash_password_with_salt(password, &salt)
        .map(|h| h.to_string())
        .map_err(|e| format!("hashing failed: {e}"))
}

/// Whether `password` matches `hash` (a PHC string; its own costs are
/// used). Takes as long as the hash asks: call it on the blocking pool.
pub fn verify(hash: &str, password: &[u8]) -> bool {
    match PasswordHash::new(hash) {
        Ok(parsed) => Argon2::default().verify_password(password, &parsed).is_ok(),
        Err(_) => false,
    }
}

/// A hash no password matches in practice, with the default costs: a
/// login for a user who does not exist is checked against it, so that it
/// takes as long as one for a user who does (no user names found by
/// timing).
pub fn decoy() -> &'static str {
    static DECOY: OnceLock<String> = OnceLock::new();
    DECOY.get_or_init(|| {
        Argon2::default()
            .hash_password_with_salt(b"mail-relay: no such user", b"mail-relay decoy salt")
            .map(|h| h.to_string())
            .unwrap_or_default()
    })
}

/// `mail-relay passwd USER ADDRESS...`: reads the password from standard
/// input and returns the users-file line (with its newline).
///
/// # Errors
///
/// A bad user name or address, an empty password, passwords that differ (on a terminal), or a
/// failure to read.
pub fn passwd(user: &str, addresses: &[String]) -> Result<String, String> {
    check_name(user)?;
    // With no address given, a name that is an address is its own; a
    // plain name may send as that local part at any domain.
    let own;
    let given: Vec<&str> = if addresses.is_empty() {
        own = if user.contains('@') {
            user.to_owned()
        } else {
            format!("{user}@*")
        };
        vec![own.as_str()]
    } else {
        addresses.iter().map(String::as_str).collect()
    };
    let addresses = parse_addresses(given.into_iter())?;
    let password = read_password(user)?;
    if password.is_empty() {
        return Err("an empty password".into());
    }
    let hash = hash(&password)?;
    Ok(format!("{user}:{hash}:{}\n", addresses.join(",")))
}

/// The password from standard input: on a terminal, asked twice with the
/// echo off; otherwise the first line.
fn read_password(user: &str) -> Result<Vec<u8>, String> {
    let stdin = std::io::stdin();
    if !stdin.is_terminal() {
        return read_line(&mut stdin.lock());
    }
    let _quiet = NoEcho::new();
    let ask = |prompt: &str| {
        eprint!("{prompt}");
        let _ = std::io::stderr().flush();
        let line = read_line(&mut stdin.lock());
        eprintln!();
        line
    };
    let first = ask(&format!("Password for {user}: "))?;
    let again = ask("Again: ")?;
    if first != again {
        return Err("the passwords differ".into());
    }
    Ok(first)
}

/// One line, without its line end.
fn read_line(r: &mut impl BufRead) -> Result<Vec<u8>, String> {
    let mut line = Vec::new();
    r.read_until(b'\n', &mut line)
        .map_err(|e| format!("reading the password from standard input: {e}"))?;
    if line.last() == Some(&b'\n') {
        line.pop();
        if line.last() == Some(&b'\r') {
            line.pop();
        }
    }
    Ok(line)
}

/// The terminal's echo off while it lives (`stty -echo`, undone on drop).
struct NoEcho;

impl NoEcho {
    fn new() -> NoEcho {
        stty("-echo");
        NoEcho
    }
}

impl Drop for NoEcho {
    fn drop(&mut self) {
        stty("echo");
    }
}

/// Runs `stty ARG` on the terminal of standard input.
fn stty(arg: &str) {
    let _ = Command::new("stty")
        .arg(arg)
        .stdin(Stdio::inherit())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_verify_and_are_salted() {
        let a = hash(b"correct horse").unwrap();
        let b = hash(b"correct horse").unwrap();
        assert!(a.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"), "{a}");
        assert_ne!(a, b, "a random salt each time");
        assert!(verify(&a, b"correct horse") && verify(&b, b"correct horse"));
        assert!(!verify(&a, b"correct horsf") && !verify(&a, b""));
        assert!(!verify("not a hash", b"x"));
        assert!(!verify(decoy(), b""), "the decoy takes nothing");
        crate::auth::users::Users::parse(&format!("u:{a}:u@x.test")).unwrap();
    }

    #[test]
    fn passwd_lines() {
        let e = passwd("alice", &["alice".into()]).unwrap_err();
        assert!(e.contains("no @domain"), "{e}");
        let e = passwd("a:b", &["a@b.test".into()]).unwrap_err();
        assert!(e.contains("':'"), "{e}");
    }
}
