//! The `[mta_sts]` table: MTA-STS (RFC 8461) on delivery by MX records,
//! and the certificate authorities it trusts.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{duration, ConfigError};

/// MTA-STS (`[mta_sts]`).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct MtaSts {
    /// Look up each recipient domain's MTA-STS policy on MX delivery and
    /// apply it (true). Off: outgoing TLS stays opportunistic everywhere.
    pub enabled: bool,
    /// A PEM file of CA certificates trusted beside the system's store,
    /// for policy hosts and for mail exchangers under a policy (a private
    /// CA; the tests' own). Unset: the system's store alone.
    pub ca_file: Option<PathBuf>,
    /// How long one policy fetch may take, connection and TLS included
    /// (RFC 8461 §3.3 recommends a minute).
    #[serde(with = "duration")]
    pub fetch_timeout: Duration,
    /// The policy hosts' HTTPS port: 443 on the Internet; only tests set
    /// another.
    pub policy_port: u16,
}

impl Default for MtaSts {
    fn default() -> MtaSts {
        MtaSts {
            enabled: true,
            ca_file: None,
            fetch_timeout: Duration::from_secs(60),
            policy_port: 443,
        }
    }
}

impl MtaSts {
    /// Values that parse but cannot work.
    pub(super) fn check(&self) -> Result<(), ConfigError> {
        if self.fetch_timeout.is_zero() {
            return Err(ConfigError(
                "mta_sts.fetch_timeout: must be longer than 0".into(),
            ));
        }
        if self.policy_port == 0 {
            return Err(ConfigError("mta_sts.policy_port: must not be 0".into()));
        }
        Ok(())
    }
}
