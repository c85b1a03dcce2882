//! V1 (`Merkle_proof_encoding.V1.Tree32`, plain `Data_encoding`), spec §5.2.
//!
//! ```text
//! tree_proof = i16 version ‖ KH before ‖ KH after ‖ TREE
//! KH    = u8 (00 contents | 01 node) ‖ hash
//! TREE  = 00 u32 n bytes | 01 hash | 02 u32 size (step TREE)* | 03 hash | 04 INODE | 05 EXT
//! ITREE = 00 hash | 01 u32 size (step TREE)* | 02 INODE | 03 EXT | 04 (empty dense slot)
//! INODE = i64 length ‖ (00 u32 size (u8 index ITREE)* | 01 ITREE×32)   dense at ≥ 16 pointers
//! EXT   = i64 length ‖ u8 n segments(n bytes) ‖ ITREE
//! ```
//!
//! The same code writes and reads `V1.Tree2` ([`super::tree2::v1`]), generic over the crate-private `Form`.

use super::{Form, Reader, Tree32, deeper_decode, deeper_encode, length_i64, put_segments, put_slots};
use super::{put_step, size_u32};
use crate::error::{DecodeError, EncodeError};
use crate::hash::Kind;
use crate::model::MAX_NESTING;
use crate::types::{Entries, Extender, Inode, InodeTree, KindedHash, Proof, Tree};
use alloc::boxed::Box;
use alloc::vec::Vec;

/// Pointer count from which V1 `Tree32` writes an inode's pointers as a dense array of 32 slots.
const DENSE_FROM: usize = 16;
/// The tag of an empty slot of a dense pointer array.
const EMPTY_SLOT: u8 = 4;

/// Encodes `proof` in V1.
pub fn encode(proof: &Proof) -> Result<Vec<u8>, EncodeError> {
    encode_in::<Tree32>(proof)
}

/// Encodes `proof` in V1 of the form `F`.
pub(crate) fn encode_in<F: Form>(proof: &Proof) -> Result<Vec<u8>, EncodeError> {
    let mut out = Vec::new();
    out.extend_from_slice(&proof.version.to_be_bytes());
    put_kh(&mut out, &proof.before);
    put_kh(&mut out, &proof.after);
    put_tree::<F>(&mut out, &proof.state, MAX_NESTING)?;
    Ok(out)
}

pub(crate) fn put_kh(out: &mut Vec<u8>, kh: &KindedHash) {
    out.push(match kh.kind {
        Kind::Contents => 0,
        Kind::Node => 1,
    });
    out.extend_from_slice(&kh.hash.0);
}

pub(crate) fn put_sized(
    out: &mut Vec<u8>,
    f: impl FnOnce(&mut Vec<u8>) -> Result<(), EncodeError>,
) -> Result<(), EncodeError> {
    let at = out.len();
    out.extend_from_slice(&[0; 4]);
    f(out)?;
    let size = size_u32(out.len() - at - 4)?;
    if let Some(slot) = out.get_mut(at..at + 4) {
        slot.copy_from_slice(&size.to_be_bytes());
    }
    Ok(())
}

fn put_entries<F: Form>(out: &mut Vec<u8>, entries: &Entries, nesting: usize) -> Result<(), EncodeError> {
    put_sized(out, |out| {
        for (step, tree) in entries {
            put_step(out, step)?;
            put_tree::<F>(out, tree, nesting)?;
        }
        Ok(())
    })
}

fn put_tree<F: Form>(out: &mut Vec<u8>, tree: &Tree, nesting: usize) -> Result<(), EncodeError> {
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
            put_entries::<F>(out, entries, nesting)?;
        }
        Tree::BlindedNode(hash) => {
            out.push(3);
            out.extend_from_slice(&hash.0);
        }
        Tree::Inode(inode) => {
            out.push(4);
            put_inode::<F>(out, inode, nesting)?;
        }
        Tree::Extender(ext) => {
            out.push(5);
            put_extender::<F>(out, ext, nesting)?;
        }
    }
    Ok(())
}

/// `Tree32`: a tag, then a sparse list (`00`) or the dense slots (`01`); `Tree2`: the slots alone.
fn put_inode<F: Form>(out: &mut Vec<u8>, inode: &Inode, nesting: usize) -> Result<(), EncodeError> {
    out.extend_from_slice(&length_i64(inode.length)?.to_be_bytes());
    F::check_pointers(&inode.proofs)?;
    if F::SPARSE && inode.proofs.len() < DENSE_FROM {
        out.push(0);
        return put_sized(out, |out| {
            for (index, child) in &inode.proofs {
                out.push(*index);
                put_itree::<F>(out, child, nesting)?;
            }
            Ok(())
        });
    }
    if F::SPARSE {
        out.push(1);
    }
    put_slots::<F, _>(out, &inode.proofs, EMPTY_SLOT, |out, child| put_itree::<F>(out, child, nesting))
}

fn put_extender<F: Form>(out: &mut Vec<u8>, ext: &Extender, nesting: usize) -> Result<(), EncodeError> {
    out.extend_from_slice(&length_i64(ext.length)?.to_be_bytes());
    put_segments::<F>(out, &ext.segments)?;
    put_itree::<F>(out, &ext.proof, nesting)
}

fn put_itree<F: Form>(out: &mut Vec<u8>, tree: &InodeTree, nesting: usize) -> Result<(), EncodeError> {
    let nesting = deeper_encode(nesting)?;
    match tree {
        InodeTree::Blinded(hash) => {
            out.push(0);
            out.extend_from_slice(&hash.0);
            Ok(())
        }
        InodeTree::Values(entries) => {
            out.push(1);
            put_entries::<F>(out, entries, nesting)
        }
        InodeTree::Tree(inode) => {
            out.push(2);
            put_inode::<F>(out, inode, nesting)
        }
        InodeTree::Extender(ext) => {
            out.push(3);
            put_extender::<F>(out, ext, nesting)
        }
    }
}

/// Decodes a V1 proof; the whole input must be one proof.
pub fn decode(bytes: &[u8]) -> Result<Proof, DecodeError> {
    decode_in::<Tree32>(bytes)
}

/// Decodes a V1 proof of the form `F`; the whole input must be one proof.
pub(crate) fn decode_in<F: Form>(bytes: &[u8]) -> Result<Proof, DecodeError> {
    let mut r = Reader::new(bytes);
    let version = r.i16("version")?;
    let before = get_kh(&mut r)?;
    let after = get_kh(&mut r)?;
    let state = get_tree::<F>(&mut r, MAX_NESTING)?;
    r.finish()?;
    Ok(Proof { version, before, after, state })
}

pub(crate) fn get_kh(r: &mut Reader<'_>) -> Result<KindedHash, DecodeError> {
    let offset = r.offset();
    let kind = match r.u8("kinded hash tag")? {
        0 => Kind::Contents,
        1 => Kind::Node,
        tag => return Err(DecodeError::BadTag { offset, tag, what: "kinded hash" }),
    };
    Ok(KindedHash { kind, hash: r.hash()? })
}

fn get_entries<F: Form>(r: &mut Reader<'_>, nesting: usize) -> Result<Entries, DecodeError> {
    r.sized_list("list size", "entry list", |r| {
        let step = r.step()?;
        Ok((step, get_tree::<F>(r, nesting)?))
    })
}

fn get_tree<F: Form>(r: &mut Reader<'_>, nesting: usize) -> Result<Tree, DecodeError> {
    let offset = r.offset();
    let nesting = deeper_decode(nesting, offset)?;
    Ok(match r.u8("tree tag")? {
        0 => {
            let n = r.size("value length")?;
            Tree::Contents(r.take(n, "value")?.to_vec())
        }
        1 => Tree::BlindedContents(r.hash()?),
        2 => Tree::Node(get_entries::<F>(r, nesting)?),
        3 => Tree::BlindedNode(r.hash()?),
        4 => Tree::Inode(get_inode::<F>(r, nesting)?),
        5 => Tree::Extender(get_extender::<F>(r, nesting)?),
        tag => return Err(DecodeError::BadTag { offset, tag, what: "tree" }),
    })
}

fn get_inode<F: Form>(r: &mut Reader<'_>, nesting: usize) -> Result<Inode, DecodeError> {
    let length = r.length_i64("inode length")?;
    let slots = |r: &mut Reader<'_>| r.slots::<F, _>(|r| get_itree::<F>(r, nesting, true));
    if !F::SPARSE {
        return Ok(Inode { length, proofs: slots(r)? });
    }
    let offset = r.offset();
    let proofs = match r.u8("inode proofs tag")? {
        0 => r.sized_list("pointer list size", "pointer list", |r| {
            let index = r.u8("inode index")?;
            Ok((index, get_child::<F>(r, nesting)?))
        })?,
        1 => slots(r)?,
        tag => return Err(DecodeError::BadTag { offset, tag, what: "inode proofs" }),
    };
    Ok(Inode { length, proofs })
}

fn get_extender<F: Form>(r: &mut Reader<'_>, nesting: usize) -> Result<Extender, DecodeError> {
    let length = r.length_i64("extender length")?;
    let segments = r.segments::<F>()?;
    Ok(Extender { length, segments, proof: Box::new(get_child::<F>(r, nesting)?) })
}

/// An inode tree where no empty slot may stand: an extender's, a listed pointer's.
fn get_child<F: Form>(r: &mut Reader<'_>, nesting: usize) -> Result<InodeTree, DecodeError> {
    r.required(EMPTY_SLOT, |r| get_itree::<F>(r, nesting, false))
}

/// `None` for the empty slot of a dense array (tag 04), accepted only when `slot` is set.
fn get_itree<F: Form>(
    r: &mut Reader<'_>,
    nesting: usize,
    slot: bool,
) -> Result<Option<InodeTree>, DecodeError> {
    let offset = r.offset();
    let nesting = deeper_decode(nesting, offset)?;
    Ok(Some(match r.u8("inode tree tag")? {
        0 => InodeTree::Blinded(r.hash()?),
        1 => InodeTree::Values(get_entries::<F>(r, nesting)?),
        2 => InodeTree::Tree(get_inode::<F>(r, nesting)?),
        3 => InodeTree::Extender(get_extender::<F>(r, nesting)?),
        EMPTY_SLOT if slot => return Ok(None),
        tag => return Err(DecodeError::BadTag { offset, tag, what: "inode tree" }),
    }))
}
