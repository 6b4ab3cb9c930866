//! Thread tags: the short names the resume ring stores in place of thread
//! ids, each naming exactly one thread in any trace.
//!
//! A resume is recorded on every switch, so its slot is small (see
//! `Recorder::res`): it holds a 28-bit tag, not the 64-bit id.
//!
//! * A thread whose id is below [`DIRECT`] (the first 134 million a
//!   runtime spawns) is its own tag: ids are never reused, so neither are
//!   these tags, and a spawn or a finish costs nothing here.
//! * A later thread takes a tag from `DIRECT` up to [`TAGS`] at spawn and
//!   gives it back at finish. One live thread holds a tag at a time, and a
//!   tag given back at switch `f` is handed out again only once the switch
//!   counter reaches `f + EVENTS`.
//!
//! A trace reads the last `EVENTS` resumes at most, and every one of them
//! names its tag's holder now or its last holder ([`Tags::id`]): a thread
//! that got a tag given back at `f` runs only in resumes numbered above
//! `f + EVENTS`, and the old holder's resumes are numbered `f` or below,
//! so no window of `EVENTS` resumes holds both. The two ranges do not
//! meet, so ids in traces are exact.
//!
//! Taken tags in use at once are the later threads alive plus those that
//! finished in the last `EVENTS` switches. A spawn that would need more
//! than `TAGS - DIRECT` fails with an error (a runtime reaches that only
//! with about 134 million threads alive, far beyond its memory).

use std::collections::VecDeque;
use std::io;

use super::EVENTS;

/// Tags there are: 28 bits of the resume ring's slot.
pub(super) const TAGS: u32 = 1 << 28;

/// Threads with an id below this are their own tag.
pub(super) const DIRECT: u32 = 1 << 27;

/// A runtime's taken tags and their holders.
pub(super) struct Tags {
    /// Tags it may hand out above [`DIRECT`]: `TAGS - DIRECT` (fewer in
    /// tests).
    limit: u32,
    /// The id of the holder of tag `DIRECT + i` at `i`, or its last holder
    /// once given back. Its length is the number of tags taken so far.
    holder: Vec<u64>,
    /// Taken tags given back, with the switch counter then, oldest first.
    ///
    /// # Invariant
    /// Ordered by that counter (it only grows), so the front is the first
    /// to become free again.
    returned: VecDeque<(u64, u32)>,
}

impl Default for Tags {
    fn default() -> Tags {
        Tags {
            limit: TAGS - DIRECT,
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
    /// `OutOfMemory` when every taken tag is held or was given back within
    /// the last `EVENTS` switches.
    #[inline]
    pub(super) fn take(&mut self, id: u64, now: u64) -> io::Result<u32> {
        if id < u64::from(DIRECT) {
            return Ok(id as u32);
        }
        self.take_above(id, now)
    }

    /// [`take`](Self::take) for a thread that is not its own tag.
    #[cold]
    #[inline(never)]
    fn take_above(&mut self, id: u64, now: u64) -> io::Result<u32> {
        let i = match self.returned.front() {
            Some(&(at, tag)) if now >= at + EVENTS as u64 => {
                self.returned.pop_front();
                tag - DIRECT
            }
            _ if self.holder.len() < self.limit as usize => {
                self.holder.push(0);
                (self.holder.len() - 1) as u32
            }
            _ => return Err(exhausted(self.limit)),
        };
        self.holder[i as usize] = id;
        Ok(DIRECT + i)
    }

    /// The holder of `tag` finished (or never started) while the switch
    /// counter was `now`.
    #[inline]
    pub(super) fn give_back(&mut self, tag: u32, now: u64) {
        if tag >= DIRECT {
            self.returned.push_back((now, tag));
        }
    }

    /// The thread whose resume a trace shows with `tag` (see the module
    /// docs): its holder, or its last holder.
    pub(super) fn id(&self, tag: u32) -> u64 {
        match tag.checked_sub(DIRECT) {
            None => u64::from(tag),
            Some(i) => self.holder.get(i as usize).copied().unwrap_or(0),
        }
    }
}

#[cold]
fn exhausted(limit: u32) -> io::Error {
    io::Error::new(
        io::ErrorKind::OutOfMemory,
        format!(
            "coro: too many green threads: past the first {DIRECT} spawns, the flight recorder \
             names at most {limit} threads alive or finished within the last {EVENTS} switches"
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const BIG: u64 = DIRECT as u64;

    #[test]
    fn early_threads_are_their_own_tag() {
        let mut tags = Tags::default();
        assert_eq!(tags.take(5, 0).unwrap(), 5);
        assert_eq!(tags.take(BIG - 1, 0).unwrap(), DIRECT - 1);
        tags.give_back(5, 0);
        assert_eq!(tags.id(5), 5);
        assert!(tags.returned.is_empty() && tags.holder.is_empty());
    }

    #[test]
    fn a_tag_given_back_waits_for_a_ring_of_switches() {
        let mut tags = Tags::default();
        assert_eq!(tags.take(BIG + 1, 0).unwrap(), DIRECT);
        assert_eq!(tags.take(BIG + 2, 0).unwrap(), DIRECT + 1);
        tags.give_back(DIRECT, 10);
        // Too soon: a fresh tag, and the finished thread keeps its name.
        assert_eq!(
            tags.take(BIG + 3, 10 + EVENTS as u64 - 1).unwrap(),
            DIRECT + 2
        );
        assert_eq!(tags.id(DIRECT), BIG + 1);
        assert_eq!(tags.take(BIG + 4, 10 + EVENTS as u64).unwrap(), DIRECT);
        assert_eq!(tags.id(DIRECT), BIG + 4);
        assert_eq!(tags.id(DIRECT + 1), BIG + 2);
    }

    #[test]
    fn running_out_of_tags_is_an_error() {
        let mut tags = Tags {
            limit: 5,
            ..Tags::default()
        };
        for i in 0..5 {
            assert_eq!(tags.take(BIG + i, 0).unwrap(), DIRECT + i as u32);
        }
        let e = tags.take(BIG + 8, 0).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::OutOfMemory);
        assert!(e.to_string().contains("too many green threads"), "{e}");
        // Early threads still are their own tag.
        assert_eq!(tags.take(9, 0).unwrap(), 9);
        tags.give_back(DIRECT + 3, 0);
        assert!(tags.take(BIG + 8, 1).is_err());
        assert_eq!(tags.take(BIG + 8, EVENTS as u64).unwrap(), DIRECT + 3);
    }
}
