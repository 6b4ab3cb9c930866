//! Idle stacks copied out (an `unsafe` opt-in): a thread parked for longer
//! than `idle_stack_release` has the live part of its stack saved to the
//! heap and its pages given back, and is copied back before it next runs,
//! at the same addresses. Each test waits until the copy-out happened
//! (`stats().idle_stacks`), so it fails if nothing is ever copied out, and
//! then checks that the thread carries on exactly where it was.

use std::cell::{Cell, RefCell};
use std::io::{Read, Write};
use std::rc::Rc;
use std::time::Duration;

use coro_runtime::{self as coro, Direction, Interest, Registration};

use coro_test_support::child::{child_ok, is_child};
use coro_test_support::memory::{assert_rss_given_back, resident_pages, rss};

/// A runtime that copies out threads parked for 20 ms.
fn runtime() -> coro::Runtime {
    // SAFETY: no test here lends a green thread's stack outside the
    // runtime (no OS thread borrows a green thread's locals, no raw
    // pointer into a stack leaves it); the one loan, `coro::scope`'s, is
    // among green threads of this runtime and pins the owner.
    unsafe { coro::Runtime::builder().idle_stack_copy_out(true) }
        .idle_stack_release(Some(Duration::from_millis(20)))
        .build()
        .unwrap()
}

/// Sleeps (in 5 ms steps, at most about 10 s) until `n` stacks are copied
/// out.
#[track_caller]
fn wait_copied_out(n: usize) {
    for _ in 0..2000 {
        if coro::stats().idle_stacks >= n {
            return;
        }
        coro::sleep(Duration::from_millis(5)).unwrap();
    }
    panic!(
        "only {} of {n} stacks were copied out",
        coro::stats().idle_stacks
    );
}

/// Fills a stack buffer with a pattern, keeps a pointer into it, parks,
/// and checks both after waking. Recursion makes several frames, each
/// pointing into the one above it.
#[inline(never)]
fn deep(level: u32, above: Option<&Cell<u64>>, parked: &dyn Fn()) -> u64 {
    let mine = Cell::new(0x5eed_0000 + level as u64);
    let mut buf = [0u8; 700];
    for (i, b) in buf.iter_mut().enumerate() {
        *b = (i as u32 * 31 + level) as u8;
    }
    let buf = std::hint::black_box(buf);
    if let Some(a) = above {
        a.set(a.get() + 1);
    }
    let below = if level == 0 {
        parked();
        0
    } else {
        deep(level - 1, Some(&mine), parked)
    };
    for (i, b) in buf.iter().enumerate() {
        assert_eq!(*b, (i as u32 * 31 + level) as u8, "frame {level} byte {i}");
    }
    // The frame below incremented our cell through its reference.
    let expect = 0x5eed_0000 + level as u64 + u64::from(level > 0);
    assert_eq!(mine.get(), expect, "frame {level}");
    below + mine.get()
}

#[test]
fn a_copied_out_thread_resumes_where_it_was_with_shared_heap_data() {
    runtime().block_on(|| {
        let shared = Rc::new(RefCell::new(vec![1u32, 2, 3]));
        let s2 = shared.clone();
        let h = coro::spawn(move || {
            // Heap data others also reference, and a reference into it held
            // on this stack across the park.
            let first: Rc<RefCell<Vec<u32>>> = s2.clone();
            let park = || coro::park_as("test").unwrap();
            let sum = deep(8, None, &park);
            let v = first.borrow().clone();
            (sum, v, Rc::strong_count(&first))
        });
        coro::yield_now(); // it runs and parks
        wait_copied_out(1);
        // Other threads use the heap data while the owner's stack is out.
        let helper = {
            let shared = shared.clone();
            coro::spawn(move || shared.borrow_mut().push(4))
        };
        helper.join().unwrap();
        shared.borrow_mut()[0] = 10;
        h.thread().unpark().unwrap();
        let (sum, v, count) = h.join().unwrap();
        assert_eq!(coro::stats().idle_stacks, 0);
        let want: u64 = (0..=8u64).map(|l| 0x5eed_0000 + l + u64::from(l > 0)).sum();
        assert_eq!(sum, want);
        assert_eq!(v, [10, 2, 3, 4]);
        assert_eq!(count, 3); // shared, the spawn's clone, `first`
    });
}

#[test]
fn a_copied_out_thread_keeps_its_socket() {
    runtime().block_on(|| {
        let mut listener = mio::net::TcpListener::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let mut client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let server = coro::spawn(move || {
            let lreg = Registration::new(&mut listener, Interest::READABLE).unwrap();
            let (mut s, _) = lreg.io(Direction::Read, || listener.accept()).unwrap();
            let reg = Registration::new(&mut s, Interest::READABLE | Interest::WRITABLE).unwrap();
            let mut buf = [0u8; 64];
            // Parked in a read long enough to be copied out.
            let n = reg
                .io_stream(Direction::Read, buf.len(), || (&s).read(&mut buf))
                .unwrap();
            let w = reg
                .io_stream(Direction::Write, n, || (&s).write(&buf[..n]))
                .unwrap();
            (n, w)
        });
        wait_copied_out(1);
        client.write_all(b"still here").unwrap();
        assert_eq!(server.join().unwrap(), (10, 10));
        let mut back = [0u8; 10];
        client.read_exact(&mut back).unwrap();
        assert_eq!(&back, b"still here");
    });
}

#[test]
fn threads_that_wake_often_are_not_copied_out() {
    runtime().block_on(|| {
        let stop = Rc::new(Cell::new(false));
        let s = stop.clone();
        let busy = coro::spawn(move || {
            while !s.get() {
                coro::sleep(Duration::from_millis(2)).unwrap();
            }
        });
        let idle = coro::spawn(|| coro::park_as("test"));
        coro::yield_now();
        wait_copied_out(1); // the idle one
        coro::sleep(Duration::from_millis(100)).unwrap();
        assert_eq!(coro::stats().idle_stacks, 1);
        stop.set(true);
        busy.join().unwrap();
        idle.thread().unpark().unwrap();
        idle.join().unwrap().unwrap();
    });
}

/// Interrupting, timing out and shutting down copied-out threads: each
/// is copied back and unwinds or returns its error on its own stack, its
/// destructors running.
#[test]
fn copied_out_threads_are_interrupted_timed_out_and_unwound() {
    struct Flag(Rc<Cell<u32>>);
    impl Drop for Flag {
        fn drop(&mut self) {
            self.0.set(self.0.get() + 1);
        }
    }
    let dropped = Rc::new(Cell::new(0));
    let d = dropped.clone();
    runtime().block_on(move || {
        let d1 = d.clone();
        let interrupted = coro::spawn(move || {
            let _f = Flag(d1);
            coro::park_as("test")
        });
        let d2 = d.clone();
        let timed_out = coro::spawn(move || {
            let _f = Flag(d2);
            coro::with_timeout(Duration::from_secs(3), || coro::park_as("test"))
        });
        let d3 = d.clone();
        coro::spawn(move || {
            let _f = Flag(d3);
            loop {
                let _ = coro::park_as("test"); // unwound at shutdown
            }
        });
        coro::yield_now();
        wait_copied_out(3);
        interrupted.thread().interrupt().unwrap();
        assert_eq!(
            interrupted.join().unwrap(),
            Err(coro::WaitError::Interrupted)
        );
        assert!(timed_out.join().unwrap().is_err());
        assert_eq!(d.get(), 2);
        wait_copied_out(1); // the third, still parked
    });
    assert_eq!(dropped.get(), 3);
}

/// Resident memory goes down when idle threads are copied out: 2 000
/// threads that each touched 64 KiB of stack and then parked keep about
/// 128 MiB resident, and a few hundred KiB once copied out. Measured in a
/// child process, alone: the pages each thread touched (`mincore`), and
/// the whole process's resident set.
#[test]
fn copying_out_gives_the_pages_back() {
    const NAME: &str = "copying_out_gives_the_pages_back";
    if is_child(NAME) {
        runtime().block_on(|| {
            /// Touches 64 KiB of stack; returns where.
            #[inline(never)]
            fn touch() -> usize {
                let mut buf = [1u8; 64 * 1024];
                std::hint::black_box(&mut buf);
                buf.as_ptr() as usize
            }
            let touched = Rc::new(RefCell::new(Vec::new()));
            let park_touched = |n| -> Vec<_> {
                (0..n)
                    .map(|_| {
                        let touched = touched.clone();
                        coro::spawn(move || {
                            touched.borrow_mut().push(touch());
                            coro::park_as("test")
                        })
                    })
                    .collect()
            };
            // A first, small round through the same code, unmeasured: what
            // running it once costs (the allocator's arenas, and under an
            // emulator its translated code) is not what is measured.
            let warm = park_touched(50);
            wait_copied_out(50);
            for h in &warm {
                h.thread().unpark().unwrap();
            }
            for h in warm {
                h.join().unwrap().unwrap();
            }
            touched.borrow_mut().clear();
            let before = rss();
            let hs = park_touched(2000);
            coro::yield_now();
            let parked = rss();
            let resident_parked = resident_pages(&touched.borrow(), 64 * 1024);
            wait_copied_out(2000);
            let after = rss();
            let resident_after = resident_pages(&touched.borrow(), 64 * 1024);
            println!(
                "RSS before {before} parked {parked} copied out {after}; touched pages \
                 resident: {resident_parked:?} parked, {resident_after:?} copied out"
            );
            // (The first threads may be copied out already.)
            let (total, resident) = resident_parked;
            assert!(
                total >= 2000 && resident * 10 >= total * 9,
                "{resident_parked:?}"
            );
            assert_eq!(resident_after, (total, 0), "touched pages still resident");
            assert_rss_given_back(NAME, before, parked, after, 16);
            for h in &hs {
                h.thread().unpark().unwrap();
            }
            for h in hs {
                h.join().unwrap().unwrap();
            }
        });
        return;
    }
    let out = child_ok(NAME);
    assert!(out.contains("copied out"), "{out}");
}

/// A scope's threads borrow from their owner's stack while the owner waits
/// for them: the owner, parked far longer than `idle_stack_release`, must
/// not be copied out (its pages would read as zeros to the threads, and
/// their writes would be lost when it is copied back). A sibling parked
/// as long is copied out, so the sweep did run.
#[test]
fn a_scope_owner_stays_in_place_while_its_threads_borrow_from_it() {
    runtime().block_on(|| {
        let idle = coro::spawn(|| {
            let _ = coro::park_as("idle sibling");
        });
        let mut counts = [0u64; 64];
        let label = String::from("borrowed");
        let before = std::hint::black_box([0xabu8; 512]);
        coro::scope(|s| {
            for (i, c) in counts.iter_mut().enumerate() {
                let before = &before;
                let label = &label;
                s.spawn(move || {
                    // Long enough for the owner (parked in the scope's wait)
                    // to be seen idle on several sweeps.
                    wait_copied_out(1);
                    coro::sleep(Duration::from_millis(100)).unwrap();
                    assert!(
                        before.iter().all(|&b| b == 0xab),
                        "thread {i} read a released page"
                    );
                    assert_eq!(label, "borrowed");
                    *c = i as u64 + 1;
                });
            }
        })
        .unwrap();
        assert!(counts.iter().enumerate().all(|(i, &c)| c == i as u64 + 1));
        assert_eq!(
            coro::stats().idle_stacks,
            1,
            "only the sibling is copied out"
        );
        let _ = idle.thread().interrupt();
        assert!(idle.join().is_ok());
    });
}
