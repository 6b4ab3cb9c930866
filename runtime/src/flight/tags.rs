//! Thread tags: the short names the resume ring stores in place of thread
//! ids, each naming exactly one thread in any trace.
//!
//! A resume is recorded on every switch, so its slot is small (see
//! `Recorder::res`): it holds a 28-bit tag, not the 64-bit id. A tag is
//! handed out at spawn and given back at finish, under two rules:
//!
//! * a tag is held by one live thread at a time;
//! * a tag given back at switch `f` is handed out again only once the
//!   switch counter reaches `f + EVENTS`.
//!
//! A trace reads the last `EVENTS` resumes at most, and every one of them
//! names its tag's holder now or its last holder ([`Tags::id`]): a thread
//! that got a tag given back at `f` runs only in resumes numbered above
//! `f + EVENTS`, and the old holder's resumes are numbered `f` or below,
//! so no window of `EVENTS` resumes holds both.
//!
//! Tags in use at once are the live threads plus those that finished in
//! the last `EVENTS` switches. A spawn that would need more than
//! [`TAGS`] fails with an error (a runtime reaches that only with about
//! 268 million threads alive, far beyond its memory).

use std::collections::VecDeque;
use std::io;

use super::EVENTS;

/// Tags there are: 28 bits of the resume ring's slot.
pub(super) const TAGS: u32 = 1 << 28;

/// A runtime's tags and their holders.
pub(super) struct Tags {
    /// Tags it may hand out: [`TAGS`] (fewer in tests).
    limit: u32,
    /// The id of each tag's holder, or its last holder once given back.
    /// Its length is the number of tags handed out so far.
    holder: Vec<u64>,
    /// Tags given back, with the switch counter then, oldest first.
    ///
    /// # Invariant
    /// Ordered by that counter (it only grows), so the front is the first
    /// to become free again.
    returned: VecDeque<(u64, u32)>,
}

impl Default for Tags {
    fn default() -> Tags {
        Tags {
            limit: TAGS,
            holder: Vec::new(),
            returned: VecDeque::new(),
        }
    }
}

impl Tags {
    /// A tag for thread `id`, spawned while the switch counter is `now`.
    ///
    /// # Errors
    ///
    /// `OutOfMemory` when all [`TAGS`] are held or were given back within
    /// the last `EVENTS` switches.
    pub(super) fn take(&mut self, id: u64, now: u64) -> io::Result<u32> {
        let tag = match self.returned.front() {
            Some(&(at, tag)) if now >= at + EVENTS as u64 => {
                self.returned.pop_front();
                tag
            }
            _ if self.holder.len() < self.limit as usize => {
                self.holder.push(0);
                (self.holder.len() - 1) as u32
            }
            _ => return Err(exhausted(self.limit)),
        };
        self.holder[tag as usize] = id;
        Ok(tag)
    }

    /// Thread `tag`'s holder finished (or never started) while the switch
    /// counter was `now`.
    pub(super) fn give_back(&mut self, tag: u32, now: u64) {
        self.returned.push_back((now, tag));
    }

    /// The thread whose resume a trace shows with `tag` (see the module
    /// docs): its holder, or its last holder.
    pub(super) fn id(&self, tag: u32) -> u64 {
        self.holder.get(tag as usize).copied().unwrap_or(0)
    }
}

#[cold]
fn exhausted(limit: u32) -> io::Error {
    io::Error::new(
        io::ErrorKind::OutOfMemory,
        format!(
            "coro: too many green threads: the flight recorder names at most {limit} threads \
             alive or finished within the last {EVENTS} switches"
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tag_given_back_waits_for_a_ring_of_switches() {
        let mut tags = Tags::default();
        assert_eq!(tags.take(1, 0).unwrap(), 0);
        assert_eq!(tags.take(2, 0).unwrap(), 1);
        tags.give_back(0, 10);
        // Too soon: a fresh tag, and the finished thread keeps its name.
        assert_eq!(tags.take(3, 10 + EVENTS as u64 - 1).unwrap(), 2);
        assert_eq!(tags.id(0), 1);
        assert_eq!(tags.take(4, 10 + EVENTS as u64).unwrap(), 0);
        assert_eq!(tags.id(0), 4);
        assert_eq!(tags.id(1), 2);
    }

    #[test]
    fn running_out_of_tags_is_an_error() {
        let mut tags = Tags {
            limit: 5,
            ..Tags::default()
        };
        for id in 0..5 {
            assert_eq!(tags.take(id, 0).unwrap(), id as u32);
        }
        let e = tags.take(8, 0).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::OutOfMemory);
        assert!(e.to_string().contains("too many green threads"), "{e}");
        tags.give_back(3, 0);
        assert!(tags.take(8, 1).is_err());
        assert_eq!(tags.take(8, EVENTS as u64).unwrap(), 3);
    }
}
