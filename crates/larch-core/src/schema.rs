//! The Tezos schema: the exact bytes Irmin hashes for contents, directories, inodes and commits
//! (`spec/tezos-context-hash.md`, copied in `docs/`). Every function here is pure.

use crate::hash::{Hash, blake2b_params};
use std::cell::RefCell;

/// A directory with at most this many entries is hashed flat; above, through its inode trie.
pub const STABLE_HASH_MAX: usize = 256;
/// An inner inode with at most this many entries is a `Values` leaf.
pub const INODE_VALUES_MAX: usize = 32;
/// Irmin refuses to compute a bucket index at this depth or deeper (`max_depth`).
pub const INODE_MAX_DEPTH: u8 = 10;

/// Whether a directory entry is a contents value or a sub-directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// A contents value (a file).
    Contents,
    /// A directory (an Irmin node).
    Node,
}

/// Appends the unsigned LEB128 encoding of `value` (the workspace's one, [`larch_varint::encode`]).
pub use larch_varint::encode as write_leb128;

thread_local! {
    static PRE_IMAGE: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Runs `fill` on a reusable, cleared buffer and hashes what it wrote.
fn hash_pre_image(fill: impl FnOnce(&mut Vec<u8>)) -> Hash {
    PRE_IMAGE.with(|cell| match cell.try_borrow_mut() {
        Ok(mut buffer) => {
            buffer.clear();
            fill(&mut buffer);
            Hash::of_bytes(&buffer)
        }
        // Re-entrant use (never in practice): fall back to a fresh buffer.
        Err(_) => {
            let mut buffer = Vec::new();
            fill(&mut buffer);
            Hash::of_bytes(&buffer)
        }
    })
}

/// Hash of a contents value: `BLAKE2b-256(u64be(len v) ‖ v)`.
pub fn contents_hash(value: &[u8]) -> Hash {
    // A pre-image that fits one BLAKE2b block is hashed in one call from a stack copy: the
    // incremental state costs ~20 ns more, which is ~15% of hashing a short value.
    let mut block = [0u8; 128];
    let (header, rest) = block.split_at_mut(8);
    if let Some(body) = rest.get_mut(..value.len()) {
        header.copy_from_slice(&(value.len() as u64).to_be_bytes());
        body.copy_from_slice(value);
        if let Some(pre_image) = block.get(..8 + value.len()) {
            return Hash::of_bytes(pre_image);
        }
    }
    let mut state = blake2b_params().to_state();
    state.update(&(value.len() as u64).to_be_bytes());
    state.update(value);
    Hash::from_digest(state.finalize())
}

/// Pre-image of a contents value (for tests and tools; hashing does not build it).
pub fn contents_pre_image(value: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + value.len());
    out.extend_from_slice(&(value.len() as u64).to_be_bytes());
    out.extend_from_slice(value);
    out
}

/// One directory entry as the schema sees it: name, kind and child hash.
pub type EntryRef<'a> = (&'a [u8], Kind, Hash);

/// Writes the flat (V1) directory pre-image; `entries` must be sorted by name bytes.
pub fn write_flat_pre_image<'a>(
    out: &mut Vec<u8>,
    count: usize,
    entries: impl Iterator<Item = EntryRef<'a>>,
) {
    out.extend_from_slice(&(count as u64).to_be_bytes());
    for (name, kind, hash) in entries {
        match kind {
            Kind::Contents => out.extend_from_slice(&[0xff, 0, 0, 0, 0, 0, 0, 0]),
            Kind::Node => out.extend_from_slice(&[0; 8]),
        }
        write_leb128(out, name.len() as u64);
        out.extend_from_slice(name);
        out.extend_from_slice(&32u64.to_be_bytes());
        out.extend_from_slice(hash.as_bytes());
    }
}

/// Hash of a directory of at most 256 entries, sorted by name bytes.
pub fn flat_node_hash<'a>(count: usize, entries: impl Iterator<Item = EntryRef<'a>>) -> Hash {
    hash_pre_image(|out| write_flat_pre_image(out, count, entries))
}

/// Writes the pre-image of an inode `Values` leaf; `entries` sorted by name bytes.
pub fn write_values_pre_image<'a>(
    out: &mut Vec<u8>,
    count: usize,
    entries: impl Iterator<Item = EntryRef<'a>>,
) {
    out.push(0x00);
    write_leb128(out, count as u64);
    for (name, kind, hash) in entries {
        write_leb128(out, name.len() as u64);
        out.extend_from_slice(name);
        out.push(match kind {
            Kind::Node => 0x00,
            Kind::Contents => 0x01,
        });
        out.extend_from_slice(hash.as_bytes());
    }
}

/// Hash of an inode `Values` leaf.
pub fn values_inode_hash<'a>(count: usize, entries: impl Iterator<Item = EntryRef<'a>>) -> Hash {
    hash_pre_image(|out| write_values_pre_image(out, count, entries))
}

/// Writes the pre-image of an inode `Tree`: depth, total entries below, and the non-empty buckets
/// by increasing index.
pub fn write_tree_pre_image(
    out: &mut Vec<u8>,
    depth: u8,
    length: u64,
    pointer_count: usize,
    pointers: impl Iterator<Item = (u8, Hash)>,
) {
    out.push(0x01);
    write_leb128(out, u64::from(depth));
    write_leb128(out, length);
    write_leb128(out, pointer_count as u64);
    for (index, hash) in pointers {
        write_leb128(out, u64::from(index));
        out.extend_from_slice(hash.as_bytes());
    }
}

/// Hash of an inode `Tree`.
pub fn tree_inode_hash(
    depth: u8,
    length: u64,
    pointer_count: usize,
    pointers: impl Iterator<Item = (u8, Hash)>,
) -> Hash {
    hash_pre_image(|out| write_tree_pre_image(out, depth, length, pointer_count, pointers))
}

/// Commit metadata that enters the commit hash.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CommitInfo {
    /// Unix seconds (Tezos: the block timestamp).
    pub date: i64,
    /// Author; Tezos always writes `"Tezos"`.
    pub author: String,
    /// Message; Tezos passes the protocol's message, `"Genesis"` at genesis.
    pub message: String,
}

/// Unix seconds as an RFC 3339 UTC timestamp, `YYYY-MM-DDTHH:MM:SSZ` (proleptic Gregorian
/// calendar; Howard Hinnant's `civil_from_days`): how commit dates are shown.
pub fn rfc3339_utc(seconds: i64) -> String {
    let days = seconds.div_euclid(86_400);
    let second_of_day = seconds.rem_euclid(86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        second_of_day / 3600,
        second_of_day / 60 % 60,
        second_of_day % 60
    )
}

impl CommitInfo {
    /// Info with the author Tezos uses.
    pub fn tezos(date: i64, message: impl Into<String>) -> CommitInfo {
        CommitInfo { date, author: "Tezos".to_string(), message: message.into() }
    }
}

/// Writes the commit pre-image. Parents are sorted by raw bytes here, as Irmin does.
pub fn write_commit_pre_image(out: &mut Vec<u8>, tree: &Hash, parents: &[Hash], info: &CommitInfo) {
    let mut sorted = parents.to_vec();
    sorted.sort_unstable();
    out.extend_from_slice(&32u64.to_be_bytes());
    out.extend_from_slice(tree.as_bytes());
    out.extend_from_slice(&(sorted.len() as u64).to_be_bytes());
    for parent in &sorted {
        out.extend_from_slice(&32u64.to_be_bytes());
        out.extend_from_slice(parent.as_bytes());
    }
    out.extend_from_slice(&info.date.to_be_bytes());
    out.extend_from_slice(&(info.author.len() as u64).to_be_bytes());
    out.extend_from_slice(info.author.as_bytes());
    out.extend_from_slice(&(info.message.len() as u64).to_be_bytes());
    out.extend_from_slice(info.message.as_bytes());
}

/// Hash of a commit of root tree `tree` with `parents` and `info`.
pub fn commit_hash(tree: &Hash, parents: &[Hash], info: &CommitInfo) -> Hash {
    hash_pre_image(|out| write_commit_pre_image(out, tree, parents, info))
}

#[cfg(test)]
mod tests {

    #[test]
    fn dates_are_rfc3339_utc() {
        // Mainnet genesis (Tezos' documented genesis timestamp), the epoch, a leap day, before it.
        assert_eq!(rfc3339_utc(1_530_374_852), "2018-06-30T16:07:32Z");
        assert_eq!(rfc3339_utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339_utc(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339_utc(-1), "1969-12-31T23:59:59Z");
    }

    use super::*;

    #[test]
    fn leb128_examples_from_spec() {
        for (value, bytes) in [
            (5u64, vec![0x05]),
            (255, vec![0xff, 0x01]),
            (257, vec![0x81, 0x02]),
            (1000, vec![0xe8, 0x07]),
            (50000, vec![0xd0, 0x86, 0x03]),
        ] {
            let mut out = Vec::new();
            write_leb128(&mut out, value);
            assert_eq!(out, bytes, "leb128({value})");
        }
    }

    #[test]
    fn irmin_test_hashes_v1_v2_v4() {
        let z = contents_hash(b"0000000000");
        assert_eq!(z.to_hex(), "d81e60258ecc8bd7064c8703888aececfc54e29ff94f7a2d9a84667a500548e1");
        let v2 =
            flat_node_hash(2, [(&b"00"[..], Kind::Contents, z), (&b"01"[..], Kind::Contents, z)].into_iter());
        assert_eq!(v2.to_base58(), "CoVeCU4o3dqmfdwqt2vh8LDz9X6qGbTUyLhgVvFReyzAvTf92AKx");
        let v3_tree = flat_node_hash(
            1,
            [(&b"singleton-step"[..], Kind::Contents, contents_hash(b"singleton-val"))].into_iter(),
        );
        let empty_info = CommitInfo { date: 0, author: String::new(), message: String::new() };
        let v3 = commit_hash(&v3_tree, &[], &empty_info);
        assert_eq!(v3.to_hex(), "634d894802f9032ef48bbe1253563dbeb2aad7dc684da83bdea5692fde2185ae");
        let v4 = commit_hash(&v2, &[v3], &CommitInfo::tezos(0, ""));
        assert_eq!(v4.to_base58(), "CoW7mALEs2vue5cfTMdJfSAjNmjmALYS1YyqSsYr9siLcNEcrvAm");
    }

    #[test]
    fn commit_parents_are_sorted() {
        let tree = contents_hash(b"t");
        let (a, b) = (contents_hash(b"a"), contents_hash(b"b"));
        let info = CommitInfo::tezos(3, "merge");
        assert_eq!(commit_hash(&tree, &[a, b], &info), commit_hash(&tree, &[b, a], &info));
        assert_ne!(commit_hash(&tree, &[a, b], &info), commit_hash(&tree, &[a], &info));
    }
}
