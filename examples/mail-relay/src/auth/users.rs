//! The users file of the submission service: who may log in, with which
//! password hash, and which sender addresses each may use.
//!
//! ```text
//! # comments and blank lines are skipped
//! alice:$argon2id$v=19$m=19456,t=2,p=1$SALT$HASH:alice@example.org,a.l@example.org
//! bob@example.org:$argon2id$v=19$m=19456,t=2,p=1$SALT$HASH:bob@example.org,@bob.example
//! ```
//!
//! One user a line: `USER:HASH:ADDRESSES`, as `mail-relay passwd` prints
//! it. The hash is an argon2id PHC string (it has no `:`); the addresses
//! are comma-separated, `local@domain` for one address, `@domain` for
//! every address of a domain, or `local@*` for that local part at any
//! domain (what `mail-relay passwd USER` writes when given no address for
//! a plain user name). User names and addresses compare without
//! regard to ASCII case. The file holds no password, but its hashes can be
//! attacked offline, so it must be the owner's alone (mode 0600 or
//! stricter), as a private key is.

use std::collections::HashMap;
use std::fmt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use argon2::password_hash::phc::PasswordHash;

/// The most memory (KiB) a hash of the file may make a verification use:
/// each login costs that much while it is checked.
pub const MAX_M_COST: u32 = 256 * 1024;
/// The most passes a hash may ask for.
pub const MAX_T_COST: u32 = 16;
/// The most lanes a hash may ask for.
pub const MAX_P_COST: u32 = 16;

/// One user of the submission service.
#[derive(Clone, PartialEq, Eq)]
pub struct User {
    /// The name it logs in with, as written in the file.
    pub name: String,
    /// Its argon2id hash (a PHC string).
    pub hash: String,
    /// The sender addresses it may use, lower-cased (`@domain` for a whole
    /// domain, `local@*` for a local part at any domain).
    pub addresses: Vec<String>,
}

impl fmt::Debug for User {
    /// The name and addresses; the hash is not shown.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("User")
            .field("name", &self.name)
            .field("addresses", &self.addresses)
            .finish_non_exhaustive()
    }
}

impl User {
    /// Whether `sender` (a MAIL FROM address) is one of the user's: listed
    /// as it is, at a domain listed as `@domain`, or with a local part
    /// listed as `local@*`. The null sender is no one's.
    pub fn owns(&self, sender: &str) -> bool {
        if sender.is_empty() {
            return false;
        }
        let sender = sender.to_lowercase();
        let Some(at) = sender.rfind('@') else {
            return false;
        };
        let (local, domain) = (&sender[..at + 1], &sender[at..]);
        self.addresses.iter().any(|a| {
            *a == sender
                || (a.starts_with('@') && a == domain)
                || a.strip_suffix('*') == Some(local)
        })
    }
}

/// The users in force, by lower-cased name.
#[derive(Debug, Default)]
pub struct Users {
    by_name: HashMap<String, User>,
}

impl Users {
    /// Reads the users file at `path`.
    ///
    /// # Errors
    ///
    /// The file cannot be read, group or others may read or write it, or
    /// a line is malformed; the message names the file and the line.
    pub fn load(path: &Path) -> Result<Users, String> {
        let at = || format!("users file {}", path.display());
        let meta = std::fs::metadata(path).map_err(|e| format!("{}: {e}", at()))?;
        let mode = meta.mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(format!(
                "{}: group or others may read or write it (mode {mode:04o}); its hashes can be \
                 attacked offline: chmod 600 it",
                at()
            ));
        }
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", at()))?;
        Users::parse(&text).map_err(|e| format!("{}: {e}", at()))
    }

    /// Parses the text of a users file.
    ///
    /// # Errors
    ///
    /// The first malformed line, by number.
    pub fn parse(text: &str) -> Result<Users, String> {
        let mut by_name = HashMap::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let user = parse_line(line).map_err(|e| format!("line {}: {e}", n + 1))?;
            let key = user.name.to_lowercase();
            if by_name.contains_key(&key) {
                return Err(format!("line {}: user {:?} given twice", n + 1, user.name));
            }
            by_name.insert(key, user);
        }
        Ok(Users { by_name })
    }

    /// The user called `name` (ASCII case aside).
    pub fn get(&self, name: &str) -> Option<&User> {
        self.by_name.get(&name.to_lowercase())
    }

    /// How many users there are.
    pub fn len(&self) -> usize {
        self.by_name.len()
    }
}

/// One `USER:HASH:ADDRESSES` line.
fn parse_line(line: &str) -> Result<User, String> {
    let mut fields = line.splitn(3, ':');
    let (name, hash, addresses) = match (fields.next(), fields.next(), fields.next()) {
        (Some(n), Some(h), Some(a)) => (n, h, a),
        _ => return Err("expected USER:HASH:ADDRESSES".into()),
    };
    check_name(name)?;
    check_hash(hash)?;
    let addresses = parse_addresses(addresses.split(',').filter(|a| !a.trim().is_empty()))?;
    if addresses.is_empty() {
        return Err(format!("user {name:?} has no sender address"));
    }
    Ok(User {
        name: name.to_owned(),
        hash: hash.to_owned(),
        addresses,
    })
}

/// A user name: not empty, no `:`, no space or control character.
pub fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("empty user name".into());
    }
    if name.len() > 255 {
        return Err("a user name over 255 octets".into());
    }
    if name
        .chars()
        .any(|c| c == ':' || c.is_whitespace() || c.is_control())
    {
        return Err(format!(
            "user name {:?} has a ':', a space or a control character",
            crate::escape::escape(name)
        ));
    }
    Ok(())
}

/// An argon2id PHC string whose costs stay within bounds.
fn check_hash(hash: &str) -> Result<(), String> {
    let parsed = PasswordHash::new(hash).map_err(|e| format!("not a password hash ({e})"))?;
    if parsed.algorithm.as_str() != "argon2id" {
        return Err(format!(
            "hash algorithm {:?}: only argon2id is taken (mail-relay passwd makes it)",
            parsed.algorithm.as_str()
        ));
    }
    if parsed.hash.is_none() {
        return Err("a hash without its output".into());
    }
    let params = argon2::Params::try_from(&parsed).map_err(|e| format!("bad argon2 hash: {e}"))?;
    if params.m_cost() > MAX_M_COST || params.t_cost() > MAX_T_COST || params.p_cost() > MAX_P_COST
    {
        return Err(format!(
            "argon2 costs m={} t={} p={} over what a login may take (m<={MAX_M_COST} KiB, \
             t<={MAX_T_COST}, p<={MAX_P_COST})",
            params.m_cost(),
            params.t_cost(),
            params.p_cost()
        ));
    }
    Ok(())
}

/// Sender addresses: `local@domain`, `@domain` or `local@*`, lower-cased.
pub fn parse_addresses<'a>(items: impl Iterator<Item = &'a str>) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for a in items {
        let a = a.trim();
        let bad = |why: &str| format!("sender address {:?}: {why}", crate::escape::escape(a));
        let at = a.rfind('@').ok_or_else(|| bad("no @domain"))?;
        let (local, domain) = (&a[..at], &a[at + 1..]);
        if domain.is_empty() || domain.contains(['@', ',', ':']) {
            return Err(bad("empty or bad domain"));
        }
        if domain == "*" && local.is_empty() {
            return Err(bad("`@*` would be every address; give a local part"));
        }
        if domain.contains('*') && domain != "*" {
            return Err(bad("`*` stands only for the whole domain"));
        }
        if a.chars().any(|c| c.is_whitespace() || c.is_control()) || local.contains([',', ':']) {
            return Err(bad("a space, ',' , ':' or control character in it"));
        }
        out.push(a.to_lowercase());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HASH: &str = "$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHRzb21lc2FsdA$aGFzaGhhc2hoYXNoaGFzaGhhc2hoYXNoaGFzaGhhc2g";

    #[test]
    fn lines_users_and_addresses() {
        let text = format!(
            "# users\n\nalice:{HASH}:Alice@Example.org, a.l@example.org\nbob@b.test:{HASH}:@B.test\n"
        );
        let u = Users::parse(&text).unwrap();
        assert_eq!(u.len(), 2);
        let alice = u.get("ALICE").unwrap();
        assert_eq!(alice.name, "alice");
        assert!(alice.owns("alice@example.org") && alice.owns("A.L@EXAMPLE.ORG"));
        assert!(!alice.owns("mallory@example.org") && !alice.owns(""));
        let bob = u.get("bob@b.test").unwrap();
        assert!(bob.owns("anyone@b.test") && !bob.owns("x@sub.b.test"));
        let carol = Users::parse(&format!("carol:{HASH}:Carol@*")).unwrap();
        let carol = carol.get("carol").unwrap();
        assert!(carol.owns("carol@a.test") && carol.owns("CAROL@b.example"));
        assert!(
            !carol.owns("carolx@a.test") && !carol.owns("xcarol@a.test") && !carol.owns("carol")
        );
        assert!(
            !format!("{bob:?}").contains("argon2"),
            "Debug hides the hash"
        );
    }

    #[test]
    fn bad_lines_are_named() {
        for (line, want) in [
            ("alice", "USER:HASH:ADDRESSES"),
            (&format!("alice:{HASH}:"), "no sender address"),
            (&format!("alice:{HASH}:alice"), "no @domain"),
            (&format!("alice:{HASH}:@*"), "give a local part"),
            (&format!("alice:{HASH}:a@*.test"), "whole domain"),
            ("alice:secret:a@b.test", "not a password hash"),
            (
                "alice:$6$salt$abcdefghijklmnopqrstuv:a@b.test",
                "not a password hash",
            ),
            (
                &format!("a b:{HASH}:a@b.test"),
                "a ':', a space or a control",
            ),
        ] {
            let e = Users::parse(line).unwrap_err();
            assert!(e.starts_with("line 1: ") && e.contains(want), "{line}: {e}");
        }
        let argon2i = format!("a:{}:a@b.test", HASH.replace("argon2id", "argon2i"));
        let e = Users::parse(&argon2i).unwrap_err();
        assert!(e.contains("only argon2id"), "{e}");
        let greedy = format!("a:{}:a@b.test", HASH.replace("m=19456", "m=4000000"));
        let e = Users::parse(&greedy).unwrap_err();
        assert!(e.contains("over what a login may take"), "{e}");
        let twice = format!("a:{HASH}:a@b.test\nA:{HASH}:a@b.test\n");
        assert!(Users::parse(&twice)
            .unwrap_err()
            .contains("line 2: user \"A\" given twice"));
    }
}
