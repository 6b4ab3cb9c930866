//! Synchronization primitives for coro green threads.
//!
//! In a cooperative runtime only one green thread runs at a time, so these
//! control *resources* (outstanding requests, access to a file), not memory.

#![warn(missing_docs, missing_debug_implementations, rust_2018_idioms)]
#![warn(clippy::undocumented_unsafe_blocks)]
