//! Reading the rings back into a [`Trace`]: the two rings merged by order
//! key, and every event timed from the clock readings among them (see
//! "Times" in the module docs).

use std::collections::{HashMap, HashSet};

use super::{
    full_ticks, ticker, After, Event, Recorder, TimedEvent, Trace, BEGAN, EVENTS, HOG, OFF, OTHERS,
    POLL, SPAWN, TICK, TIMER, TIMER_KINDS, WAKE,
};
use crate::clock::{self, Instant};
use crate::context;
use crate::sched::Scheduler;
use crate::task::{Task, ThreadState};

/// An event as read from the rings, before it is timed.
#[derive(Clone, Copy)]
enum Item {
    /// A spawn, wake or timer: no clock reading of its own.
    Instant(Event),
    /// A clock reading.
    Tick(u64),
    /// The resume before the reading before this began then.
    Began(u64),
    /// A poll that ended at `end` (the reading that follows it); it began
    /// at the reading before it.
    Poll {
        events: usize,
        blocking: bool,
        end: u64,
    },
    /// The watchdog reported resume `n`.
    Hog(u64),
    /// Resume `n` of `thread`.
    Resume { n: u64, thread: u64, then: After },
}

impl Recorder {
    /// Copies the rings out, oldest first, with the names of the threads
    /// they mention that are still alive (and `extra`).
    /// `last` is the last resume that ended (by default, when `None`: the
    /// one before the running one, if a thread runs).
    pub(super) fn trace(
        &self,
        s: &Scheduler,
        reason: String,
        extra: Option<&Task>,
        last: Option<u64>,
    ) -> Trace {
        let now = clock::now().ticks();
        // The resumes that ended (not the one in progress, if any).
        let switches = s.counters.switches.get();
        let running = !s.current.get().is_null();
        let last = last.unwrap_or(switches - u64::from(running));
        let first = if OFF {
            last + 1
        } else {
            (last + 1).saturating_sub(EVENTS as u64).max(1)
        };
        let tags = self.tags.borrow();
        let resume = |n: u64| self.res[n as usize & (EVENTS - 1)].get();
        // The thread that ran resume `n` (the spawner or waker of an event
        // recorded during it), 0 when it is no longer in the ring.
        let thread_of = |n: u64| -> u64 {
            if running && n == switches {
                context::current_id_of(s)
            } else if (first..=last).contains(&n) {
                tags.id(resume(n) >> 4)
            } else {
                0
            }
        };
        // A waker or spawner: the thread of the resume running then.
        let by = |k: u64| {
            if k.is_multiple_of(4) {
                thread_of(k / 4)
            } else {
                0
            }
        };
        // The other events, oldest first, with their keys.
        let head = if OFF { 0 } else { self.head.get() };
        let kept = head.min(OTHERS as u64);
        let raw: Vec<(u64, u64)> = (head - kept..head)
            .map(|i| {
                let e = &self.ev[i as usize & (OTHERS - 1)];
                (e.k.get(), e.a.get())
            })
            .collect();
        let mut items: Vec<(u64, Item)> = Vec::with_capacity(raw.len() + EVENTS);
        for (j, &(k, a)) in raw.iter().enumerate() {
            let payload = a >> 8;
            let item = match a & 0xf {
                SPAWN => Item::Instant(Event::Spawn {
                    thread: payload,
                    parent: by(k),
                }),
                WAKE => Item::Instant(Event::Wake {
                    thread: payload,
                    by: by(k),
                }),
                TIMER => Item::Instant(Event::Timer {
                    thread: payload,
                    kind: TIMER_KINDS
                        .get((a >> 4 & 0xf) as usize)
                        .copied()
                        .unwrap_or(""),
                }),
                TICK => Item::Tick(full_ticks(payload, now)),
                BEGAN => Item::Began(full_ticks(payload, now)),
                POLL => Item::Poll {
                    events: payload as usize,
                    blocking: a & 0x10 != 0,
                    end: raw
                        .get(j + 1)
                        .map_or(now, |&(_, b)| full_ticks(b >> 8, now)),
                },
                HOG => Item::Hog(payload),
                _ => continue,
            };
            items.push((k, item));
        }
        for n in first..=last {
            let r = resume(n);
            // The state is marked only on a resume that did not yield.
            let then = match u64::from(r & 0xf) {
                s if s == ThreadState::Parked as u64 => {
                    After::Park(self.res_s[n as usize & (EVENTS - 1)].get())
                }
                s if s == ThreadState::Dead as u64 => After::Finish,
                _ => After::Yield,
            };
            items.push((
                4 * n + 1,
                Item::Resume {
                    n,
                    thread: tags.id(r >> 4),
                    then,
                },
            ));
        }
        // From where both rings still hold everything.
        let lo = if head > OTHERS as u64 {
            raw.first().map_or(0, |r| r.0)
        } else {
            0
        }
        .max(if first > 1 { 4 * first } else { 0 });
        items.retain(|(k, _)| *k >= lo);
        items.sort_by_key(|(k, _)| *k); // stable: the other events keep their order
        let first_event = items.first().map_or(0, |(k, _)| *k / 2);
        let mut names: HashMap<u64, String> = self
            .names
            .borrow()
            .iter()
            .map(|(id, n)| (*id, n.to_string()))
            .collect();
        for (_, t) in s.tasks.borrow().iter() {
            if let Some(name) = &t.name {
                names.insert(t.id, name.to_string());
            }
        }
        if let Some(t) = extra {
            if let Some(name) = &t.name {
                names.insert(t.id, name.to_string());
            }
        }
        // Resumes after the last reading ran at the sampled run's pace.
        let pace = if self.seen.get() == ticker::NEVER {
            0
        } else {
            self.avg.get()
        };
        let events = decode(&items, pace, now);
        Trace {
            reason,
            taken: std::time::SystemTime::now(),
            start_wall: Instant::from_ticks(events.0).to_system_time(),
            first_event,
            names,
            events: events.1,
        }
    }
}

/// Times the merged items: the tick count the trace starts at, and its
/// events. `pace`: the ticks of a resume after the last reading.
fn decode(items: &[(u64, Item)], pace: u64, now: u64) -> (u64, Vec<TimedEvent>) {
    let (starts, ends) = resume_times(items, pace, now);
    // Anchors: (position, ticks); position p is just before item p. A
    // resume runs from its start to its end; the events it recorded come
    // just before it (their key is its own, less one), so its start is
    // placed before them, and they fall inside it.
    let mut anchors: Vec<(usize, u64)> = Vec::new();
    let mut reported = HashSet::new();
    for (i, &(k, item)) in items.iter().enumerate() {
        match item {
            Item::Resume { .. } => {
                let mut p = i;
                while p > 0 && items[p - 1].0 == k - 1 {
                    p -= 1;
                }
                anchors.push((p, starts[i]));
                anchors.push((i + 1, ends[i]));
            }
            Item::Tick(t) => {
                anchors.push((i, t));
                anchors.push((i + 1, t));
            }
            Item::Hog(n) => {
                reported.insert(n);
            }
            Item::Instant(_) | Item::Poll { .. } | Item::Began(_) => {}
        }
    }
    anchors.sort_by_key(|a| a.0);
    // Ticks never go back.
    let mut latest = 0;
    for a in &mut anchors {
        a.1 = a.1.max(latest);
        latest = a.1;
    }
    let base = anchors.first().map_or(now, |a| a.1);
    let at = |pos: usize| -> u64 {
        let k = anchors.partition_point(|a| a.0 <= pos);
        match (k.checked_sub(1).map(|j| anchors[j]), anchors.get(k)) {
            (Some(lo), Some(hi)) if hi.0 > lo.0 => {
                lo.1 + (hi.1 - lo.1) * (pos - lo.0) as u64 / (hi.0 - lo.0) as u64
            }
            (Some(lo), _) => lo.1,
            (None, Some(hi)) => hi.1,
            (None, None) => now,
        }
    };
    let rel = |t: u64| clock::ticks_to_duration(t.saturating_sub(base));
    let mut events = Vec::with_capacity(items.len());
    for (i, &(_, item)) in items.iter().enumerate() {
        let (at, event) = match item {
            Item::Instant(event) => (at(i + 1), event),
            Item::Poll {
                events,
                blocking,
                end,
            } => {
                let start = at(i);
                (
                    start,
                    Event::Poll {
                        events,
                        took: clock::ticks_to_duration(end.saturating_sub(start)),
                        blocking,
                    },
                )
            }
            Item::Resume { n, thread, then } => (
                starts[i],
                Event::Resume {
                    thread,
                    ran: clock::ticks_to_duration(ends[i].saturating_sub(starts[i])),
                    then,
                    latency_warning: reported.contains(&n),
                },
            ),
            Item::Tick(_) | Item::Hog(_) | Item::Began(_) => continue,
        };
        events.push(TimedEvent { at: rel(at), event });
    }
    (base, events)
}

/// Each resume's start and end (by item index; 0 elsewhere).
///
/// The resumes between two readings share the interval between them
/// evenly; a [`Item::Began`] after the second reading gives the last of
/// them its own start. Those before the first reading, whose earlier
/// reading has left the ring, take the trace's average; those after the
/// last one take `pace` each, up to `now`.
fn resume_times(items: &[(u64, Item)], pace: u64, now: u64) -> (Vec<u64>, Vec<u64>) {
    let mut starts = vec![0; items.len()];
    let mut ends = vec![0; items.len()];
    // Spreads `window`'s resumes over `from..to`.
    let mut spread = |window: &[usize], from: u64, to: u64| {
        let m = window.len() as u64;
        let span = to.saturating_sub(from);
        for (j, &i) in window.iter().enumerate() {
            let j = j as u64;
            starts[i] = from + span * j / m;
            ends[i] = from + span * (j + 1) / m;
        }
    };
    let mut window: Vec<usize> = Vec::new();
    // The first window, before any reading (timed once the average is
    // known), and the last reading.
    let mut first: Option<(Vec<usize>, u64)> = None;
    let mut reading: Option<u64> = None;
    let (mut total, mut timed) = (0u64, 0u64);
    for (i, &(_, item)) in items.iter().enumerate() {
        match item {
            Item::Resume { .. } => window.push(i),
            Item::Tick(t) => {
                match reading {
                    Some(from) if !window.is_empty() => {
                        let began = match items.get(i + 1) {
                            Some(&(_, Item::Began(b))) => Some(b.clamp(from, t)),
                            _ => None,
                        };
                        let last = window.len() - 1;
                        match began {
                            Some(b) => {
                                spread(&window[..last], from, b);
                                spread(&window[last..], b, t);
                            }
                            None => spread(&window, from, t),
                        }
                        total += t.saturating_sub(from);
                        timed += window.len() as u64;
                    }
                    None if !window.is_empty() => first = Some((window.clone(), t)),
                    _ => {}
                }
                window.clear();
                reading = Some(reading.map_or(t, |r| r.max(t)));
            }
            _ => {}
        }
    }
    if let Some((w, to)) = first {
        let each = total.checked_div(timed).unwrap_or(0);
        let from = to.saturating_sub(each * w.len() as u64);
        spread(&w, from, to);
    }
    if !window.is_empty() {
        let from = reading.unwrap_or(now);
        let to = from
            .saturating_add(pace.saturating_mul(window.len() as u64))
            .min(now)
            .max(from);
        spread(&window, from, to);
    }
    (starts, ends)
}
