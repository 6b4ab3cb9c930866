//! The delivery side's settings: the `[queue]` table (retries, lifetimes
//! and delivery status notifications, Postfix's qmgr defaults) and the
//! `[smtp]` table (the
//! client's timeouts, connection cache, concurrency and TLS, Postfix's
//! `smtp_*` defaults).

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{duration, ConfigError};
use crate::dsn::{Notify, Ret};

/// Retries and lifetimes (`[queue]`).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Queue {
    /// Wait after the first deferral; it doubles with each further one
    /// (Postfix's `minimal_backoff_time`, 300 s).
    #[serde(with = "duration")]
    pub minimal_backoff_time: Duration,
    /// The longest wait between attempts (`maximal_backoff_time`, 4000 s).
    #[serde(with = "duration")]
    pub maximal_backoff_time: Duration,
    /// A message still deferred this long after arrival is returned to its
    /// sender (`maximal_queue_lifetime`, 5 days).
    #[serde(with = "duration")]
    pub maximal_queue_lifetime: Duration,
    /// The same for bounces (which are dropped instead:
    /// `bounce_queue_lifetime`, 5 days).
    #[serde(with = "duration")]
    pub bounce_queue_lifetime: Duration,
    /// Messages in delivery attempts at once (`qmgr_message_active_limit`,
    /// 20 000); the others wait their turn. Only envelopes are in memory
    /// either way: contents are read from the spool as they are sent.
    pub active_limit: usize,
    /// A message still deferred this long after arrival has its sender
    /// told so, once, for the recipients that want it (NOTIFY with DELAY,
    /// or `dsn_notify` for those that gave none); 0: never (Postfix's
    /// `delay_warning_time`, 4 h here).
    #[serde(with = "duration")]
    pub delay_warning_time: Duration,
    /// What a report returns of a message whose MAIL gave no RET: `hdrs`
    /// (its header section) or `full` (the whole message).
    pub dsn_ret: Ret,
    /// The reports a recipient that gave no NOTIFY gets: `FAILURE` (RFC
    /// 3461's default), `FAILURE,DELAY`, or `NEVER`.
    pub dsn_notify: Notify,
}

impl Default for Queue {
    fn default() -> Queue {
        let days = |d: u64| Duration::from_secs(d * 86_400);
        Queue {
            minimal_backoff_time: Duration::from_secs(300),
            maximal_backoff_time: Duration::from_secs(4000),
            maximal_queue_lifetime: days(5),
            bounce_queue_lifetime: days(5),
            active_limit: 20_000,
            delay_warning_time: Duration::from_secs(4 * 3600),
            dsn_ret: Ret::Hdrs,
            dsn_notify: Notify {
                failure: true,
                ..Notify::default()
            },
        }
    }
}

impl Queue {
    /// The wait after the `attempts`-th deferral: the minimum, doubled for
    /// each deferral after the first, at most the maximum.
    pub fn backoff(&self, attempts: u32) -> Duration {
        let doublings = attempts.saturating_sub(1).min(31);
        self.minimal_backoff_time
            .saturating_mul(1u32 << doublings)
            .min(self.maximal_backoff_time)
            .max(self.minimal_backoff_time.min(self.maximal_backoff_time))
    }

    pub(super) fn check(&self) -> Result<(), ConfigError> {
        for (key, d) in [
            ("queue.minimal_backoff_time", self.minimal_backoff_time),
            ("queue.maximal_backoff_time", self.maximal_backoff_time),
            ("queue.maximal_queue_lifetime", self.maximal_queue_lifetime),
            ("queue.bounce_queue_lifetime", self.bounce_queue_lifetime),
        ] {
            if d.is_zero() {
                return Err(ConfigError(format!("{key}: must be longer than 0")));
            }
        }
        if self.active_limit == 0 {
            return Err(ConfigError("queue.active_limit: must be at least 1".into()));
        }
        if self.maximal_backoff_time < self.minimal_backoff_time {
            return Err(ConfigError(
                "queue.maximal_backoff_time: must not be below queue.minimal_backoff_time".into(),
            ));
        }
        Ok(())
    }
}

/// When the client uses STARTTLS (Postfix's `smtp_tls_security_level`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TlsLevel {
    /// Never.
    None,
    /// When the server offers it; the certificate is not checked (as
    /// opportunistic TLS cannot be authenticated anyway). A failed
    /// handshake is retried once in plain text.
    May,
    /// Always; the certificate is not checked. No STARTTLS, no delivery.
    Encrypt,
    /// Always, and the certificate must verify against `tls_ca_file` (or
    /// the system's CA bundle) for the upstream's host name or address.
    Verify,
}

/// The SMTP client (`[smtp]`).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Smtp {
    /// The name we give in EHLO/HELO (default: `hostname`).
    pub helo_name: Option<String>,
    /// Connecting (30 s).
    #[serde(with = "duration")]
    pub connect_timeout: Duration,
    /// The greeting, and the reply to EHLO/HELO (300 s).
    #[serde(with = "duration")]
    pub helo_timeout: Duration,
    /// STARTTLS's reply and the handshake (300 s).
    #[serde(with = "duration")]
    pub starttls_timeout: Duration,
    /// MAIL FROM's reply (300 s).
    #[serde(with = "duration")]
    pub mail_timeout: Duration,
    /// Each RCPT TO's reply (300 s).
    #[serde(with = "duration")]
    pub rcpt_timeout: Duration,
    /// DATA's reply (120 s).
    #[serde(with = "duration")]
    pub data_init_timeout: Duration,
    /// Each write of the message content (180 s).
    #[serde(with = "duration")]
    pub data_xfer_timeout: Duration,
    /// The reply to the final dot (600 s).
    #[serde(with = "duration")]
    pub data_done_timeout: Duration,
    /// RSET's reply, on a reused connection (20 s).
    #[serde(with = "duration")]
    pub rset_timeout: Duration,
    /// Sending QUIT (its reply is not waited for) (300 s).
    #[serde(with = "duration")]
    pub quit_timeout: Duration,
    /// The whole of one message's delivery, however its steps went: one
    /// `with_timeout` around waiting for a connection and the transaction
    /// (20 min).
    #[serde(with = "duration")]
    pub message_timeout: Duration,
    /// Connections to one destination at once (Postfix's
    /// `default_destination_concurrency_limit`, 20).
    pub destination_concurrency_limit: usize,
    /// Connections at once in all (Postfix's `default_process_limit`, 100).
    pub connection_limit: usize,
    /// Keep connections open for the next message to the same destination
    /// (true).
    pub connection_cache: bool,
    /// Messages one connection carries before it is closed; 0: no limit
    /// (`smtp_connection_reuse_count_limit`, 0).
    pub connection_reuse_count_limit: u64,
    /// A connection older than this is closed after its message
    /// (`smtp_connection_reuse_time_limit`, 300 s).
    #[serde(with = "duration")]
    pub connection_reuse_time_limit: Duration,
    /// An idle cached connection is closed after this
    /// (`smtp_connection_cache_time_limit`, 2 s).
    #[serde(with = "duration")]
    pub connection_idle_time_limit: Duration,
    /// STARTTLS policy (`may`).
    pub tls_security_level: TlsLevel,
    /// CA certificates (PEM) for `verify` (default: the system's bundle).
    pub tls_ca_file: Option<PathBuf>,
}

impl Default for Smtp {
    fn default() -> Smtp {
        let s = Duration::from_secs;
        Smtp {
            helo_name: None,
            connect_timeout: s(30),
            helo_timeout: s(300),
            starttls_timeout: s(300),
            mail_timeout: s(300),
            rcpt_timeout: s(300),
            data_init_timeout: s(120),
            data_xfer_timeout: s(180),
            data_done_timeout: s(600),
            rset_timeout: s(20),
            quit_timeout: s(300),
            message_timeout: s(20 * 60),
            destination_concurrency_limit: 20,
            connection_limit: 100,
            connection_cache: true,
            connection_reuse_count_limit: 0,
            connection_reuse_time_limit: s(300),
            connection_idle_time_limit: s(2),
            tls_security_level: TlsLevel::May,
            tls_ca_file: None,
        }
    }
}

impl Smtp {
    pub(super) fn check(&self) -> Result<(), ConfigError> {
        for (key, d) in [
            ("smtp.connect_timeout", self.connect_timeout),
            ("smtp.helo_timeout", self.helo_timeout),
            ("smtp.starttls_timeout", self.starttls_timeout),
            ("smtp.mail_timeout", self.mail_timeout),
            ("smtp.rcpt_timeout", self.rcpt_timeout),
            ("smtp.data_init_timeout", self.data_init_timeout),
            ("smtp.data_xfer_timeout", self.data_xfer_timeout),
            ("smtp.data_done_timeout", self.data_done_timeout),
            ("smtp.rset_timeout", self.rset_timeout),
            ("smtp.quit_timeout", self.quit_timeout),
            ("smtp.message_timeout", self.message_timeout),
            (
                "smtp.connection_reuse_time_limit",
                self.connection_reuse_time_limit,
            ),
            (
                "smtp.connection_idle_time_limit",
                self.connection_idle_time_limit,
            ),
        ] {
            if d.is_zero() {
                return Err(ConfigError(format!("{key}: must be longer than 0")));
            }
        }
        for (key, n) in [
            (
                "smtp.destination_concurrency_limit",
                self.destination_concurrency_limit,
            ),
            ("smtp.connection_limit", self.connection_limit),
        ] {
            if n == 0 {
                return Err(ConfigError(format!("{key}: must be at least 1")));
            }
        }
        if let Some(name) = &self.helo_name {
            if name.is_empty() || name.contains(char::is_whitespace) {
                return Err(ConfigError(format!(
                    "smtp.helo_name: {name:?} is not a host name"
                )));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_maximum() {
        let q = Queue::default();
        let secs = |n| q.backoff(n).as_secs();
        assert_eq!(
            [secs(1), secs(2), secs(3), secs(4), secs(5)],
            [300, 600, 1200, 2400, 4000]
        );
        assert_eq!(secs(1000), 4000);
        assert_eq!(secs(0), 300);
    }
}
