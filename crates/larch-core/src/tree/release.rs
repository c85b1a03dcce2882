//! Giving back the memory of a tree kept after its commit: [`Tree::release_stored`] refers by key
//! to the stored nodes a copy-on-write would detach ([`Node::detached_copy`]), at once and
//! through the whole in-memory part of the tree, instead of one parent at a time as later edits
//! copy them.

use super::Tree;
use super::node::{Entry, HeldKeys, InodeTree, Node, NodeBody, NodeRef};
use std::collections::HashMap;
use std::sync::Arc;

/// What [`Tree::release_stored`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Released {
    /// In-memory nodes now referred to by key (each with whatever it held in memory below it).
    pub detached: usize,
    /// Stored nodes kept in memory and copied, because something below them was detached.
    pub copied: usize,
}

impl Tree {
    /// This tree, with every in-memory node that its source surely holds (`held`, as a
    /// copy-on-write detaches, [`Node::detached_copy`]) referred to by key instead: the nodes
    /// only this tree kept in memory are freed once the other holders of the old one drop it.
    /// The in-memory nodes above them are copied (with their caches and origins): the caller
    /// must not let a store write this tree while another commit that shares its nodes not
    /// stored yet is being written (the copies would not learn their keys). The nodes written last (`held.recent_from`, `held.recent_inodes_from`) stay in memory, as a
    /// copy keeps them. Same value and hash; the count of dirty nodes is kept.
    ///
    /// For a writer that carries the tree of its last commit into the next blocks
    /// (`larch_store::PipelinedRepo`): a block that rewrote thousands of directories left them
    /// in memory until a later change copies each parent again (hundreds of blocks for the
    /// directories spread over a large one).
    pub fn release_stored(&self, held: HeldKeys) -> (Tree, Released) {
        let mut released = Released::default();
        let root = match &self.root {
            Entry::Node(NodeRef::Mem(node)) => {
                let mut walk = Walk { held, released: &mut released, done: HashMap::new() };
                match walk.node(node) {
                    Some(copy) => Entry::Node(NodeRef::Mem(copy)),
                    None => self.root.clone(),
                }
            }
            Entry::Node(NodeRef::Stored { .. }) | Entry::Contents(_) => self.root.clone(),
        };
        let tree = Tree { root, source: self.source.clone(), dirty_bound: self.dirty_bound };
        (tree, released)
    }
}

impl Tree {
    /// The distinct nodes (directories and inodes) this tree holds in memory: a walk of its
    /// in-memory part, for tests and diagnostics of what a kept tree costs.
    pub fn in_memory_nodes(&self) -> usize {
        let mut seen = std::collections::HashSet::new();
        let mut stack: Vec<&Arc<Node>> = Vec::new();
        if let Entry::Node(NodeRef::Mem(root)) = &self.root {
            stack.push(root);
        }
        while let Some(node) = stack.pop() {
            if !seen.insert(Arc::as_ptr(node)) {
                continue;
            }
            node.body().for_each_child(|child| {
                if let NodeRef::Mem(child) = child {
                    stack.push(child);
                }
            });
        }
        seen.len()
    }
}

/// One release's walk: a node reachable by several paths (a subtree copied to a second path
/// shares its `Arc`) is released once, and every path gets the same result, so sharing is kept
/// and the walk stays linear in the distinct in-memory nodes.
struct Walk<'r> {
    held: HeldKeys,
    released: &'r mut Released,
    /// Each in-memory node walked (by address: the tree borrowed for the walk keeps it alive),
    /// and its copy, `None` when unchanged.
    done: HashMap<*const Node, Option<Arc<Node>>>,
}

impl Walk<'_> {
    /// `child`, released: `None` when unchanged.
    fn child(&mut self, child: &NodeRef) -> Option<NodeRef> {
        let NodeRef::Mem(node) = child else { return None };
        if let (Some(key), Some(hash)) = (node.stored_key(), node.cached_hash())
            && self.held.detaches(key, node)
        {
            self.released.detached += 1;
            return Some(NodeRef::Stored { hash, key });
        }
        crate::stack::guarded(|| self.node(node)).map(NodeRef::Mem)
    }

    /// A copy of `node` with its children released (keeping its caches and origin), `None` when
    /// none was; the same copy for every path to one node.
    fn node(&mut self, node: &Arc<Node>) -> Option<Arc<Node>> {
        if let Some(done) = self.done.get(&Arc::as_ptr(node)) {
            return done.clone();
        }
        let copy = self.copy(node);
        self.done.insert(Arc::as_ptr(node), copy.clone());
        copy
    }

    fn copy(&mut self, node: &Arc<Node>) -> Option<Arc<Node>> {
        let body = match node.body() {
            NodeBody::Flat(entries) | NodeBody::Values(entries) => {
                let mut changed: Option<Vec<_>> = None;
                for (at, (_, entry)) in entries.iter().enumerate() {
                    let Entry::Node(child) = entry else { continue };
                    if let Some(new) = self.child(child) {
                        let copy = changed.get_or_insert_with(|| entries.clone());
                        if let Some(slot) = copy.get_mut(at) {
                            slot.1 = Entry::Node(new);
                        }
                    }
                }
                let entries = changed?;
                if matches!(node.body(), NodeBody::Flat(_)) {
                    NodeBody::Flat(entries)
                } else {
                    NodeBody::Values(entries)
                }
            }
            NodeBody::Tree(tree) => {
                let mut changed: Option<Vec<_>> = None;
                for (at, (_, child)) in tree.children.iter().enumerate() {
                    if let Some(new) = self.child(child) {
                        let copy = changed.get_or_insert_with(|| tree.children.clone());
                        if let Some(slot) = copy.get_mut(at) {
                            slot.1 = new;
                        }
                    }
                }
                NodeBody::Tree(InodeTree { depth: tree.depth, length: tree.length, children: changed? })
            }
        };
        self.released.copied += 1;
        let copy = node.with_body(body);
        if let Some(origin) = node.origin() {
            copy.set_origin(origin);
        }
        Some(Arc::new(copy))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;
    use crate::tree::node::{ObjectKey, StoreId};

    /// The in-memory children of `tree`'s root, in name order.
    fn children(tree: &Tree) -> Vec<Arc<Node>> {
        let Entry::Node(NodeRef::Mem(root)) = tree.root() else { panic!("no root in memory") };
        let mut out = Vec::new();
        root.body().for_each_child(|child| {
            if let NodeRef::Mem(child) = child {
                out.push(child.clone());
            }
        });
        out
    }

    /// Directories `a`, `b`, `c` (one value each), hashed, each marked stored in `store` at
    /// 100, 200 and 300, the root at 400.
    fn stored_tree(store: StoreId) -> Tree {
        let mut tree = Tree::empty();
        for dir in ["a", "b", "c"] {
            tree.add(&[dir, "v"], dir.as_bytes().to_vec()).unwrap();
        }
        tree.hash();
        for (at, child) in children(&tree).iter().enumerate() {
            child.set_stored_key(ObjectKey::new(store, 100 * (at as u64 + 1)));
        }
        let Entry::Node(NodeRef::Mem(root)) = tree.root() else { panic!("no root in memory") };
        root.set_stored_key(ObjectKey::new(store, 400));
        tree
    }

    fn held(store: StoreId, recent_from: u64) -> HeldKeys {
        HeldKeys { store, from: 0, recent_from, recent_inodes_from: u64::MAX }
    }

    #[test]
    fn stored_nodes_are_referred_to_by_key_but_the_recent_ones() {
        let store = StoreId::fresh();
        let tree = stored_tree(store);
        assert_eq!(tree.in_memory_nodes(), 4);
        let (released, counts) = tree.release_stored(held(store, u64::MAX));
        assert_eq!(counts, Released { detached: 3, copied: 1 });
        assert_eq!(released.in_memory_nodes(), 1);
        assert_eq!(released.hash(), tree.hash());
        // The tree it was made from is unchanged.
        assert_eq!(tree.in_memory_nodes(), 4);
        // Nodes stored at 200 or later stay in memory.
        let (released, counts) = tree.release_stored(held(store, 200));
        assert_eq!(counts, Released { detached: 1, copied: 1 });
        assert_eq!(released.in_memory_nodes(), 3);
        // Another store's keys are not this store's to give back.
        let (released, counts) = tree.release_stored(held(StoreId::fresh(), u64::MAX));
        assert_eq!(counts, Released::default());
        assert_eq!(released.in_memory_nodes(), 4);
    }

    #[test]
    fn nodes_not_stored_are_kept_and_copied_above_what_is_given_back() {
        let store = StoreId::fresh();
        let mut tree = stored_tree(store);
        tree.add(&["c", "w"], b"new".to_vec()).unwrap();
        let expected = tree.hash();
        let (released, counts) = tree.release_stored(held(store, u64::MAX));
        // `a` and `b` given back; the root and `c`, changed since, kept (the root copied).
        assert_eq!(counts, Released { detached: 2, copied: 1 });
        assert_eq!(released.in_memory_nodes(), 2);
        assert_eq!(released.hash(), expected);
        let c = &children(&released)[0];
        assert!(c.stored_key().is_none() && c.cached_hash().is_some());
    }

    #[test]
    fn a_node_reached_by_two_paths_is_released_once_and_stays_shared() {
        let store = StoreId::fresh();
        let mut tree = Tree::empty();
        for dir in ["a", "b"] {
            tree.add(&["s", dir, "v"], dir.as_bytes().to_vec()).unwrap();
        }
        tree.hash();
        let s = children(&tree)[0].clone();
        let mut at = 100;
        s.body().for_each_child(|child| {
            if let NodeRef::Mem(child) = child {
                child.set_stored_key(ObjectKey::new(store, at));
                at += 100;
            }
        });
        // `t` is `s` again (one `Arc` by two paths); neither is stored.
        assert!(tree.copy(&["s"], &["t"]).unwrap());
        let expected = tree.hash();
        let (released, counts) = tree.release_stored(held(store, u64::MAX));
        // `a` and `b` given back once, `s` copied once, and the root.
        assert_eq!(counts, Released { detached: 2, copied: 2 });
        let [s, t] = &children(&released)[..] else { panic!("two children expected") };
        assert!(Arc::ptr_eq(s, t), "the copy of `s` serves both paths");
        assert_eq!(released.in_memory_nodes(), 2);
        assert_eq!(released.hash(), expected);
    }
}
