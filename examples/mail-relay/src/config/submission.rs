//! The `[submission]` table: the submission service (RFC 6409) beside the
//! MTA listener: its two listeners (port 587 with STARTTLS, port 465 with
//! implicit TLS, RFC 8314), the users file, and how failed logins are met.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{duration, opt_listen_addr, ConfigError};

/// The submission service (`[submission]`).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Submission {
    /// Port 587's listener: STARTTLS, then AUTH, then mail; unset: none.
    #[serde(deserialize_with = "opt_listen_addr")]
    pub listen: Option<SocketAddr>,
    /// Port 465's listener: TLS from the first octet (RFC 8314), then
    /// AUTH; unset: none.
    #[serde(deserialize_with = "opt_listen_addr")]
    pub listen_tls: Option<SocketAddr>,
    /// The users file: one `USER:HASH:ADDRESSES` line per user, as
    /// `mail-relay passwd` prints them (read again at SIGHUP).
    pub users_file: Option<PathBuf>,
    /// Failed AUTHs in a row from one client address (over all its
    /// sessions) before its session is ended and the address locked out.
    pub auth_failure_limit: u32,
    /// How long a locked-out address is refused (421 at its next
    /// connections to the submission ports); also how long a failure
    /// counts toward the limit.
    #[serde(with = "duration")]
    pub auth_lockout: Duration,
    /// How long each failed AUTH waits before its 535 (Postfix's
    /// `smtpd_error_sleep_time`), so that guessing is slow even within
    /// the limit.
    #[serde(with = "duration")]
    pub auth_failure_delay: Duration,
    /// Name the client's address and EHLO name in the `Received:` header
    /// of submitted mail; by default they are left out (a mail program's
    /// address is its user's whereabouts).
    pub received_client_address: bool,
}

impl Default for Submission {
    fn default() -> Submission {
        Submission {
            listen: None,
            listen_tls: None,
            users_file: None,
            auth_failure_limit: 5,
            auth_lockout: Duration::from_secs(600),
            auth_failure_delay: Duration::from_secs(1),
            received_client_address: false,
        }
    }
}

impl Submission {
    /// Whether a submission listener is configured.
    pub fn enabled(&self) -> bool {
        self.listen.is_some() || self.listen_tls.is_some()
    }

    /// Values that parse but cannot work; `tls` says whether `[tls]` has
    /// a certificate and key.
    pub(super) fn check(&self, tls: bool) -> Result<(), ConfigError> {
        if self.auth_failure_limit == 0 {
            return Err(ConfigError(
                "submission.auth_failure_limit: must be at least 1".into(),
            ));
        }
        if self.auth_lockout.is_zero() {
            return Err(ConfigError(
                "submission.auth_lockout: must be longer than 0".into(),
            ));
        }
        if !self.enabled() {
            return Ok(());
        }
        if !tls {
            return Err(ConfigError(
                "submission: needs [tls] cert and key (AUTH is offered only under TLS)".into(),
            ));
        }
        if self.users_file.is_none() {
            return Err(ConfigError(
                "submission.users_file: not set (the submission listener needs its users; \
                 `mail-relay passwd USER ADDRESS...` makes their lines)"
                    .into(),
            ));
        }
        Ok(())
    }
}
