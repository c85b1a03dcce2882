//! Nodes a tree lets go of, kept in the cache ([`larch_core::ObjectSource::offer_detached`]).
//!
//! A pipelined writer's carried tree keeps the nodes it wrote in memory until a change copies
//! their parent: the copy then refers to them by key ([`larch_core::Node::detached_copy`]), and
//! the next read of one of them loaded it from the pack, though it had been in memory a moment
//! before (the commit thread does not keep what it writes in the cache but for the last records
//! of each commit). Such a node is put into the cache instead, as decoding its record would make
//! it: its in-memory children referred to by key. On the recorded regular blocks replayed onto
//! their setups (docs/benchmarks.md, *Scale ladder*), this took the 1x rung's cache misses from
//! ~366k to ~248k, the 10x rung's from ~721k to ~652k and the mainnet rung's from 1,335k to
//! 1,231k.

use super::PackReader;
use crate::format::codec::INLINE_MAX;
use larch_core::{ContentsRef, Entry, InodeTree, Node, NodeBody, NodeRef, StoreId};
use std::sync::Arc;

impl PackReader {
    /// Puts `node`, an in-memory node of this store that a tree has just referred to by key,
    /// into the cache if it is not there yet ([`stored_version`]; nothing if it has none).
    pub(crate) fn offer_detached(&self, node: &Arc<Node>) {
        let Some(offset) = node.stored_offset_in(self.store) else { return };
        if self.is_cached(offset) {
            return;
        }
        let Some(chain) = node.record_chain() else { return };
        let Some(stored) = stored_version(node, self.store) else { return };
        let weight = super::node_weight(&stored);
        self.prime(offset, stored, chain, weight);
    }
}

/// `node` as decoding its record in `store` makes it: the same node when it holds no child in
/// memory, else a copy whose in-memory children are referred to by key. `None` when it cannot be
/// made from what the node holds: it has no hash or no key in `store`, remembers a version it
/// was copied from, refers to a child or value not stored in `store`, or holds a value in memory
/// larger than [`INLINE_MAX`] (a record of its own, whose key the node does not know).
pub(crate) fn stored_version(node: &Arc<Node>, store: StoreId) -> Option<Arc<Node>> {
    let hash = node.cached_hash()?;
    let key = node.stored_key()?;
    key.offset_in(store)?;
    // Storing a node forgets its origin (`Node::set_stored_key`): this guards a node that would
    // not, whose origin the cache would keep alive outside its weight.
    if node.origin().is_some() {
        return None;
    }
    let in_memory = match node.body() {
        NodeBody::Flat(entries) | NodeBody::Values(entries) => {
            let mut in_memory = false;
            for (_, entry) in entries {
                match entry {
                    Entry::Node(child) => in_memory |= child_by_key(child, store)?,
                    Entry::Contents(ContentsRef::Mem(contents)) if contents.len() > INLINE_MAX => {
                        return None;
                    }
                    Entry::Contents(ContentsRef::Inline(value)) if value.as_bytes().len() > INLINE_MAX => {
                        return None;
                    }
                    Entry::Contents(ContentsRef::Stored { key, .. }) => _ = key.offset_in(store)?,
                    Entry::Contents(ContentsRef::Mem(_) | ContentsRef::Inline(_)) => {}
                }
            }
            in_memory
        }
        NodeBody::Tree(tree) => {
            let mut in_memory = false;
            for (_, child) in &tree.children {
                in_memory |= child_by_key(child, store)?;
            }
            in_memory
        }
    };
    if !in_memory {
        return Some(node.clone());
    }
    let by_key = |child: &NodeRef| match child {
        NodeRef::Mem(child) => Some(NodeRef::Stored { hash: child.cached_hash()?, key: child.stored_key()? }),
        NodeRef::Stored { .. } => Some(child.clone()),
    };
    let body = match node.body() {
        NodeBody::Flat(entries) | NodeBody::Values(entries) => {
            let stored = entries
                .iter()
                .map(|(name, entry)| {
                    let entry = match entry {
                        Entry::Node(child) => Entry::Node(by_key(child)?),
                        Entry::Contents(_) => entry.clone(),
                    };
                    Some((name.clone(), entry))
                })
                .collect::<Option<Vec<_>>>()?;
            match node.body() {
                NodeBody::Flat(_) => NodeBody::Flat(stored),
                _ => NodeBody::Values(stored),
            }
        }
        NodeBody::Tree(tree) => NodeBody::Tree(InodeTree {
            depth: tree.depth,
            length: tree.length,
            children: tree
                .children
                .iter()
                .map(|(bucket, child)| Some((*bucket, by_key(child)?)))
                .collect::<Option<Vec<_>>>()?,
        }),
    };
    let copy = Node::with_hash(body, hash);
    copy.set_stored_key(key);
    Some(Arc::new(copy))
}

/// Whether `child` is held in memory (`Some(true)`) or by key (`Some(false)`), when either way it
/// is a node of `store` with a hash (`None`: it is not, or an in-memory one has no key or hash).
fn child_by_key(child: &NodeRef, store: StoreId) -> Option<bool> {
    match child {
        NodeRef::Stored { key, .. } => key.offset_in(store).map(|_| false),
        NodeRef::Mem(child) => {
            child.stored_key()?.offset_in(store)?;
            child.cached_hash()?;
            Some(true)
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)] // test code
    use super::*;
    use larch_core::{Contents, Name, ObjectKey, SharedBytes};

    /// A hashed directory of `entries` stored in `store` at `offset`.
    fn stored(store: StoreId, offset: u64, entries: Vec<(Name, Entry)>) -> Arc<Node> {
        let node = Node::new(NodeBody::Flat(entries));
        node.hash();
        node.set_stored_key(ObjectKey::new(store, offset));
        Arc::new(node)
    }

    fn value(bytes: Vec<u8>) -> Entry {
        Entry::Contents(ContentsRef::Mem(Arc::new(Contents::new(bytes))))
    }

    #[test]
    fn only_a_node_its_record_decodes_to_has_a_stored_version() {
        let store = StoreId::fresh();
        let other = StoreId::fresh();
        let small = stored(store, 100, vec![(Name::from("v"), value(vec![1; 8]))]);
        // Values only: the node itself.
        assert!(Arc::ptr_eq(&stored_version(&small, store).unwrap(), &small));
        // An in-memory child: a copy referring to it by key, same hash and key.
        let parent = stored(store, 200, vec![(Name::from("d"), Entry::Node(NodeRef::Mem(small.clone())))]);
        let copy = stored_version(&parent, store).unwrap();
        assert!(!Arc::ptr_eq(&copy, &parent));
        let NodeBody::Flat(entries) = copy.body() else { panic!("not flat") };
        assert!(matches!(
            entries.first(),
            Some((_, Entry::Node(NodeRef::Stored { key, hash })))
                if *key == ObjectKey::new(store, 100) && *hash == small.hash()
        ));
        assert_eq!(Node::new(copy.body().clone()).hash(), parent.hash());
        assert_eq!(copy.stored_key(), Some(ObjectKey::new(store, 200)));
        // Not another store's node, nor one whose child or value is another store's.
        assert!(stored_version(&small, other).is_none());
        let foreign_child = stored(other, 300, vec![(Name::from("v"), value(vec![2; 8]))]);
        let holds_foreign =
            stored(store, 400, vec![(Name::from("d"), Entry::Node(NodeRef::Mem(foreign_child)))]);
        assert!(stored_version(&holds_foreign, store).is_none());
        let foreign_value =
            Entry::Contents(ContentsRef::Stored { hash: small.hash(), key: ObjectKey::new(other, 8) });
        assert!(stored_version(&stored(store, 500, vec![(Name::from("v"), foreign_value)]), store).is_none());
        // Not one holding a value a record does not hold inline, in memory or in a buffer.
        let large = stored(store, 600, vec![(Name::from("v"), value(vec![3; INLINE_MAX + 1]))]);
        assert!(stored_version(&large, store).is_none());
        let buffer = SharedBytes::new(&[4; INLINE_MAX + 1]);
        let inline = Entry::Contents(ContentsRef::Inline(buffer.value(0..INLINE_MAX + 1).unwrap()));
        assert!(stored_version(&stored(store, 700, vec![(Name::from("v"), inline)]), store).is_none());
        // Not one without a key, nor one holding a child without one.
        let unstored = Arc::new(Node::new(NodeBody::Flat(vec![(Name::from("v"), value(vec![5; 8]))])));
        unstored.hash();
        assert!(stored_version(&unstored, store).is_none());
        let holds_unstored = stored(store, 800, vec![(Name::from("d"), Entry::Node(NodeRef::Mem(unstored)))]);
        assert!(stored_version(&holds_unstored, store).is_none());
        // Not one remembering the version it was copied from.
        let copied = Node::new(small.body().clone());
        copied.hash();
        copied.set_stored_key(ObjectKey::new(store, 900));
        copied.set_origin(small.clone());
        let copied = Arc::new(copied);
        assert!(copied.origin().is_some());
        assert!(stored_version(&copied, store).is_none());
    }
}
