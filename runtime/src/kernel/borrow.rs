//! Why [`Runtime::block_on`](crate::Runtime::block_on) (and [`run`](crate::run))
//! take a closure that borrows from the caller (`coro::run(|| serve(&addr))`),
//! and the one `unsafe` step that makes it possible.
//!
//! # The argument
//!
//! Green threads are coroutines stored in `'static` tables, so spawning
//! needs `'static` closures. The main closure is different: `block_on`
//! starts it as the main green thread and does not return (or unwind past
//! its own frame) before that thread is *finished or abandoned for good*,
//! on every path:
//!
//! * **Normal return.** The loop runs until the main thread is dead: its
//!   closure returned (and wrote its value) or panicked (caught in
//!   `spawn::entry`, on its own stack).
//! * **The loop panics** (the deadlock report, a poller error). The
//!   `Shutdown` guard in `block_on` runs `runtime::shutdown` while the panic
//!   unwinds, before `block_on`'s frame is gone. Shutdown lets threads react
//!   (the main closure may even return normally then) and unwinds the rest
//!   on their own stacks: the main closure's frames and captures are
//!   dropped there. A thread that never ran has its closure dropped on its
//!   own stack.
//! * **A main thread that swallows its unwind** and blocks again is unwound
//!   again, then leaked: its coroutine is forgotten (`mem::forget`), removed
//!   from every table, and never resumed. The borrows on its stack are never
//!   used again, as with `mem::forget` of a value holding references. (While
//!   the OS thread panics no green thread may switch, so there such a
//!   thread is refused until the process aborts, or spins in its own loop:
//!   either way `block_on` never returns past it.)
//!
//! Nothing else can reach the borrowed data: every other way to run code on
//! a green thread (`spawn`, `Builder::spawn`, `Handle::spawn`, `blocking`,
//! green-thread locals) still requires `'static`; a `Coro` or `JoinHandle`
//! of the main thread that escapes refers to a dead task that has no
//! coroutine left to resume. `block_on` refuses to nest inside a runtime, so
//! no inner `block_on` can outlive an outer one's borrows either.
//!
//! The result travels through a slot on `block_on`'s stack, declared before
//! the `Shutdown` guard so that it outlives every path on which the main
//! closure can still write it.

/// The main closure `f` as a `'static` job that writes `f`'s value into
/// `*out` when it returns.
///
/// # Safety
///
/// The caller must guarantee that the job is run, dropped, or abandoned for
/// good (never resumed nor dropped later) before `'a` ends and before `out`
/// stops being valid for writes; and that nothing reads `*out` while the
/// job may still write it. `Runtime::block_on` does: see the module docs.
pub(crate) unsafe fn erase<'a, F, T>(f: F, out: *mut Option<T>) -> Box<dyn FnOnce() + 'static>
where
    F: FnOnce() -> T + 'a,
    T: 'a,
{
    let job: Box<dyn FnOnce() + 'a> = Box::new(move || {
        let v = f();
        // SAFETY: the caller keeps `out` valid while the job can run and
        // reads it only after the job is done (see `erase`'s contract).
        unsafe { *out = Some(v) };
    });
    // SAFETY: only the lifetime bound changes (same layout and vtable); by
    // `erase`'s contract the job never runs or drops after `'a`, which is
    // what the `'a` bound protected.
    unsafe { std::mem::transmute::<Box<dyn FnOnce() + 'a>, Box<dyn FnOnce() + 'static>>(job) }
}
