//! Patch records (docs/format.md §3.7): a directory or inode written as its changes to an earlier
//! version of itself (its *base*), so that rewriting a 32-entry inode for one changed entry costs
//! one entry, not 32. Pointers keep their child hashes, so a parent is still rehashed without
//! reading its children. A chain of patches is bounded by [`MAX_CHAIN`].

use crate::error::{FileKind, Result, StoreError};
use crate::format::codec::{self, Cursor, EncodedTarget, EntryCounts, RecordKind};
use larch_core::schema::{INODE_VALUES_MAX, STABLE_HASH_MAX};
use larch_core::{Entry, Hash, InodeTree, Name, NodeBody, NodeRef, StoreId};
use larch_varint::encode as write_leb128;
use std::borrow::Cow;

/// The longest chain of patches: a record whose base is at this depth is written in full.
pub const MAX_CHAIN: u8 = 8;

/// The fewest entries of a directory or `Values` inode written as a patch.
pub const PATCH_MIN_ENTRIES: usize = 4;

/// A flat directory of fewer than [`OLD_BASE_MAX_ENTRIES`] entries whose base was written more
/// than this many bytes of pack before it is written in full. Such a directory (a Tezos account)
/// is rewritten a few times between long stretches in which it is not read, then mostly read
/// cold: a full record then costs one read instead of a record and its base, for a little more
/// space. Inode leaves (`Values`) are not concerned: they are the parts of large directories,
/// rewritten and read together with them.
pub const OLD_BASE_BYTES: u64 = 32 << 20;

/// The longest chain of patches of a flat directory of fewer than [`OLD_BASE_MAX_ENTRIES`]
/// entries: a record whose base is at this depth (or deeper, in a store written before this
/// bound) is written in full. Such a directory (a Tezos account) is rewritten a few times between
/// two cold reads (a cycle's end reads 16,000 of them), each rewrite within [`OLD_BASE_BYTES`] of
/// the one before a patch on it: a cold read then costs at most three records (2 patches and a
/// full record) instead of up to nine. A full record of a small directory is only a little larger
/// than a patch.
pub const SMALL_MAX_CHAIN: u8 = 2;

/// The small flat directories of [`OLD_BASE_BYTES`] and [`SMALL_MAX_CHAIN`]: fewer entries than this.
pub const OLD_BASE_MAX_ENTRIES: usize = 16;

/// Whether a directory (`flat`) or `Values` inode of `entries` entries may be written as a patch
/// on a base of chain length `base_chain` written `base_age` bytes of pack before it (if few
/// enough of its entries changed).
pub fn entries_patch_allowed(flat: bool, entries: usize, base_chain: u8, base_age: u64) -> bool {
    let small = flat && entries < OLD_BASE_MAX_ENTRIES;
    let max_chain = if small { SMALL_MAX_CHAIN } else { MAX_CHAIN };
    base_chain < max_chain && entries >= PATCH_MIN_ENTRIES && !(small && base_age > OLD_BASE_BYTES)
}

/// A decoded patch record.
#[derive(Debug)]
pub enum Patch {
    /// Changes to a flat directory or a `Values` inode: `None` removes the name.
    Entries {
        /// The base: hash and offset.
        base: (Hash, u64),
        /// Patches from the last full record to this one (1..=MAX_CHAIN).
        chain: u8,
        /// Changes sorted by name.
        changes: Vec<(Name, Option<Entry>)>,
    },
    /// Changes to a `Tree` inode: `None` removes the bucket.
    Tree {
        /// The base: hash and offset.
        base: (Hash, u64),
        /// Patches from the last full record to this one (1..=MAX_CHAIN).
        chain: u8,
        /// Entries below the patched inode.
        length: u64,
        /// Changes sorted by bucket.
        changes: Vec<(u8, Option<NodeRef>)>,
    },
}

impl Patch {
    /// The base's hash and offset.
    pub fn base(&self) -> (Hash, u64) {
        match self {
            Patch::Entries { base, .. } | Patch::Tree { base, .. } => *base,
        }
    }

    /// The chain length of this record.
    pub fn chain(&self) -> u8 {
        match self {
            Patch::Entries { chain, .. } | Patch::Tree { chain, .. } => *chain,
        }
    }
}

/// Appends the head of a patch body: the base pointer and the chain length.
pub fn encode_head(out: &mut Vec<u8>, self_offset: u64, base: (Hash, u64), chain: u8) {
    codec::write_pointer(out, self_offset, &base.0, base.1);
    out.push(chain);
}

/// A change of an entries patch, for [`encode_entries`].
pub enum EntryChange<'a> {
    /// Set `name` to the target.
    Set(&'a [u8], EncodedTarget<'a>),
    /// Remove `name`.
    Remove(&'a [u8]),
}

/// Appends the changes of an entries patch (sorted by name).
pub fn encode_entries(out: &mut Vec<u8>, self_offset: u64, changes: &[EntryChange<'_>]) {
    write_leb128(out, changes.len() as u64);
    for change in changes {
        match change {
            EntryChange::Set(name, target) => codec::encode_entry(out, self_offset, name, target),
            EntryChange::Remove(name) => codec::encode_removal(out, name),
        }
    }
}

/// Appends the changes of a tree patch (sorted by bucket): `None` removes the bucket.
pub fn encode_tree(out: &mut Vec<u8>, self_offset: u64, length: u64, changes: &[(u8, Option<(Hash, u64)>)]) {
    write_leb128(out, length);
    out.push(changes.len() as u8);
    for (bucket, target) in changes {
        out.push(*bucket);
        match target {
            None => out.push(0),
            Some((hash, offset)) => {
                out.push(1);
                codec::write_pointer(out, self_offset, hash, *offset);
            }
        }
    }
}

/// Decodes the body of a patch record at `offset`; its child pointers become keys of `store`.
pub fn decode(
    kind: RecordKind,
    body: &[u8],
    offset: u64,
    counts: &mut EntryCounts,
    store: StoreId,
) -> Result<Patch> {
    let mut cursor = Cursor::new(body, FileKind::Pack, offset);
    let base = cursor.pointer()?;
    let chain = cursor.u8()?;
    if chain == 0 || chain > MAX_CHAIN {
        return Err(cursor.error(format!("patch chain length {chain}")));
    }
    let patch = match kind {
        RecordKind::PatchEntries => {
            let count = cursor.leb()?;
            if count > STABLE_HASH_MAX as u64 * 2 {
                return Err(cursor.error(format!("{count} changes")));
            }
            let changes = codec::with_decoded_names(|names| {
                for _ in 0..count {
                    codec::decode_entry(&mut cursor, counts, names, store)?;
                    if names.previous().is_some_and(|previous| previous >= names.last()) {
                        return Err(cursor.error("patch changes not sorted by name"));
                    }
                }
                names.finish(&cursor, |name, target| Ok((name, target)))
            })?;
            Patch::Entries { base, chain, changes }
        }
        RecordKind::PatchTree => {
            let length = cursor.leb()?;
            let count = cursor.u8()?;
            if count > 32 {
                return Err(cursor.error(format!("{count} bucket changes")));
            }
            let mut changes: Vec<(u8, Option<NodeRef>)> = Vec::with_capacity(usize::from(count));
            for _ in 0..count {
                let bucket =
                    codec::decode_bucket(&mut cursor, changes.last().map(|(previous, _)| *previous))?;
                let target = match cursor.u8()? {
                    0 => None,
                    1 => {
                        let (hash, key) = cursor.key_pointer(store)?;
                        Some(NodeRef::Stored { hash, key })
                    }
                    flag => return Err(cursor.error(format!("bad bucket change flag {flag}"))),
                };
                changes.push((bucket, target));
            }
            Patch::Tree { base, chain, length, changes }
        }
        other => return Err(cursor.error(format!("a {} record is not a patch", other.name()))),
    };
    if !cursor.at_end() {
        return Err(cursor.error("trailing bytes in patch body"));
    }
    Ok(patch)
}

/// `base` (sorted by key) with sorted `changes` applied: a value replaces or adds its key's, `None`
/// removes it. `None` when a change removes a key the base lacks. Shared by the reader's patch
/// decoding and the GC mark's (`gc_children`).
pub(crate) fn merge_changes<K: Ord + Clone, V: Clone>(
    base: &[(K, V)],
    changes: Vec<(K, Option<V>)>,
) -> Option<Vec<(K, V)>> {
    merge_changes_into(base.iter().cloned(), base.len(), changes)
}

/// [`merge_changes`] of a base given as its items in order (`base_len` of them): owned items are
/// moved, not cloned.
fn merge_changes_into<K: Ord, V>(
    base: impl Iterator<Item = (K, V)>,
    base_len: usize,
    changes: Vec<(K, Option<V>)>,
) -> Option<Vec<(K, V)>> {
    let mut out = Vec::with_capacity(base_len + changes.len());
    let mut rest = base.peekable();
    for (key, change) in changes {
        while let Some(kept) = rest.next_if(|(existing, _)| *existing < key) {
            out.push(kept);
        }
        let present = rest.next_if(|(existing, _)| *existing == key).is_some();
        match change {
            Some(value) => out.push((key, value)),
            None if !present => return None,
            None => {}
        }
    }
    out.extend(rest);
    Some(out)
}

/// The body a patch at `offset` describes, given its base's body.
pub fn apply(base: &NodeBody, patch: Patch, offset: u64) -> Result<NodeBody> {
    apply_to(Cow::Borrowed(base), patch, offset)
}

/// [`apply`] to a base's body borrowed (the entries kept are cloned) or owned (they are moved:
/// a base read only to apply a patch to it is no longer needed, and moving its entries spares
/// a reference count taken and dropped per entry).
pub fn apply_to(base: Cow<'_, NodeBody>, patch: Patch, offset: u64) -> Result<NodeBody> {
    let corrupt = |reason: &str| StoreError::corrupt(FileKind::Pack, offset, reason);
    let mismatch = || corrupt("the patch does not match the kind of its base");
    match patch {
        Patch::Entries { changes, .. } => {
            let flat = matches!(*base, NodeBody::Flat(_));
            let out = match base {
                Cow::Borrowed(NodeBody::Flat(entries) | NodeBody::Values(entries)) => {
                    merge_changes(entries, changes)
                }
                Cow::Owned(NodeBody::Flat(entries) | NodeBody::Values(entries)) => {
                    let len = entries.len();
                    merge_changes_into(entries.into_iter(), len, changes)
                }
                _ => return Err(mismatch()),
            }
            .ok_or_else(|| corrupt("the patch removes a name its base lacks"))?;
            match flat {
                true if out.len() <= STABLE_HASH_MAX => Ok(NodeBody::Flat(out)),
                false if out.len() <= INODE_VALUES_MAX => Ok(NodeBody::Values(out)),
                _ => Err(corrupt("the patched node has too many entries")),
            }
        }
        Patch::Tree { length, changes, .. } => {
            let (depth, children) = match base {
                Cow::Borrowed(NodeBody::Tree(tree)) => (tree.depth, merge_changes(&tree.children, changes)),
                Cow::Owned(NodeBody::Tree(tree)) => {
                    let len = tree.children.len();
                    (tree.depth, merge_changes_into(tree.children.into_iter(), len, changes))
                }
                _ => return Err(mismatch()),
            };
            let children = children.ok_or_else(|| corrupt("the patch removes a bucket its base lacks"))?;
            if children.is_empty() {
                return Err(corrupt("the patched inode has no children"));
            }
            codec::check_tree_length(depth, length).map_err(|reason| corrupt(&reason))?;
            Ok(NodeBody::Tree(InodeTree { depth, length, children }))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use larch_core::Entry;

    fn flat(names: &[&str]) -> NodeBody {
        NodeBody::Flat(
            names.iter().map(|name| (Name::from(*name), Entry::contents(name.as_bytes()))).collect(),
        )
    }

    fn entries_patch(chain: u8, changes: &[EntryChange<'_>]) -> Vec<u8> {
        let mut out = Vec::new();
        encode_head(&mut out, 1000, (Hash([4; 32]), 500), chain);
        encode_entries(&mut out, 1000, changes);
        out
    }

    #[test]
    fn entries_patches_round_trip_and_apply() {
        let body = entries_patch(
            1,
            &[
                EntryChange::Remove(b"b"),
                EntryChange::Set(b"c", EncodedTarget::Inline(b"new")),
                EntryChange::Set(b"d", EncodedTarget::Inline(b"d")),
            ],
        );
        let patch =
            decode(RecordKind::PatchEntries, &body, 1000, &mut EntryCounts::default(), StoreId::fresh())
                .unwrap();
        assert_eq!((patch.base(), patch.chain()), ((Hash([4; 32]), 500), 1));
        let NodeBody::Flat(out) = apply(&flat(&["a", "b", "c"]), patch, 1000).unwrap() else { panic!() };
        let names: Vec<&[u8]> = out.iter().map(|(name, _)| name.as_bytes()).collect();
        assert_eq!(names, [&b"a"[..], b"c", b"d"]);
        let Entry::Contents(value) = &out[1].1 else { panic!() };
        assert_eq!(value.held_bytes(), Some(&b"new"[..]));
        assert_eq!(value.hash(), larch_core::schema::contents_hash(b"new"));
    }

    #[test]
    fn a_base_given_owned_patches_as_a_borrowed_one() {
        let child = |n: u8| NodeRef::Stored {
            hash: Hash([n; 32]),
            key: larch_core::ObjectKey::new(StoreId::fresh(), u64::from(n) * 100),
        };
        let tree = NodeBody::Tree(InodeTree {
            depth: 1,
            length: 40,
            children: vec![(1, child(1)), (3, child(3)), (9, child(9))],
        });
        let mut tree_patch = Vec::new();
        encode_head(&mut tree_patch, 1000, (Hash([4; 32]), 500), 2);
        encode_tree(&mut tree_patch, 1000, 41, &[(2, Some((Hash([2; 32]), 200))), (3, None)]);
        let mut tree_removing_absent = Vec::new();
        encode_head(&mut tree_removing_absent, 1000, (Hash([4; 32]), 500), 2);
        encode_tree(&mut tree_removing_absent, 1000, 41, &[(4, None)]);
        let cases: Vec<(NodeBody, RecordKind, Vec<u8>)> = vec![
            (
                flat(&["a", "b", "c", "e"]),
                RecordKind::PatchEntries,
                entries_patch(
                    1,
                    &[
                        EntryChange::Set(b"0", EncodedTarget::Inline(b"first")),
                        EntryChange::Remove(b"b"),
                        EntryChange::Set(b"c", EncodedTarget::Inline(b"new")),
                        EntryChange::Set(b"z", EncodedTarget::Inline(b"last")),
                    ],
                ),
            ),
            (flat(&["a"]), RecordKind::PatchEntries, entries_patch(1, &[EntryChange::Remove(b"zz")])),
            (tree.clone(), RecordKind::PatchTree, tree_patch),
            (tree.clone(), RecordKind::PatchTree, tree_removing_absent),
            (tree, RecordKind::PatchEntries, entries_patch(1, &[])),
        ];
        for (i, (base, kind, body)) in cases.into_iter().enumerate() {
            let store = StoreId::fresh();
            let decode_patch = || decode(kind, &body, 1000, &mut EntryCounts::default(), store).unwrap();
            let borrowed = apply(&base, decode_patch(), 1000).map(|body| larch_core::Node::new(body).hash());
            let owned = apply_to(Cow::Owned(base), decode_patch(), 1000)
                .map(|body| larch_core::Node::new(body).hash());
            match (borrowed, owned) {
                (Ok(a), Ok(b)) => assert_eq!(a, b, "case {i}"),
                (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "case {i}"),
                (a, b) => panic!("case {i}: borrowed {a:?}, owned {b:?}"),
            }
        }
    }

    #[test]
    fn bad_patches_are_corruption() {
        for chain in [0, MAX_CHAIN + 1] {
            let body = entries_patch(chain, &[]);
            assert!(
                decode(RecordKind::PatchEntries, &body, 1000, &mut EntryCounts::default(), StoreId::fresh())
                    .is_err()
            );
        }
        // Unsorted changes.
        let body = entries_patch(
            1,
            &[
                EntryChange::Set(b"b", EncodedTarget::Inline(b"")),
                EntryChange::Set(b"a", EncodedTarget::Inline(b"")),
            ],
        );
        assert!(
            decode(RecordKind::PatchEntries, &body, 1000, &mut EntryCounts::default(), StoreId::fresh())
                .is_err()
        );
        // Removing a name the base lacks.
        let body = entries_patch(1, &[EntryChange::Remove(b"zz")]);
        let patch =
            decode(RecordKind::PatchEntries, &body, 1000, &mut EntryCounts::default(), StoreId::fresh())
                .unwrap();
        assert!(matches!(apply(&flat(&["a"]), patch, 1000), Err(StoreError::Corrupt { offset: 1000, .. })));
        // An entries patch on a tree inode.
        let body = entries_patch(1, &[]);
        let patch =
            decode(RecordKind::PatchEntries, &body, 1000, &mut EntryCounts::default(), StoreId::fresh())
                .unwrap();
        let tree = NodeBody::Tree(InodeTree { depth: 0, length: 300, children: vec![] });
        assert!(apply(&tree, patch, 1000).is_err());
        // A tree patch removing every bucket.
        let mut body = Vec::new();
        encode_head(&mut body, 1000, (Hash([4; 32]), 500), 1);
        encode_tree(&mut body, 1000, 0, &[(3, None)]);
        let patch = decode(RecordKind::PatchTree, &body, 1000, &mut EntryCounts::default(), StoreId::fresh())
            .unwrap();
        let child =
            NodeRef::Stored { hash: Hash([1; 32]), key: larch_core::ObjectKey::new(StoreId::fresh(), 100) };
        let tree = NodeBody::Tree(InodeTree { depth: 1, length: 40, children: vec![(3, child)] });
        assert!(apply(&tree, patch, 1000).is_err());
    }
}
