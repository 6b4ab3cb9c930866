//! The precise wake-up timer elsewhere (BSD, macOS): mio's poll timeout.
//! kqueue takes a nanosecond timeout, so nothing else is needed.

use std::io;
use std::time::Duration;

use mio::Registry;

use crate::kernel::clock::{self, Instant};

pub(crate) struct PreciseTimer;

impl PreciseTimer {
    pub(crate) fn new(_registry: &Registry) -> io::Result<PreciseTimer> {
        Ok(PreciseTimer)
    }

    pub(crate) fn arm(&self, _registry: &Registry, _deadline: Instant) {}

    pub(crate) fn poll_timeout(&self, deadline: Instant) -> Option<Duration> {
        Some(deadline.duration_since(clock::now()))
    }

    pub(crate) fn fired(&self) {}
}
