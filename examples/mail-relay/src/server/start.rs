//! Starting the relay, in the order that keeps a failed start harmless:
//! the endpoints (TLS files, listeners, users) before anything touches
//! the disk; then, as root if started so, the directories and the keys,
//! and the drop to the relay's user for good; then the destinations, the
//! queue and the spool, with what the last run left back in the queue;
//! then the announcement.

use std::io;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;

use coro::net::backdoor::BackDoor;
use coro::net::TcpListener;

use crate::config::Config;
use crate::delivery::mx::MxDelivery;
use crate::delivery::route::{Dest, Router, Upstream};
use crate::delivery::smtp::client::Settings;
use crate::delivery::smtp::{Destination, Smtp};
use crate::delivery::{Maildir, Transport};
use crate::dkim::{Dkim, Signing};
use crate::privilege::RunAs;
use crate::queue::Queue;
use crate::session::Port;
use crate::spool::Spool;

/// What the relay listens on and answers with, set up before anything
/// touches the disk.
pub(super) struct Endpoints {
    /// STARTTLS (and the TLS port's handshake), when configured.
    pub(super) tls: Option<Arc<rustls::ServerConfig>>,
    /// The MTA listener.
    pub(super) listener: Rc<TcpListener>,
    /// The metrics endpoint's listener, when configured.
    pub(super) metrics: Option<Rc<TcpListener>>,
    /// The submission service's listeners.
    pub(super) submission: Vec<(Rc<TcpListener>, Port)>,
    /// The submission service's users.
    pub(super) auth: Option<Rc<crate::auth::Auth>>,
}

impl Endpoints {
    /// Reads the TLS files and the users, binds the listeners.
    pub(super) fn open(config: &Config) -> io::Result<Endpoints> {
        let tls = match (&config.tls.cert, &config.tls.key) {
            (Some(c), Some(k)) => {
                crate::files::check_private_key("tls.key", k, config.require_safe_keys)
                    .map_err(|e| io::Error::new(io::ErrorKind::PermissionDenied, e))?;
                Some(crate::tls::server_config(c, k)?)
            }
            _ => None,
        };
        let listener = Rc::new(
            TcpListener::bind(config.listen)
                .map_err(|e| io::Error::new(e.kind(), format!("listen {}: {e}", config.listen)))?,
        );
        let metrics = match config.metrics {
            Some(a) => Some(Rc::new(crate::metrics::bind(a)?)),
            None => None,
        };
        let submission = bind_submission(config)?;
        let auth = crate::auth::Auth::load(&config.submission)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?
            .map(Rc::new);
        Ok(Endpoints {
            tls,
            listener,
            metrics,
            submission,
            auth,
        })
    }
}

/// As root if started so: checks the directories, reads the DKIM keys,
/// makes what is missing (for `who`); then drops to `who` for good.
pub(super) fn prepare_as(config: &Config, who: &RunAs) -> io::Result<Rc<Dkim>> {
    let dkim = load_dkim(config)?;
    let dirs = private_dirs(config, who)?;
    for (key, dir, exists) in &dirs {
        if !exists {
            crate::files::make_dir(key, dir, who)?;
        }
    }
    who.drop_privileges()?;
    if who.drops {
        log::info!("running as {who} from now on");
    }
    Ok(dkim)
}

/// The destinations and the queue, and the spool opened: what the last
/// run left in it is back in the queue, to deliver.
pub(super) fn open_spool(
    config: &Config,
    dkim: &Rc<Dkim>,
) -> io::Result<(Spool, Queue, Option<Rc<Smtp>>)> {
    let router = Router::new(
        &config.routes,
        &config.local_domains,
        config.relayhost.as_ref(),
    );
    let router = if config.mx.enabled {
        router.by_mx()
    } else {
        router
    };
    let (transports, smtp, _) = transports(config, &router, dkim.clone())?;
    warn_unresolved(&router);
    let queue = Queue::new(router, transports, config.queue.clone(), &config.hostname);
    let (spool, recovered) = {
        let q = queue.clone();
        Spool::open(&config.spool_dir, config.testing.commit_delay, move |m| {
            q.enqueue(m)
        })
        .map_err(|e| annotate(e, "spool_dir", &config.spool_dir))?
    };
    queue.attach(spool.clone());
    if recovered.removed_tmp > 0 {
        log::info!(
            "removed {} from the spool",
            crate::logger::count(recovered.removed_tmp, "half-written file")
        );
    }
    for (name, why) in &recovered.corrupt {
        log::warn!("{name}: unreadable queue file moved to corrupt/: {why}");
    }
    if !recovered.messages.is_empty() {
        log::info!(
            "{} found in the spool; delivering",
            crate::logger::count(recovered.messages.len(), "queued message")
        );
    }
    for q in recovered.messages {
        queue.restore(q);
    }
    queue.retry_at_start();
    Ok((spool, queue, smtp))
}

/// Opens the back door, writes the pid file and says where the relay
/// listens (stdout and the log).
pub(super) fn announce(
    config: &Config,
    endpoints: &Endpoints,
    spool: &Spool,
    queue: &Queue,
    smtp: &Option<Rc<Smtp>>,
) -> io::Result<Option<BackDoor>> {
    let addr = endpoints.listener.local_addr()?;
    let mut submission_at = String::new();
    for (l, port) in &endpoints.submission {
        let how = if *port == Port::SubmissionTls {
            "TLS"
        } else {
            "STARTTLS"
        };
        submission_at.push_str(&format!("; submission on {} ({how})", l.local_addr()?));
    }
    let door = match &config.backdoor {
        Some(path) => Some(crate::control::serve_backdoor(path, queue, smtp.clone())?),
        None => None,
    };
    crate::control::write_pid(spool.dir())
        .map_err(|e| annotate(e, "spool_dir", &config.spool_dir))?;
    println!(
        "mail-relay: listening on {addr}{submission_at}; spool in {}; {}{}",
        spool.dir().display(),
        queue.describe(),
        if endpoints.tls.is_some() {
            "; STARTTLS on"
        } else {
            ""
        }
    );
    log::info!("daemon started -- listening on {addr}");
    Ok(door)
}

/// A transport for each destination the router can name: the Maildir, and
/// one per SMTP upstream sharing one client and connection cache, each
/// SMTP one DKIM-signing with the keys in force (none, until `[dkim]`
/// names some).
type Transports = (Vec<(Dest, Rc<dyn Transport>)>, Option<Rc<Smtp>>, Rc<Dkim>);

/// The DKIM keys, read (and a bad or unsafe one refused) at start,
/// whatever the routes.
fn load_dkim(config: &Config) -> io::Result<Rc<Dkim>> {
    let dkim = Dkim::load(&config.dkim, config.require_safe_keys)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    Ok(Rc::new(dkim))
}

/// The directories the relay writes into that the configuration names
/// (the spool, the Maildir, the back door's), checked for `who`: (setting,
/// path, whether it exists).
fn private_dirs(config: &Config, who: &RunAs) -> io::Result<Vec<(&'static str, PathBuf, bool)>> {
    let mut dirs = vec![
        ("spool_dir", config.spool_dir.clone()),
        ("maildir", config.maildir.clone()),
    ];
    if let Some(path) = &config.backdoor {
        let dir = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
            _ => PathBuf::from("."),
        };
        dirs.push(("backdoor", dir));
    }
    dirs.into_iter()
        .map(|(key, dir)| {
            let exists = crate::files::check_dir(key, &dir, who)?;
            Ok((key, dir, exists))
        })
        .collect()
}

/// The SMTP upstreams the router delivers to (`relayhost`, routes), each
/// once.
fn smtp_upstreams(router: &Router) -> Vec<Upstream> {
    router
        .destinations()
        .into_iter()
        .filter_map(|d| match d {
            Dest::Smtp(up) => Some(up),
            Dest::Local | Dest::Mx => None,
        })
        .collect()
}

/// Warns about SMTP upstreams (`relayhost`, routes) whose names do not
/// resolve now: the relay starts all the same, and their mail waits in
/// the queue until they do.
fn warn_unresolved(router: &Router) {
    let upstreams = smtp_upstreams(router);
    if upstreams.is_empty() {
        return;
    }
    let relayhost = router.relayhost().cloned();
    let spawned = coro::Builder::new()
        .name("resolve upstreams".into())
        .spawn(move || {
            for up in upstreams {
                let what = if Some(&up) == relayhost.as_ref() {
                    "relayhost"
                } else {
                    "route to"
                };
                match coro::net::lookup_host((up.host.as_str(), up.port)) {
                    Ok(_) => {}
                    Err(e) if coro::WaitError::from_io(&e).is_some() => return,
                    Err(e) => log::warn!(
                        "{what} {up}: {} does not resolve now ({e}); mail for it waits in the \
                         queue until it does",
                        up.host
                    ),
                }
            }
        });
    if let Err(e) = spawned {
        log::warn!("cannot check the upstreams' names: {e}");
    }
}

fn transports(config: &Config, router: &Router, dkim: Rc<Dkim>) -> io::Result<Transports> {
    let maildir = Maildir::open(&config.maildir, &config.hostname)
        .map_err(|e| annotate(e, "maildir", &config.maildir))?;
    let mut out: Vec<(Dest, Rc<dyn Transport>)> = vec![(Dest::Local, Rc::new(maildir))];
    let upstreams = smtp_upstreams(router);
    let by_mx = router.destinations().contains(&Dest::Mx);
    if upstreams.is_empty() && !by_mx {
        return Ok((out, None, dkim));
    }
    let c = &config.smtp;
    let sts = if by_mx {
        crate::delivery::mx::sts::from_config(config)?
    } else {
        None
    };
    let settings = Settings {
        cfg: c.clone(),
        helo_name: c
            .helo_name
            .clone()
            .unwrap_or_else(|| config.hostname.clone()),
        tls: crate::tls::client_config(c.tls_security_level, c.tls_ca_file.as_deref())?,
        verified_tls: sts.as_ref().map(|(_, tls)| tls.clone()),
    };
    let smtp = Smtp::new(settings)?;
    for up in upstreams {
        let dest = Destination::new(smtp.clone(), up.clone());
        out.push((Dest::Smtp(up), Rc::new(dest)));
    }
    if by_mx {
        let mx = MxDelivery::new(
            smtp.clone(),
            &config.mx,
            config.listen.ip(),
            c.connection_limit,
            c.message_timeout,
        )
        .map_err(|e| io::Error::new(e.kind(), format!("[mx]: {e}")))?;
        let mx = match sts {
            Some((sts, _)) => mx.with_sts(sts),
            None => mx,
        };
        out.push((Dest::Mx, Rc::new(mx)));
    }
    for (dest, t) in &mut out {
        if *dest != Dest::Local {
            *t = Rc::new(Signing::new(t.clone(), dkim.clone()));
        }
    }
    Ok((out, Some(smtp), dkim))
}

/// `e` with the setting and the path it is about.
pub(super) fn annotate(e: io::Error, key: &str, path: &std::path::Path) -> io::Error {
    io::Error::new(e.kind(), format!("{key} {}: {e}", path.display()))
}

/// The submission service's listeners, bound (none when not configured).
fn bind_submission(config: &Config) -> io::Result<Vec<(Rc<TcpListener>, Port)>> {
    let s = &config.submission;
    let mut out = Vec::new();
    for (addr, port, key) in [
        (s.listen, Port::Submission, "submission.listen"),
        (s.listen_tls, Port::SubmissionTls, "submission.listen_tls"),
    ] {
        if let Some(addr) = addr {
            let l = TcpListener::bind(addr)
                .map_err(|e| io::Error::new(e.kind(), format!("{key} {addr}: {e}")))?;
            out.push((Rc::new(l), port));
        }
    }
    Ok(out)
}
