//! The binary-tree forms of Octez's encodings (`Merkle_proof_encoding.V1.Tree2` and
//! `V2.Tree2`, spec §5.1–5.3), for proofs of a context whose inodes have 2 buckets
//! (`Context_binary`; verified by [`crate::verify_tree2`]). They differ from `Tree32` in three
//! places only:
//!
//! - an inode's pointers are exactly two slots, left (index 0) then right (index 1), each an
//!   inode tree or the empty slot (V1 `04`, V2 `e0`), never both empty: no sparse or dense tag
//!   (V2: the inode's tag byte is its length class alone, `0b000000LL`);
//! - extender segments are packed 1 bit each (then a `1` bit and zero padding), not 5;
//! - V2 node and `Inode_values` lists count 2 bits: `80|n` for n ≤ 2 entries, `83` then a u32
//!   byte size for more.
//!
//! ```text
//! V1: i16 version ‖ KH before ‖ KH after ‖ TREE
//!     TREE  = 00 u32 n bytes | 01 hash | 02 u32 size (step TREE)* | 03 hash | 04 INODE | 05 EXT
//!     ITREE = 00 hash | 01 u32 size (step TREE)* | 02 INODE | 03 EXT
//!     INODE = i64 length ‖ SLOT SLOT       SLOT = ITREE | 04
//!     EXT   = i64 length ‖ u8 n ‖ n bytes of 1-bit segments ‖ ITREE
//! V2: u8 (bit0 before is node, bit1 after is node) ‖ i16 version ‖ hash ‖ hash ‖ TREE
//!     TREE  = 000000LL length SLOT SLOT | 80|n (n ≤ 2) (step TREE)×n | 83 u32 size (step TREE)*
//!           | c0 u8 n bytes | c1 u16 n bytes | c3 u32 n bytes | c8 hash | d0 hash | d8|L length SEG ITREE
//!     ITREE = 000000LL length SLOT SLOT | 80|n … | 83 … | c0 hash | d0|L length SEG ITREE
//!     SLOT  = ITREE | e0
//! ```
//!
//! Decoding is as strict as for `Tree32` (sizes checked against the bytes left before anything
//! is allocated, nesting bounded by [`crate::model::MAX_NESTING`], unknown tags and trailing bytes
//! are errors).

use super::{Reader, deeper_decode, deeper_encode, length_i64, put_step, size_u32};
use crate::error::{DecodeError, EncodeError};
use crate::types::{Entries, Extender, Inode, InodeTree};
use alloc::vec::Vec;

/// Packs binary extender segments 1 bit each, most significant first, closed by a 1 bit and
/// zero padding to a byte boundary (Octez's `segment_encoding_2`).
pub fn segments_pack(segments: &[u8]) -> Result<Vec<u8>, EncodeError> {
    let mut out = alloc::vec![0u8; (segments.len() + 1).div_ceil(8)];
    let mut put = |position: usize| {
        if let Some(byte) = out.get_mut(position / 8) {
            *byte |= 0x80 >> (position % 8);
        }
    };
    for (k, segment) in segments.iter().enumerate() {
        match segment {
            0 => {}
            1 => put(k),
            _ => return Err(EncodeError::BadSegments),
        }
    }
    put(segments.len());
    Ok(out)
}

/// Unpacks a binary segment list; `None` if it is not a valid packing (empty, or a zero last
/// byte).
pub fn segments_unpack(bytes: &[u8]) -> Option<Vec<u8>> {
    let last = *bytes.last()?;
    if last == 0 {
        return None;
    }
    let bits = bytes.len() * 8 - 1 - last.trailing_zeros() as usize;
    let bit =
        |position: usize| bytes.get(position / 8).is_some_and(|byte| byte & (0x80 >> (position % 8)) != 0);
    Some((0..bits).map(|k| u8::from(bit(k))).collect())
}

fn put_segments(out: &mut Vec<u8>, segments: &[u8]) -> Result<(), EncodeError> {
    let packed = segments_pack(segments)?;
    let len = u8::try_from(packed.len()).map_err(|_| EncodeError::BadSegments)?;
    out.push(len);
    out.extend_from_slice(&packed);
    Ok(())
}

fn get_segments(r: &mut Reader<'_>) -> Result<Vec<u8>, DecodeError> {
    let n = r.u8("segments length")?;
    let offset = r.offset();
    let bytes = r.take(usize::from(n), "segments")?;
    segments_unpack(bytes).ok_or(DecodeError::Invalid { offset, what: "binary extender segment list" })
}

/// The two slots (left, right) of a binary inode's pointers.
fn slots(inode: &Inode) -> Result<[Option<&InodeTree>; 2], EncodeError> {
    match inode.proofs.as_slice() {
        [(0, left), (1, right)] => Ok([Some(left), Some(right)]),
        [(0, left)] => Ok([Some(left), None]),
        [(1, right)] => Ok([None, Some(right)]),
        [] => Err(EncodeError::NotBinary("an inode without pointers")),
        _ => Err(EncodeError::NotBinary("inode indices other than 0 and 1")),
    }
}

/// The pointers of a binary inode from its two decoded slots; both empty is an error.
fn pointers(slots: [Option<InodeTree>; 2], offset: usize) -> Result<Vec<(u8, InodeTree)>, DecodeError> {
    let proofs: Vec<(u8, InodeTree)> =
        slots.into_iter().enumerate().filter_map(|(index, slot)| Some((index as u8, slot?))).collect();
    if proofs.is_empty() {
        return Err(DecodeError::Invalid { offset, what: "binary inode with two empty slots" });
    }
    Ok(proofs)
}

/// V1 (`Merkle_proof_encoding.V1.Tree2`, plain `Data_encoding`).
pub mod v1 {
    use super::{Entries, Extender, Inode, InodeTree};
    use super::{Reader, deeper_decode, deeper_encode, length_i64, put_step, size_u32};
    use super::{get_segments, pointers, put_segments, slots};
    use crate::encoding::v1::{get_kh, put_kh, put_sized};
    use crate::error::{DecodeError, EncodeError};
    use crate::model::MAX_NESTING;
    use crate::types::{Proof, Tree};
    use alloc::boxed::Box;
    use alloc::vec::Vec;

    /// Encodes `proof` in V1 `Tree2`.
    pub fn encode(proof: &Proof) -> Result<Vec<u8>, EncodeError> {
        let mut out = Vec::new();
        out.extend_from_slice(&proof.version.to_be_bytes());
        put_kh(&mut out, &proof.before);
        put_kh(&mut out, &proof.after);
        put_tree(&mut out, &proof.state, MAX_NESTING)?;
        Ok(out)
    }

    fn put_entries(out: &mut Vec<u8>, entries: &Entries, nesting: usize) -> Result<(), EncodeError> {
        put_sized(out, |out| {
            for (step, tree) in entries {
                put_step(out, step)?;
                put_tree(out, tree, nesting)?;
            }
            Ok(())
        })
    }

    fn put_tree(out: &mut Vec<u8>, tree: &Tree, nesting: usize) -> Result<(), EncodeError> {
        let nesting = deeper_encode(nesting)?;
        match tree {
            Tree::Contents(value) => {
                out.push(0);
                out.extend_from_slice(&size_u32(value.len())?.to_be_bytes());
                out.extend_from_slice(value);
            }
            Tree::BlindedContents(hash) => {
                out.push(1);
                out.extend_from_slice(&hash.0);
            }
            Tree::Node(entries) => {
                out.push(2);
                put_entries(out, entries, nesting)?;
            }
            Tree::BlindedNode(hash) => {
                out.push(3);
                out.extend_from_slice(&hash.0);
            }
            Tree::Inode(inode) => {
                out.push(4);
                put_inode(out, inode, nesting)?;
            }
            Tree::Extender(ext) => {
                out.push(5);
                put_extender(out, ext, nesting)?;
            }
        }
        Ok(())
    }

    fn put_inode(out: &mut Vec<u8>, inode: &Inode, nesting: usize) -> Result<(), EncodeError> {
        out.extend_from_slice(&length_i64(inode.length)?.to_be_bytes());
        for slot in slots(inode)? {
            match slot {
                Some(child) => put_itree(out, child, nesting)?,
                None => out.push(4),
            }
        }
        Ok(())
    }

    fn put_extender(out: &mut Vec<u8>, ext: &Extender, nesting: usize) -> Result<(), EncodeError> {
        out.extend_from_slice(&length_i64(ext.length)?.to_be_bytes());
        put_segments(out, &ext.segments)?;
        put_itree(out, &ext.proof, nesting)
    }

    fn put_itree(out: &mut Vec<u8>, tree: &InodeTree, nesting: usize) -> Result<(), EncodeError> {
        let nesting = deeper_encode(nesting)?;
        match tree {
            InodeTree::Blinded(hash) => {
                out.push(0);
                out.extend_from_slice(&hash.0);
                Ok(())
            }
            InodeTree::Values(entries) => {
                out.push(1);
                put_entries(out, entries, nesting)
            }
            InodeTree::Tree(inode) => {
                out.push(2);
                put_inode(out, inode, nesting)
            }
            InodeTree::Extender(ext) => {
                out.push(3);
                put_extender(out, ext, nesting)
            }
        }
    }

    /// Decodes a V1 `Tree2` proof; the whole input must be one proof.
    pub fn decode(bytes: &[u8]) -> Result<Proof, DecodeError> {
        let mut r = Reader::new(bytes);
        let version = r.i16("version")?;
        let before = get_kh(&mut r)?;
        let after = get_kh(&mut r)?;
        let state = get_tree(&mut r, MAX_NESTING)?;
        r.finish()?;
        Ok(Proof { version, before, after, state })
    }

    fn get_entries(r: &mut Reader<'_>, nesting: usize) -> Result<Entries, DecodeError> {
        let size = r.size("list size")?;
        r.sub(size, "entry list", |r| {
            let mut entries = Vec::new();
            while !r.at_end() {
                let step = r.step()?;
                entries.push((step, get_tree(r, nesting)?));
            }
            Ok(entries)
        })
    }

    fn get_tree(r: &mut Reader<'_>, nesting: usize) -> Result<Tree, DecodeError> {
        let offset = r.offset();
        let nesting = deeper_decode(nesting, offset)?;
        Ok(match r.u8("tree tag")? {
            0 => {
                let n = r.size("value length")?;
                Tree::Contents(r.take(n, "value")?.to_vec())
            }
            1 => Tree::BlindedContents(r.hash()?),
            2 => Tree::Node(get_entries(r, nesting)?),
            3 => Tree::BlindedNode(r.hash()?),
            4 => Tree::Inode(get_inode(r, nesting)?),
            5 => Tree::Extender(get_extender(r, nesting)?),
            tag => return Err(DecodeError::BadTag { offset, tag, what: "tree" }),
        })
    }

    fn get_inode(r: &mut Reader<'_>, nesting: usize) -> Result<Inode, DecodeError> {
        let length = r.length_i64("inode length")?;
        let offset = r.offset();
        let left = get_itree(r, nesting, true)?;
        let right = get_itree(r, nesting, true)?;
        Ok(Inode { length, proofs: pointers([left, right], offset)? })
    }

    fn get_extender(r: &mut Reader<'_>, nesting: usize) -> Result<Extender, DecodeError> {
        let length = r.length_i64("extender length")?;
        let segments = get_segments(r)?;
        let offset = r.offset();
        let proof = get_itree(r, nesting, false)?.ok_or(DecodeError::BadTag {
            offset,
            tag: 4,
            what: "inode tree",
        })?;
        Ok(Extender { length, segments, proof: Box::new(proof) })
    }

    /// `None` for an empty slot (tag 04), accepted only when `slot` is set.
    fn get_itree(r: &mut Reader<'_>, nesting: usize, slot: bool) -> Result<Option<InodeTree>, DecodeError> {
        let offset = r.offset();
        let nesting = deeper_decode(nesting, offset)?;
        Ok(Some(match r.u8("inode tree tag")? {
            0 => InodeTree::Blinded(r.hash()?),
            1 => InodeTree::Values(get_entries(r, nesting)?),
            2 => InodeTree::Tree(get_inode(r, nesting)?),
            3 => InodeTree::Extender(get_extender(r, nesting)?),
            4 if slot => return Ok(None),
            tag => return Err(DecodeError::BadTag { offset, tag, what: "inode tree" }),
        }))
    }
}

/// V2 (`Merkle_proof_encoding.V2.Tree2`, `Data_encoding.Compact`).
pub mod v2 {
    use super::{Entries, Extender, Inode, InodeTree};
    use super::{Reader, deeper_decode, deeper_encode, put_step, size_u32};
    use super::{get_segments, pointers, put_segments, slots};
    use crate::encoding::v2::{get_header, get_length, header, put_length};
    use crate::error::{DecodeError, EncodeError};
    use crate::model::MAX_NESTING;
    use crate::types::{Proof, Tree};
    use alloc::boxed::Box;
    use alloc::vec::Vec;

    /// Entry count from which a node list takes its long form (`0x83` + byte size): 2 tag bits.
    const LONG_LIST_FROM: usize = 3;

    /// Encodes `proof` in V2 `Tree2`.
    pub fn encode(proof: &Proof) -> Result<Vec<u8>, EncodeError> {
        let mut out = header(proof.version, &proof.before, &proof.after);
        put_tree(&mut out, &proof.state, MAX_NESTING)?;
        Ok(out)
    }

    fn put_entries(out: &mut Vec<u8>, entries: &Entries, nesting: usize) -> Result<(), EncodeError> {
        let mut body = Vec::new();
        for (step, tree) in entries {
            put_step(&mut body, step)?;
            put_tree(&mut body, tree, nesting)?;
        }
        if entries.len() < LONG_LIST_FROM {
            out.push(0x80 | entries.len() as u8);
        } else {
            out.push(0x83);
            out.extend_from_slice(&size_u32(body.len())?.to_be_bytes());
        }
        out.extend_from_slice(&body);
        Ok(())
    }

    fn put_inode(out: &mut Vec<u8>, inode: &Inode, nesting: usize) -> Result<(), EncodeError> {
        let slots = slots(inode)?;
        let (class, payload) = put_length(inode.length)?;
        out.push(class);
        out.extend_from_slice(&payload);
        for slot in slots {
            match slot {
                Some(child) => put_itree(out, child, nesting)?,
                None => out.push(0xe0),
            }
        }
        Ok(())
    }

    fn put_extender(out: &mut Vec<u8>, base: u8, ext: &Extender, nesting: usize) -> Result<(), EncodeError> {
        let (class, payload) = put_length(ext.length)?;
        out.push(base | class);
        out.extend_from_slice(&payload);
        put_segments(out, &ext.segments)?;
        put_itree(out, &ext.proof, nesting)
    }

    fn put_tree(out: &mut Vec<u8>, tree: &Tree, nesting: usize) -> Result<(), EncodeError> {
        let nesting = deeper_encode(nesting)?;
        match tree {
            Tree::Inode(inode) => put_inode(out, inode, nesting)?,
            Tree::Node(entries) => put_entries(out, entries, nesting)?,
            Tree::Contents(value) => {
                if let Ok(n) = u8::try_from(value.len()) {
                    out.push(0xc0);
                    out.push(n);
                } else if let Ok(n) = u16::try_from(value.len()) {
                    out.push(0xc1);
                    out.extend_from_slice(&n.to_be_bytes());
                } else {
                    out.push(0xc3);
                    out.extend_from_slice(&size_u32(value.len())?.to_be_bytes());
                }
                out.extend_from_slice(value);
            }
            Tree::BlindedContents(hash) => {
                out.push(0xc8);
                out.extend_from_slice(&hash.0);
            }
            Tree::BlindedNode(hash) => {
                out.push(0xd0);
                out.extend_from_slice(&hash.0);
            }
            Tree::Extender(ext) => put_extender(out, 0xd8, ext, nesting)?,
        }
        Ok(())
    }

    fn put_itree(out: &mut Vec<u8>, tree: &InodeTree, nesting: usize) -> Result<(), EncodeError> {
        let nesting = deeper_encode(nesting)?;
        match tree {
            InodeTree::Tree(inode) => put_inode(out, inode, nesting),
            InodeTree::Values(entries) => put_entries(out, entries, nesting),
            InodeTree::Blinded(hash) => {
                out.push(0xc0);
                out.extend_from_slice(&hash.0);
                Ok(())
            }
            InodeTree::Extender(ext) => put_extender(out, 0xd0, ext, nesting),
        }
    }

    /// Decodes a V2 `Tree2` proof; the whole input must be one proof.
    pub fn decode(bytes: &[u8]) -> Result<Proof, DecodeError> {
        let mut r = Reader::new(bytes);
        let (version, before, after) = get_header(&mut r)?;
        let state = get_tree(&mut r, MAX_NESTING)?;
        r.finish()?;
        Ok(Proof { version, before, after, state })
    }

    fn get_entries(r: &mut Reader<'_>, tag: u8, nesting: usize) -> Result<Entries, DecodeError> {
        let count = usize::from(tag & 0x03);
        let entry = |r: &mut Reader<'_>| -> Result<(Vec<u8>, Tree), DecodeError> {
            let step = r.step()?;
            Ok((step, get_tree(r, nesting)?))
        };
        if count < LONG_LIST_FROM {
            let mut entries = Vec::with_capacity(count);
            for _ in 0..count {
                entries.push(entry(r)?);
            }
            return Ok(entries);
        }
        let size = r.size("list size")?;
        r.sub(size, "entry list", |r| {
            let mut entries = Vec::new();
            while !r.at_end() {
                entries.push(entry(r)?);
            }
            Ok(entries)
        })
    }

    fn get_inode(r: &mut Reader<'_>, tag: u8, nesting: usize) -> Result<Inode, DecodeError> {
        let length = get_length(r, tag)?;
        let offset = r.offset();
        let left = get_itree(r, nesting, true)?;
        let right = get_itree(r, nesting, true)?;
        Ok(Inode { length, proofs: pointers([left, right], offset)? })
    }

    fn get_extender(r: &mut Reader<'_>, tag: u8, nesting: usize) -> Result<Extender, DecodeError> {
        let length = get_length(r, tag)?;
        let segments = get_segments(r)?;
        let offset = r.offset();
        let proof = get_itree(r, nesting, false)?.ok_or(DecodeError::BadTag {
            offset,
            tag: 0xe0,
            what: "inode tree",
        })?;
        Ok(Extender { length, segments, proof: Box::new(proof) })
    }

    fn get_tree(r: &mut Reader<'_>, nesting: usize) -> Result<Tree, DecodeError> {
        let offset = r.offset();
        let nesting = deeper_decode(nesting, offset)?;
        let tag = r.u8("tree tag")?;
        Ok(match tag {
            0x00..=0x03 => Tree::Inode(get_inode(r, tag, nesting)?),
            0x80..=0x83 => Tree::Node(get_entries(r, tag, nesting)?),
            0xc0 => {
                let n = r.u8("value length")?;
                Tree::Contents(r.take(usize::from(n), "value")?.to_vec())
            }
            0xc1 => {
                let n = r.u16("value length")?;
                Tree::Contents(r.take(usize::from(n), "value")?.to_vec())
            }
            0xc3 => {
                let n = r.size("value length")?;
                Tree::Contents(r.take(n, "value")?.to_vec())
            }
            0xc8 => Tree::BlindedContents(r.hash()?),
            0xd0 => Tree::BlindedNode(r.hash()?),
            0xd8..=0xdb => Tree::Extender(get_extender(r, tag, nesting)?),
            _ => return Err(DecodeError::BadTag { offset, tag, what: "tree" }),
        })
    }

    /// `None` for an empty slot (0xe0), accepted only when `slot` is set.
    fn get_itree(r: &mut Reader<'_>, nesting: usize, slot: bool) -> Result<Option<InodeTree>, DecodeError> {
        let offset = r.offset();
        let nesting = deeper_decode(nesting, offset)?;
        let tag = r.u8("inode tree tag")?;
        Ok(Some(match tag {
            0x00..=0x03 => InodeTree::Tree(get_inode(r, tag, nesting)?),
            0x80..=0x83 => InodeTree::Values(get_entries(r, tag, nesting)?),
            0xc0 => InodeTree::Blinded(r.hash()?),
            0xd0..=0xd3 => InodeTree::Extender(get_extender(r, tag, nesting)?),
            0xe0 if slot => return Ok(None),
            _ => return Err(DecodeError::BadTag { offset, tag, what: "inode tree" }),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_segments() {
        // 1 bit each, then the closing 1: [1; 0] = 10 1 00000.
        assert_eq!(segments_pack(&[1, 0]).ok(), Some(alloc::vec![0xa0]));
        assert_eq!(segments_pack(&[]).ok(), Some(alloc::vec![0x80]));
        // Seven segments and the closing bit fill one byte; eight need a second byte.
        assert_eq!(segments_pack(&[0, 1, 1, 0, 1, 0, 0]).ok(), Some(alloc::vec![0x69]));
        assert_eq!(segments_pack(&[1; 8]).ok(), Some(alloc::vec![0xff, 0x80]));
        for segments in [&[][..], &[1, 0], &[0, 0, 0], &[1; 8], &[0, 1].repeat(100)] {
            let packed = segments_pack(segments).unwrap_or_default();
            assert_eq!(packed.len(), (segments.len() + 8) / 8);
            assert_eq!(segments_unpack(&packed).as_deref(), Some(segments));
        }
        assert_eq!(segments_unpack(&[]), None);
        assert_eq!(segments_unpack(&[0xa0, 0x00]), None);
        assert!(segments_pack(&[2]).is_err());
    }
}
