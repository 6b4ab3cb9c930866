//! A plain OS thread (a library callback, say) spawns a green thread into a
//! running runtime and sends it data over `coro::sync::remote`, written
//! against the facade as a user would.

mod util;

use coro::sync::remote;

/// A plain OS thread spawns a green thread into a running runtime and sends
/// it data over a `Send` channel (`std::thread::spawn(move || tx.send(1))`
/// compiles: no `Rc` inside, no E0277).
#[test]
fn an_os_thread_spawns_into_a_runtime_and_sends_into_it() {
    let total = util::run(|| {
        let handle = coro::handle();
        let (tx, rx) = remote::channel::<u64>();
        let (results, from_green) = remote::channel::<u64>();
        let os = std::thread::spawn(move || {
            // Spawn a green thread that sums what the OS thread sends.
            handle
                .spawn(move || {
                    let sum: u64 = rx.iter().sum();
                    results.send(sum).unwrap();
                })
                .unwrap();
            for i in 1..=100 {
                tx.send(i).unwrap();
            }
        });
        let total = from_green.recv().unwrap();
        os.join().unwrap();
        total
    });
    assert_eq!(total, 5050);
}
