//! The journal green thread: delivery events appended to each batch's
//! `<name>.state`, and batches whose messages are all done removed.
//!
//! Delivery records events with [`Spool::record`], which never blocks.
//! The journal thread takes everything recorded since its last round,
//! groups the lines by batch, and writes the round in one `coro::blocking`
//! job: one append per batch touched, or, for a batch whose last message
//! just finished, the removal of the batch file and its journal (whatever
//! lines it would have got are moot). Rounds form on their own: events
//! recorded while a round is being written make the next one.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::io::{self, Write};
use std::path::Path;
use std::rc::Rc;

use coro::sync::Event;

use super::scan::journal_name;
use super::{Spool, Update};

/// What the journal thread is asked.
pub(super) enum Request {
    /// Write this event.
    Update(Update),
    /// Set the event once everything recorded before is written.
    Flush(Rc<Event>),
}

/// One round's work: lines to append per batch, batches to remove.
#[derive(Debug, Default)]
struct Round {
    appends: Vec<(String, String)>,
    removals: Vec<String>,
}

impl Spool {
    /// Records a delivery event for the journal. Never blocks; an event
    /// about a message the spool does not hold is ignored.
    pub fn record(&self, u: Update) {
        self.inner.journal.push(Request::Update(u));
    }

    /// Waits until every event recorded before the call is written.
    ///
    /// # Errors
    ///
    /// A timeout or interruption of the wait.
    pub fn sync_journal(&self) -> io::Result<()> {
        let done = Rc::new(Event::new());
        self.inner.journal.push(Request::Flush(done.clone()));
        done.wait()?;
        Ok(())
    }

    /// The journal thread: runs until interrupted (at shutdown).
    pub fn run_journal(&self) {
        let inner = &self.inner;
        while let Ok(requests) = inner.journal.pop_all() {
            let mut flushes = Vec::new();
            let round = self.plan(requests, &mut flushes);
            let (n, m) = (round.appends.len(), round.removals.len());
            if n + m > 0 {
                let queue = inner.dir.join("queue");
                match coro::blocking(move || write_round(&queue, &round)) {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => log::warn!("spool journal ({n} appends, {m} removals): {e}"),
                    Err(e) => log::warn!("spool journal round cut short: {e}"),
                }
            }
            for f in flushes {
                f.set();
            }
        }
    }

    /// Turns events into a round, updating the counts of undelivered
    /// messages per batch.
    fn plan(&self, requests: Vec<Request>, flushes: &mut Vec<Rc<Event>>) -> Round {
        let mut batches = self.inner.batches.borrow_mut();
        let mut located = self.inner.located.borrow_mut();
        let mut round = Round::default();
        let mut slot: HashMap<String, usize> = HashMap::new();
        for req in requests {
            let u = match req {
                Request::Flush(f) => {
                    flushes.push(f);
                    continue;
                }
                Request::Update(u) => u,
            };
            let Some(name) = located.get(u.id()).map(|b| b.to_string()) else {
                continue;
            };
            if let Update::Done { id } = &u {
                located.remove(id);
                if let Some(n) = batches.get_mut(&name) {
                    *n -= 1;
                    if *n == 0 {
                        batches.remove(&name);
                        round.removals.push(name);
                        continue;
                    }
                }
            }
            let i = *slot.entry(name.clone()).or_insert_with(|| {
                round.appends.push((name, String::new()));
                round.appends.len() - 1
            });
            round.appends[i].1.push_str(&u.line());
        }
        if !round.removals.is_empty() {
            let gone: HashSet<&String> = round.removals.iter().collect();
            round.appends.retain(|(name, _)| !gone.contains(name));
        }
        round
    }
}

/// Appends and removes; goes on after an error and reports the first.
fn write_round(queue: &Path, round: &Round) -> io::Result<()> {
    let mut first = Ok(());
    for (name, text) in &round.appends {
        let r = crate::files::open_own()
            .append(true)
            .create(true)
            .open(queue.join(journal_name(name)))
            .and_then(|mut f| f.write_all(text.as_bytes()));
        if let Err(e) = r {
            first = first.and(Err(io::Error::new(e.kind(), format!("{name}: {e}"))));
        }
    }
    for name in &round.removals {
        // The batch first: a journal left without it is removed at start.
        if let Err(e) = fs::remove_file(queue.join(name)) {
            first = first.and(Err(io::Error::new(e.kind(), format!("{name}: {e}"))));
        }
        match fs::remove_file(queue.join(journal_name(name))) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => {
                first = first.and(Err(io::Error::new(e.kind(), format!("{name}: {e}"))));
            }
            _ => {}
        }
    }
    first
}
