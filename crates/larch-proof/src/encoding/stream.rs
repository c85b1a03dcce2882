//! Octez's binary encodings of stream proofs (`Merkle_proof_encoding.{V1,V2}.Tree32`
//! `stream_proof_encoding`). Decoding is strict like the tree proofs' decoders: every size is
//! checked against the bytes left, unknown tags and trailing bytes are errors.
//!
//! ```text
//! V1: i16 version ‖ KH before ‖ KH after ‖ u32 size ELT*
//!     ELT = 00 u32 n bytes | 01 u32 size (step KH)* | 02 i64 length PTRS | 03 i64 length SEG hash
//!     PTRS = 00 u32 size (u8 index 01 hash)* | 01 (00 | 01 hash)×32      dense at ≥ 16 pointers
//! V2: u8 (bit0 before is node, bit1 after is node) ‖ i16 version ‖ hash ‖ hash ‖ u32 size ELT*
//!     ELT = L|p<<2 length PTRS | 80|n (n<63) (step KH)×n | bf u32 size (step KH)*
//!         | c0 u8 n bytes | c1 u16 n bytes | c3 u32 n bytes | e0|L length SEG hash
//!     PTRS(p) = p ≤ 14: (u8 index 01 hash)×p | 15: u32 size (u8 index 01 hash)* | 16: (00 | 01 hash)×32
//! ```

use super::{Reader, Tree32, put_segments, put_slots, put_step, size_u32};
use crate::error::{DecodeError, EncodeError};
use crate::hash::{Hash, Kind};
use crate::stream::{Elt, StreamProof};
use crate::types::KindedHash;
use alloc::vec::Vec;

/// The 32 slots of a dense inode: `00` empty, `01` and the hash.
fn put_pointers_dense(out: &mut Vec<u8>, proofs: &[(u8, Hash)]) -> Result<(), EncodeError> {
    put_slots::<Tree32, _>(out, proofs, 0, |out, hash| {
        out.push(1);
        out.extend_from_slice(&hash.0);
        Ok(())
    })
}

fn put_pointer(out: &mut Vec<u8>, index: u8, hash: &Hash) {
    out.push(index);
    out.push(1);
    out.extend_from_slice(&hash.0);
}

fn get_pointer(r: &mut Reader<'_>) -> Result<(u8, Hash), DecodeError> {
    let index = r.u8("inode index")?;
    let offset = r.offset();
    let tag = r.u8("pointer option")?;
    if tag != 1 {
        return Err(DecodeError::BadTag { offset, tag, what: "inode pointer" });
    }
    Ok((index, r.hash()?))
}

fn get_pointers_dense(r: &mut Reader<'_>) -> Result<Vec<(u8, Hash)>, DecodeError> {
    r.slots::<Tree32, _>(|r| {
        let offset = r.offset();
        match r.u8("pointer option")? {
            0 => Ok(None),
            1 => Ok(Some(r.hash()?)),
            tag => Err(DecodeError::BadTag { offset, tag, what: "dense inode slot" }),
        }
    })
}

fn get_pointer_list(r: &mut Reader<'_>) -> Result<Vec<(u8, Hash)>, DecodeError> {
    r.sized_list("pointer list size", "pointer list", get_pointer)
}

/// The element list: a `Uint30` byte size, then the elements.
fn get_elts(
    r: &mut Reader<'_>,
    elt: fn(&mut Reader<'_>) -> Result<Elt, DecodeError>,
) -> Result<Vec<Elt>, DecodeError> {
    r.sized_list("stream size", "stream", elt)
}

/// V1 (`Merkle_proof_encoding.V1.Tree32.stream_proof_encoding`).
pub mod v1 {
    use super::*;
    use crate::encoding::length_i64;
    use crate::encoding::v1::{get_kh, put_kh, put_sized};

    const DENSE_FROM: usize = 16;

    /// Encodes a stream proof in V1.
    pub fn encode(proof: &StreamProof) -> Result<Vec<u8>, EncodeError> {
        let mut out = Vec::new();
        out.extend_from_slice(&proof.version.to_be_bytes());
        put_kh(&mut out, &proof.before);
        put_kh(&mut out, &proof.after);
        put_sized(&mut out, |out| {
            for elt in &proof.elts {
                put_elt(out, elt)?;
            }
            Ok(())
        })?;
        Ok(out)
    }

    fn put_elt(out: &mut Vec<u8>, elt: &Elt) -> Result<(), EncodeError> {
        match elt {
            Elt::Contents(value) => {
                out.push(0);
                out.extend_from_slice(&size_u32(value.len())?.to_be_bytes());
                out.extend_from_slice(value);
            }
            Elt::Node(entries) => {
                out.push(1);
                put_sized(out, |out| {
                    for (step, kh) in entries {
                        put_step(out, step)?;
                        put_kh(out, kh);
                    }
                    Ok(())
                })?;
            }
            Elt::Inode { length, proofs } => {
                out.push(2);
                out.extend_from_slice(&length_i64(*length)?.to_be_bytes());
                if proofs.len() < DENSE_FROM {
                    out.push(0);
                    put_sized(out, |out| {
                        for (index, hash) in proofs {
                            put_pointer(out, *index, hash);
                        }
                        Ok(())
                    })?;
                } else {
                    out.push(1);
                    put_pointers_dense(out, proofs)?;
                }
            }
            Elt::InodeExtender { length, segments, proof } => {
                out.push(3);
                out.extend_from_slice(&length_i64(*length)?.to_be_bytes());
                put_segments::<Tree32>(out, segments)?;
                out.extend_from_slice(&proof.0);
            }
        }
        Ok(())
    }

    /// Decodes a V1 stream proof; the whole input must be one proof.
    pub fn decode(bytes: &[u8]) -> Result<StreamProof, DecodeError> {
        let mut r = Reader::new(bytes);
        let version = r.i16("version")?;
        let before = get_kh(&mut r)?;
        let after = get_kh(&mut r)?;
        let elts = get_elts(&mut r, get_elt)?;
        r.finish()?;
        Ok(StreamProof { version, before, after, elts })
    }

    fn get_elt(r: &mut Reader<'_>) -> Result<Elt, DecodeError> {
        let offset = r.offset();
        Ok(match r.u8("element tag")? {
            0 => {
                let n = r.size("value size")?;
                Elt::Contents(r.take(n, "value")?.to_vec())
            }
            1 => Elt::Node(r.sized_list("node size", "node entries", |r| {
                let step = r.step()?;
                Ok((step, get_kh(r)?))
            })?),
            2 => {
                let length = r.length_i64("inode length")?;
                let offset = r.offset();
                let proofs = match r.u8("pointers tag")? {
                    0 => get_pointer_list(r)?,
                    1 => get_pointers_dense(r)?,
                    tag => return Err(DecodeError::BadTag { offset, tag, what: "inode pointers" }),
                };
                Elt::Inode { length, proofs }
            }
            3 => {
                let length = r.length_i64("extender length")?;
                let segments = r.segments::<Tree32>()?;
                Elt::InodeExtender { length, segments, proof: r.hash()? }
            }
            tag => return Err(DecodeError::BadTag { offset, tag, what: "stream element" }),
        })
    }
}

/// V2 (`Merkle_proof_encoding.V2.Tree32.stream_proof_encoding`, `Data_encoding.Compact`).
pub mod v2 {
    use super::*;
    use crate::encoding::v2::{
        get_header, get_length, get_list, get_value, header, put_length, put_list, put_value,
    };

    const DENSE_FROM: usize = 15;
    /// The long form's list tag.
    const LONG_LIST: u8 = 0xbf;

    /// Encodes a stream proof in V2.
    pub fn encode(proof: &StreamProof) -> Result<Vec<u8>, EncodeError> {
        let mut out = header(proof.version, &proof.before, &proof.after);
        let mut body = Vec::new();
        for elt in &proof.elts {
            put_elt(&mut body, elt)?;
        }
        out.extend_from_slice(&size_u32(body.len())?.to_be_bytes());
        out.extend_from_slice(&body);
        Ok(out)
    }

    fn put_kh(out: &mut Vec<u8>, kh: &KindedHash) {
        out.push(u8::from(kh.kind == Kind::Node));
        out.extend_from_slice(&kh.hash.0);
    }

    fn put_elt(out: &mut Vec<u8>, elt: &Elt) -> Result<(), EncodeError> {
        match elt {
            Elt::Inode { length, proofs } => {
                let (class, payload) = put_length(*length)?;
                if proofs.len() < DENSE_FROM {
                    out.push(class | ((proofs.len() as u8) << 2));
                    out.extend_from_slice(&payload);
                    for (index, hash) in proofs {
                        put_pointer(out, *index, hash);
                    }
                } else {
                    out.push(class | (16 << 2));
                    out.extend_from_slice(&payload);
                    put_pointers_dense(out, proofs)?;
                }
            }
            Elt::Node(entries) => {
                let mut body = Vec::new();
                for (step, kh) in entries {
                    put_step(&mut body, step)?;
                    put_kh(&mut body, kh);
                }
                put_list(out, entries.len(), LONG_LIST, &body)?;
            }
            Elt::Contents(value) => put_value(out, value)?,
            Elt::InodeExtender { length, segments, proof } => {
                let (class, payload) = put_length(*length)?;
                out.push(0xe0 | class);
                out.extend_from_slice(&payload);
                put_segments::<Tree32>(out, segments)?;
                out.extend_from_slice(&proof.0);
            }
        }
        Ok(())
    }

    /// Decodes a V2 stream proof; the whole input must be one proof.
    pub fn decode(bytes: &[u8]) -> Result<StreamProof, DecodeError> {
        let mut r = Reader::new(bytes);
        let (version, before, after) = get_header(&mut r)?;
        let elts = get_elts(&mut r, get_elt)?;
        r.finish()?;
        Ok(StreamProof { version, before, after, elts })
    }

    fn get_kh(r: &mut Reader<'_>) -> Result<KindedHash, DecodeError> {
        let offset = r.offset();
        let kind = match r.u8("kinded hash tag")? {
            0 => Kind::Contents,
            1 => Kind::Node,
            tag => return Err(DecodeError::BadTag { offset, tag, what: "kinded hash" }),
        };
        Ok(KindedHash { kind, hash: r.hash()? })
    }

    fn get_elt(r: &mut Reader<'_>) -> Result<Elt, DecodeError> {
        let offset = r.offset();
        let tag = r.u8("element tag")?;
        Ok(match tag {
            0x00..=0x7f => {
                let length = get_length(r, tag)?;
                let proofs = match tag >> 2 {
                    count @ 0..=14 => r.counted(usize::from(count), get_pointer)?,
                    15 => get_pointer_list(r)?,
                    16 => get_pointers_dense(r)?,
                    _ => return Err(DecodeError::BadTag { offset, tag, what: "stream inode" }),
                };
                Elt::Inode { length, proofs }
            }
            0x80..=0xbf => Elt::Node(get_list(r, tag, LONG_LIST, ("node size", "node entries"), |r| {
                let step = r.step()?;
                Ok((step, get_kh(r)?))
            })?),
            0xc0 | 0xc1 | 0xc3 => Elt::Contents(get_value(r, tag, "value size")?),
            0xe0..=0xe3 => {
                let length = get_length(r, tag)?;
                let segments = r.segments::<Tree32>()?;
                Elt::InodeExtender { length, segments, proof: r.hash()? }
            }
            _ => return Err(DecodeError::BadTag { offset, tag, what: "stream element" }),
        })
    }
}
