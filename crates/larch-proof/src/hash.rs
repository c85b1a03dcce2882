//! The minimal Tezos context hashing a verifier needs (`spec/tezos-context-hash.md`): BLAKE2b-256
//! of contents, flat directories, inode `Values` and `Tree` pre-images, and OCaml's seeded hash
//! for inode buckets. A small copy of `larch-core`'s `schema.rs` and `ocaml_hash.rs` (checked equal
//! by `larch-core/tests/proof_random.rs`), kept here so that this crate stays `no_std`.

use alloc::vec::Vec;
use core::fmt;

/// Number of bytes in a [`Hash`](struct@Hash).
pub const HASH_LEN: usize = 32;
/// A directory with at most this many entries is hashed flat; above, through its inode trie.
pub const STABLE_HASH_MAX: usize = 256;
/// An inner inode with at most this many entries is a `Values` leaf.
pub const INODE_VALUES_MAX: usize = 32;
/// Buckets per inode `Tree` (Tezos `Conf.entries`).
pub const INODE_BUCKETS: u8 = 32;
/// Irmin refuses to compute a bucket index at this depth or deeper (`max_depth`).
pub const INODE_MAX_DEPTH: u8 = 10;

/// The shape of a context's directories (irmin-pack's `Conf`): buckets per inode (`entries`, also
/// the most entries of a `Values` leaf), the most entries of a directory hashed flat
/// (`stable_hash`), and Irmin's inode depth limit (`max_depth = log(2^50) / log(entries)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arity {
    /// Buckets per inode `Tree`; a `Values` leaf holds at most this many entries.
    pub entries: u8,
    /// A directory with at most this many entries is hashed flat.
    pub stable_hash: usize,
    /// Irmin refuses to compute a bucket index at this depth or deeper.
    pub max_depth: u8,
}

impl Arity {
    /// The Tezos L1 context (`Tezos_context_encoding.Context.Conf`: 32 entries, stable hash 256).
    pub const TREE32: Arity =
        Arity { entries: INODE_BUCKETS, stable_hash: STABLE_HASH_MAX, max_depth: INODE_MAX_DEPTH };
    /// The binary-tree context (`Context_binary.Conf`: 2 entries, stable hash 2, seeded-hash
    /// buckets; its proofs are Octez's `Tree2`).
    pub const TREE2: Arity = Arity { entries: 2, stable_hash: 2, max_depth: 50 };

    /// The most entries of an inode `Values` leaf.
    pub fn values_max(&self) -> usize {
        usize::from(self.entries)
    }

    /// The bucket of `name` in an inode `Tree` at `depth` (OCaml's seeded hash mod `entries`).
    #[inline]
    pub fn index(&self, depth: u8, name: &[u8]) -> u8 {
        (ocaml_seeded_hash(u32::from(depth), name) % u32::from(self.entries.max(1))) as u8
    }
}

/// A BLAKE2b-256 digest naming a contents value, a directory or an inode.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Hash(pub [u8; HASH_LEN]);

impl Hash {
    /// BLAKE2b with a 32-byte digest of `bytes`.
    pub fn of_bytes(bytes: &[u8]) -> Hash {
        let digest = blake2b_simd::Params::new().hash_length(HASH_LEN).hash(bytes);
        let mut out = [0u8; HASH_LEN];
        out.copy_from_slice(digest.as_bytes());
        Hash(out)
    }

    /// The raw 32 bytes.
    pub fn as_bytes(&self) -> &[u8; HASH_LEN] {
        &self.0
    }
}

impl fmt::Debug for Hash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Hash(")?;
        fmt::Display::fmt(self, f)?;
        f.write_str(")")
    }
}

impl fmt::Display for Hash {
    /// Lower-case hex of the 32 bytes.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for byte in self.0 {
            write!(f, "{byte:02x}")?;
        }
        Ok(())
    }
}

/// Whether a directory entry (or a hash) names a contents value or a directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// A contents value.
    Contents,
    /// A directory (an Irmin node).
    Node,
}

/// Appends the unsigned LEB128 encoding of `value` (the workspace's one, [`larch_varint::encode`]).
pub use larch_varint::encode as write_leb128;

/// Hash of a contents value: `H(u64be(len v) ‖ v)`.
pub fn contents_hash(value: &[u8]) -> Hash {
    let mut state = blake2b_simd::Params::new().hash_length(HASH_LEN).to_state();
    state.update(&(value.len() as u64).to_be_bytes());
    state.update(value);
    let mut out = [0u8; HASH_LEN];
    out.copy_from_slice(state.finalize().as_bytes());
    Hash(out)
}

/// Hash of a directory of at most 256 entries; `entries` sorted by name bytes.
pub fn flat_node_hash<'a>(count: usize, entries: impl Iterator<Item = (&'a [u8], Kind, Hash)>) -> Hash {
    let mut out = Vec::with_capacity(8 + count * 50);
    out.extend_from_slice(&(count as u64).to_be_bytes());
    for (name, kind, hash) in entries {
        match kind {
            Kind::Contents => out.extend_from_slice(&[0xff, 0, 0, 0, 0, 0, 0, 0]),
            Kind::Node => out.extend_from_slice(&[0; 8]),
        }
        write_leb128(&mut out, name.len() as u64);
        out.extend_from_slice(name);
        out.extend_from_slice(&32u64.to_be_bytes());
        out.extend_from_slice(&hash.0);
    }
    Hash::of_bytes(&out)
}

/// Hash of an inode `Values` leaf; `entries` sorted by name bytes.
pub fn values_inode_hash<'a>(count: usize, entries: impl Iterator<Item = (&'a [u8], Kind, Hash)>) -> Hash {
    let mut out = Vec::with_capacity(2 + count * 42);
    out.push(0x00);
    write_leb128(&mut out, count as u64);
    for (name, kind, hash) in entries {
        write_leb128(&mut out, name.len() as u64);
        out.extend_from_slice(name);
        out.push(match kind {
            Kind::Node => 0x00,
            Kind::Contents => 0x01,
        });
        out.extend_from_slice(&hash.0);
    }
    Hash::of_bytes(&out)
}

/// Hash of an inode `Tree` at `depth` with `length` entries below and its non-empty buckets by
/// increasing index.
pub fn tree_inode_hash(
    depth: u8,
    length: u64,
    count: usize,
    pointers: impl Iterator<Item = (u8, Hash)>,
) -> Hash {
    let mut out = Vec::with_capacity(8 + count * 33);
    out.push(0x01);
    write_leb128(&mut out, u64::from(depth));
    write_leb128(&mut out, length);
    write_leb128(&mut out, count as u64);
    for (index, hash) in pointers {
        write_leb128(&mut out, u64::from(index));
        out.extend_from_slice(&hash.0);
    }
    Hash::of_bytes(&out)
}

#[inline]
fn mix(mut h: u32, mut w: u32) -> u32 {
    w = w.wrapping_mul(0xcc9e_2d51);
    w = w.rotate_left(15);
    w = w.wrapping_mul(0x1b87_3593);
    h ^= w;
    h = h.rotate_left(13);
    h.wrapping_mul(5).wrapping_add(0xe654_6b64)
}

/// OCaml's `Hashtbl.seeded_hash seed s` on a string (30-bit result).
#[inline]
pub fn ocaml_seeded_hash(seed: u32, s: &[u8]) -> u32 {
    let mut h = seed;
    let mut blocks = s.chunks_exact(4);
    for block in &mut blocks {
        let mut word = [0u8; 4];
        word.copy_from_slice(block);
        h = mix(h, u32::from_le_bytes(word));
    }
    let tail = blocks.remainder();
    if !tail.is_empty() {
        let mut word = 0u32;
        for (i, byte) in tail.iter().enumerate() {
            word |= u32::from(*byte) << (8 * i);
        }
        h = mix(h, word);
    }
    h ^= s.len() as u32;
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^= h >> 16;
    h & 0x3fff_ffff
}

/// The bucket (0..32) of `name` in an inode `Tree` at `depth`.
#[inline]
pub fn inode_index(depth: u8, name: &[u8]) -> u8 {
    (ocaml_seeded_hash(u32::from(depth), name) % u32::from(INODE_BUCKETS)) as u8
}

/// The hash of the empty directory (`H(00×8)`), equal to the hash of the empty contents.
pub fn empty_node_hash() -> Hash {
    flat_node_hash(0, core::iter::empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values() {
        assert_eq!(inode_index(1, b"a"), 23);
        assert_eq!(inode_index(42, b"foo"), 10);
        assert_eq!(ocaml_seeded_hash(1, b"tz1KqTpEZ7Yob7QbPE4Hy4Wo8fHG8LhKxZSx"), 883_477_039);
        let mut s = alloc::string::String::new();
        use core::fmt::Write;
        let _ = write!(s, "{}", empty_node_hash());
        assert_eq!(s, "81e47a19e6b29b0a65b9591762ce5143ed30d0261e5d24a3201752506b20f15c");
        let mut leb = Vec::new();
        write_leb128(&mut leb, 300);
        assert_eq!(leb, [0xac, 0x02]);
    }
}
