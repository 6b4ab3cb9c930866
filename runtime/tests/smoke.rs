//! Smoke test: three yielding threads, a sleep, a timeout.
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

#[test]
fn smoke() {
    let v = coro_runtime::run(|| {
        let log = Rc::new(RefCell::new(Vec::new()));
        let hs: Vec<_> = (0..3)
            .map(|i| {
                let log = log.clone();
                coro_runtime::spawn(move || {
                    for r in 0..3 {
                        log.borrow_mut().push((r, i));
                        coro_runtime::yield_now();
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        coro_runtime::sleep(Duration::from_millis(5)).unwrap();
        let r = coro_runtime::with_timeout(Duration::from_millis(5), || {
            coro_runtime::sleep(Duration::from_secs(10))
        });
        assert!(r.is_err());
        let x = log.borrow().clone();
        x
    });
    assert_eq!(
        v,
        vec![
            (0, 0),
            (0, 1),
            (0, 2),
            (1, 0),
            (1, 1),
            (1, 2),
            (2, 0),
            (2, 1),
            (2, 2)
        ]
    );
}
