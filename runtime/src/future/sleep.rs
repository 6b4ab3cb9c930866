//! coro's timers as futures: [`Sleep`] registers on the runtime's timer
//! wheel (the one `coro::sleep` uses) and wakes its task's `Waker` there.
//!
//! # Design
//!
//! A pending `Sleep` owns one timer entry of kind `TimerKind::Waker`, whose
//! `Waker` is kept in the scheduler's [`TimerWakers`] table under a key
//! and a sequence number (keys are reused, sequence numbers are not). When
//! the entry fires, the loop takes the waker out and wakes it; when the
//! `Sleep` is dropped first (or moved to another deadline), it takes its
//! waker out and gives the entry up (`TimerHeap::cancel_one`), so the
//! wheel's live count stays exact and a stale entry does nothing.
//!
//! A `Sleep` holds only numbers, so it is `Send + Sync` (as
//! `hyper::rt::Sleep` requires). Dropped on another OS thread, it cannot
//! reach its runtime's table: its entry then fires in due course and wakes
//! a waker nobody waits on, which is harmless.
//!
//! A runtime's timers end with its run (`Runtime::block_on`): the table
//! is cleared with the wheel, its wakers woken and dropped, and the
//! sequence numbers go on. A `Sleep` armed in one run and polled in the
//! next finds its entry gone and arms anew; one dropped between runs
//! finds nothing to give up.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use slab::Slab;

use crate::clock::{self, Instant};
use crate::context;
use crate::sched::Scheduler;
use crate::timer::TimerKind;

/// The wakers of pending [`Sleep`]s of one runtime, by the key their timer
/// entry names.
#[derive(Default)]
pub(crate) struct TimerWakers {
    slots: Slab<(u64, Waker)>,
    next_seq: u64,
}

impl TimerWakers {
    /// Whether the entry `(key, seq)` is still wanted.
    pub(crate) fn is_live(&self, key: usize, seq: u64) -> bool {
        self.slots.get(key).is_some_and(|(s, _)| *s == seq)
    }

    /// Takes the waker of entry `(key, seq)` out, if it is still there.
    pub(crate) fn take(&mut self, key: usize, seq: u64) -> Option<Waker> {
        if self.is_live(key, seq) {
            Some(self.slots.remove(key).1)
        } else {
            None
        }
    }

    /// Puts `new` in place of the waker of entry `(key, seq)` and returns
    /// the old one; gives `new` back if the entry is gone.
    fn replace(&mut self, key: usize, seq: u64, new: Waker) -> Result<Waker, Waker> {
        match self.slots.get_mut(key) {
            Some((s, w)) if *s == seq => Ok(std::mem::replace(w, new)),
            _ => Err(new),
        }
    }

    /// Takes every waker out (the runtime's timers were cleared: no entry
    /// is left to fire them). The sequence numbers go on, so a `Sleep`
    /// armed before never takes a later entry for its own.
    pub(crate) fn take_all(&mut self) -> Vec<Waker> {
        std::mem::take(&mut self.slots)
            .into_iter()
            .map(|(_, (_, w))| w)
            .collect()
    }
}

/// Whether the `TimerKind::Waker` entry `(key, seq)` of the running runtime
/// is still wanted (`false` outside a runtime: nothing can fire it).
pub(crate) fn waker_timer_is_live(key: usize, seq: u64) -> bool {
    context::try_with_sched(|s| s.timer_wakers.borrow().is_live(key, seq)).unwrap_or(false)
}

/// The timer entry a pending [`Sleep`] owns.
#[derive(Debug, Clone, Copy)]
struct Armed {
    runtime: u64,
    key: usize,
    seq: u64,
}

/// A future that completes at a deadline, on coro's timer wheel: what
/// [`sleep`] and [`sleep_until`] return.
///
/// # Timers never fire early
///
/// It completes at or after its deadline, never before: a wake-up that
/// comes early (spuriously) is followed by another check of the clock.
///
/// # Where it runs
///
/// Poll it on a green thread of a coro runtime (inside
/// [`block_on`](super::block_on)); it is `Send + Sync` and `Unpin`, so it
/// can be stored in types that require it (`hyper::rt::Sleep`).
///
/// # Panics
///
/// A poll that has to wait panics outside a green thread, naming
/// `coro::future::Sleep`.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
///
/// coro::run(|| {
///     let t = coro::clock::now();
///     coro::future::block_on(coro::future::sleep(Duration::from_millis(5))).unwrap();
///     assert!(t.elapsed() >= Duration::from_millis(5));
/// });
/// ```
#[derive(Debug)]
#[must_use = "futures do nothing unless polled"]
pub struct Sleep {
    deadline: Instant,
    armed: Option<Armed>,
}

/// A [`Sleep`] that completes `d` from now.
pub fn sleep(d: Duration) -> Sleep {
    sleep_until(clock::now() + d)
}

/// A [`Sleep`] that completes at `deadline`.
pub fn sleep_until(deadline: Instant) -> Sleep {
    Sleep {
        deadline,
        armed: None,
    }
}

impl Sleep {
    /// When it completes.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Moves the deadline (earlier or later); the next poll waits for the
    /// new one.
    pub fn reset(&mut self, deadline: Instant) {
        if deadline != self.deadline {
            self.disarm();
            self.deadline = deadline;
        }
    }

    /// Whether the deadline has passed.
    pub fn is_elapsed(&self) -> bool {
        clock::now() >= self.deadline
    }

    /// Gives up the timer entry, if it is still pending, on its runtime's
    /// OS thread (elsewhere, see the module docs).
    fn disarm(&mut self) {
        if let Some(a) = self.armed.take() {
            let old = context::try_with_sched(|s| {
                if s.id != a.runtime {
                    return None;
                }
                let old = s.timer_wakers.borrow_mut().take(a.key, a.seq);
                if old.is_some() {
                    s.timers.borrow_mut().cancel_one();
                }
                old
            });
            // Dropped with no borrow of the table held (see `arm`).
            drop(old);
        }
    }

    /// Makes sure the timer entry is pending and wakes `waker`.
    ///
    /// Wakers are cloned and dropped with no borrow of the table held: a
    /// waker's clone or drop is user code, which may poll or drop other
    /// `Sleep`s (a task that owns one, freed with its last waker).
    fn arm(&mut self, s: &Scheduler, waker: &Waker) {
        if let Some(a) = self.armed {
            if a.runtime == s.id {
                let same = match s.timer_wakers.borrow().slots.get(a.key) {
                    Some((seq, w)) if *seq == a.seq => Some(w.will_wake(waker)),
                    _ => None,
                };
                match same {
                    Some(true) => return,
                    Some(false) => {
                        let new = waker.clone();
                        let swapped = s.timer_wakers.borrow_mut().replace(a.key, a.seq, new);
                        match swapped {
                            Ok(old) => {
                                drop(old);
                                return;
                            }
                            // The entry fired meanwhile (the clone yielded).
                            Err(new) => drop(new),
                        }
                    }
                    None => {}
                }
            }
            self.disarm();
        }
        let task = context::current_task_rc("coro::future::Sleep");
        let waker = waker.clone();
        let mut wakers = s.timer_wakers.borrow_mut();
        wakers.next_seq += 1;
        let seq = wakers.next_seq;
        let key = wakers.slots.insert((seq, waker));
        drop(wakers);
        s.timers
            .borrow_mut()
            .insert(self.deadline.ticks(), task, TimerKind::Waker { key, seq });
        self.armed = Some(Armed {
            runtime: s.id,
            key,
            seq,
        });
    }
}

impl Future for Sleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        if clock::now() >= this.deadline {
            this.disarm();
            return Poll::Ready(());
        }
        context::with_sched("coro::future::Sleep", |s| this.arm(s, cx.waker()));
        Poll::Pending
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        self.disarm();
    }
}

/// Compile-time proof that a `Sleep` can go where hyper's timers go.
const _: () = {
    const fn send_sync_unpin<T: Send + Sync + Unpin>() {}
    send_sync_unpin::<Sleep>();
};
