//! V2 (`Merkle_proof_encoding.V2.Tree32`, `Data_encoding.Compact`), spec §5.3.
//!
//! ```text
//! tree_proof = u8 (bit0 before is node, bit1 after is node) ‖ i16 version ‖ hash ‖ hash ‖ TREE
//! TREE  = L|p<<2 length PROOFS (Inode) | 80|n (n<63) (step TREE)×n | bf u32 size (step TREE)*
//!       | c0 u8 n bytes | c1 u16 n bytes | c3 u32 n bytes | c8 hash | d0 hash | d8|L length SEG ITREE
//! ITREE = L|p<<2 length PROOFS | 80|n … | bf … (Values) | c0 hash | d0|L length SEG ITREE | e0 (empty slot)
//! PROOFS(p) = p ≤ 14: (u8 index ITREE)×p | 15: u32 size (u8 index ITREE)* | 16: ITREE×32
//! L: length class 0 u8, 1 u16, 2 u32, 3 i64; dense from 15 pointers.
//! ```

use super::{Reader, deeper_decode, deeper_encode, length_i64, put_segments, put_step, size_u32};
use crate::error::{DecodeError, EncodeError};
use crate::hash::{INODE_BUCKETS, Kind};
use crate::model::MAX_NESTING;
use crate::types::{Entries, Extender, Inode, InodeTree, KindedHash, Proof, Tree};
use alloc::boxed::Box;
use alloc::vec::Vec;

/// Pointer count from which V2 writes an inode's pointers as a dense array of 32 slots.
const DENSE_FROM: usize = 15;
/// Entry count from which a node list takes its long form (`0xbf` + byte size).
const LONG_LIST_FROM: usize = 63;

/// Encodes `proof` in V2.
pub fn encode(proof: &Proof) -> Result<Vec<u8>, EncodeError> {
    let mut out = header(proof.version, &proof.before, &proof.after);
    put_tree(&mut out, &proof.state, MAX_NESTING)?;
    Ok(out)
}

/// The header shared by tree and stream proofs: kind bits, version, before and after hashes.
pub(crate) fn header(version: i16, before: &KindedHash, after: &KindedHash) -> Vec<u8> {
    let mut out = Vec::new();
    let bit = |kh: &KindedHash| u8::from(kh.kind == Kind::Node);
    out.push(bit(before) | (bit(after) << 1));
    out.extend_from_slice(&version.to_be_bytes());
    out.extend_from_slice(&before.hash.0);
    out.extend_from_slice(&after.hash.0);
    out
}

/// Reads the header written by [`header`]: `(version, before, after)`.
pub(crate) fn get_header(r: &mut Reader<'_>) -> Result<(i16, KindedHash, KindedHash), DecodeError> {
    let offset = r.offset();
    let tag = r.u8("proof tag")?;
    if tag > 3 {
        return Err(DecodeError::BadTag { offset, tag, what: "proof" });
    }
    let kind = |node: bool| if node { Kind::Node } else { Kind::Contents };
    let version = r.i16("version")?;
    let before = KindedHash { kind: kind(tag & 1 != 0), hash: r.hash()? };
    let after = KindedHash { kind: kind(tag & 2 != 0), hash: r.hash()? };
    Ok((version, before, after))
}

/// The compact length: (2-bit class, payload).
pub(crate) fn put_length(length: u64) -> Result<(u8, Vec<u8>), EncodeError> {
    Ok(if let Ok(n) = u8::try_from(length) {
        (0, alloc::vec![n])
    } else if let Ok(n) = u16::try_from(length) {
        (1, n.to_be_bytes().to_vec())
    } else if let Ok(n) = u32::try_from(length) {
        (2, n.to_be_bytes().to_vec())
    } else {
        (3, length_i64(length)?.to_be_bytes().to_vec())
    })
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
        out.push(0xbf);
        out.extend_from_slice(&size_u32(body.len())?.to_be_bytes());
    }
    out.extend_from_slice(&body);
    Ok(())
}

fn put_inode(out: &mut Vec<u8>, inode: &Inode, nesting: usize) -> Result<(), EncodeError> {
    let (class, payload) = put_length(inode.length)?;
    if inode.proofs.len() < DENSE_FROM {
        out.push(class | ((inode.proofs.len() as u8) << 2));
        out.extend_from_slice(&payload);
        for (index, child) in &inode.proofs {
            out.push(*index);
            put_itree(out, child, nesting)?;
        }
    } else {
        out.push(class | (16 << 2));
        out.extend_from_slice(&payload);
        let mut slot = 0u8;
        for (index, child) in &inode.proofs {
            if *index < slot || *index >= INODE_BUCKETS {
                return Err(EncodeError::BadIndex { index: *index });
            }
            while slot < *index {
                out.push(0xe0);
                slot += 1;
            }
            put_itree(out, child, nesting)?;
            slot += 1;
        }
        while slot < INODE_BUCKETS {
            out.push(0xe0);
            slot += 1;
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

/// Decodes a V2 proof; the whole input must be one proof.
pub fn decode(bytes: &[u8]) -> Result<Proof, DecodeError> {
    let mut r = Reader::new(bytes);
    let (version, before, after) = get_header(&mut r)?;
    let state = get_tree(&mut r, MAX_NESTING)?;
    r.finish()?;
    Ok(Proof { version, before, after, state })
}

pub(crate) fn get_length(r: &mut Reader<'_>, class: u8) -> Result<u64, DecodeError> {
    Ok(match class & 3 {
        0 => u64::from(r.u8("length")?),
        1 => u64::from(r.u16("length")?),
        2 => u64::from(r.u32("length")?),
        _ => r.length_i64("length")?,
    })
}

fn get_entries(r: &mut Reader<'_>, tag: u8, nesting: usize) -> Result<Entries, DecodeError> {
    let count = usize::from(tag & 0x3f);
    let entry = |r: &mut Reader<'_>| -> Result<(Vec<u8>, Tree), DecodeError> {
        let step = r.step()?;
        Ok((step, get_tree(r, nesting)?))
    };
    if count < LONG_LIST_FROM {
        // Each entry takes at least 2 bytes: the count cannot make us allocate much.
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
    let offset = r.offset().saturating_sub(1);
    let length = get_length(r, tag)?;
    let pointers = tag >> 2;
    let pointer = |r: &mut Reader<'_>| -> Result<(u8, InodeTree), DecodeError> {
        let index = r.u8("inode index")?;
        let offset = r.offset();
        let child = get_itree(r, nesting, false)?.ok_or(DecodeError::BadTag {
            offset,
            tag: 0xe0,
            what: "inode tree",
        })?;
        Ok((index, child))
    };
    let proofs = match pointers {
        0..=14 => {
            let mut proofs = Vec::with_capacity(usize::from(pointers));
            for _ in 0..pointers {
                proofs.push(pointer(r)?);
            }
            proofs
        }
        15 => {
            let size = r.size("pointer list size")?;
            r.sub(size, "pointer list", |r| {
                let mut proofs = Vec::new();
                while !r.at_end() {
                    proofs.push(pointer(r)?);
                }
                Ok(proofs)
            })?
        }
        16 => {
            let mut proofs = Vec::new();
            for index in 0..INODE_BUCKETS {
                if let Some(child) = get_itree(r, nesting, true)? {
                    proofs.push((index, child));
                }
            }
            proofs
        }
        _ => return Err(DecodeError::BadTag { offset, tag, what: "inode" }),
    };
    Ok(Inode { length, proofs })
}

fn get_extender(r: &mut Reader<'_>, tag: u8, nesting: usize) -> Result<Extender, DecodeError> {
    let length = get_length(r, tag)?;
    let segments = r.segments()?;
    let offset = r.offset();
    let proof =
        get_itree(r, nesting, false)?.ok_or(DecodeError::BadTag { offset, tag: 0xe0, what: "inode tree" })?;
    Ok(Extender { length, segments, proof: Box::new(proof) })
}

fn get_tree(r: &mut Reader<'_>, nesting: usize) -> Result<Tree, DecodeError> {
    let offset = r.offset();
    let nesting = deeper_decode(nesting, offset)?;
    let tag = r.u8("tree tag")?;
    Ok(match tag {
        0x00..=0x7f => Tree::Inode(get_inode(r, tag, nesting)?),
        0x80..=0xbf => Tree::Node(get_entries(r, tag, nesting)?),
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

/// `None` for the empty slot of a dense array (0xe0), accepted only when `slot` is set.
fn get_itree(r: &mut Reader<'_>, nesting: usize, slot: bool) -> Result<Option<InodeTree>, DecodeError> {
    let offset = r.offset();
    let nesting = deeper_decode(nesting, offset)?;
    let tag = r.u8("inode tree tag")?;
    Ok(Some(match tag {
        0x00..=0x7f => InodeTree::Tree(get_inode(r, tag, nesting)?),
        0x80..=0xbf => InodeTree::Values(get_entries(r, tag, nesting)?),
        0xc0 => InodeTree::Blinded(r.hash()?),
        0xd0..=0xd3 => InodeTree::Extender(get_extender(r, tag, nesting)?),
        0xe0 if slot => return Ok(None),
        _ => return Err(DecodeError::BadTag { offset, tag, what: "inode tree" }),
    }))
}
