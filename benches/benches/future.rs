//! Futures on green threads, beside tokio's current-thread
//! runtime:
//!
//! * `future::block_on_ready`: `coro::future::block_on` of a ready future
//!   on a green thread, beside tokio's `Runtime::block_on` of the same
//!   future (the way a blocking caller runs a future on tokio). One
//!   iteration = one call.
//! * `future::remote_wake`: a future woken from another OS thread: the
//!   first poll hands its waker to a helper OS thread (spinning on an
//!   atomic slot, so neither side sleeps in the kernel on the handoff),
//!   which sets the flag and wakes it; the runtime is woken through its
//!   poller (coro: the remote inbox and mio's waker; tokio: its own
//!   driver unpark). coro runs it with `block_on` on a green thread,
//!   tokio as one `.await` inside its `block_on`. One iteration = one
//!   round trip.
//!
//! Run: `cargo bench -p coro-benches --bench future`.

#![allow(missing_docs)] // criterion_group! generates undocumented functions

use std::future::{poll_fn, Future};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

use criterion::{black_box, criterion_group, criterion_main, Criterion};

fn block_on_ready(c: &mut Criterion) {
    let mut rt = coro_benches::coro_rt();
    c.bench_function("future::block_on_ready/coro", |b| {
        b.iter_custom(|iters| {
            rt.block_on(move || {
                let t = Instant::now();
                for i in 0..iters {
                    black_box(coro::future::block_on(std::future::ready(black_box(i))).unwrap());
                }
                t.elapsed()
            })
        })
    });
    let tk = coro_benches::tokio_rt();
    c.bench_function("future::block_on_ready/tokio", |b| {
        b.iter(|| tk.block_on(std::future::ready(black_box(1u64))))
    });
}

/// The next job of the helper: a waker to call once the flag is set.
type Slot = Arc<Mutex<Option<(Waker, Arc<AtomicBool>)>>>;

/// The helper OS thread's side: a slot it spins on for the next waker.
struct Helper {
    slot: Slot,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Helper {
    fn start() -> Helper {
        let slot: Slot = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let (s, st) = (slot.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            while !st.load(Ordering::Relaxed) {
                let job = s.lock().unwrap().take();
                match job {
                    Some((w, done)) => {
                        done.store(true, Ordering::Release);
                        w.wake();
                    }
                    None => std::hint::spin_loop(),
                }
            }
        });
        Helper {
            slot,
            stop,
            thread: Some(thread),
        }
    }

    /// A future that the helper completes.
    fn round_trip(&self) -> impl Future<Output = ()> + '_ {
        let done = Arc::new(AtomicBool::new(false));
        let mut sent = false;
        poll_fn(move |cx| {
            if done.load(Ordering::Acquire) {
                return Poll::Ready(());
            }
            if !sent {
                sent = true;
                *self.slot.lock().unwrap() = Some((cx.waker().clone(), done.clone()));
            }
            Poll::Pending
        })
    }
}

impl Drop for Helper {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
    }
}

fn remote_wake(c: &mut Criterion) {
    let helper = Arc::new(Helper::start());
    let mut rt = coro_benches::coro_rt();
    c.bench_function("future::remote_wake/coro", |b| {
        b.iter_custom(|iters| {
            let h = helper.clone();
            rt.block_on(move || {
                let t = Instant::now();
                for _ in 0..iters {
                    coro::future::block_on(h.round_trip()).unwrap();
                }
                t.elapsed()
            })
        })
    });
    let tk = coro_benches::tokio_rt();
    c.bench_function("future::remote_wake/tokio", |b| {
        b.iter_custom(|iters| {
            let h = helper.clone();
            tk.block_on(async move {
                let t = Instant::now();
                for _ in 0..iters {
                    h.round_trip().await;
                }
                t.elapsed()
            })
        })
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    targets = block_on_ready, remote_wake
}
criterion_main!(benches);
