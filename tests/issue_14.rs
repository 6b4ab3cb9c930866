//! Issue #14, item 2, through the facade as a user writes it: a plain OS
//! thread (a library callback, say) spawns a green thread into a running
//! runtime and sends it data over a `Send` channel; `std::thread::spawn(move
//! || tx.send(1))` used to fail with E0277 on `Rc<Chan>`.

mod util;

use coro::sync::remote;

#[test]
fn issue_14_2_an_os_thread_spawns_into_a_runtime_and_sends_into_it() {
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
