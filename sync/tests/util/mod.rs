//! Helpers of the sync tests: the workspace's shared ones
//! (`coro-test-support`: a bounded runtime, ways to let every ready thread
//! run, captured logs), and a log of what each waiter got.

#![allow(dead_code, unused_imports)]

use std::cell::RefCell;
use std::fmt::Debug;
use std::rc::Rc;

pub mod conns;
pub mod workers;

pub use coro_test_support::{logs, run, settle, yield_until, LIMIT};

/// What each waiter ended with, in the order they finished.
#[derive(Clone, Default)]
pub struct Log(Rc<RefCell<Vec<(usize, String)>>>);

impl Log {
    pub fn new() -> Log {
        Log::default()
    }

    /// Records that waiter `i` finished with `what`.
    pub fn push(&self, i: usize, what: impl Debug) {
        self.0
            .borrow_mut()
            .push((i, format!("{what:?}").trim_matches('"').to_string()));
    }

    /// The entries so far.
    pub fn entries(&self) -> Vec<(usize, String)> {
        self.0.borrow().clone()
    }

    /// The waiters that finished, in order.
    pub fn order(&self) -> Vec<usize> {
        self.0.borrow().iter().map(|(i, _)| *i).collect()
    }

    /// The waiters whose outcome's text is `what`, in finishing order.
    pub fn with(&self, what: &str) -> Vec<usize> {
        self.0
            .borrow()
            .iter()
            .filter(|(_, s)| s == what)
            .map(|(i, _)| *i)
            .collect()
    }

    pub fn len(&self) -> usize {
        self.0.borrow().len()
    }
}

/// Interrupts every thread of `handles` whose index is in `which`.
#[track_caller]
pub fn interrupt<T>(
    handles: &[coro_runtime::JoinHandle<T>],
    which: impl IntoIterator<Item = usize>,
) {
    for i in which {
        handles[i].thread().interrupt().expect("waiter is alive");
    }
}

/// Joins every handle, failing on a panic.
#[track_caller]
pub fn join_all<T>(handles: Vec<coro_runtime::JoinHandle<T>>) -> Vec<T> {
    handles
        .into_iter()
        .map(|h| h.join().expect("green thread failed"))
        .collect()
}
