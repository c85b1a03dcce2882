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
    // Every child checked above: each in-memory one has a key in `store` and a hash.
    let by_key = |child: &NodeRef| match child {
        NodeRef::Mem(child) => match (child.stored_key(), child.cached_hash()) {
            (Some(key), Some(hash)) => NodeRef::Stored { hash, key },
            _ => NodeRef::Mem(child.clone()),
        },
        NodeRef::Stored { .. } => child.clone(),
    };
    let body = match node.body() {
        NodeBody::Flat(entries) | NodeBody::Values(entries) => {
            let stored = entries
                .iter()
                .map(|(name, entry)| {
                    let entry = match entry {
                        Entry::Node(child) => Entry::Node(by_key(child)),
                        Entry::Contents(_) => entry.clone(),
                    };
                    (name.clone(), entry)
                })
                .collect();
            match node.body() {
                NodeBody::Flat(_) => NodeBody::Flat(stored),
                _ => NodeBody::Values(stored),
            }
        }
        NodeBody::Tree(tree) => NodeBody::Tree(InodeTree {
            depth: tree.depth,
            length: tree.length,
            children: tree.children.iter().map(|(bucket, child)| (*bucket, by_key(child))).collect(),
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
