//! The SASL mechanisms AUTH offers (RFC 4954), both plain-text passwords,
//! so both only under TLS: PLAIN (RFC 4616: `authzid NUL authcid NUL
//! password` in one base64 response) and LOGIN (the user name and the
//! password in two responses, as mail programs still send them). Only
//! the decoding is here; the session runs the exchange.

use base64ct::{Base64, Encoding};

/// A mechanism AUTH takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mechanism {
    /// RFC 4616.
    Plain,
    /// The LOGIN mechanism (draft-murchison-sasl-login).
    Login,
}

impl Mechanism {
    /// The mechanism named `name` (any case), if we offer it.
    pub fn parse(name: &str) -> Option<Mechanism> {
        match name.to_ascii_uppercase().as_str() {
            "PLAIN" => Some(Mechanism::Plain),
            "LOGIN" => Some(Mechanism::Login),
            _ => None,
        }
    }

    /// Its name, for the log (`sasl_method=`).
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Plain => "PLAIN",
            Mechanism::Login => "LOGIN",
        }
    }
}

/// What EHLO announces after `AUTH`.
pub const OFFERED: &str = "PLAIN LOGIN";

/// A user name and password, as the client gave them.
pub struct Credentials {
    /// The name it logs in with.
    pub user: String,
    /// The password (never shown).
    pub password: Vec<u8>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("user", &self.user)
            .finish_non_exhaustive()
    }
}

/// Decodes one base64 response (`=` is the empty one, RFC 4954 §4).
///
/// # Errors
///
/// Text that is not base64.
pub fn decode(response: &[u8]) -> Result<Vec<u8>, &'static str> {
    if response == b"=" {
        return Ok(Vec::new());
    }
    let text = std::str::from_utf8(response).map_err(|_| "not base64")?;
    Base64::decode_vec(text).map_err(|_| "not base64")
}

/// A PLAIN message: `[authzid] NUL authcid NUL password`. An authorization
/// identity other than the user's own (acting for someone else) is not
/// taken.
///
/// # Errors
///
/// A message that is not of that shape, a name that is not UTF-8, or
/// another identity to act for.
pub fn plain(message: &[u8]) -> Result<Credentials, &'static str> {
    let mut parts = message.splitn(3, |&b| b == 0);
    let (authz, user, password) = match (parts.next(), parts.next(), parts.next()) {
        (Some(z), Some(u), Some(p)) => (z, u, p),
        _ => return Err("malformed PLAIN response"),
    };
    let user = name(user)?;
    if !authz.is_empty() && authz != user.as_bytes() {
        return Err("acting for another identity is not supported");
    }
    Ok(Credentials {
        user,
        password: password.to_vec(),
    })
}

/// A user name from a response: UTF-8, not empty, no NUL.
pub fn name(raw: &[u8]) -> Result<String, &'static str> {
    let s = std::str::from_utf8(raw).map_err(|_| "a user name that is not UTF-8")?;
    if s.is_empty() || s.contains('\0') {
        return Err("an empty user name");
    }
    Ok(s.to_owned())
}

/// The base64 of `text`, for LOGIN's challenges.
pub fn encode(text: &str) -> String {
    Base64::encode_string(text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_responses() {
        let c = plain(&decode(b"AGFsaWNlAHNlY3JldA==").unwrap()).unwrap();
        assert_eq!(
            (c.user.as_str(), c.password.as_slice()),
            ("alice", &b"secret"[..])
        );
        let c = plain(b"alice\0alice\0pw").unwrap();
        assert_eq!(c.user, "alice");
        assert!(plain(b"bob\0alice\0pw").is_err(), "acting for bob");
        assert!(plain(b"alice\0pw").is_err());
        assert!(plain(b"\0\0pw").is_err());
        assert!(decode(b"not base64!").is_err());
        assert_eq!(decode(b"=").unwrap(), b"");
        assert!(!format!("{c:?}").contains("pw"));
        assert_eq!(encode("Username:"), "VXNlcm5hbWU6");
        assert_eq!(Mechanism::parse("login"), Some(Mechanism::Login));
        assert_eq!(Mechanism::parse("CRAM-MD5"), None);
    }
}
