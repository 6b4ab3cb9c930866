//! Doubly linked lists threaded through a slab of nodes, for O(1)
//! `remove`, `move_to_front` and `move_to_back` (the document's `list<T>`
//! with iterators).
//!
//! A node can be on several lists at once (a worker is on its group's list
//! and maybe on the inactive list): each list kind has its own [`Link`] in
//! the node, picked by a [`Kind`].

pub(super) const NIL: usize = usize::MAX;

/// Which of a node's links a list uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    /// The group's `processes` list.
    Group,
    /// The pool's `inactive_apps` list.
    Inactive,
}

#[derive(Clone, Copy, Debug)]
pub(super) struct Link {
    pub(super) prev: usize,
    pub(super) next: usize,
}

impl Default for Link {
    fn default() -> Link {
        Link {
            prev: NIL,
            next: NIL,
        }
    }
}

/// A node that can be linked.
pub(super) trait Linked {
    fn link(&mut self, kind: Kind) -> &mut Link;
    fn link_ref(&self, kind: Kind) -> &Link;
}

/// A list's ends and length.
#[derive(Debug, Clone, Copy)]
pub(super) struct List {
    kind: Kind,
    pub(super) head: usize,
    pub(super) tail: usize,
    pub(super) len: usize,
}

fn node<T: Linked>(nodes: &mut [Option<T>], k: usize) -> &mut T {
    nodes[k].as_mut().expect("linked node is live")
}

impl List {
    pub(super) fn new(kind: Kind) -> List {
        List {
            kind,
            head: NIL,
            tail: NIL,
            len: 0,
        }
    }

    pub(super) fn push_back<T: Linked>(&mut self, nodes: &mut [Option<T>], k: usize) {
        let tail = self.tail;
        *node(nodes, k).link(self.kind) = Link {
            prev: tail,
            next: NIL,
        };
        if tail == NIL {
            self.head = k;
        } else {
            node(nodes, tail).link(self.kind).next = k;
        }
        self.tail = k;
        self.len += 1;
    }

    pub(super) fn push_front<T: Linked>(&mut self, nodes: &mut [Option<T>], k: usize) {
        let head = self.head;
        *node(nodes, k).link(self.kind) = Link {
            prev: NIL,
            next: head,
        };
        if head == NIL {
            self.tail = k;
        } else {
            node(nodes, head).link(self.kind).prev = k;
        }
        self.head = k;
        self.len += 1;
    }

    pub(super) fn remove<T: Linked>(&mut self, nodes: &mut [Option<T>], k: usize) {
        let Link { prev, next } = std::mem::take(node(nodes, k).link(self.kind));
        if prev == NIL {
            self.head = next;
        } else {
            node(nodes, prev).link(self.kind).next = next;
        }
        if next == NIL {
            self.tail = prev;
        } else {
            node(nodes, next).link(self.kind).prev = prev;
        }
        self.len -= 1;
    }

    pub(super) fn move_to_back<T: Linked>(&mut self, nodes: &mut [Option<T>], k: usize) {
        if self.tail != k {
            self.remove(nodes, k);
            self.push_back(nodes, k);
        }
    }

    pub(super) fn move_to_front<T: Linked>(&mut self, nodes: &mut [Option<T>], k: usize) {
        if self.head != k {
            self.remove(nodes, k);
            self.push_front(nodes, k);
        }
    }

    /// The keys from front to back.
    pub(super) fn keys<T: Linked>(&self, nodes: &[Option<T>]) -> Vec<usize> {
        let mut out = Vec::with_capacity(self.len);
        let mut k = self.head;
        while k != NIL {
            out.push(k);
            k = nodes[k]
                .as_ref()
                .expect("linked node is live")
                .link_ref(self.kind)
                .next;
        }
        out
    }
}
