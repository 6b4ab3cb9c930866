//! The helpers the runtime's integration tests use, from the workspace's
//! `coro-test-support`: running one test in a child process (for behaviour
//! that aborts, faults or must measure the whole process's memory), a
//! runtime bounded by a watchdog, forced interleavings, bodies bounded on
//! an OS thread of their own, captured logs.

#![allow(unused_imports)]

pub use coro_test_support::child::{child, child_ok, child_with_env, is_child};
pub use coro_test_support::{bounded, logs, run, wait_until, within, yield_until, LIMIT};
