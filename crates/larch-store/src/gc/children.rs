//! The children of a node record as the mark needs them (docs/gc-design.md §4): which offsets a
//! node points to, through its patch chain, without building [`larch_core::NodeBody`]s.
//!
//! A kept patch's children are its base's entries with the patch's changes applied, so the mark
//! decodes patch chains. Decoding them as the reader does (a `Name` and an `Entry` per entry, a
//! hash per pointer, an `Arc` per inline value) made most of the mark's time allocation and
//! copying; here a node is its names in one buffer and one offset per entry, and a patch is
//! applied by merging two sorted lists. The checks that decide *which* children a node has are
//! the reader's (kinds, counts, sorted names and buckets, removals of present names, trailing
//! bytes); what does not change the children (hashes, inline values, tree lengths beyond their
//! bound) is left to fsck.

use crate::error::{FileKind, Result, StoreError};
use crate::format::codec::{Cursor, RecordKind, check_tree_length, decode_bucket, decode_tree_head};
use crate::format::patch::MAX_CHAIN;
use larch_core::schema::{INODE_VALUES_MAX, STABLE_HASH_MAX};

/// The target of an entry that points to no record (an inline value).
const NO_RECORD: u64 = u64::MAX;

/// Entry tags (docs/format.md §3.5).
const TAG_NODE: u8 = 0;
const TAG_INLINE: u8 = 1;
const TAG_CONTENTS: u8 = 2;
const TAG_HEX: u8 = 4;

/// Names decoded into one buffer (hex names expanded, as the reader's `Name`s are), in order.
#[derive(Debug, Default)]
pub(crate) struct Names {
    bytes: Vec<u8>,
    ends: Vec<u32>,
}

impl Names {
    fn with_capacity(count: usize) -> Names {
        Names { bytes: Vec::with_capacity(count * 16), ends: Vec::with_capacity(count) }
    }

    fn len(&self) -> usize {
        self.ends.len()
    }

    fn get(&self, index: usize) -> &[u8] {
        let start = index.checked_sub(1).and_then(|i| self.ends.get(i)).map_or(0, |end| *end as usize);
        let end = self.ends.get(index).map_or(start, |end| *end as usize);
        self.bytes.get(start..end).unwrap_or_default()
    }

    fn push(&mut self, name: &[u8]) {
        self.bytes.extend_from_slice(name);
        self.close();
    }

    /// Ends the name whose bytes were appended to `bytes`.
    fn close(&mut self) {
        self.ends.push(u32::try_from(self.bytes.len()).unwrap_or(u32::MAX));
    }

    /// Decodes one entry's name (tag already read) and checks it sorts after the previous one.
    fn decode(&mut self, cursor: &mut Cursor<'_>, tag: u8) -> Result<()> {
        let len = cursor.length()?;
        let stored = cursor.take(len)?;
        if tag & TAG_HEX != 0 {
            if stored.is_empty() {
                return Err(cursor.error("empty hex name"));
            }
            const DIGITS: &[u8; 16] = b"0123456789abcdef";
            self.bytes.reserve(stored.len() * 2);
            for byte in stored {
                self.bytes.push(DIGITS[usize::from(byte >> 4)]);
                self.bytes.push(DIGITS[usize::from(byte & 15)]);
            }
            self.close();
        } else {
            self.push(stored);
        }
        let count = self.len();
        if count >= 2 && self.get(count - 2) >= self.get(count - 1) {
            return Err(cursor.error("entries not sorted by name (or a name repeated)"));
        }
        Ok(())
    }
}

/// A node's children: what a kept node makes live.
#[derive(Debug)]
pub(crate) enum NodeChildren {
    /// A flat directory (`values` false) or a `Values` inode: its names, sorted, and one target
    /// per name (the child's offset, or none for an inline value).
    Entries {
        /// A `Values` inode (at most 32 entries) rather than a flat directory (at most 256).
        values: bool,
        /// The names.
        names: Names,
        /// Per name: the child record's offset, [`NO_RECORD`] for an inline value.
        targets: Vec<u64>,
    },
    /// A `Tree` inode: its non-empty buckets, increasing, with the child's offset.
    Tree {
        /// The inode's depth (kept for the patch's length check).
        depth: u8,
        /// (bucket, child offset).
        buckets: Vec<(u8, u64)>,
    },
}

impl NodeChildren {
    /// Appends the offsets of the records this node points to.
    pub(crate) fn offsets(&self, out: &mut Vec<u64>) {
        match self {
            NodeChildren::Entries { targets, .. } => {
                out.extend(targets.iter().copied().filter(|target| *target != NO_RECORD));
            }
            NodeChildren::Tree { buckets, .. } => out.extend(buckets.iter().map(|(_, child)| *child)),
        }
    }

    /// Estimated heap bytes, the weight of a cached node.
    pub(crate) fn heap_bytes(&self) -> u64 {
        let bytes = match self {
            NodeChildren::Entries { names, targets, .. } => {
                names.bytes.capacity() + names.ends.capacity() * 4 + targets.capacity() * 8
            }
            NodeChildren::Tree { buckets, .. } => buckets.capacity() * 16,
        };
        bytes as u64 + 64
    }
}

/// A node record: in full, or as a patch on a base.
pub(crate) enum Decoded {
    /// A full directory or inode.
    Full(NodeChildren),
    /// A patch: its base's offset, its chain length and its changes.
    Patch {
        /// The base's record offset.
        base: u64,
        /// Patches from the last full record to this one (1..=MAX_CHAIN).
        chain: u8,
        /// The changes.
        changes: Changes,
    },
}

/// A patch's changes, sorted.
pub(crate) enum Changes {
    /// Names set (to a target, [`NO_RECORD`] for an inline value) or removed (`None`).
    Entries(Names, Vec<Option<u64>>),
    /// Buckets set or removed, with the patched inode's length.
    Tree(u64, Vec<(u8, Option<u64>)>),
}

/// Decodes one entry's target (tag already read, name decoded): `None` for a removal.
fn target(cursor: &mut Cursor<'_>, tag: u8, removals: bool) -> Result<Option<u64>> {
    match tag & 3 {
        TAG_NODE | TAG_CONTENTS => Ok(Some(cursor.pointer()?.1)),
        TAG_INLINE => {
            let len = cursor.length()?;
            cursor.take(len)?;
            Ok(Some(NO_RECORD))
        }
        _ if removals => Ok(None),
        _ => Err(cursor.error("a removal where an entry was expected")),
    }
}

fn tag(cursor: &mut Cursor<'_>) -> Result<u8> {
    let tag = cursor.u8()?;
    if tag & !(TAG_HEX | 3) != 0 {
        return Err(cursor.error(format!("bad entry tag {tag:#04x}")));
    }
    Ok(tag)
}

/// Decodes `count` entries (removals allowed in patches only): returns their names and hands each
/// target to `push` (`None`: a removal).
fn entries(
    cursor: &mut Cursor<'_>,
    count: u64,
    removals: bool,
    mut push: impl FnMut(Option<u64>),
) -> Result<Names> {
    let mut names = Names::with_capacity(usize::try_from(count).unwrap_or(0));
    for _ in 0..count {
        let tag = tag(cursor)?;
        names.decode(cursor, tag)?;
        push(target(cursor, tag, removals)?);
    }
    Ok(names)
}

/// Decodes the node or patch record at `offset` (kind and body, framing already checked).
pub(crate) fn decode(kind: RecordKind, body: &[u8], offset: u64) -> Result<Decoded> {
    let mut cursor = Cursor::new(body, FileKind::Pack, offset);
    let decoded = match kind {
        RecordKind::Flat | RecordKind::Values => {
            let values = kind == RecordKind::Values;
            let max = if values { INODE_VALUES_MAX } else { STABLE_HASH_MAX };
            let count = cursor.leb()?;
            if count > max as u64 {
                return Err(cursor.error(format!("{count} entries, at most {max} allowed")));
            }
            let mut targets = Vec::with_capacity(count as usize);
            let names = entries(&mut cursor, count, false, |target| targets.extend(target))?;
            Decoded::Full(NodeChildren::Entries { values, names, targets })
        }
        RecordKind::Tree => {
            let (depth, _, count) = decode_tree_head(&mut cursor)?;
            let mut buckets: Vec<(u8, u64)> = Vec::with_capacity(usize::from(count));
            for _ in 0..count {
                let bucket = decode_bucket(&mut cursor, buckets.last().map(|(previous, _)| *previous))?;
                buckets.push((bucket, cursor.pointer()?.1));
            }
            Decoded::Full(NodeChildren::Tree { depth, buckets })
        }
        RecordKind::PatchEntries | RecordKind::PatchTree => {
            let base = cursor.pointer()?.1;
            let chain = cursor.u8()?;
            if chain == 0 || chain > MAX_CHAIN {
                return Err(cursor.error(format!("patch chain length {chain}")));
            }
            let changes = if kind == RecordKind::PatchEntries {
                let count = cursor.leb()?;
                if count > STABLE_HASH_MAX as u64 * 2 {
                    return Err(cursor.error(format!("{count} changes")));
                }
                let mut targets = Vec::with_capacity(count as usize);
                let names = entries(&mut cursor, count, true, |target| targets.push(target))?;
                Changes::Entries(names, targets)
            } else {
                let length = cursor.leb()?;
                let count = cursor.u8()?;
                if count > 32 {
                    return Err(cursor.error(format!("{count} bucket changes")));
                }
                let mut changes: Vec<(u8, Option<u64>)> = Vec::with_capacity(usize::from(count));
                for _ in 0..count {
                    let bucket = decode_bucket(&mut cursor, changes.last().map(|(previous, _)| *previous))?;
                    let child = match cursor.u8()? {
                        0 => None,
                        1 => Some(cursor.pointer()?.1),
                        flag => return Err(cursor.error(format!("bad bucket change flag {flag}"))),
                    };
                    changes.push((bucket, child));
                }
                Changes::Tree(length, changes)
            };
            Decoded::Patch { base, chain, changes }
        }
        other => {
            return Err(cursor.error(format!("a {} record where a node was expected", other.name())));
        }
    };
    if !cursor.at_end() {
        return Err(cursor.error("trailing bytes in record body"));
    }
    Ok(decoded)
}

/// The children of the patch at `offset` with `changes`, given its base's children (as
/// [`crate::format::patch::apply`] computes the patched node).
pub(crate) fn apply(base: &NodeChildren, changes: Changes, offset: u64) -> Result<NodeChildren> {
    let corrupt = |reason: &str| StoreError::corrupt(FileKind::Pack, offset, reason);
    match (base, changes) {
        (
            NodeChildren::Entries { values, names: base_names, targets: base_targets },
            Changes::Entries(names, targets),
        ) => {
            let mut out_names = Names::with_capacity(base_names.len() + names.len());
            let mut out_targets = Vec::with_capacity(base_names.len() + names.len());
            let mut next = 0;
            for (index, change) in targets.into_iter().enumerate() {
                let name = names.get(index);
                while next < base_names.len() && base_names.get(next) < name {
                    out_names.push(base_names.get(next));
                    out_targets.push(base_targets.get(next).copied().unwrap_or(NO_RECORD));
                    next += 1;
                }
                let present = next < base_names.len() && base_names.get(next) == name;
                if present {
                    next += 1;
                }
                match change {
                    Some(target) => {
                        out_names.push(name);
                        out_targets.push(target);
                    }
                    None if !present => return Err(corrupt("the patch removes a name its base lacks")),
                    None => {}
                }
            }
            while next < base_names.len() {
                out_names.push(base_names.get(next));
                out_targets.push(base_targets.get(next).copied().unwrap_or(NO_RECORD));
                next += 1;
            }
            let max = if *values { INODE_VALUES_MAX } else { STABLE_HASH_MAX };
            if out_targets.len() > max {
                return Err(corrupt("the patched node has too many entries"));
            }
            Ok(NodeChildren::Entries { values: *values, names: out_names, targets: out_targets })
        }
        (NodeChildren::Tree { depth, buckets: base_buckets }, Changes::Tree(length, changes)) => {
            let buckets = crate::format::patch::merge_changes(base_buckets, changes)
                .ok_or_else(|| corrupt("the patch removes a bucket its base lacks"))?;
            if buckets.is_empty() {
                return Err(corrupt("the patched inode has no children"));
            }
            check_tree_length(*depth, length).map_err(|reason| corrupt(&reason))?;
            Ok(NodeChildren::Tree { depth: *depth, buckets })
        }
        _ => Err(corrupt("the patch does not match the kind of its base")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::codec::{self, EncodedTarget, EntryCounts};
    use crate::format::patch::{self, EntryChange};
    use larch_core::{ContentsRef, Entry, Hash, NodeBody, NodeRef, StoreId};

    /// The child offsets of a decoded node (the reader's decoding; the mark uses
    /// `decode` and `apply`, tested against this).
    fn body_children(body: &NodeBody, out: &mut Vec<u64>) {
        match body {
            NodeBody::Flat(entries) | NodeBody::Values(entries) => {
                for (_, entry) in entries.iter() {
                    match entry {
                        Entry::Node(NodeRef::Stored { key, .. })
                        | Entry::Contents(ContentsRef::Stored { key, .. }) => out.push(key.offset()),
                        _ => {}
                    }
                }
            }
            NodeBody::Tree(tree) => {
                for (_, child) in &tree.children {
                    if let NodeRef::Stored { key, .. } = child {
                        out.push(key.offset());
                    }
                }
            }
        }
    }

    /// The child offsets of a decoded body, sorted.
    fn body_offsets(body: &NodeBody) -> Vec<u64> {
        let mut out = Vec::new();
        body_children(body, &mut out);
        out.sort_unstable();
        out
    }

    fn light_offsets(node: &NodeChildren) -> Vec<u64> {
        let mut out = Vec::new();
        node.offsets(&mut out);
        out.sort_unstable();
        out
    }

    /// A flat directory at `offset` with the given entries (names, and a child offset or inline).
    fn flat(offset: u64, entries: &[(&[u8], Option<u64>)]) -> Vec<u8> {
        let mut out = Vec::new();
        larch_varint::encode(&mut out, entries.len() as u64);
        for (name, child) in entries {
            let target = match child {
                Some(child) => EncodedTarget::Node(Hash([7; 32]), *child),
                None => EncodedTarget::Inline(b"v"),
            };
            codec::encode_entry(&mut out, offset, name, &target);
        }
        out
    }

    #[test]
    fn light_children_match_the_readers_decoding() {
        // Hex-looking names (stored compactly), plain names, inline values, node pointers.
        let base_entries: Vec<(&[u8], Option<u64>)> = vec![
            (b"00ff", Some(100)),
            (b"a", None),
            (b"b", Some(200)),
            (b"c", Some(300)),
            (b"deadbeef", Some(400)),
        ];
        let base_body = flat(1000, &base_entries);
        let store = StoreId::fresh();
        let full =
            codec::decode_node_body(RecordKind::Flat, &base_body, 1000, &mut EntryCounts::default(), store)
                .unwrap();
        let Decoded::Full(light) = decode(RecordKind::Flat, &base_body, 1000).unwrap() else { panic!() };
        assert_eq!(light_offsets(&light), body_offsets(&full));
        assert_eq!(light_offsets(&light), [100, 200, 300, 400]);

        let mut patch_body = Vec::new();
        patch::encode_head(&mut patch_body, 2000, (Hash([4; 32]), 1000), 1);
        patch::encode_entries(
            &mut patch_body,
            2000,
            &[
                EntryChange::Set(b"0", EncodedTarget::Contents(Hash([1; 32]), 50)),
                EntryChange::Remove(b"b"),
                EntryChange::Set(b"c", EncodedTarget::Node(Hash([2; 32]), 1500)),
                EntryChange::Set(b"deadbeef", EncodedTarget::Inline(b"x")),
                EntryChange::Set(b"z", EncodedTarget::Node(Hash([3; 32]), 1600)),
            ],
        );
        let reader_patch =
            patch::decode(RecordKind::PatchEntries, &patch_body, 2000, &mut EntryCounts::default(), store)
                .unwrap();
        let expected = patch::apply(&full, reader_patch, 2000).unwrap();
        let Decoded::Patch { base, chain, changes } =
            decode(RecordKind::PatchEntries, &patch_body, 2000).unwrap()
        else {
            panic!()
        };
        assert_eq!((base, chain), (1000, 1));
        let patched = apply(&light, changes, 2000).unwrap();
        assert_eq!(light_offsets(&patched), body_offsets(&expected));
        assert_eq!(light_offsets(&patched), [50, 100, 1500, 1600]);
    }

    #[test]
    fn bad_patches_are_refused_as_the_reader_refuses_them() {
        let base_body = flat(1000, &[(b"a", Some(100))]);
        let Decoded::Full(light) = decode(RecordKind::Flat, &base_body, 1000).unwrap() else { panic!() };
        // Removing a name the base lacks.
        let mut body = Vec::new();
        patch::encode_head(&mut body, 2000, (Hash([4; 32]), 1000), 1);
        patch::encode_entries(&mut body, 2000, &[EntryChange::Remove(b"zz")]);
        let Decoded::Patch { changes, .. } = decode(RecordKind::PatchEntries, &body, 2000).unwrap() else {
            panic!()
        };
        assert!(matches!(apply(&light, changes, 2000), Err(StoreError::Corrupt { offset: 2000, .. })));
        // A tree patch on a directory.
        let mut body = Vec::new();
        patch::encode_head(&mut body, 2000, (Hash([4; 32]), 1000), 1);
        patch::encode_tree(&mut body, 2000, 300, &[(3, Some((Hash([1; 32]), 500)))]);
        let Decoded::Patch { changes, .. } = decode(RecordKind::PatchTree, &body, 2000).unwrap() else {
            panic!()
        };
        assert!(apply(&light, changes, 2000).is_err());
        // Unsorted names, a chain out of bounds, trailing bytes.
        let unsorted = flat(1000, &[(b"b", Some(100)), (b"a", Some(200))]);
        assert!(decode(RecordKind::Flat, &unsorted, 1000).is_err());
        let mut body = Vec::new();
        patch::encode_head(&mut body, 2000, (Hash([4; 32]), 1000), MAX_CHAIN + 1);
        patch::encode_entries(&mut body, 2000, &[]);
        assert!(decode(RecordKind::PatchEntries, &body, 2000).is_err());
        let mut trailing = base_body.clone();
        trailing.push(0);
        assert!(decode(RecordKind::Flat, &trailing, 1000).is_err());
        assert!(decode(RecordKind::Commit, &base_body, 1000).is_err());
    }
}
