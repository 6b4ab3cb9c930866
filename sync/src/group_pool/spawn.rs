//! Spawns of a [`GroupPool`](super::GroupPool): the document's
//! `spawn_in_background` and `spawner_thread_callback` on a green thread
//! per spawn, with the hand-over of the first worker to the caller that
//! started the spawn, and what a failure does (the group removed, the
//! caller's ticket given the error, the key's run of failures counted).

use std::io;
use std::rc::Rc;

use coro_runtime::clock;

use super::state::{GroupShared, State};
use super::{Inner, Spawner, LOG_TARGET};

impl<S: Spawner> Inner<S> {
    /// The document's `spawn_in_background`: a spawner green thread for
    /// group `g`, counted in `spawning` until it ends.
    pub(super) fn spawn_in_background(
        self: &Inner<S>,
        st: &mut State<S::Key, S::Worker, S::Error>,
        g: usize,
    ) -> io::Result<()> {
        let me = self
            .me
            .upgrade()
            .expect("the pool is alive while it is used");
        let grp = st.group(g);
        let (key, shared) = (grp.key.clone(), grp.shared.clone());
        let h = coro_runtime::Builder::new()
            .name(format!("{} spawner {key:?}", self.config.name))
            .spawn(move || me.spawner_thread(g, key, shared))?;
        st.spawning += 1;
        let grp = st.group_mut(g);
        grp.spawning = true;
        grp.spawner = Some(h.thread().clone());
        Ok(())
    }

    /// The document's `spawner_thread_callback`, with the caller's ticket
    /// and the key's run of failures.
    fn spawner_thread(&self, g: usize, key: S::Key, shared: Rc<GroupShared>) {
        /// Counts the spawn out on every path, also an unwind at shutdown.
        struct Done<'a, S: Spawner>(&'a Inner<S>, usize, Rc<GroupShared>);
        impl<S: Spawner> Drop for Done<'_, S> {
            fn drop(&mut self) {
                let (inner, g, shared) = (self.0, self.1, &self.2);
                inner.with_state(|st| {
                    st.spawning -= 1;
                    st.queue_changed = true;
                    st.room_changed = true;
                    if !shared.detached.get() {
                        let grp = st.group_mut(g);
                        grp.spawning = false;
                        grp.spawner = None;
                        // Its caller (if any) sees the group leave.
                        grp.owner = None;
                        if grp.procs.len == 0 {
                            st.detach_group(g);
                        }
                    }
                });
            }
        }
        let _done = Done(self, g, shared.clone());
        loop {
            let r = self.spawner.spawn(&key);
            let again = self.with_state(|st| match r {
                // A spawn cut short by its group's detach is not the key's
                // failure.
                Err(_) if shared.detached.get() => false,
                Err(e) => {
                    let now = clock::now();
                    let e = Rc::new(e);
                    let f = st.spawn_failed(&key, e.clone(), now);
                    let backoff = match f.wait_left(now) {
                        Some(d) => format!(
                            " ({} failures in a row; no spawn for {key:?} in the next {d:.1?})",
                            f.failures
                        ),
                        None => String::new(),
                    };
                    log::warn!(
                        target: LOG_TARGET,
                        "{}: spawning a worker for {key:?} failed: {e}{backoff}; the group is removed",
                        self.config.name
                    );
                    let grp = st.group_mut(g);
                    grp.spawner = None; // this thread: no need to interrupt it
                    if let Some(t) = grp.owner.take() {
                        if !t.gone.get() {
                            *t.error.borrow_mut() = Some(e);
                        }
                    }
                    // The document: "remove the entire group and have the
                    // next get() call spawn the process and display the
                    // error". Its waiters start over.
                    st.detach_group(g);
                    false
                }
                Ok(w) => {
                    if shared.detached.get() {
                        st.retired.push(Rc::new(w));
                        return false;
                    }
                    st.failing.remove(&key);
                    let p = st.add_worker(g, Rc::new(w), clock::now());
                    if let Some(t) = st.group_mut(g).owner.take() {
                        if !t.gone.get() {
                            // The first worker serves the caller that
                            // started the spawn, now, not after the loop.
                            st.take_worker(p);
                            t.got.set(Some((p, st.proc(p).id)));
                        }
                    }
                    let grp = st.group(g);
                    let size = grp.procs.len;
                    // Still counted in `spawning`: allowed if one more fits.
                    let room = st.count + st.spawning <= st.max
                        && (st.max_per_app == 0 || size < st.max_per_app);
                    size < grp.min_processes && room
                }
            });
            if !again {
                return;
            }
        }
    }
}
