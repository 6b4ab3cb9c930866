//! The relay's configuration: embedded defaults, then a TOML file
//! (`--config PATH`), then command-line flags, each layer over the last.
//!
//! Every key of the file is a field of [`Config`] (or of its `[timeouts]`,
//! `[tls]`, `[queue]`, `[smtp]`, `[mx]`, `[mta_sts]`, `[dkim]`, `[submission]`,
//! `[routes]` and `[testing]` tables); an
//! unknown key or a value of the wrong shape is an error at start that
//! names the key. Durations are written `"300ms"`, `"30s"`, `"5m"`, `"1h"`,
//! `"5d"`.

mod delivery;
mod dkim;
mod mta_sts;
mod mx;
mod submission;

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Parser, Subcommand};
use serde::{Deserialize, Serialize};

use crate::cidr::Cidr;
use crate::delivery::route::{Dest, Upstream};
pub use delivery::{Queue, Smtp, TlsLevel};
pub use dkim::DkimDomain;
pub use mta_sts::MtaSts;
pub use mx::Mx;
pub use submission::Submission;

/// Everything the relay reads at start.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Address the SMTP listener binds (`127.0.0.1:2525`; a host name such
    /// as `localhost:2525` is resolved, its first address used).
    #[serde(deserialize_with = "listen_addr")]
    pub listen: SocketAddr,
    /// Our name in the greeting, EHLO reply and `Received:` headers.
    pub hostname: String,
    /// The user the relay runs as: started as root, it binds its ports,
    /// reads its keys and opens its log as root, then drops to this user
    /// (see `privilege`). Unset: it runs as whoever started it.
    pub user: Option<String>,
    /// Running as root without `user` is meant: no warning about it at
    /// start.
    pub run_as_root: bool,
    /// Refuse a private key file (TLS, DKIM) that its group or others may
    /// read or write; false: use it with a warning.
    pub require_safe_keys: bool,
    /// The spool directory (`./spool`).
    pub spool_dir: PathBuf,
    /// The Maildir local delivery writes into (`./maildir`).
    pub maildir: PathBuf,
    /// Clients allowed to relay to any domain (loopback by default).
    pub mynetworks: Vec<Cidr>,
    /// Domains we accept mail for from any client, delivered locally.
    pub local_domains: Vec<String>,
    /// Domains we accept mail for from any client and relay onwards.
    pub relay_domains: Vec<String>,
    /// The SMTP upstream for every domain that is not local and has no
    /// route (`"127.0.0.1:2601"` or `"[host]:port"`); unset: the Maildir.
    pub relayhost: Option<Upstream>,
    /// Destinations by recipient domain: `"host:port"` or `"local"`; a
    /// key with a leading dot (`".example.test"`) covers the subdomains.
    pub routes: BTreeMap<String, Dest>,
    /// The back door's Unix socket (`mailq`, `flush` and the runtime's
    /// console, for this user only); unset: none.
    pub backdoor: Option<PathBuf>,
    /// Where to serve Prometheus metrics (`GET /metrics`); unset: not
    /// served.
    #[serde(deserialize_with = "opt_listen_addr")]
    pub metrics: Option<SocketAddr>,
    /// The largest message accepted, in octets (SIZE).
    pub max_message_size: u64,
    /// Recipients per message; the next one gets 452.
    pub max_recipients: usize,
    /// Sessions at once; the next client gets 421 at greeting.
    pub max_sessions: usize,
    /// Sessions at once from one client address [default: 100].
    pub max_sessions_per_client: usize,
    /// Rejected commands in one session before it is ended with 421
    /// (452 replies count too).
    pub error_limit: u32,
    /// NOOP, RSET, VRFY and HELP commands a session may send before each
    /// further one counts as an error (Postfix's
    /// `smtpd_junk_command_limit`); a message accepted starts the count
    /// again.
    pub junk_command_limit: u32,
    /// `Received:` headers a message may carry; one with this many or more
    /// is refused as a mail forwarding loop (Postfix's `hopcount_limit`).
    pub hopcount_limit: usize,
    /// Add `Date:` and `Message-ID:` to messages from `mynetworks` that
    /// lack them (submissions from our own clients, as Postfix does for
    /// its local clients).
    pub add_missing_headers: bool,
    /// Octets per second a client must keep up during DATA: each octet
    /// received extends the DATA deadline by `1 / min_data_rate` s
    /// (Postfix's `smtpd_min_data_rate`).
    pub min_data_rate: u64,
    /// At SIGTERM/SIGINT, how long sessions in flight may take to finish.
    #[serde(with = "duration")]
    pub stop_deadline: Duration,
    /// `log` level: error, warn, info, debug, trace, off.
    #[serde(serialize_with = "level")]
    pub log_level: log::LevelFilter,
    /// The log goes to this file (appended; reopened at SIGHUP) instead of
    /// stderr.
    pub log_file: Option<PathBuf>,
    /// OS threads of the blocking pool (fsync and file work; a Maildir
    /// batch syncs from 8 at once, beside the spool's commit).
    pub blocking_threads: usize,
    /// Protocol timeouts.
    pub timeouts: Timeouts,
    /// STARTTLS, offered when both are set.
    pub tls: Tls,
    /// Retries and lifetimes.
    pub queue: Queue,
    /// The SMTP client.
    pub smtp: Smtp,
    /// Delivery by MX records, and the DNS servers.
    pub mx: Mx,
    /// MTA-STS on MX delivery, and the extra CA file it trusts.
    pub mta_sts: MtaSts,
    /// DKIM signing: the domains that sign, by name.
    pub dkim: BTreeMap<String, DkimDomain>,
    /// The submission service: its listeners, users and login limits.
    pub submission: Submission,
    /// Fault injection for tests; never set in production (left out of
    /// `mail-relay config` unless set).
    #[serde(skip_serializing_if = "Testing::is_unset")]
    pub testing: Testing,
}

/// The timeouts of RFC 5321 §4.5.3.2, as the server applies them: how long
/// it waits for the client in each state (and for its own commit).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Timeouts {
    /// After the 220 greeting, for EHLO/HELO (5 min).
    #[serde(with = "duration")]
    pub greeting: Duration,
    /// After EHLO/HELO or a finished transaction, for MAIL (5 min).
    #[serde(with = "duration")]
    pub mail: Duration,
    /// After MAIL or RCPT, for the next RCPT or DATA (5 min).
    #[serde(with = "duration")]
    pub rcpt: Duration,
    /// After our 354, for the first data (2 min).
    #[serde(with = "duration")]
    pub data_init: Duration,
    /// During DATA, for each further block of data (3 min).
    #[serde(with = "duration")]
    pub data_block: Duration,
    /// After the final dot, for the message to become durable before we
    /// answer; past it the client gets 451 (10 min), and the message, if
    /// its commit completes later, is removed, not delivered: the client's
    /// next attempt makes no duplicate.
    #[serde(with = "duration")]
    pub final_dot: Duration,
    /// For a client to take our replies (a client that stops reading) and
    /// to finish a TLS handshake (5 min).
    #[serde(with = "duration")]
    pub idle: Duration,
    /// Every timeout above is cut to this while the relay is under stress
    /// (three quarters of `max_sessions` or more in use), as Postfix's
    /// stress mode does (10 s).
    #[serde(with = "duration")]
    pub stress: Duration,
}

/// STARTTLS certificate and key (PEM files).
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Tls {
    /// Certificate chain, leaf first.
    pub cert: Option<PathBuf>,
    /// Private key (PKCS#8, PKCS#1 or SEC1).
    pub key: Option<PathBuf>,
}

/// Fault injection, for the tests of timeouts that depend on the disk.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Testing {
    /// Extra time every spool commit batch takes (as if the disk were slow).
    #[serde(with = "duration")]
    pub commit_delay: Duration,
}

impl Testing {
    /// Whether no fault is injected.
    pub fn is_unset(&self) -> bool {
        let Testing { commit_delay } = self;
        commit_delay.is_zero()
    }
}

impl Default for Config {
    fn default() -> Config {
        Config {
            listen: "127.0.0.1:2525".parse().expect("a valid address"),
            hostname: default_hostname(),
            user: None,
            run_as_root: false,
            require_safe_keys: true,
            spool_dir: "spool".into(),
            maildir: "maildir".into(),
            mynetworks: vec![
                "127.0.0.0/8".parse().expect("valid"),
                "::1/128".parse().expect("valid"),
            ],
            local_domains: Vec::new(),
            relay_domains: Vec::new(),
            relayhost: None,
            routes: BTreeMap::new(),
            backdoor: None,
            metrics: None,
            max_message_size: 10 << 20,
            max_recipients: 100,
            max_sessions: 1000,
            max_sessions_per_client: 100,
            error_limit: 10,
            junk_command_limit: 100,
            hopcount_limit: 50,
            min_data_rate: 500,
            add_missing_headers: true,
            stop_deadline: Duration::from_secs(10),
            log_level: log::LevelFilter::Info,
            log_file: None,
            blocking_threads: 16,
            timeouts: Timeouts::default(),
            tls: Tls::default(),
            queue: Queue::default(),
            smtp: Smtp::default(),
            mx: Mx::default(),
            mta_sts: MtaSts::default(),
            dkim: BTreeMap::new(),
            submission: Submission::default(),
            testing: Testing::default(),
        }
    }
}

impl Default for Timeouts {
    fn default() -> Timeouts {
        let min = |m: u64| Duration::from_secs(60 * m);
        Timeouts {
            greeting: min(5),
            mail: min(5),
            rcpt: min(5),
            data_init: min(2),
            data_block: min(3),
            final_dot: min(10),
            idle: min(5),
            stress: Duration::from_secs(10),
        }
    }
}

/// The system's host name, or `localhost`.
fn default_hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|s| s.trim().to_owned())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "localhost".to_owned())
}

/// The command line (`mail-relay --help`).
#[derive(Debug, Parser)]
#[command(
    name = "mail-relay",
    version,
    about = "An ESMTP relay on coro green threads: durable group-committed spool, Maildir or SMTP delivery.",
    long_about = "An ESMTP relay on coro green threads. With no options it listens on \
127.0.0.1:2525, spools into ./spool and delivers into the Maildir ./maildir; loopback \
clients may relay. With --relayhost (or routes in the config file) it relays to an SMTP \
upstream instead, with retries and bounces. Settings come from the embedded defaults, \
then --config FILE (TOML), then these flags; `mail-relay config` prints the result, and \
examples/mail-relay/mail-relay.toml lists every key. SIGHUP reloads the file, SIGUSR1 \
retries the queue, SIGTERM stops gracefully. The back door (--backdoor PATH) serves mailq, \
flush and the runtime's console on a Unix socket. Started as root, it should have --user NAME \
(it binds its ports and reads its keys as root, then runs as NAME); without it, it runs as \
root and warns at start, unless --run-as-root says that is meant. With a submission listener \
(--submission-listen, --submission-listen-tls) it also takes mail from its users' mail \
programs: AUTH PLAIN or LOGIN under TLS, each user limited to its own sender addresses, the \
users in a file of argon2id hashes made by `mail-relay passwd USER ADDRESS...`."
)]
pub struct Cli {
    /// What to do (default: run the relay).
    #[command(subcommand)]
    pub command: Option<Command>,
    /// TOML file over the embedded defaults (its keys are the long flags' names
    /// with `_`, plus the `[timeouts]`, `[tls]`, `[queue]`, `[smtp]`, `[mx]`, `[mta_sts]`,
    /// `[dkim]`, `[submission]` and `[routes]` tables).
    #[arg(long, value_name = "PATH", global = true)]
    pub config: Option<PathBuf>,
    /// Address to listen on (IP:PORT or HOST:PORT) [default: 127.0.0.1:2525].
    #[arg(long, value_name = "ADDR", value_parser = parse_listen)]
    pub listen: Option<SocketAddr>,
    /// Our host name (greeting, Received: headers) [default: the system's].
    #[arg(long)]
    pub hostname: Option<String>,
    /// The user to run as: started as root, the relay binds its ports,
    /// reads its keys and opens its log, then drops to this user [default:
    /// none: it runs as whoever starts it; as root, with a warning unless
    /// --run-as-root].
    #[arg(long, value_name = "NAME")]
    pub user: Option<String>,
    /// Running as root with no --user is meant: no warning about it at
    /// start (run_as_root).
    #[arg(long)]
    pub run_as_root: bool,
    /// Spool directory [default: spool].
    #[arg(long, value_name = "DIR", global = true)]
    pub spool_dir: Option<PathBuf>,
    /// Maildir to deliver into [default: maildir].
    #[arg(long, value_name = "DIR")]
    pub maildir: Option<PathBuf>,
    /// Networks allowed to relay, comma-separated CIDRs [default:
    /// 127.0.0.0/8,::1/128].
    #[arg(long, value_delimiter = ',', value_name = "CIDR")]
    pub mynetworks: Option<Vec<Cidr>>,
    /// Domains delivered locally (accepted from any client), comma-separated
    /// [default: none].
    #[arg(long, value_delimiter = ',', value_name = "DOMAIN")]
    pub local_domains: Option<Vec<String>>,
    /// SMTP upstream for all non-local mail: HOST:PORT, an IPv6 address in
    /// brackets, no scheme (e.g. 127.0.0.1:2601) [default: none, all mail into the
    /// Maildir]. A host name that does not resolve at start is warned
    /// about, not refused: mail for it waits in the queue until it does.
    #[arg(long, value_name = "HOST:PORT")]
    pub relayhost: Option<Upstream>,
    /// The back door's Unix socket (mailq, flush, the runtime's console)
    /// [default: none].
    #[arg(long, value_name = "PATH", global = true)]
    pub backdoor: Option<PathBuf>,
    /// Serve Prometheus metrics at http://ADDR/metrics [default: none].
    #[arg(long, value_name = "ADDR", value_parser = parse_listen)]
    pub metrics: Option<SocketAddr>,
    /// Largest message in octets [default: 10485760].
    #[arg(long, value_name = "OCTETS")]
    pub max_message_size: Option<u64>,
    /// Recipients per message [default: 100].
    #[arg(long, value_name = "N")]
    pub max_recipients: Option<usize>,
    /// Sessions at once [default: 1000].
    #[arg(long, value_name = "N")]
    pub max_sessions: Option<usize>,
    /// Sessions at once from one client address [default: 100].
    #[arg(long, value_name = "N")]
    pub max_sessions_per_client: Option<usize>,
    /// How long sessions in flight may take to finish at SIGTERM [default:
    /// 10s].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub stop_deadline: Option<Duration>,
    /// A protocol timeout, CLASS=DURATION (greeting, mail, rcpt, data_init,
    /// data_block, final_dot, idle, stress); repeatable [defaults: 5m, 5m, 5m,
    /// 2m, 3m, 10m, 5m, 10s].
    #[arg(long = "timeout", value_name = "CLASS=DURATION")]
    pub timeouts: Vec<String>,
    /// STARTTLS certificate chain (PEM) [default: none, no STARTTLS].
    #[arg(long, value_name = "PATH")]
    pub tls_cert: Option<PathBuf>,
    /// STARTTLS private key (PEM) [default: none].
    #[arg(long, value_name = "PATH")]
    pub tls_key: Option<PathBuf>,
    /// Log level (error, warn, info, debug, trace, off) [default: info].
    #[arg(long, value_name = "LEVEL")]
    pub log_level: Option<log::LevelFilter>,
    /// Append the log to this file (reopened at SIGHUP) [default: none,
    /// stderr].
    #[arg(long, value_name = "PATH")]
    pub log_file: Option<PathBuf>,
    /// MX delivery: addresses tried per delivery attempt, over all the
    /// exchangers ([mx] address_limit) [default: 5].
    #[arg(long, value_name = "N")]
    pub mx_address_limit: Option<usize>,
    /// MX delivery: connect to exchangers at loopback, private, link-local,
    /// shared or unspecified addresses ([mx] allow_private_addresses)
    /// [default: refused].
    #[arg(long)]
    pub mx_allow_private_addresses: bool,
    /// MX delivery: ignore the recipient domains' MTA-STS policies ([mta_sts]
    /// enabled = false) [default: applied].
    #[arg(long)]
    pub no_mta_sts: bool,
    /// CA certificates (PEM) trusted beside the system's store for MTA-STS:
    /// policy hosts and the mail exchangers a policy names ([mta_sts]
    /// ca_file) [default: the system's store alone].
    #[arg(long, value_name = "PATH")]
    pub mta_sts_ca_file: Option<PathBuf>,
    /// Submission listener with STARTTLS, then AUTH (port 587's service;
    /// submission.listen; needs --tls-cert, --tls-key and --users-file)
    /// [default: none].
    #[arg(long, value_name = "ADDR", value_parser = parse_listen)]
    pub submission_listen: Option<SocketAddr>,
    /// Submission listener with implicit TLS (port 465's service, RFC
    /// 8314; submission.listen_tls) [default: none].
    #[arg(long, value_name = "ADDR", value_parser = parse_listen)]
    pub submission_listen_tls: Option<SocketAddr>,
    /// The submission users file: USER:HASH:ADDRESSES lines made by
    /// `mail-relay passwd` (submission.users_file; read again at SIGHUP)
    /// [default: none].
    #[arg(long, value_name = "PATH")]
    pub users_file: Option<PathBuf>,
    /// Delivery status notifications: tell the sender of a message still
    /// deferred after this long, once, for the recipients that asked
    /// (NOTIFY=DELAY); 0s: never (queue.delay_warning_time) [default:
    /// 4h].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub delay_warning_time: Option<Duration>,
    /// What a delivery status notification returns of a message whose MAIL
    /// gave no RET: hdrs or full (queue.dsn_ret) [default: hdrs].
    #[arg(long, value_name = "RET", value_parser = parse_ret)]
    pub dsn_ret: Option<crate::dsn::Ret>,
    /// The notifications a recipient that gave no NOTIFY gets: FAILURE,
    /// FAILURE,DELAY or NEVER (queue.dsn_notify) [default: FAILURE].
    #[arg(long, value_name = "NOTIFY", value_parser = crate::dsn::Notify::parse)]
    pub dsn_notify: Option<crate::dsn::Notify>,
}

/// `--dsn-ret`'s value.
fn parse_ret(s: &str) -> Result<crate::dsn::Ret, String> {
    match s.to_ascii_lowercase().as_str() {
        "hdrs" => Ok(crate::dsn::Ret::Hdrs),
        "full" => Ok(crate::dsn::Ret::Full),
        _ => Err(format!("{s:?}: hdrs or full")),
    }
}

/// What `mail-relay` does besides running.
#[derive(Debug, Clone, PartialEq, Eq, Subcommand)]
pub enum Command {
    /// List the queue (id, size, arrival, sender, recipients, and why a
    /// deferred message waits): from the running relay's back door when one
    /// is configured, else from the spool directory.
    Mailq,
    /// Retry every deferred message now (through the back door when one is
    /// configured, else by SIGUSR1 to the relay whose pid is in the spool).
    Flush,
    /// Print the effective configuration (defaults, then --config FILE,
    /// then the flags) as TOML, every key.
    Config,
    /// Make a users-file line for the submission service: reads USER's
    /// password from standard input (asking twice, without echo, on a
    /// terminal) and prints `USER:HASH:ADDRESSES`, the hash argon2id
    /// with a random salt. Append the line to the file of submission.users_file.
    Passwd {
        /// The name the user logs in with.
        user: String,
        /// The sender addresses the user may use in MAIL FROM
        /// (`name@domain`, `@domain` for every address of a domain, or
        /// `name@*` for that name at any domain); none: the user name
        /// itself when it is an address, else `USER@*`.
        addresses: Vec<String>,
    },
}

/// A configuration error: what is wrong, naming the key.
#[derive(Debug)]
pub struct ConfigError(pub String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

impl Config {
    /// The configuration as a TOML file would say it (every key; unset
    /// optional ones are left out).
    pub fn to_toml(&self) -> String {
        toml::to_string(self).unwrap_or_else(|e| format!("# cannot print: {e}\n"))
    }

    /// Defaults, then the file named by `--config`, then the flags; checked.
    pub fn load(cli: &Cli) -> Result<Config, ConfigError> {
        let mut c = match &cli.config {
            Some(path) => Config::from_file(path)?,
            None => Config::default(),
        };
        c.apply(cli)?;
        c.check()?;
        Ok(c)
    }

    /// Defaults with the TOML file at `path` over them.
    pub fn from_file(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            let note = crate::privilege::dropped_note();
            ConfigError(format!(
                "cannot read config file {}: {e}{note}",
                path.display()
            ))
        })?;
        Config::from_toml(&text)
            .map_err(|e| ConfigError(format!("config file {}: {}", path.display(), e.0)))
    }

    /// Defaults with the TOML text over them.
    pub fn from_toml(text: &str) -> Result<Config, ConfigError> {
        toml::from_str(text).map_err(|e| ConfigError(e.to_string().trim_end().to_owned()))
    }

    fn apply(&mut self, cli: &Cli) -> Result<(), ConfigError> {
        macro_rules! set {
            ($($field:ident),*) => {
                $(if let Some(v) = &cli.$field { self.$field = v.clone(); })*
            };
        }
        if let Some(u) = &cli.relayhost {
            self.relayhost = Some(u.clone());
        }
        if let Some(p) = &cli.backdoor {
            self.backdoor = Some(p.clone());
        }
        if let Some(u) = &cli.user {
            self.user = Some(u.clone());
        }
        self.run_as_root |= cli.run_as_root;
        if let Some(a) = cli.metrics {
            self.metrics = Some(a);
        }
        if let Some(p) = &cli.log_file {
            self.log_file = Some(p.clone());
        }
        set!(
            listen,
            hostname,
            spool_dir,
            maildir,
            mynetworks,
            local_domains,
            max_message_size,
            max_recipients,
            max_sessions,
            max_sessions_per_client,
            stop_deadline,
            log_level
        );
        if let Some(n) = cli.mx_address_limit {
            self.mx.address_limit = n;
        }
        if cli.mx_allow_private_addresses {
            self.mx.allow_private_addresses = true;
        }
        if cli.no_mta_sts {
            self.mta_sts.enabled = false;
        }
        if let Some(p) = &cli.mta_sts_ca_file {
            self.mta_sts.ca_file = Some(p.clone());
        }
        if let Some(a) = cli.submission_listen {
            self.submission.listen = Some(a);
        }
        if let Some(a) = cli.submission_listen_tls {
            self.submission.listen_tls = Some(a);
        }
        if let Some(p) = &cli.users_file {
            self.submission.users_file = Some(p.clone());
        }
        if let Some(d) = cli.delay_warning_time {
            self.queue.delay_warning_time = d;
        }
        if let Some(r) = cli.dsn_ret {
            self.queue.dsn_ret = r;
        }
        if let Some(n) = cli.dsn_notify {
            self.queue.dsn_notify = n;
        }
        if let Some(p) = &cli.tls_cert {
            self.tls.cert = Some(p.clone());
        }
        if let Some(p) = &cli.tls_key {
            self.tls.key = Some(p.clone());
        }
        for t in &cli.timeouts {
            let (class, value) = t
                .split_once('=')
                .ok_or_else(|| ConfigError(format!("--timeout {t:?}: expected CLASS=DURATION")))?;
            let d = parse_duration(value)
                .map_err(|e| ConfigError(format!("--timeout {class}: {e}")))?;
            let slot = match class {
                "greeting" => &mut self.timeouts.greeting,
                "mail" => &mut self.timeouts.mail,
                "rcpt" => &mut self.timeouts.rcpt,
                "data_init" => &mut self.timeouts.data_init,
                "data_block" => &mut self.timeouts.data_block,
                "final_dot" => &mut self.timeouts.final_dot,
                "idle" => &mut self.timeouts.idle,
                "stress" => &mut self.timeouts.stress,
                _ => {
                    return Err(ConfigError(format!(
                        "--timeout {class}: unknown timeout class (greeting, mail, rcpt, \
                         data_init, data_block, final_dot, idle, stress)"
                    )))
                }
            };
            *slot = d;
        }
        Ok(())
    }

    /// Values that parse but cannot work.
    fn check(&self) -> Result<(), ConfigError> {
        let positive = [
            ("max_message_size", self.max_message_size as usize),
            ("max_recipients", self.max_recipients),
            ("max_sessions", self.max_sessions),
            ("max_sessions_per_client", self.max_sessions_per_client),
            ("error_limit", self.error_limit as usize),
            ("junk_command_limit", self.junk_command_limit as usize),
            ("hopcount_limit", self.hopcount_limit),
            ("min_data_rate", self.min_data_rate as usize),
            ("blocking_threads", self.blocking_threads),
        ];
        for (key, v) in positive {
            if v == 0 {
                return Err(ConfigError(format!("{key}: must be at least 1")));
            }
        }
        let t = &self.timeouts;
        for (key, d) in [
            ("timeouts.greeting", t.greeting),
            ("timeouts.mail", t.mail),
            ("timeouts.rcpt", t.rcpt),
            ("timeouts.data_init", t.data_init),
            ("timeouts.data_block", t.data_block),
            ("timeouts.final_dot", t.final_dot),
            ("timeouts.idle", t.idle),
            ("timeouts.stress", t.stress),
        ] {
            if d.is_zero() {
                return Err(ConfigError(format!("{key}: must be longer than 0")));
            }
        }
        if self.hostname.is_empty() || self.hostname.chars().any(|c| c.is_whitespace()) {
            return Err(ConfigError(format!(
                "hostname: {:?} is not a host name",
                self.hostname
            )));
        }
        self.queue.check()?;
        self.smtp.check()?;
        self.mx.check()?;
        self.mta_sts.check()?;
        dkim::check(&self.dkim)?;
        self.submission
            .check(self.tls.cert.is_some() && self.tls.key.is_some())?;
        match (&self.tls.cert, &self.tls.key) {
            (Some(_), None) => Err(ConfigError("tls.key: missing (tls.cert is set)".into())),
            (None, Some(_)) => Err(ConfigError("tls.cert: missing (tls.key is set)".into())),
            _ => Ok(()),
        }
    }
}

/// Parses a listen address: `IP:PORT`, `[IPv6]:PORT`, or `HOST:PORT`
/// resolved to its first address (`localhost:2526`).
pub fn parse_listen(s: &str) -> Result<SocketAddr, String> {
    if let Ok(a) = s.parse() {
        return Ok(a);
    }
    use std::net::ToSocketAddrs;
    let mut addrs = s
        .to_socket_addrs()
        .map_err(|e| format!("{s:?} is not an address to listen on (IP:PORT or HOST:PORT): {e}"))?;
    addrs
        .next()
        .ok_or_else(|| format!("{s:?} resolves to no address"))
}

/// serde glue for `metrics`.
fn opt_listen_addr<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<SocketAddr>, D::Error> {
    let s = String::deserialize(d)?;
    parse_listen(&s).map(Some).map_err(serde::de::Error::custom)
}

/// serde glue for `listen`.
fn listen_addr<'de, D: serde::Deserializer<'de>>(d: D) -> Result<SocketAddr, D::Error> {
    let s = String::deserialize(d)?;
    parse_listen(&s).map_err(serde::de::Error::custom)
}

/// Parses `"300ms"`, `"30s"`, `"5m"`, `"1h"`, `"5d"` (a bare number is
/// seconds).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a duration (e.g. \"300ms\", \"30s\", \"5m\")"))?;
    let d = match unit.trim() {
        "ms" => Duration::from_millis(n),
        "" | "s" => Duration::from_secs(n),
        "m" | "min" => Duration::from_secs(n * 60),
        "h" => Duration::from_secs(n * 3600),
        "d" => Duration::from_secs(n * 86_400),
        u => return Err(format!("{s:?}: unknown unit {u:?} (ms, s, m, h, d)")),
    };
    Ok(d)
}

/// serde glue: the log level in lower case, as the file writes it.
fn level<S: serde::Serializer>(l: &log::LevelFilter, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&l.as_str().to_lowercase())
}

/// Writes `d` as the file does: the largest unit that divides it.
pub fn format_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if !ms.is_multiple_of(1000) || ms == 0 {
        return format!("{ms}ms");
    }
    let s = d.as_secs();
    for (unit, n) in [("d", 86_400), ("h", 3600), ("m", 60)] {
        if s.is_multiple_of(n) {
            return format!("{}{unit}", s / n);
        }
    }
    format!("{s}s")
}

/// serde glue: durations as strings (`"5m"`) or integers (seconds).
mod duration {
    use std::time::Duration;

    use serde::{de, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&super::format_duration(*d))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        struct V;
        impl de::Visitor<'_> for V {
            type Value = Duration;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a duration such as \"300ms\", \"30s\", \"5m\" or a number of seconds")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Duration, E> {
                super::parse_duration(s).map_err(E::custom)
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<Duration, E> {
                u64::try_from(n)
                    .map(Duration::from_secs)
                    .map_err(|_| E::custom("a duration cannot be negative"))
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_readme_ones() {
        let c = Config::default();
        assert_eq!(c.listen.to_string(), "127.0.0.1:2525");
        assert_eq!(c.spool_dir, Path::new("spool"));
        assert_eq!(c.maildir, Path::new("maildir"));
        assert!(c
            .mynetworks
            .iter()
            .any(|n| n.contains("127.0.0.1".parse().unwrap())));
        c.check().unwrap();
    }

    #[test]
    fn file_values_override_defaults() {
        let c = Config::from_toml(
            "listen = \"127.0.0.1:0\"\nmax_sessions = 3\n[timeouts]\ngreeting = \"300ms\"\nidle = 2\n",
        )
        .unwrap();
        assert_eq!(c.max_sessions, 3);
        assert_eq!(c.timeouts.greeting, Duration::from_millis(300));
        assert_eq!(c.timeouts.idle, Duration::from_secs(2));
        assert_eq!(c.timeouts.mail, Duration::from_secs(300));
    }

    #[test]
    fn delivery_settings() {
        let c = Config::from_toml(
            "relayhost = \"[127.0.0.1]:2601\"\n[routes]\n\"b.test\" = \"local\"\n\".c.test\" = \"10.0.0.1:25\"\n\
             [queue]\nminimal_backoff_time = \"1s\"\nmaximal_queue_lifetime = \"2d\"\n\
             [smtp]\ntls_security_level = \"verify\"\nconnection_cache = false\n",
        )
        .unwrap();
        c.check().unwrap();
        assert_eq!(c.relayhost.unwrap().to_string(), "127.0.0.1:2601");
        assert_eq!(c.routes["b.test"], Dest::Local);
        assert_eq!(c.routes[".c.test"].to_string(), "smtp:10.0.0.1:25");
        assert_eq!(c.queue.minimal_backoff_time, Duration::from_secs(1));
        assert_eq!(
            c.queue.maximal_queue_lifetime,
            Duration::from_secs(2 * 86_400)
        );
        assert_eq!(c.queue.maximal_backoff_time, Duration::from_secs(4000));
        assert_eq!(c.smtp.tls_security_level, TlsLevel::Verify);
        assert!(!c.smtp.connection_cache);
        assert_eq!(c.smtp.destination_concurrency_limit, 20);
        let e = Config::from_toml("relayhost = \"host:99999\"\n")
            .unwrap_err()
            .0;
        assert!(e.contains("relayhost") && e.contains("bad port"), "{e}");
        let e = Config::from_toml("[smtp]\ntls_security_level = \"maybe\"\n")
            .unwrap_err()
            .0;
        assert!(e.contains("tls_security_level"), "{e}");
        let e = Config::from_toml("[queue]\nminimal_backoff_time = \"2h\"\n")
            .unwrap()
            .check()
            .unwrap_err()
            .0;
        assert!(e.contains("queue.maximal_backoff_time"), "{e}");
    }

    #[test]
    fn unknown_keys_and_bad_values_name_the_key() {
        let e = Config::from_toml("max_sesions = 3\n").unwrap_err().0;
        assert!(e.contains("max_sesions"), "{e}");
        let e = Config::from_toml("[timeouts]\nrcpt = \"5 parsecs\"\n")
            .unwrap_err()
            .0;
        assert!(e.contains("rcpt") && e.contains("unknown unit"), "{e}");
        let e = Config::from_toml("mynetworks = [\"10.0.0.0/33\"]\n")
            .unwrap_err()
            .0;
        assert!(e.contains("mynetworks") && e.contains("10.0.0.0/33"), "{e}");
        let e = Config::from_toml("max_sessions = \"many\"\n")
            .unwrap_err()
            .0;
        assert!(e.contains("max_sessions"), "{e}");
        let c = Config {
            max_recipients: 0,
            ..Config::default()
        };
        assert!(c.check().unwrap_err().0.contains("max_recipients"));
    }

    #[test]
    fn the_shipped_file_is_the_defaults() {
        let shipped = include_str!("../../mail-relay.toml");
        let c = Config::from_toml(shipped).unwrap();
        c.check().unwrap();
        assert_eq!(c.to_toml(), Config::default().to_toml());
        // Every key the relay knows is in the file (set, or commented out
        // when it has no value by default).
        let full = Config {
            user: Some("mailrelay".into()),
            relayhost: Some("127.0.0.1:1".parse().unwrap()),
            backdoor: Some("b".into()),
            log_file: Some("l".into()),
            metrics: Some("127.0.0.1:9".parse().unwrap()),
            submission: Submission {
                listen: Some("127.0.0.1:587".parse().unwrap()),
                listen_tls: Some("127.0.0.1:465".parse().unwrap()),
                users_file: Some("u".into()),
                ..Submission::default()
            },
            ..Config::default()
        };
        for line in full.to_toml().lines() {
            let Some((key, _)) = line.split_once(" = ") else {
                continue;
            };
            assert!(
                shipped.contains(&format!("\n{key} = "))
                    || shipped.contains(&format!("\n# {key} = ")),
                "{key} is not in mail-relay.toml"
            );
        }
    }

    #[test]
    fn fault_injection_is_printed_only_when_set() {
        assert!(!Config::default().to_toml().contains("[testing]"));
        let c = Config::from_toml("[testing]\ncommit_delay = \"5ms\"\n").unwrap();
        assert!(c.to_toml().contains("[testing]\ncommit_delay = \"5ms\""));
    }

    #[test]
    fn listen_takes_a_host_name() {
        let a = parse_listen("localhost:2526").unwrap();
        assert!(a.ip().is_loopback() && a.port() == 2526, "{a}");
        let c = Config::from_toml("listen = \"localhost:2527\"\n").unwrap();
        assert_eq!(c.listen.port(), 2527);
        assert!(parse_listen("no such host.invalid:25").is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("7"), Ok(Duration::from_secs(7)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("5d"), Ok(Duration::from_secs(432_000)));
        assert!(parse_duration("soon").is_err());
    }
}
