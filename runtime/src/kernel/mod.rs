//! The kernel: green threads themselves. The control block (`task`), the
//! ready queue and the loop (`sched`), suspend and wake (`suspend`,
//! `task::make_ready`), spawn and join (`spawn`), stacks (`stack`), the
//! clock (`clock`), green-thread locals (`local`) and the rule for calls
//! that fail at once (`spin`). It names no service, observer or API item:
//! it reaches them through `seams`.

pub(crate) mod borrow;
pub mod clock;
pub(crate) mod context;
pub(crate) mod error;
pub(crate) mod local;
pub(crate) mod panic_hook;
pub(crate) mod result_slot;
pub(crate) mod sched;
pub(crate) mod seams;
pub(crate) mod spawn;
pub(crate) mod spin;
pub(crate) mod stack;
pub(crate) mod suspend;
pub(crate) mod tail;
pub(crate) mod task;
pub(crate) mod task_pool;
pub(crate) mod wait_target;
pub(crate) mod waiter_queue;
pub(crate) mod wake;
