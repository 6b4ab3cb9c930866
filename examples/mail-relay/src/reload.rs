//! SIGHUP: the configuration read again (the file, then the same flags),
//! and what can change in a running relay changed.
//!
//! Live: the host name, `mynetworks`, `relay_domains`, the limits
//! (`max_*`, `error_limit`, `junk_command_limit`, `hopcount_limit`,
//! `min_data_rate`), `add_missing_headers`, `stop_deadline`, `log_level`
//! and every timeout; sessions see the new values at their next command.
//! `[dkim]` too: its keys are read again at every SIGHUP, changed or not
//! (a key file rotated in place), and sign from the next message on; a
//! key that does not load keeps the keys in force. `[submission]` except
//! its listeners, and its users file, read again at every SIGHUP (one
//! that does not load keeps the users in force). Everything else (the
//! listener, the spool and the Maildir, delivery's routes and settings,
//! `[mx]`, `[mta_sts]`, TLS, the back door, `log_file`, the blocking
//! pool, the user the relay runs as and the key checks) is set up once at
//! start: a change there is logged as needing a restart, and the running
//! value stays. Every key of [`Config`] is one or the other
//! ([`merge`] does not compile otherwise). A file that does not load
//! keeps the whole running configuration, with an error line. The log
//! file is reopened in any case (for `logrotate`).

use crate::config::{Config, ConfigError};
use crate::dkim::Dkim;

/// What a reload did: the configuration now in force, and the keys that
/// changed (live) or would need a restart (kept as they were).
#[derive(Debug)]
pub struct Reloaded {
    /// The configuration to use from now on.
    pub config: Config,
    /// Keys whose new value is in force.
    pub changed: Vec<&'static str>,
    /// Keys whose new value needs a restart (the old one stays).
    pub need_restart: Vec<&'static str>,
}

/// Merges `new` over `old` (see the module docs).
pub fn merge(old: &Config, new: Config) -> Reloaded {
    let mut config = new;
    let mut changed = Vec::new();
    let mut need_restart = Vec::new();
    // Every key, each in one of the lists below: a key added to `Config`
    // fails to compile here until it is classified.
    let Config {
        listen: _,
        hostname: _,
        user: _,
        run_as_root: _,
        require_safe_keys: _,
        spool_dir: _,
        maildir: _,
        mynetworks: _,
        local_domains: _,
        relay_domains: _,
        relayhost: _,
        routes: _,
        backdoor: _,
        metrics: _,
        max_message_size: _,
        max_recipients: _,
        max_sessions: _,
        max_sessions_per_client: _,
        error_limit: _,
        junk_command_limit: _,
        hopcount_limit: _,
        add_missing_headers: _,
        min_data_rate: _,
        stop_deadline: _,
        log_level: _,
        log_file: _,
        blocking_threads: _,
        timeouts: _,
        tls: _,
        queue: _,
        smtp: _,
        mx: _,
        mta_sts: _,
        dkim: _,
        submission: _,
        testing: _,
    } = old;
    macro_rules! live {
        ($($f:ident),*) => {$(
            if format!("{:?}", old.$f) != format!("{:?}", config.$f) {
                changed.push(stringify!($f));
            }
        )*};
    }
    macro_rules! fixed {
        ($($f:ident),*) => {$(
            if format!("{:?}", old.$f) != format!("{:?}", config.$f) {
                need_restart.push(stringify!($f));
                config.$f = old.$f.clone();
            }
        )*};
    }
    // [submission]: its listeners are bound at start; the rest (the users
    // file's path, the login limits, the Received: setting) is live.
    let (s, o) = (&mut config.submission, &old.submission);
    if (s.listen, s.listen_tls) != (o.listen, o.listen_tls) {
        need_restart.push("submission.listen");
        (s.listen, s.listen_tls) = (o.listen, o.listen_tls);
    }
    live!(
        hostname,
        mynetworks,
        relay_domains,
        max_message_size,
        max_recipients,
        max_sessions,
        max_sessions_per_client,
        error_limit,
        junk_command_limit,
        hopcount_limit,
        min_data_rate,
        add_missing_headers,
        stop_deadline,
        log_level,
        timeouts,
        dkim,
        submission
    );
    fixed!(
        listen,
        user,
        run_as_root,
        require_safe_keys,
        spool_dir,
        maildir,
        local_domains,
        relayhost,
        routes,
        backdoor,
        blocking_threads,
        tls,
        queue,
        smtp,
        mx,
        mta_sts,
        log_file,
        metrics,
        testing
    );
    Reloaded {
        config,
        changed,
        need_restart,
    }
}

/// Reads the configuration again with `load`, merges it, reads the DKIM
/// keys again into `dkim`, and logs what happened; `None` when it did not
/// load (the error is logged).
pub fn reload(
    old: &Config,
    load: &dyn Fn() -> Result<Config, ConfigError>,
    dkim: &Dkim,
) -> Option<Config> {
    let new = match load() {
        Ok(c) => c,
        Err(e) => {
            log::error!("reload at SIGHUP: {e}; keeping the running configuration");
            let _ = crate::logger::reopen(old.log_file.as_deref(), old.log_level);
            return None;
        }
    };
    let mut r = merge(old, new);
    if !r.config.dkim.is_empty() || !old.dkim.is_empty() {
        // Whether or not [dkim] changed: a key file may have been rotated.
        match dkim.reload(&r.config.dkim, r.config.require_safe_keys) {
            Ok(_) => {
                if !r.changed.contains(&"dkim") {
                    r.changed.push("dkim (keys read again)");
                }
                let signers: Vec<String> = r
                    .config
                    .dkim
                    .iter()
                    .map(|(d, k)| format!("{d} (selector {})", k.selector))
                    .collect();
                log::info!(
                    "reload at SIGHUP: DKIM keys read again; signing for {}",
                    if signers.is_empty() {
                        "no domain".to_owned()
                    } else {
                        signers.join(", ")
                    }
                );
            }
            Err(e) => {
                log::error!("reload at SIGHUP: {e}; the DKIM keys in force stay");
                r.config.dkim = old.dkim.clone();
                r.changed.retain(|k| *k != "dkim");
            }
        }
    }
    if let Err(e) = crate::logger::reopen(r.config.log_file.as_deref(), r.config.log_level) {
        log::error!("reload at SIGHUP: reopening the log: {e}");
    }
    for key in &r.need_restart {
        log::warn!("reload at SIGHUP: {key} changed: needs a restart (the running value stays)");
    }
    if r.changed.is_empty() {
        log::info!("reload at SIGHUP: configuration reloaded, nothing changed that applies live");
    } else {
        log::info!(
            "reload at SIGHUP: configuration reloaded; now in force: {}",
            r.changed.join(", ")
        );
    }
    Some(r.config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn live_keys_change_and_fixed_keys_stay() {
        let old = Config::default();
        let new = Config::from_toml(
            "max_recipients = 7\nlisten = \"127.0.0.1:2600\"\n[timeouts]\nmail = \"1s\"\n",
        )
        .unwrap();
        let r = merge(&old, new);
        assert_eq!(r.changed, ["max_recipients", "timeouts"]);
        assert_eq!(r.need_restart, ["listen"]);
        assert_eq!(r.config.max_recipients, 7);
        assert_eq!(r.config.listen, old.listen);
        let new = Config::from_toml("[mx]\nport = 2525\n").unwrap();
        assert_eq!(merge(&old, new).need_restart, ["mx"]);
        let new =
            Config::from_toml("[dkim.\"example.test\"]\nselector = \"s\"\nkey_file = \"k.pem\"\n")
                .unwrap();
        let r = merge(&old, new);
        assert_eq!((r.changed, r.config.dkim.len()), (vec!["dkim"], 1));
    }
}
