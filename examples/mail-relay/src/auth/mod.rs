//! Authentication for the submission service (RFC 4954 over RFC 6409's
//! submission and RFC 8314's implicit TLS): the users in force, the check
//! of a password, and the failed-login limit.
//!
//! * [`users`]: the users file (`USER:HASH:ADDRESSES`), its checks, sender
//!   ownership;
//! * [`password`]: argon2id hashes and `mail-relay passwd`;
//! * [`sasl`]: PLAIN and LOGIN;
//! * [`anvil`]: failures by client address, and lockouts.
//!
//! # Where the work runs
//!
//! A password check costs tens of milliseconds of CPU and the hash's
//! memory (19 MiB by default): it runs on the blocking pool, and at most
//! [`Auth::CONCURRENCY`] at once; the session's green thread waits for
//! its turn and its verdict without holding the scheduler. A login for a
//! user who does not exist is checked against a decoy hash, so that it
//! takes as long as any other.
//!
//! # Reload
//!
//! The users file is read at start (a bad file stops the start) and again
//! at every SIGHUP: a file that does not load then keeps the users in
//! force, with an error line. No password is ever logged; a failed login
//! names its user only when the user exists (a password typed into the
//! name field is not written to the log).

pub mod anvil;
pub mod password;
pub mod sasl;
pub mod users;

use std::cell::RefCell;
use std::net::IpAddr;
use std::rc::Rc;

use coro::sync::Semaphore;

pub use anvil::{Anvil, Verdict};
pub use users::{User, Users};

use crate::config::Submission;

/// The submission service's users and login limits (one per relay).
#[derive(Debug)]
pub struct Auth {
    /// The users in force (replaced at SIGHUP).
    users: RefCell<Rc<Users>>,
    /// Failed logins by address.
    anvil: Anvil,
    /// Password checks running at once.
    gate: Semaphore,
}

/// What a login came to.
#[derive(Debug)]
pub enum Login {
    /// The password is the user's.
    Ok(User),
    /// No such user, or the wrong password; `known` says whether the user
    /// exists (for the log only).
    Failed {
        /// The user exists.
        known: bool,
    },
}

impl Auth {
    /// Password checks at once at most: each holds a blocking-pool thread,
    /// a core and the hash's memory while it runs.
    pub const CONCURRENCY: usize = 2;

    /// The submission service's authentication for `cfg`, its users file
    /// read; `None` when no submission listener is configured.
    ///
    /// # Errors
    ///
    /// The users file cannot be read or is malformed (the message names
    /// it and the line).
    pub fn load(cfg: &Submission) -> Result<Option<Auth>, String> {
        if !cfg.enabled() {
            return Ok(None);
        }
        let path = cfg
            .users_file
            .as_ref()
            .ok_or("submission.users_file: not set")?;
        let users = Users::load(path).map_err(|e| format!("submission.users_file: {e}"))?;
        log::info!(
            "submission: {} from {}",
            crate::logger::count(users.len(), "user"),
            path.display()
        );
        Ok(Some(Auth {
            users: RefCell::new(Rc::new(users)),
            anvil: Anvil::default(),
            gate: Semaphore::new(Auth::CONCURRENCY),
        }))
    }

    /// Reads the users file of `cfg` again (SIGHUP); a file that does not
    /// load keeps the users in force. Logs what happened.
    pub fn reload(&self, cfg: &Submission) {
        let Some(path) = &cfg.users_file else {
            log::error!("reload at SIGHUP: submission.users_file unset; the users in force stay");
            return;
        };
        match Users::load(path) {
            Ok(users) => {
                log::info!(
                    "reload at SIGHUP: submission users read again: {} from {}",
                    crate::logger::count(users.len(), "user"),
                    path.display()
                );
                *self.users.borrow_mut() = Rc::new(users);
            }
            Err(e) => log::error!("reload at SIGHUP: {e}; the users in force stay"),
        }
    }

    /// The failed-login table.
    pub fn anvil(&self) -> &Anvil {
        &self.anvil
    }

    /// Checks `password` for `user` on the blocking pool (waiting for a
    /// turn among [`CONCURRENCY`](Auth::CONCURRENCY) checks); a user who
    /// does not exist is checked against a decoy, in as long.
    ///
    /// # Errors
    ///
    /// The wait was cut short (a stop, a deadline).
    pub fn verify(&self, user: &str, password: Vec<u8>) -> Result<Login, coro::WaitError> {
        let found = self.users.borrow().get(user).cloned();
        let _turn = self.gate.acquire(1)?;
        let hash = found.as_ref().map(|u| u.hash.clone());
        let matched = coro::blocking(move || match hash {
            Some(h) => password::verify(&h, &password),
            None => {
                let _ = password::verify(password::decoy(), &password);
                false
            }
        })?;
        Ok(match found {
            Some(u) if matched => Login::Ok(u),
            other => Login::Failed {
                known: other.is_some(),
            },
        })
    }

    /// Whether `ip` is locked out now, and for how much longer.
    pub fn locked(&self, ip: IpAddr) -> Option<std::time::Duration> {
        self.anvil.locked(ip)
    }
}
