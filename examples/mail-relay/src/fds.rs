//! The open-file limit (`RLIMIT_NOFILE`, systemd's `LimitNOFILE`): raised
//! to its hard limit at start, and checked against what the settings may
//! need at once.
//!
//! Every session, upstream connection, metrics scrape, spool and Maildir
//! file takes a descriptor. A `max_sessions` the limit cannot hold lets a
//! crowd of clients take them all (accept then fails and backs off, and
//! commits fail with 451 until sessions end), so the start says so.

use std::io;

use crate::config::Config;

/// Descriptors for everything but sessions and upstream connections: the
/// listeners, the spool's and the journal's files, the log, the reactor,
/// the back door, the blocking pool's files, metrics scrapes.
pub const RESERVE: usize = 64 + crate::metrics::MAX_CONNECTIONS;

/// Raises the soft open-file limit to the hard one (a relay is a server of
/// many connections; the epoll reactor has no `FD_SETSIZE` bound); returns
/// the limit in force.
///
/// # Errors
///
/// If the limit cannot be read.
pub fn raise_limit() -> io::Result<usize> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one `rlimit` into the valid, exclusively
    // borrowed `lim`; it reads no memory of ours.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err(io::Error::last_os_error());
    }
    if lim.rlim_cur < lim.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: lim.rlim_max,
            rlim_max: lim.rlim_max,
        };
        // SAFETY: setrlimit reads one `rlimit` from the valid `raised`.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            lim.rlim_cur = lim.rlim_max;
        }
    }
    Ok(usize::try_from(lim.rlim_cur).unwrap_or(usize::MAX))
}

/// The descriptors `config` may need at once: every session, every
/// upstream connection, and the [`RESERVE`].
pub fn needed(config: &Config) -> usize {
    config.max_sessions + config.smtp.connection_limit + RESERVE
}

/// Warns when the open-file limit `nofile` is below what `config` may
/// need at once.
pub fn check(nofile: usize, config: &Config) {
    let need = needed(config);
    if nofile < need {
        log::warn!(
            "the open-file limit {nofile} is below what max_sessions ({}) and \
             smtp.connection_limit ({}) may need at once, about {need}: a crowd of clients \
             can exhaust it (raise LimitNOFILE / ulimit -n, or lower max_sessions)",
            config.max_sessions,
            config.smtp.connection_limit
        );
    }
}
