//! The queue's delivery status notifications (RFC 3461): which senders
//! are told what, and the report committed to the spool.
//!
//! Each recipient's NOTIFY (or `[queue] dsn_notify` when it gave none)
//! decides: a failure is reported unless FAILURE is left out (NOTIFY=NEVER
//! sends nothing); a delay once per message, after `delay_warning_time`
//! in the queue, to the recipients that asked for DELAY; a delivery only
//! when SUCCESS was asked and no next hop took the request on (`delivered`
//! for the Maildir, `relayed` for a next hop without DSN). Nothing is ever
//! reported to the null sender.
//!
//! The report returns the original's header section (RET=HDRS, or
//! `dsn_ret`) or the whole message (RET=FULL). The whole message is copied
//! from its spool file into the report's own spool file a chunk at a time
//! ([`Spool::spill`](crate::spool::Spool::spill)): neither is ever held
//! whole in memory, whatever its size.

use std::io;
use std::sync::Arc;

use super::Inner;
use crate::delivery::report::{self, Action, Context, Notice, Report};
use crate::delivery::Detail;
use crate::dsn::{Notify, Ret};
use crate::spool::{Message, Stored, SPILL_AT};

/// What recipient `i` of `msg` wants to be told.
fn wants(inner: &Inner, msg: &Stored, i: usize) -> Notify {
    msg.env.dsn.rcpt(i).notify_or(inner.settings.dsn_notify)
}

/// Tells the sender of `msg` that `failed` recipients failed (`expired`:
/// the queue lifetime ran out). Recipients that asked for no failure
/// notice are logged and left out. `Err` when the report could not be
/// committed (then the recipients are not finished).
pub(super) fn failed(
    inner: &Inner,
    msg: &Stored,
    failed: &[(usize, Detail)],
    expired: bool,
) -> Result<(), String> {
    let env = &msg.env;
    if env.from.is_empty() {
        for (i, d) in failed {
            log::info!(
                "{}: to=<{}>: undeliverable ({}) and the sender is <>: no bounce, dropped",
                env.id,
                env.rcpts[*i],
                d.text
            );
        }
        return Ok(());
    }
    let mut notices = Vec::new();
    for (i, d) in failed {
        let n = wants(inner, msg, *i);
        if n.failure {
            notices.push(Notice {
                index: *i,
                action: Action::Failed,
                detail: d,
            });
        } else {
            log::info!(
                "{}: to=<{}>: undeliverable ({}); no bounce: NOTIFY={n}",
                env.id,
                env.rcpts[*i],
                d.text
            );
        }
    }
    if notices.is_empty() {
        return Ok(());
    }
    send(
        inner,
        msg,
        &notices,
        expired,
        "sender non-delivery notification",
    )
}

/// Tells the sender of `msg`, once, that `deferred` recipients are still
/// waiting, if the message has been queued `delay_warning_time` and some
/// of them asked; returns whether it did (the caller records it).
pub(super) fn delayed(inner: &Inner, msg: &Stored, deferred: &[(usize, Detail)]) -> bool {
    let env = &msg.env;
    let after = inner.settings.delay_warning_time;
    let age = std::time::SystemTime::now()
        .duration_since(env.arrival)
        .unwrap_or_default();
    if env.from.is_empty() || after.is_zero() || age < after {
        return false;
    }
    let notices: Vec<Notice<'_>> = deferred
        .iter()
        .filter(|(i, _)| wants(inner, msg, *i).delay)
        .map(|(i, d)| Notice {
            index: *i,
            action: Action::Delayed,
            detail: d,
        })
        .collect();
    !notices.is_empty() && send(inner, msg, &notices, false, "sender delay notification").is_ok()
}

/// Tells the sender of `msg` that `sent` recipients (with how each left
/// us) were delivered, for those that asked.
pub(super) fn delivered(inner: &Inner, msg: &Stored, sent: &[(usize, Detail, Action)]) {
    if msg.env.from.is_empty() {
        return;
    }
    let notices: Vec<Notice<'_>> = sent
        .iter()
        .filter(|(i, ..)| wants(inner, msg, *i).success)
        .map(|(i, d, a)| Notice {
            index: *i,
            action: *a,
            detail: d,
        })
        .collect();
    if !notices.is_empty() {
        // A report that cannot be queued is logged; the delivery stands.
        let _ = send(
            inner,
            msg,
            &notices,
            false,
            "sender delivery status notification",
        );
    }
}

/// Makes the report on `notices` and commits it; logs the outcome.
fn send(
    inner: &Inner,
    msg: &Stored,
    notices: &[Notice<'_>],
    expired: bool,
    what: &str,
) -> Result<(), String> {
    let q = &inner.settings;
    let lifetime = q.maximal_queue_lifetime;
    let cx = Context {
        hostname: &inner.hostname,
        expired,
        retry_until: Some(msg.env.arrival + lifetime),
        default_ret: q.dsn_ret,
    };
    let r = report::report(&cx, &msg.env, notices);
    let rid = r.env.id.clone();
    let committed = match r.returns {
        Ret::Hdrs => commit_with_headers(inner, msg, r),
        Ret::Full => commit_with_message(inner, msg, r),
    };
    match committed {
        Ok(()) => {
            log::info!("{}: {what}: {rid}", msg.env.id);
            Ok(())
        }
        Err(e) => {
            log::warn!(
                "{}: cannot queue the {what} to <{}>: {e}",
                msg.env.id,
                msg.env.from
            );
            Err(e.to_string())
        }
    }
}

/// The report with the original's header section (read from the spool,
/// bounded by [`report::HEADERS_LIMIT`]), committed from memory.
fn commit_with_headers(inner: &Inner, msg: &Stored, r: Report) -> io::Result<()> {
    let headers = match msg.content.header_section(report::HEADERS_LIMIT) {
        Ok(h) => h,
        Err(e) => {
            log::warn!(
                "{}: cannot read its headers for the report: {e}; sent without them",
                msg.env.id
            );
            Vec::new()
        }
    };
    let Report {
        env,
        mut head,
        tail,
        ..
    } = r;
    head.extend_from_slice(&headers);
    head.extend_from_slice(&tail);
    inner.spool().commit(Arc::new(Message { env, data: head }))
}

/// The report with the whole original, streamed from its spool file into
/// the report's own, [`SPILL_AT`] octets at a time.
fn commit_with_message(inner: &Inner, msg: &Stored, r: Report) -> io::Result<()> {
    let spool = inner.spool();
    let Report {
        env, head, tail, ..
    } = r;
    let mut spill = spool.spill(&env)?;
    let mut buf = head;
    let mut reader = msg.content.reader();
    while let Some(chunk) = reader.next()? {
        buf.extend_from_slice(chunk);
        if buf.len() >= SPILL_AT {
            spill.write(&mut buf)?;
        }
    }
    buf.extend_from_slice(&tail);
    let spilled = spill.finish(&mut buf, &env)?;
    let msg = Arc::new(Message {
        env,
        data: Vec::new(),
    });
    spool.commit_received(msg, Some(spilled), None)
}
