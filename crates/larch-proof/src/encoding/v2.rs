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
//!
//! The same code writes and reads `V2.Tree2` ([`super::tree2::v2`]), generic over the crate-private `Form`.

use super::{Form, Reader, Tree32, deeper_decode, deeper_encode, length_i64, put_segments, put_slots};
use super::{put_step, size_u32};
use crate::error::{DecodeError, EncodeError};
use crate::hash::Kind;
use crate::model::MAX_NESTING;
use crate::types::{Entries, Extender, Inode, InodeTree, KindedHash, Proof, Tree};
use alloc::boxed::Box;
use alloc::vec::Vec;

/// Pointer count from which V2 `Tree32` writes an inode's pointers as a dense array of 32 slots.
const DENSE_FROM: usize = 15;
/// The tag of an empty slot of a dense pointer array.
const EMPTY_SLOT: u8 = 0xe0;

/// Encodes `proof` in V2.
pub fn encode(proof: &Proof) -> Result<Vec<u8>, EncodeError> {
    encode_in::<Tree32>(proof)
}

/// Encodes `proof` in V2 of the form `F`.
pub(crate) fn encode_in<F: Form>(proof: &Proof) -> Result<Vec<u8>, EncodeError> {
    let mut out = header(proof.version, &proof.before, &proof.after);
    put_tree::<F>(&mut out, &proof.state, MAX_NESTING)?;
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

/// A list of `count` items already encoded in `body`: `80|count` while the count fits below the
/// low bits of `long` (the long form's tag), else `long` and the body's u32 byte size.
pub(crate) fn put_list(out: &mut Vec<u8>, count: usize, long: u8, body: &[u8]) -> Result<(), EncodeError> {
    if count < usize::from(long & 0x3f) {
        out.push(0x80 | count as u8);
    } else {
        out.push(long);
        out.extend_from_slice(&size_u32(body.len())?.to_be_bytes());
    }
    out.extend_from_slice(body);
    Ok(())
}

/// Reads the list written by [`put_list`] after its tag: the count from the tag below `long`'s
/// low bits, else a sized list (`size_what`, `list_what` name them in errors).
pub(crate) fn get_list<'a, T>(
    r: &mut Reader<'a>,
    tag: u8,
    long: u8,
    whats: (&'static str, &'static str),
    item: impl FnMut(&mut Reader<'a>) -> Result<T, DecodeError>,
) -> Result<Vec<T>, DecodeError> {
    let count = usize::from(tag & 0x3f);
    if count < usize::from(long & 0x3f) {
        // Each entry takes at least 2 bytes: the count cannot make us allocate much.
        return r.counted(count, item);
    }
    r.sized_list(whats.0, whats.1, item)
}

/// A value: `c0` u8, `c1` u16 or `c3` u32 length, then its bytes.
pub(crate) fn put_value(out: &mut Vec<u8>, value: &[u8]) -> Result<(), EncodeError> {
    if let Ok(n) = u8::try_from(value.len()) {
        out.extend_from_slice(&[0xc0, n]);
    } else if let Ok(n) = u16::try_from(value.len()) {
        out.push(0xc1);
        out.extend_from_slice(&n.to_be_bytes());
    } else {
        out.push(0xc3);
        out.extend_from_slice(&size_u32(value.len())?.to_be_bytes());
    }
    out.extend_from_slice(value);
    Ok(())
}

/// Reads the value written by [`put_value`] after its tag (`c0`, `c1` or `c3`).
pub(crate) fn get_value(r: &mut Reader<'_>, tag: u8, what: &'static str) -> Result<Vec<u8>, DecodeError> {
    let n = match tag {
        0xc0 => usize::from(r.u8(what)?),
        0xc1 => usize::from(r.u16(what)?),
        _ => r.size(what)?,
    };
    Ok(r.take(n, "value")?.to_vec())
}

fn put_entries<F: Form>(out: &mut Vec<u8>, entries: &Entries, nesting: usize) -> Result<(), EncodeError> {
    let mut body = Vec::new();
    for (step, tree) in entries {
        put_step(&mut body, step)?;
        put_tree::<F>(&mut body, tree, nesting)?;
    }
    put_list(out, entries.len(), F::V2_LONG_LIST, &body)
}

/// The tag is the length class and the pointer count: `Tree32` up to 14 pointers listed, 16 for
/// the dense slots; `Tree2` always the slots, no count.
fn put_inode<F: Form>(out: &mut Vec<u8>, inode: &Inode, nesting: usize) -> Result<(), EncodeError> {
    F::check_pointers(&inode.proofs)?;
    let (class, payload) = put_length(inode.length)?;
    if F::SPARSE && inode.proofs.len() < DENSE_FROM {
        out.push(class | ((inode.proofs.len() as u8) << 2));
        out.extend_from_slice(&payload);
        for (index, child) in &inode.proofs {
            out.push(*index);
            put_itree::<F>(out, child, nesting)?;
        }
        return Ok(());
    }
    out.push(class | (F::v2_dense_count() << 2));
    out.extend_from_slice(&payload);
    put_slots::<F, _>(out, &inode.proofs, EMPTY_SLOT, |out, child| put_itree::<F>(out, child, nesting))
}

fn put_extender<F: Form>(
    out: &mut Vec<u8>,
    base: u8,
    ext: &Extender,
    nesting: usize,
) -> Result<(), EncodeError> {
    let (class, payload) = put_length(ext.length)?;
    out.push(base | class);
    out.extend_from_slice(&payload);
    put_segments::<F>(out, &ext.segments)?;
    put_itree::<F>(out, &ext.proof, nesting)
}

fn put_tree<F: Form>(out: &mut Vec<u8>, tree: &Tree, nesting: usize) -> Result<(), EncodeError> {
    let nesting = deeper_encode(nesting)?;
    match tree {
        Tree::Inode(inode) => put_inode::<F>(out, inode, nesting)?,
        Tree::Node(entries) => put_entries::<F>(out, entries, nesting)?,
        Tree::Contents(value) => put_value(out, value)?,
        Tree::BlindedContents(hash) => {
            out.push(0xc8);
            out.extend_from_slice(&hash.0);
        }
        Tree::BlindedNode(hash) => {
            out.push(0xd0);
            out.extend_from_slice(&hash.0);
        }
        Tree::Extender(ext) => put_extender::<F>(out, 0xd8, ext, nesting)?,
    }
    Ok(())
}

fn put_itree<F: Form>(out: &mut Vec<u8>, tree: &InodeTree, nesting: usize) -> Result<(), EncodeError> {
    let nesting = deeper_encode(nesting)?;
    match tree {
        InodeTree::Tree(inode) => put_inode::<F>(out, inode, nesting),
        InodeTree::Values(entries) => put_entries::<F>(out, entries, nesting),
        InodeTree::Blinded(hash) => {
            out.push(0xc0);
            out.extend_from_slice(&hash.0);
            Ok(())
        }
        InodeTree::Extender(ext) => put_extender::<F>(out, 0xd0, ext, nesting),
    }
}

/// Decodes a V2 proof; the whole input must be one proof.
pub fn decode(bytes: &[u8]) -> Result<Proof, DecodeError> {
    decode_in::<Tree32>(bytes)
}

/// Decodes a V2 proof of the form `F`; the whole input must be one proof.
pub(crate) fn decode_in<F: Form>(bytes: &[u8]) -> Result<Proof, DecodeError> {
    let mut r = Reader::new(bytes);
    let (version, before, after) = get_header(&mut r)?;
    let state = get_tree::<F>(&mut r, MAX_NESTING)?;
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

fn get_entries<F: Form>(r: &mut Reader<'_>, tag: u8, nesting: usize) -> Result<Entries, DecodeError> {
    get_list(r, tag, F::V2_LONG_LIST, ("list size", "entry list"), |r| {
        let step = r.step()?;
        Ok((step, get_tree::<F>(r, nesting)?))
    })
}

fn get_inode<F: Form>(r: &mut Reader<'_>, tag: u8, nesting: usize) -> Result<Inode, DecodeError> {
    let offset = r.offset().saturating_sub(1);
    let length = get_length(r, tag)?;
    let pointer = |r: &mut Reader<'_>| -> Result<(u8, InodeTree), DecodeError> {
        let index = r.u8("inode index")?;
        Ok((index, get_child::<F>(r, nesting)?))
    };
    let proofs = match tag >> 2 {
        count if count == F::v2_dense_count() => r.slots::<F, _>(|r| get_itree::<F>(r, nesting, true))?,
        count @ 0..=14 if F::SPARSE => r.counted(usize::from(count), pointer)?,
        15 if F::SPARSE => r.sized_list("pointer list size", "pointer list", pointer)?,
        _ => return Err(DecodeError::BadTag { offset, tag, what: "inode" }),
    };
    Ok(Inode { length, proofs })
}

fn get_extender<F: Form>(r: &mut Reader<'_>, tag: u8, nesting: usize) -> Result<Extender, DecodeError> {
    let length = get_length(r, tag)?;
    let segments = r.segments::<F>()?;
    Ok(Extender { length, segments, proof: Box::new(get_child::<F>(r, nesting)?) })
}

fn get_tree<F: Form>(r: &mut Reader<'_>, nesting: usize) -> Result<Tree, DecodeError> {
    let offset = r.offset();
    let nesting = deeper_decode(nesting, offset)?;
    let tag = r.u8("tree tag")?;
    Ok(match tag {
        0x00..=0x7f if tag <= F::V2_INODE_TAG_MAX => Tree::Inode(get_inode::<F>(r, tag, nesting)?),
        0x80..=0xbf if tag <= F::V2_LONG_LIST => Tree::Node(get_entries::<F>(r, tag, nesting)?),
        0xc0 | 0xc1 | 0xc3 => Tree::Contents(get_value(r, tag, "value length")?),
        0xc8 => Tree::BlindedContents(r.hash()?),
        0xd0 => Tree::BlindedNode(r.hash()?),
        0xd8..=0xdb => Tree::Extender(get_extender::<F>(r, tag, nesting)?),
        _ => return Err(DecodeError::BadTag { offset, tag, what: "tree" }),
    })
}

/// An inode tree where no empty slot may stand: an extender's, a listed pointer's.
fn get_child<F: Form>(r: &mut Reader<'_>, nesting: usize) -> Result<InodeTree, DecodeError> {
    r.required(EMPTY_SLOT, |r| get_itree::<F>(r, nesting, false))
}

/// `None` for the empty slot of a dense array (0xe0), accepted only when `slot` is set.
fn get_itree<F: Form>(
    r: &mut Reader<'_>,
    nesting: usize,
    slot: bool,
) -> Result<Option<InodeTree>, DecodeError> {
    let offset = r.offset();
    let nesting = deeper_decode(nesting, offset)?;
    let tag = r.u8("inode tree tag")?;
    Ok(Some(match tag {
        0x00..=0x7f if tag <= F::V2_INODE_TAG_MAX => InodeTree::Tree(get_inode::<F>(r, tag, nesting)?),
        0x80..=0xbf if tag <= F::V2_LONG_LIST => InodeTree::Values(get_entries::<F>(r, tag, nesting)?),
        0xc0 => InodeTree::Blinded(r.hash()?),
        0xd0..=0xd3 => InodeTree::Extender(get_extender::<F>(r, tag, nesting)?),
        EMPTY_SLOT if slot => return Ok(None),
        _ => return Err(DecodeError::BadTag { offset, tag, what: "inode tree" }),
    }))
}
