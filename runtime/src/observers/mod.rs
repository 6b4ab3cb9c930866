//! What watches threads run and never steers them: the flight recorder
//! (`flight`), the profiler (`profile`), the watchdog and latency warnings
//! (`watchdog`, `latency`), who waits on whom with its deadlock and leak
//! reports (`waits`, `asleep`), stats and inspection (`stats`,
//! `inspect`). The kernel's events reach them through one hub (`hub`, the
//! kernel's `seams::Observer`); they use the kernel and the services.

pub(crate) mod asleep;
pub mod flight;
pub(crate) mod hub;
pub(crate) mod inspect;
pub(crate) mod json;
pub(crate) mod latency;
pub mod profile;
pub(crate) mod stats;
pub(crate) mod waits;
pub(crate) mod watchdog;
