//! What user code builds on, over the layers below: the runtime and its
//! `block_on` with shutdown (`runtime`, `shutdown_hooks`), structured
//! concurrency (`scope`), cancel scopes and timeouts (`cancel_scope`,
//! `timeout`).

pub(crate) mod cancel_scope;
pub(crate) mod runtime;
pub(crate) mod scope;
pub(crate) mod shutdown_hooks;
pub(crate) mod timeout;
