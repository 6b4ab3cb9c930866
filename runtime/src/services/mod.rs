//! The services the loop drives: timers (`timer`, `sleep`), cancellation
//! and deadlines (`cancel`), the reactor and its precise timer
//! (`reactor`, `sys`), the remote inbox (`remote`), the blocking pool
//! (`blocking`) and futures on green threads (`future`). The loop reaches
//! them through one driver (`driver`, the kernel's `seams::Driver`); they
//! use only the kernel.

pub(crate) mod blocking;
pub(crate) mod cancel;
pub(crate) mod driver;
pub mod future;
pub(crate) mod reactor;
pub(crate) mod remote;
pub(crate) mod sleep;
pub(crate) mod sys;
pub(crate) mod timer;
