//! [`Manager`]: what a [`Pool`](crate::Pool) needs to know about its
//! connections (r2d2's `ManageConnection`, plus ZODB's cache clear).

/// Opens, checks and closes the connections of a [`Pool`](crate::Pool).
///
/// The names follow r2d2's `ManageConnection` where the concepts match.
/// Which methods may block matters in a cooperative runtime:
///
/// | method | called | may block |
/// |---|---|---|
/// | [`connect`](Manager::connect) | by `get` when no idle connection is left, by the reaper for `min_idle` | yes |
/// | [`is_valid`](Manager::is_valid) | on checkout, when `test_on_check_out` is on | yes |
/// | [`has_broken`](Manager::has_broken) | when a connection comes back (the guard's `Drop`) | **no** |
/// | [`clear`](Manager::clear) | when a connection is pushed out of the idle stack | **no** |
/// | [`close`](Manager::close) | when the pool closes a connection | only if [`CLOSE_BLOCKS`](Manager::CLOSE_BLOCKS) |
///
/// The non-blocking ones run inside [`no_suspend`](coro_runtime::no_suspend)
/// where the pool cannot block: a blocking call there fails with
/// `WaitError::SuspendForbidden` (and is logged) instead of suspending.
///
/// # Examples
///
/// ```
/// use std::io;
/// use coro::sync::Manager;
///
/// /// Connections to a backend, here just numbered.
/// struct Backend {
///     opened: std::cell::Cell<u32>,
/// }
///
/// impl Manager for Backend {
///     type Connection = u32;
///     type Error = io::Error;
///     fn connect(&self) -> io::Result<u32> {
///         self.opened.set(self.opened.get() + 1);
///         Ok(self.opened.get())
///     }
///     fn has_broken(&self, conn: &mut u32) -> bool {
///         *conn == 0
///     }
/// }
///
/// coro::run(|| {
///     let pool = coro::sync::Pool::new(Backend { opened: Default::default() }).unwrap();
///     assert_eq!(*pool.get().unwrap(), 1);
/// });
/// ```
pub trait Manager: 'static {
    /// The pooled connection.
    type Connection: 'static;
    /// What `connect` and `is_valid` fail with.
    type Error: std::error::Error + 'static;

    /// Whether [`close`](Manager::close) may block. If so, the pool never
    /// calls it where it must not block (a guard's `Drop`, `set_pool_size`):
    /// it hands the connection to a [`Deferred`](crate::Deferred) queue
    /// whose thread closes it.
    const CLOSE_BLOCKS: bool = false;

    /// Opens a new connection. May block.
    ///
    /// # Errors
    ///
    /// The manager's error; `get` returns it to its caller.
    fn connect(&self) -> Result<Self::Connection, Self::Error>;

    /// Checks an idle connection before it is handed out (when
    /// `test_on_check_out` is on). May block. An error closes the connection
    /// and `get` tries the next one.
    ///
    /// # Errors
    ///
    /// Why the connection is unusable.
    fn is_valid(&self, conn: &mut Self::Connection) -> Result<(), Self::Error> {
        let _ = conn;
        Ok(())
    }

    /// Whether a returned connection is broken and must be closed instead of
    /// reused. Must not block.
    fn has_broken(&self, conn: &mut Self::Connection) -> bool {
        let _ = conn;
        false
    }

    /// Releases what a connection caches, when it is pushed out of the idle
    /// stack (ZODB clears the connection's object cache). Must not block.
    fn clear(&self, conn: &mut Self::Connection) {
        let _ = conn;
    }

    /// Closes a connection the pool gives up. Must not block unless
    /// [`CLOSE_BLOCKS`](Manager::CLOSE_BLOCKS) is `true`. Dropping it is the
    /// default.
    fn close(&self, conn: Self::Connection) {
        drop(conn);
    }
}
