//! coro: Shrapnel-style cooperative green threads for Rust.
//!
//! Write servers in plain blocking style (`stream.read(&mut buf)?`) and run
//! tens of thousands of them on one core. This crate is the facade: the
//! runtime's items at the top level, primitives in [`sync`], sockets in
//! [`net`] (with the [back door](net::backdoor) console), Unix signals in
//! [`signal`].
//!
//! The package also builds `coro-profile`, which turns a [`profile`] file
//! into an HTML report (`coro-profile report PROFILE -o report.html`) or
//! compares two (`coro-profile diff A B`).
//!
//! # Examples
//!
//! ```
//! use std::time::Duration;
//!
//! coro::run(|| {
//!     let h = coro::spawn(|| {
//!         coro::sleep(Duration::from_millis(1)).unwrap();
//!         "done"
//!     });
//!     assert_eq!(h.join().unwrap(), "done");
//! });
//! ```

#![warn(missing_docs, missing_debug_implementations, rust_2018_idioms)]

pub use coro_runtime::*;

/// Synchronization primitives (see the `coro-sync` crate).
pub mod sync {
    pub use coro_sync::*;
}

/// Sockets (see the `coro-net` crate).
pub mod net {
    pub use coro_net::*;
}

pub use coro_net::signal;
