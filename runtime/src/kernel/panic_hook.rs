//! Names the green thread in panic messages: std's hook says only
//! `thread 'main' panicked at ...` (the OS thread), so the runtime chains a
//! hook in front of it that first says which green thread panicked.
//!
//! # Design
//!
//! Installed once per process, when the first runtime is built: it takes
//! the hook in place then (std's default, or one the program set before)
//! and calls it after its own line, so a program's hook keeps working. A
//! hook set after the first runtime is built replaces this one (std has a
//! single hook); call [`panic_hook_line`](crate::panic_hook_line) from it to
//! keep the green thread's name. The hook only reads the running task's id
//! and name; it never blocks or switches.
//!
//! # Cost under `RUST_BACKTRACE`
//!
//! The hook runs on the panicking green thread, on the runtime's OS thread.
//! With backtraces on, std's hook (called after ours) resolves and prints
//! the backtrace there, which takes tens to hundreds of milliseconds: the
//! whole runtime stalls meanwhile. std offers no stable way to capture the
//! frames and leave the formatting to another thread from inside its own
//! hook, so the cost is documented (README, "Panics") rather than hidden; a
//! program may set a hook of its own that does so.

use std::any::Any;
use std::io::Write;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Once;

use crate::kernel::context;

static INSTALL: Once = Once::new();

/// Chains the hook in (once per process). Not while the OS thread panics
/// (std refuses to swap hooks then): a later build installs it.
pub(crate) fn install() {
    if std::thread::panicking() {
        return;
    }
    INSTALL.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if let Some(line) = panic_hook_line() {
                eprintln!("{line}");
            }
            previous(info);
        }));
    });
}

/// A panic payload's message, if it is a string (`&str` or `String`, as
/// `panic!` makes).
pub(crate) fn payload_str(p: &(dyn Any + Send)) -> Option<&str> {
    p.downcast_ref::<&'static str>()
        .copied()
        .or_else(|| p.downcast_ref::<String>().map(String::as_str))
}

/// [`payload_str`], or a placeholder for a payload of another type.
pub(crate) fn payload_message(p: &(dyn Any + Send)) -> &str {
    payload_str(p).unwrap_or("<non-string payload>")
}

/// Runs user code the runtime calls from the scheduler's own stack (a
/// `log` backend, a destructor) so that a panic in it cannot unwind
/// through the runtime: the panic is swallowed and its payload leaked
/// (dropping it could panic again). Returns whether `f` completed.
pub(crate) fn caught(f: impl FnOnce()) -> bool {
    match panic::catch_unwind(AssertUnwindSafe(f)) {
        Ok(()) => true,
        Err(p) => {
            std::mem::forget(p);
            false
        }
    }
}

/// Ends the process after a panic that would otherwise leave green threads
/// alive past the frame they may borrow from (see `runtime::shutdown`):
/// says which panic on stderr, then aborts. Never unwinds.
#[cold]
pub(crate) fn abort_after(what: &str, p: Box<dyn Any + Send>) -> ! {
    let msg = payload_message(&*p).to_owned();
    std::mem::forget(p);
    // A failed write to stderr must not panic here: `eprintln!` would.
    let _ = writeln!(
        std::io::stderr(),
        "coro: {what} panicked ({msg}); green threads that may borrow from \
         block_on's caller could not be finished, so the process aborts"
    );
    std::process::abort()
}

/// The line the runtime's panic hook prints before std's message when a
/// green thread panics: `coro: green thread #3 'worker' panicked (on OS
/// thread 'main')`; `None` where no green thread runs. For a panic hook of
/// your own that replaces the runtime's.
pub fn panic_hook_line() -> Option<String> {
    let (id, name) = context::try_with_current(|_, t| (t.id, t.name.clone()))?;
    let os = std::thread::current();
    Some(format!(
        "coro: green thread #{id} '{}' panicked (on OS thread '{}')",
        name.as_deref().unwrap_or("<unnamed>"),
        os.name().unwrap_or("<unnamed>"),
    ))
}
