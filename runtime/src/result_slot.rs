//! Where a finished green thread's result waits for its `JoinHandle`: a
//! slot in the thread's own control block ([`ResultSlot`]), so that a spawn
//! allocates nothing for it.
//!
//! # Why
//!
//! A result in an `Rc` of its own, shared by the thread and its handle,
//! would cost either a list per result type to keep those for reuse (about
//! 270 instructions a thread, a fifth of a cold spawn and join) or a fresh
//! allocation per spawn, which costs more once a thousand results are
//! alive at once (BENCHMARKS.md, "Spawn"). The handle holds the control
//! block anyway, so the result waits there.
//!
//! # Invariant: a slot is read as the type it was filled with
//!
//! The slot does not know its value's type: [`ResultSlot::take`] is told.
//! `spawn` keeps the two ends together: a task's slot is filled only by the
//! first frame of the thread that `spawn::<F, T>` started
//! (`Result<T, JoinError>`), and only while that spawn's `JoinHandle<T>` is
//! alive; it is emptied only by that handle (by `join`, or by dropping the
//! handle), which reads it as `Result<T, JoinError>`. A control block is
//! kept for another spawn only once nothing else holds it (the handle
//! included), so a later thread never sees an earlier thread's value.

use std::cell::{Cell, UnsafeCell};
use std::mem::{self, MaybeUninit};
use std::ptr;

/// The inline storage: four words.
#[repr(C, align(8))]
struct Inline([MaybeUninit<u8>; 32]);

/// Whether an `R` is kept inline; otherwise it is boxed and the slot holds
/// the box's pointer.
const fn fits<R>() -> bool {
    mem::size_of::<R>() <= mem::size_of::<Inline>()
        && mem::align_of::<R>() <= mem::align_of::<Inline>()
}

/// A value of a type the slot does not know, or nothing (see the module
/// docs).
pub(crate) struct ResultSlot {
    full: Cell<bool>,
    /// The value when it [`fits`], else a `*mut R` from `Box::into_raw`.
    bytes: UnsafeCell<Inline>,
}

impl ResultSlot {
    /// An empty slot.
    pub(crate) const fn new() -> ResultSlot {
        ResultSlot {
            full: Cell::new(false),
            bytes: UnsafeCell::new(Inline([MaybeUninit::uninit(); 32])),
        }
    }

    /// Whether it holds a value.
    #[inline]
    pub(crate) fn is_full(&self) -> bool {
        self.full.get()
    }

    /// Stores `value`. A value already there is leaked, never dropped as
    /// the wrong type (`spawn` fills a slot once; this only keeps a misuse
    /// safe).
    #[inline]
    pub(crate) fn put<R>(&self, value: R) {
        debug_assert!(!self.is_full(), "a result slot is filled once");
        let at = self.bytes.get().cast::<u8>();
        if fits::<R>() {
            // SAFETY: `at` is valid for writes of an `R`: the inline bytes
            // are at least `size_of::<R>()` long and aligned for it
            // (`fits`). No reference into them is alive: the slot hands
            // out only values, never references, and is not `Sync`.
            unsafe { ptr::write(at.cast::<R>(), value) };
        } else {
            let boxed = Box::into_raw(Box::new(value));
            // SAFETY: as above, for a pointer (8 bytes, align 8, which
            // `Inline` always has room for).
            unsafe { ptr::write(at.cast::<*mut R>(), boxed) };
        }
        self.full.set(true);
    }

    /// Takes the value out, if there is one.
    ///
    /// # Safety
    ///
    /// If the slot is full, its value was stored by [`put::<R>`](Self::put)
    /// with this same `R`.
    #[inline]
    pub(crate) unsafe fn take<R>(&self) -> Option<R> {
        if !self.full.replace(false) {
            return None;
        }
        let at = self.bytes.get().cast::<u8>();
        if fits::<R>() {
            // SAFETY: the slot was full, so `put::<R>` (the caller's
            // contract) wrote an `R` inline here (`fits::<R>()` chose the
            // same branch there), and nothing has read it out since: `full`
            // was true and is false from now on, so it is read once.
            Some(unsafe { ptr::read(at.cast::<R>()) })
        } else {
            // SAFETY: as above, `put::<R>` stored a pointer from
            // `Box::<R>::into_raw` here, read once.
            let boxed = unsafe { ptr::read(at.cast::<*mut R>()) };
            // SAFETY: that pointer came from `Box::into_raw` and is turned
            // back into a box once (the slot reads empty from now on).
            Some(*unsafe { Box::from_raw(boxed) })
        }
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::rc::Rc;

    use super::{fits, ResultSlot};

    /// Counts its drops.
    struct Counted(Rc<Cell<u32>>, [u64; 8]);

    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.set(self.0.get() + 1);
        }
    }

    #[test]
    fn small_values_are_kept_inline_and_large_or_overaligned_ones_boxed() {
        assert!(fits::<Result<u64, crate::JoinError>>());
        assert!(fits::<Result<String, crate::JoinError>>());
        assert!(fits::<()>());
        assert!(!fits::<[u64; 8]>());
    }

    #[test]
    fn a_value_comes_back_once_inline_or_boxed() {
        let s = ResultSlot::new();
        assert!(!s.is_full());
        s.put(String::from("forty-two"));
        assert!(s.is_full());
        // SAFETY: filled with a `String` just above.
        assert_eq!(unsafe { s.take::<String>() }.as_deref(), Some("forty-two"));
        // SAFETY: empty: nothing is read.
        assert_eq!(unsafe { s.take::<String>() }, None);

        let drops = Rc::new(Cell::new(0));
        s.put(Counted(drops.clone(), [7; 8]));
        // SAFETY: filled with a `Counted` just above.
        let back = unsafe { s.take::<Counted>() }.expect("full");
        assert_eq!((back.1[7], drops.get()), (7, 0));
        drop(back);
        assert_eq!(drops.get(), 1);
        assert!(!s.is_full());
    }
}
