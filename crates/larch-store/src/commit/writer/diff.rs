//! The differences a rewritten node is written as, when it is written as a patch of its base: its
//! entries' changes (set or removed names) or its buckets' changes, against the base's.

use super::Loc;
use crate::format::codec::EncodedTarget;
use larch_core::{ContentsRef, Entry, Hash, Name, NodeRef, StoreId};
use std::sync::Arc;

/// One change of an entries patch: set the entry at this index of the new node, or remove a name.
pub(super) enum Change {
    /// Set the entry at this index of the new node.
    Set(usize),
    /// Remove this name.
    Remove(Name),
}

pub(super) fn target_of(loc: Option<&Loc>) -> EncodedTarget<'_> {
    match loc {
        Some(Loc::Node(hash, child)) => EncodedTarget::Node(*hash, *child),
        Some(Loc::Contents(hash, child)) => EncodedTarget::Contents(*hash, *child),
        Some(loc @ Loc::Inline(_)) => EncodedTarget::Inline(loc.inline_bytes().unwrap_or_default()),
        None => EncodedTarget::Inline(&[]),
    }
}

/// The hash and position in `store` of a child a base refers to: by key, or in memory with its
/// stored key (a base in memory: a node's origin).
pub(super) fn stored_position(child: &NodeRef, store: StoreId) -> Option<(Hash, u64)> {
    match child {
        NodeRef::Stored { hash, key } => Some((*hash, key.offset_in(store)?)),
        NodeRef::Mem(node) => Some((node.cached_hash()?, node.stored_offset_in(store)?)),
    }
}

/// Whether the new target `loc` is what the base entry (of `store`) holds.
fn same_target(loc: &Loc, entry: &Entry, store: StoreId) -> bool {
    match (loc, entry) {
        // By key, or in memory (a base in memory, a node's origin, holds its children so).
        (Loc::Node(hash, offset), Entry::Node(child)) => {
            stored_position(child, store) == Some((*hash, *offset))
        }
        (Loc::Contents(hash, offset), Entry::Contents(ContentsRef::Stored { hash: h, key })) => {
            hash == h && key.offset_in(store) == Some(*offset)
        }
        (Loc::Inline(ContentsRef::Mem(contents)), Entry::Contents(ContentsRef::Mem(old))) => {
            // An unchanged entry usually shares its value with the base (the node was copied from
            // it): no need to read the bytes.
            Arc::ptr_eq(contents, old) || contents.as_bytes() == old.as_bytes()
        }
        (loc @ Loc::Inline(_), Entry::Contents(old)) => {
            loc.inline_bytes().is_some_and(|new| old.held_bytes() == Some(new))
        }
        _ => false,
    }
}

/// The changes from the sorted `base` entries to the new sorted `entries` (with their targets
/// `locs`), sorted by name; `None` if the lists are not sorted as they must be.
pub(super) fn entry_changes(
    entries: &[(Name, Entry)],
    locs: &[Loc],
    base: &[(Name, Entry)],
    store: StoreId,
) -> Option<Vec<Change>> {
    let mut changes = Vec::new();
    let mut old = base.iter().peekable();
    for (index, ((name, _), loc)) in entries.iter().zip(locs).enumerate() {
        // Equality first: an unchanged entry shares its name with the base (the node was copied
        // from it), and `Name` equality then compares no bytes: most entries cost no comparison.
        loop {
            match old.peek() {
                Some((probe, entry)) if probe == name => {
                    if !same_target(loc, entry, store) {
                        changes.push(Change::Set(index));
                    }
                    old.next();
                    break;
                }
                Some((probe, _)) if probe < name => {
                    changes.push(Change::Remove(probe.clone()));
                    old.next();
                }
                _ => {
                    changes.push(Change::Set(index));
                    break;
                }
            }
        }
    }
    changes.extend(old.map(|(removed, _)| Change::Remove(removed.clone())));
    Some(changes)
}

/// The bucket changes from the base children to the new ones (both sorted by bucket).
pub(super) fn bucket_changes(
    children: &[(u8, (Hash, u64))],
    base: &[(u8, NodeRef)],
    store: StoreId,
) -> Vec<(u8, Option<(Hash, u64)>)> {
    let mut changes = Vec::new();
    let mut old = base.iter().peekable();
    for (bucket, (hash, offset)) in children {
        while let Some((removed, _)) = old.next_if(|(probe, _)| probe < bucket) {
            changes.push((*removed, None));
        }
        match old.next_if(|(probe, _)| probe == bucket) {
            Some((_, child)) if stored_position(child, store) == Some((*hash, *offset)) => {}
            _ => changes.push((*bucket, Some((*hash, *offset)))),
        }
    }
    changes.extend(old.map(|(removed, _)| (*removed, None)));
    changes
}
