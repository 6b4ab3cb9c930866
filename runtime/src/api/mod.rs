//! API

pub(crate) mod cancel_scope;
pub(crate) mod runtime;
pub(crate) mod scope;
pub(crate) mod shutdown_hooks;
pub(crate) mod timeout;
