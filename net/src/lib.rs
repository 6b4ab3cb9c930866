//! Non-blocking sockets for coro green threads, with the shapes of `std::net`.

#![warn(missing_docs, missing_debug_implementations, rust_2018_idioms)]
#![warn(clippy::undocumented_unsafe_blocks)]
