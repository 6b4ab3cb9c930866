//! A test connection manager: numbered connections with a marker and a
//! cache, and switches to make connecting fail or block, validation fail,
//! returns look broken, and closing block.

use std::cell::{Cell, RefCell};
use std::fmt;
use std::rc::Rc;
use std::time::Duration;

use coro_sync::Manager;

#[derive(Debug)]
pub struct Conn {
    pub id: u32,
    pub marker: Option<i32>,
    /// ZODB's object cache, shared so a test can look at it after the pool
    /// took the connection back.
    pub cache: Rc<RefCell<Vec<i32>>>,
    pub broken: bool,
    pub invalid: bool,
}

#[derive(Debug)]
pub struct Refused(pub u32);

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "connection {} refused", self.0)
    }
}

impl std::error::Error for Refused {}

/// Shared switches and records of a [`Db`].
#[derive(Default)]
pub struct Backend {
    pub opened: Cell<u32>,
    /// The next connects fail.
    pub refuse: Cell<bool>,
    /// Each connect blocks this long.
    pub connect_delay: Cell<Duration>,
    /// Ids closed by the manager, in order.
    pub closed: RefCell<Vec<u32>>,
    /// What a blocking call made from has_broken returned.
    pub has_broken_block: RefCell<Vec<String>>,
    /// has_broken tries to sleep (it must be refused).
    pub block_in_has_broken: Cell<bool>,
}

pub struct Db(pub Rc<Backend>);

impl Db {
    pub fn new() -> (Db, Rc<Backend>) {
        let b = Rc::new(Backend::default());
        (Db(b.clone()), b)
    }
}

impl Manager for Db {
    type Connection = Conn;
    type Error = Refused;

    fn connect(&self) -> Result<Conn, Refused> {
        let b = &self.0;
        let d = b.connect_delay.get();
        if !d.is_zero() {
            coro_runtime::sleep(d).map_err(|_| Refused(0))?;
        }
        if b.refuse.get() {
            return Err(Refused(b.opened.get() + 1));
        }
        b.opened.set(b.opened.get() + 1);
        Ok(Conn {
            id: b.opened.get(),
            marker: None,
            cache: Rc::default(),
            broken: false,
            invalid: false,
        })
    }

    fn is_valid(&self, conn: &mut Conn) -> Result<(), Refused> {
        if conn.invalid {
            Err(Refused(conn.id))
        } else {
            Ok(())
        }
    }

    fn has_broken(&self, conn: &mut Conn) -> bool {
        if self.0.block_in_has_broken.get() {
            let r = coro_runtime::sleep(Duration::from_millis(1));
            self.0.has_broken_block.borrow_mut().push(format!("{r:?}"));
        }
        conn.broken
    }

    fn clear(&self, conn: &mut Conn) {
        conn.cache.borrow_mut().clear();
    }

    fn close(&self, conn: Conn) {
        self.0.closed.borrow_mut().push(conn.id);
    }
}

/// A manager whose `close` blocks (it says so with `CLOSE_BLOCKS`).
pub struct SlowClose(pub Db);

impl Manager for SlowClose {
    type Connection = Conn;
    type Error = Refused;
    const CLOSE_BLOCKS: bool = true;

    fn connect(&self) -> Result<Conn, Refused> {
        self.0.connect()
    }

    fn has_broken(&self, conn: &mut Conn) -> bool {
        conn.broken
    }

    fn close(&self, conn: Conn) {
        // A goodbye to the server: blocks, so never inside a guard's Drop.
        coro_runtime::sleep(Duration::from_millis(1)).expect("close may block here");
        self.0 .0.closed.borrow_mut().push(conn.id);
    }
}
