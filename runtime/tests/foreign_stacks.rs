//! Green threads that park while running on another stack than their own:
//! inside a `corosensei` coroutine they resumed, inside
//! `stacker::maybe_grow`. Their recorded stack pointer is then that
//! stack's, and says nothing about where their own live frames end, so the
//! idle sweep leaves their stacks whole (neither trimmed nor copied out)
//! and counts them in `Stats::idle_stack_foreign`. Each test fills the
//! parked thread's locals (on both stacks) and its neighbours' with
//! patterns, waits until the sweep has been over all of them, and checks
//! every pattern after waking them.
//!
//! The other stack is placed above the green threads' slots (see
//! [`HoleAbove`]): a trim that took the foreign stack pointer for the
//! thread's own would then release everything from the thread's slot up
//! to that stack, its live frames and its neighbours' included.

use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

use coro_runtime::{self as coro, JoinHandle, Stats};
use corosensei::stack::valgrind::ValgrindStackRegistration;
use corosensei::{Coroutine, CoroutineResult, Yielder};

use coro_test_support as util;

/// Words of pattern each parked frame keeps.
const WORDS: usize = 512;

/// The pattern of frame `tag`'s buffer.
fn pattern(tag: u64) -> [u64; WORDS] {
    std::array::from_fn(|i| tag << 32 | (i as u64).wrapping_mul(0x9e37_79b9) | 1)
}

/// Checks a buffer against its pattern, naming the frame.
#[track_caller]
fn check(buf: &[u64; WORDS], tag: u64) {
    let want = pattern(tag);
    let bad = (0..WORDS).filter(|&i| buf[i] != want[i]).count();
    assert_eq!(bad, 0, "{bad} of {WORDS} words of frame {tag} were lost");
}

/// Address space reserved before the runtime maps its stacks and given
/// back once they are mapped: the kernel maps new memory top-down into the
/// highest hole that fits, so a stack mapped after [`HoleAbove::open`]
/// lands above the green threads' slots.
struct HoleAbove(usize);

const HOLE: usize = 64 << 20;

impl HoleAbove {
    fn reserve() -> HoleAbove {
        // SAFETY: a fresh private mapping with no address hint; the result
        // is checked. (PROT_NONE: no memory is committed or accounted for
        // it, without MAP_NORESERVE, which only Linux has.)
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                HOLE,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED);
        HoleAbove(p as usize)
    }

    fn open(self) {
        // SAFETY: the mapping made in `reserve`, which nothing uses.
        assert_eq!(unsafe { libc::munmap(self.0 as *mut _, HOLE) }, 0);
    }
}

/// A runtime whose idle sweep looks at threads parked for 20 ms; with
/// `copy_out`, the `unsafe` opt-in that copies idle stacks out.
fn runtime(copy_out: bool) -> coro::Runtime {
    let b = coro::Runtime::builder().idle_stack_release(Some(Duration::from_millis(20)));
    let b = if copy_out {
        // SAFETY: no test here lends a green thread's stack outside the
        // runtime (no OS thread borrows a green thread's locals, no
        // pointer into a green stack leaves its thread).
        unsafe { b.idle_stack_copy_out(true) }
    } else {
        b
    };
    b.build().unwrap()
}

/// A neighbour: keeps a patterned buffer in the frame that parks, after
/// running deep once (so that the sweep has pages of its to trim: proof
/// that it went over the threads).
fn neighbour(tag: u64) -> JoinHandle<()> {
    coro::spawn(move || {
        #[inline(never)]
        fn deep() {
            let mut buf = [1u8; 64 * 1024];
            std::hint::black_box(&mut buf);
        }
        deep();
        let buf = std::hint::black_box(pattern(tag));
        coro::park_as("neighbour").unwrap();
        check(&buf, tag);
    })
}

/// Sleeps until the sweep has gone over the threads: `foreign` parks left
/// whole, and some stack trimmed or copied out; at most about 10 s.
#[track_caller]
fn wait_for_sweep(foreign: u64) -> Stats {
    for _ in 0..2000 {
        let st = coro::stats();
        if st.idle_stack_foreign >= foreign && st.idle_stack_trims + st.idle_stacks as u64 >= 1 {
            // One more period: every pass of the sweep sees every thread.
            coro::sleep(Duration::from_millis(60)).unwrap();
            return coro::stats();
        }
        coro::sleep(Duration::from_millis(5)).unwrap();
    }
    panic!("the sweep did not get round: {:?}", coro::stats());
}

/// The address of a local of the caller's frame.
#[inline(always)]
fn here() -> usize {
    let x = 0u8;
    std::hint::black_box(&x) as *const u8 as usize
}

/// Runs `subject` as a green thread between two neighbours, with the
/// hole above the slots opened just before it runs; returns the stats after
/// the sweep and what `subject` returned.
fn around<T: 'static>(copy_out: bool, subject: impl FnOnce() -> T + 'static) -> (Stats, T) {
    let hole = HoleAbove::reserve();
    runtime(copy_out).block_on(move || {
        let below = neighbour(1);
        let subject = coro::spawn(subject);
        let above = neighbour(2);
        hole.open();
        coro::yield_now(); // all three park
        let st = wait_for_sweep(1);
        for h in [&below, &above] {
            h.thread().unpark().unwrap();
        }
        subject.thread().unpark().unwrap();
        below.join().unwrap();
        above.join().unwrap();
        (st, subject.join().unwrap())
    })
}

/// Parks inside a corosensei coroutine resumed on this green thread, with
/// patterned buffers in the frame that resumed it (on the thread's own
/// stack) and in the coroutine (on its stack); returns where each stack
/// was.
#[inline(never)]
fn park_in_coroutine() -> (usize, usize) {
    let own = std::hint::black_box(pattern(10));
    let inside = Rc::new(Cell::new(0));
    let at = inside.clone();
    let mut co = Coroutine::new(move |_: &Yielder<(), ()>, ()| {
        let buf = std::hint::black_box(pattern(11));
        at.set(here());
        coro::park_as("inside a coroutine").unwrap();
        check(&buf, 11);
    });
    assert!(matches!(co.resume(()), CoroutineResult::Return(())));
    check(&own, 10);
    (here(), inside.get())
}

#[test]
fn a_thread_parked_inside_a_coroutine_keeps_its_stack_and_its_neighbours_stacks() {
    let (st, (own, other)) = util::bounded(|| around(false, park_in_coroutine));
    println!("own stack at {own:#x}, the coroutine's at {other:#x}");
    assert_eq!(st.idle_stack_foreign, 1, "{st:?}");
    assert!(
        st.idle_stack_trims >= 2,
        "the neighbours were trimmed: {st:?}"
    );
}

/// Bytes of the stack `stacker` maps (a whole number of pages).
const STACKER_STACK: usize = 256 * 1024;

/// Parks inside `stacker::maybe_grow`, as a parser deep in a recursion
/// would; returns where each stack was.
#[inline(never)]
fn park_in_stacker() -> (usize, usize) {
    let own = std::hint::black_box(pattern(20));
    // A red zone larger than any stack: it always switches, as a deep
    // recursion eventually does.
    let other = stacker::maybe_grow(usize::MAX, STACKER_STACK, || {
        let buf = std::hint::black_box(pattern(21));
        let at = here();
        // Stacker does not tell valgrind about its stack (corosensei and
        // the runtime do about theirs): without this, valgrind takes the
        // switches between this stack and the scheduler's for one stack
        // growing and shrinking when the two lie close, and marks what is
        // between them (the OS thread's TLS) inaccessible. A no-op outside
        // valgrind.
        let lo = at - stacker::remaining_stack().expect("stacker knows its stack");
        let _told = ValgrindStackRegistration::new(lo as *mut u8, STACKER_STACK);
        coro::park_as("inside stacker").unwrap();
        check(&buf, 21);
        at
    });
    check(&own, 20);
    (here(), other)
}

#[test]
fn a_thread_parked_inside_stacker_keeps_its_stack_and_its_neighbours_stacks() {
    let (st, (own, other)) = util::bounded(|| around(false, park_in_stacker));
    println!("own stack at {own:#x}, stacker's at {other:#x}");
    assert_eq!(st.idle_stack_foreign, 1, "{st:?}");
    assert!(
        st.idle_stack_trims >= 2,
        "the neighbours were trimmed: {st:?}"
    );
}

/// With the `unsafe` opt-in, the neighbours are copied out and the thread
/// parked on the coroutine's stack stays in place, whole.
#[test]
fn copying_out_leaves_a_thread_parked_inside_a_coroutine_in_place() {
    let (st, _) = util::bounded(|| around(true, park_in_coroutine));
    assert_eq!(st.idle_stack_foreign, 1, "{st:?}");
    assert_eq!(
        st.idle_stacks, 2,
        "only the neighbours are copied out: {st:?}"
    );
}
