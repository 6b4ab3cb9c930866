//! SERVICES

pub(crate) mod blocking;
pub(crate) mod cancel;
pub(crate) mod driver;
pub mod future;
pub(crate) mod reactor;
pub(crate) mod remote;
pub(crate) mod sleep;
pub(crate) mod sys;
pub(crate) mod timer;
