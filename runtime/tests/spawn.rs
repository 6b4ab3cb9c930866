//! spawn, Builder, join, panics, and spawn errors.

use std::time::Duration;

use coro_runtime::{self as coro, JoinError};

#[test]
fn join_returns_the_value() {
    assert_eq!(coro::run(|| coro::spawn(|| 40 + 2).join().unwrap()), 42);
}

#[test]
fn a_panicking_thread_does_not_disturb_the_others() {
    coro::run(|| {
        let steady = coro::spawn(|| {
            let mut n = 0;
            for _ in 0..10 {
                coro::sleep(Duration::from_millis(1)).unwrap();
                n += 1;
            }
            n
        });
        let bad = coro::Builder::new()
            .name("bad".into())
            .spawn(|| -> u32 {
                coro::yield_now();
                panic!("boom in a green thread")
            })
            .unwrap();
        let e = bad.join().unwrap_err();
        assert!(e.is_panic());
        assert_eq!(e.panic_message(), Some("boom in a green thread"));
        assert!(e.to_string().contains("boom"));
        assert_eq!(steady.join().unwrap(), 10);
        assert_eq!(coro::stats().panicked, 1);
    });
}

#[test]
fn a_panic_in_main_propagates_after_shutdown() {
    let r = std::panic::catch_unwind(|| {
        coro::run(|| {
            coro::spawn(|| coro::sleep(Duration::from_secs(3600)));
            panic!("main failed");
        })
    });
    let e = r.unwrap_err();
    assert_eq!(e.downcast_ref::<&str>(), Some(&"main failed"));
}

#[test]
fn builder_names_and_sizes() {
    coro::run(|| {
        let h = coro::Builder::new()
            .name("sized".into())
            .stack_size(100_000)
            .spawn(|| {
                let me = coro::current();
                let info = coro::threads()
                    .into_iter()
                    .find(|t| t.id == me.id())
                    .unwrap();
                (me.name().map(str::to_owned), info.stack_size)
            })
            .unwrap();
        let (name, size) = h.join().unwrap();
        assert_eq!(name.as_deref(), Some("sized"));
        assert!((100_000..100_000 + 4096 * 4).contains(&size), "{size}");
    });
}

#[test]
fn bad_builder_settings_are_errors_that_name_the_problem() {
    coro::run(|| {
        let e = coro::Builder::new().stack_size(0).spawn(|| ()).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
        assert!(e.to_string().contains("stack size"), "{e}");
        let e = coro::Builder::new()
            .selfishness(0)
            .spawn(|| ())
            .unwrap_err();
        assert!(e.to_string().contains("selfishness"), "{e}");
        let e = coro::Builder::new()
            .selfishness(32769)
            .spawn(|| ())
            .unwrap_err();
        assert!(e.to_string().contains("1..=32768"), "{e}");
    });
    let e = coro::Runtime::builder().stack_size(10).build().unwrap_err();
    assert!(e.to_string().contains("stack size"));
    let e = coro::Runtime::builder().selfishness(0).build().unwrap_err();
    assert!(e.to_string().contains("selfishness"));
    let e = coro::Runtime::builder()
        .blocking_threads(0)
        .build()
        .unwrap_err();
    assert!(e.to_string().contains("blocking_threads"));
}

#[test]
fn stacks_are_recycled() {
    coro::run(|| {
        for _ in 0..100 {
            coro::spawn(|| ()).join().unwrap();
        }
        let s = coro::stats();
        assert!(s.pooled_stacks >= 1 && s.pooled_stacks <= 2, "{s:?}");
        assert_eq!(s.live, 1);
    });
}

#[test]
fn join_after_finish_and_wait() {
    coro::run(|| {
        let h = coro::spawn(|| "x");
        h.wait().unwrap();
        assert!(h.is_finished());
        assert_eq!(h.join().unwrap(), "x");
        let h = coro::spawn(|| coro::sleep(Duration::from_secs(3600)));
        h.thread().interrupt().unwrap();
        assert!(matches!(h.join(), Ok(Err(coro::WaitError::Interrupted))));
    });
}

#[test]
fn join_error_debug_is_readable() {
    let e = JoinError::Cancelled;
    assert_eq!(format!("{e:?}"), "Cancelled");
}

#[test]
fn a_large_closure_can_be_spawned() {
    coro::run(|| {
        let big = [1u8; 4096];
        let h = coro::spawn(move || big.iter().map(|&b| b as u32).sum::<u32>());
        assert_eq!(h.join().unwrap(), 4096);
    });
}

#[test]
fn current_id_names_the_running_thread() {
    assert_eq!(coro::current_id(), None, "no runtime on this OS thread");
    coro::run(|| {
        let main = coro::current_id().expect("main is a green thread");
        assert_eq!(main, coro::current().id());
        let h = coro::spawn(|| {
            coro::yield_now();
            coro::current_id()
        });
        let child = h.thread().id();
        assert_ne!(child, main);
        assert_eq!(h.join().unwrap(), Some(child));
        assert_eq!(
            coro::current_id(),
            Some(main),
            "still main after the switch"
        );
    });
    assert_eq!(coro::current_id(), None, "the runtime has returned");
}
