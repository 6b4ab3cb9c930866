//! OBSERVERS

pub(crate) mod asleep;
pub mod flight;
pub(crate) mod hub;
pub(crate) mod inspect;
pub(crate) mod latency;
pub mod profile;
pub(crate) mod stats;
pub(crate) mod waits;
pub(crate) mod watchdog;
