//! [`in_parallel`]: run closures on their own green threads and collect what
//! they return (Shrapnel's `in_parallel`).

use coro_runtime::{JoinError, JoinHandle, WaitError};

/// Runs each job on a new green thread, waits for all of them, and returns
/// their results in the order of `jobs`.
///
/// A job that panics yields `Err(JoinError::Panicked)` in its place; the
/// others are unaffected.
///
/// # Errors
///
/// [`WaitError`] if waiting is cut short (timeout, interrupt, shutdown). The
/// jobs that have not finished are then [interrupted](coro_runtime::Coro::interrupt)
/// (their next blocking call fails) and left to end on their own; their
/// results are dropped.
///
/// # Panics
///
/// Outside a green thread, or if a green thread cannot be spawned (no memory
/// for its stack).
///
/// # Examples
///
/// ```
/// coro::run(|| {
///     let jobs = (1..=3u64).map(|i| move || {
///         coro::yield_now(); // e.g. a DNS lookup
///         i * 10
///     });
///     let results = coro::sync::in_parallel(jobs).unwrap();
///     let values: Vec<u64> = results.into_iter().map(Result::unwrap).collect();
///     assert_eq!(values, [10, 20, 30]);
/// });
/// ```
pub fn in_parallel<I, F, T>(jobs: I) -> Result<Vec<Result<T, JoinError>>, WaitError>
where
    I: IntoIterator<Item = F>,
    F: FnOnce() -> T + 'static,
    T: 'static,
{
    let handles: Vec<JoinHandle<T>> = jobs.into_iter().map(coro_runtime::spawn).collect();
    for (i, h) in handles.iter().enumerate() {
        if let Err(e) = h.wait() {
            for rest in &handles[i..] {
                if !rest.is_finished() {
                    let _ = rest.thread().interrupt();
                }
            }
            return Err(e);
        }
    }
    Ok(handles.into_iter().map(JoinHandle::join).collect())
}
