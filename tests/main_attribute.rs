//! `#[coro::main]`, in tokio's style, runs the body as the main green
//! thread of a runtime that ends with it; `?` and the signature work.

use std::time::Duration;

#[coro::main]
fn main_attribute_body(n: u64) -> std::io::Result<(u64, u64)> {
    let me = coro::current().id();
    let child = coro::spawn(move || n * 2).join().unwrap();
    coro::time::sleep(Duration::from_millis(1))?;
    Ok((me, child))
}

#[test]
fn coro_main_runs_the_body_as_a_green_thread() {
    let (me, doubled) = main_attribute_body(21).unwrap();
    assert!(me > 0, "the body ran as green thread #{me}");
    assert_eq!(doubled, 42);
    // The runtime ended with the body.
    assert!(coro::current_id().is_none());
}
