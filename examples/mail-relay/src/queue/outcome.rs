//! What the queue does with a delivery's outcome: one log line per
//! recipient (Postfix's shape), and, once every job of a message's attempt
//! is in, the message's fate:
//!
//! * every recipient finished: `done` in the journal, out of the queue;
//! * delivered recipients whose sender asked (NOTIFY=SUCCESS): a report,
//!   unless the next hop took the request on ([`notify`]);
//! * bounced recipients: a report to the sender, committed to the spool
//!   before the recipients count as finished (so a crash can duplicate a
//!   bounce, never lose one), unless their NOTIFY leaves failures out;
//!   none to the null sender, so a bounce that fails is dropped with a
//!   log line;
//! * deferred recipients: the next attempt after the backoff, in the
//!   journal; once, after `delay_warning_time`, a delay report to the
//!   senders who asked for it (`delayed` in the journal); past the queue
//!   lifetime, returned to the sender instead.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::{notify, Inner};
use crate::delivery::report::Action;
use crate::delivery::{Detail, Handoff, Job, Outcome, Status};
use crate::spool::{Stored, Update};

/// Takes the outcomes of `jobs` (one each, in order); `attempt` is when
/// the attempt started and how long it took.
pub(super) fn report(
    inner: &Inner,
    jobs: &[Job],
    outcomes: Vec<Outcome>,
    attempt: (SystemTime, Duration),
) {
    let now = SystemTime::now();
    let (started, took) = attempt;
    let mut finished = Vec::new();
    {
        let mut entries = inner.entries.borrow_mut();
        for (job, o) in jobs.iter().zip(outcomes) {
            let env = &job.msg.env;
            let Some(e) = entries.get_mut(&env.id) else {
                continue;
            };
            let delay = now.duration_since(env.arrival).unwrap_or_default();
            // Postfix's delays=a/b/c/d: before the queue (receiving, from
            // MAIL until the message was durable; 0 when not known, after
            // a restart), in the queue until this attempt, connection
            // setup (not told apart by our transports: 0), the delivery.
            let waited = started.duration_since(env.arrival).unwrap_or_default();
            let delays = format!(
                "{:.2}/{:.2}/0/{:.2}",
                e.received_in.as_secs_f64(),
                waited.as_secs_f64(),
                took.as_secs_f64()
            );
            let conn_use = if o.conn_use > 1 {
                format!("conn_use={}, ", o.conn_use)
            } else {
                String::new()
            };
            for (&i, st) in job.rcpts.iter().zip(o.rcpts) {
                let d = st.detail();
                log::info!(
                    "{}: to=<{}>, relay={}, delay={:.2}, delays={delays}, {conn_use}dsn={}, status={} ({})",
                    env.id,
                    env.rcpts[i],
                    o.relay,
                    delay.as_secs_f64(),
                    d.dsn,
                    st.word(),
                    d.text
                );
                let m = crate::metrics::get();
                match &st {
                    Status::Sent(..) => {
                        m.delivered.inc();
                        m.delay.observe(delay.as_secs_f64());
                    }
                    Status::Deferred(_) => {
                        m.deferred.inc();
                    }
                    Status::Bounced(_) => {
                        m.bounced.inc();
                    }
                }
                e.results.push((i, st));
            }
            e.outstanding -= 1;
            if e.outstanding == 0 {
                finished.push(env.id.clone());
            }
        }
    }
    for id in finished {
        finalize(inner, &id);
    }
}

/// Decides a message's fate after an attempt (see the module docs); its
/// place among the active messages goes to the next ready one.
fn finalize(inner: &Inner, id: &str) {
    inner.active.set(inner.active.get() - 1);
    settle(inner, id);
    if !inner.ready.borrow().is_empty() {
        inner.wake();
    }
}

fn settle(inner: &Inner, id: &str) {
    let spool = inner.spool();
    let Some((msg, results, delay_warned)) = inner.entries.borrow_mut().get_mut(id).map(|e| {
        (
            e.msg.clone(),
            std::mem::take(&mut e.results),
            e.delay_warned,
        )
    }) else {
        return;
    };
    let cut = inner.cut.get();
    let mut finished = Vec::new();
    let mut sent = Vec::new();
    let mut bounced = Vec::new();
    let mut deferred = Vec::new();
    for (i, st) in results {
        match st {
            Status::Sent(d, handoff) => {
                finished.push(i);
                match handoff {
                    Handoff::Delivered => sent.push((i, d, Action::Delivered)),
                    Handoff::Relayed => sent.push((i, d, Action::Relayed)),
                    Handoff::PassedOn => {}
                }
            }
            Status::Bounced(d) if !cut => bounced.push((i, d)),
            Status::Bounced(_) => {}
            Status::Deferred(d) => deferred.push((i, d)),
        }
    }
    // Each report blocks until it is durable; no borrow is held meanwhile.
    if !sent.is_empty() {
        notify::delivered(inner, &msg, &sent);
    }
    if !bounced.is_empty() {
        match notify::failed(inner, &msg, &bounced, false) {
            Ok(()) => finished.extend(bounced.iter().map(|(i, _)| *i)),
            Err(why) => deferred.extend(bounced.into_iter().map(|(i, d)| {
                let text = format!("{} (and the bounce could not be queued: {why})", d.text);
                (i, Detail { text, ..d })
            })),
        }
    }
    let mut entries = inner.entries.borrow_mut();
    let Some(e) = entries.get_mut(id) else { return };
    for &i in &finished {
        e.done[i] = true;
    }
    if e.done.iter().all(|&d| d) {
        entries.remove(id);
        spool.record(Update::Done { id: id.to_owned() });
        log::info!("{id}: removed");
        return;
    }
    for &i in &finished {
        spool.record(Update::Rcpt {
            id: id.to_owned(),
            index: i,
        });
    }
    drop(entries);
    if cut {
        return; // the stop cut the attempt short: it stays as it was
    }
    let age = SystemTime::now()
        .duration_since(msg.env.arrival)
        .unwrap_or_default();
    let q = &inner.settings;
    let lifetime = if msg.env.from.is_empty() {
        q.bounce_queue_lifetime
    } else {
        q.maximal_queue_lifetime
    };
    if age >= lifetime && !deferred.is_empty() {
        log::info!(
            "{id}: from=<{}>, status=expired, returned to sender after {age:.0?} in the queue",
            msg.env.from
        );
        if notify::failed(inner, &msg, &deferred, true).is_ok() {
            inner.entries.borrow_mut().remove(id);
            spool.record(Update::Done { id: id.to_owned() });
            return;
        }
    }
    if !delay_warned && !deferred.is_empty() && notify::delayed(inner, &msg, &deferred) {
        if let Some(e) = inner.entries.borrow_mut().get_mut(id) {
            e.delay_warned = true;
        }
        spool.record(Update::Delayed { id: id.to_owned() });
    }
    let first = deferred
        .first()
        .map_or_else(|| Detail::local("4.0.0", "deferred"), |(_, d)| d.clone());
    defer(inner, id, &first);
}

/// Defers `id` for `why`: the next attempt after the backoff, in the
/// journal.
pub(super) fn defer(inner: &Inner, id: &str, why: &Detail) {
    let mut entries = inner.entries.borrow_mut();
    let Some(e) = entries.get_mut(id) else { return };
    e.attempts += 1;
    let next = SystemTime::now() + inner.settings.backoff(e.attempts);
    e.next_attempt = Some(next);
    e.reason = Some(why.text.clone());
    if e.msg.content.is_held() {
        // Until the next attempt, its content is on disk only.
        e.msg = Arc::new(Stored {
            env: e.msg.env.clone(),
            content: e.msg.content.unheld(),
        });
    }
    inner.spool().record(Update::Defer {
        id: id.to_owned(),
        attempts: e.attempts,
        next,
        reason: why.text.clone(),
    });
    inner.deferred.borrow_mut().insert((next, id.to_owned()));
    // The runner sets its next wake-up from the earliest deferral.
    inner.wake();
}
