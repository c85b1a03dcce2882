//! A commit the store already holds, committed again (the same tree, parents and info: a replay
//! onto a store that has its commits, a node applying a block again after a crash): nothing is
//! written, and the tree's nodes are told where the store holds them, as a written commit's are.
//! Without that, a tree carried on from such a commit (a [`crate::PipelinedRepo`]'s, served from
//! memory to the next block) never refers to its nodes by key: every block's changes stayed in
//! memory, and a replay of 1,000 blocks onto a store that held them grew from 159 to 299 MiB of
//! peak RSS at the 1x rung, to 1.1 GiB at the mainnet rung.

use crate::error::Result;
use crate::format::patch::MAX_CHAIN;
use crate::pack::reader::PackReader;
use larch_core::{Entry, Node, NodeBody, NodeRef};
use std::sync::Arc;

/// Records in `root` and its in-memory descendants without a key in this store the keys of the
/// equal nodes of the stored tree whose root record is at `offset` (`root`'s hash must be that
/// record's: the caller read it from the commit record of the same commit hash). Children are
/// matched by name in directories and by bucket in inode trees, and keyed, with their records'
/// patch chains, only when their hash is the one the stored parent records for them; any other
/// is left as it is, with its subtree. The stored versions are read through the cache without
/// entering it (the tree holds them already).
pub(crate) fn key_as_stored(root: &NodeRef, offset: u64, reader: &PackReader) -> Result<()> {
    let store = reader.store();
    let mut pending: Vec<(Arc<Node>, u64)> = Vec::new();
    if let NodeRef::Mem(node) = root {
        pending.push((node.clone(), offset));
    }
    while let Some((node, offset)) = pending.pop() {
        let Some(hash) = node.cached_hash() else { continue };
        if node.stored_offset_in(store).is_some() {
            continue;
        }
        let (stored, chain) = match reader.cached_node(offset, &hash, MAX_CHAIN)? {
            Some(found) => found,
            None => reader.node_read(offset, &hash, MAX_CHAIN, false)?,
        };
        let key = reader.key(offset);
        node.set_stored_key(key);
        node.note_record_chain(key, chain);
        let mut push = |mine: &NodeRef, theirs: &NodeRef| {
            let (hash, offset) = match theirs {
                NodeRef::Stored { hash, key } => (Some(*hash), key.offset_in(store)),
                NodeRef::Mem(node) => (node.cached_hash(), node.stored_offset_in(store)),
            };
            if let (NodeRef::Mem(child), Some(hash), Some(offset)) = (mine, hash, offset)
                && child.cached_hash() == Some(hash)
            {
                pending.push((child.clone(), offset));
            }
        };
        match (node.body(), stored.body()) {
            (NodeBody::Flat(mine), NodeBody::Flat(theirs))
            | (NodeBody::Values(mine), NodeBody::Values(theirs))
                if mine.len() == theirs.len() =>
            {
                for ((name, entry), (stored_name, stored_entry)) in mine.iter().zip(theirs) {
                    if let (Entry::Node(child), Entry::Node(stored_child)) = (entry, stored_entry)
                        && name == stored_name
                    {
                        push(child, stored_child);
                    }
                }
            }
            (NodeBody::Tree(mine), NodeBody::Tree(theirs))
                if mine.children.len() == theirs.children.len() =>
            {
                for ((index, child), (stored_index, stored_child)) in
                    mine.children.iter().zip(&theirs.children)
                {
                    if index == stored_index {
                        push(child, stored_child);
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}
