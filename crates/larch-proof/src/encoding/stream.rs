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

use super::{Reader, put_segments, put_step, size_u32};
use crate::error::{DecodeError, EncodeError};
use crate::hash::{Hash, INODE_BUCKETS, Kind};
use crate::stream::{Elt, StreamProof};
use crate::types::KindedHash;
use alloc::vec::Vec;

fn put_pointers_dense(out: &mut Vec<u8>, proofs: &[(u8, Hash)]) -> Result<(), EncodeError> {
    let mut slot = 0u8;
    for (index, hash) in proofs {
        if *index < slot || *index >= INODE_BUCKETS {
            return Err(EncodeError::BadIndex { index: *index });
        }
        while slot < *index {
            out.push(0);
            slot += 1;
        }
        out.push(1);
        out.extend_from_slice(&hash.0);
        slot += 1;
    }
    while slot < INODE_BUCKETS {
        out.push(0);
        slot += 1;
    }
    Ok(())
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
    let mut proofs = Vec::new();
    for index in 0..INODE_BUCKETS {
        let offset = r.offset();
        match r.u8("pointer option")? {
            0 => {}
            1 => proofs.push((index, r.hash()?)),
            tag => return Err(DecodeError::BadTag { offset, tag, what: "dense inode slot" }),
        }
    }
    Ok(proofs)
}

fn get_pointer_list(r: &mut Reader<'_>) -> Result<Vec<(u8, Hash)>, DecodeError> {
    let size = r.size("pointer list size")?;
    r.sub(size, "pointer list", |r| {
        let mut proofs = Vec::new();
        while !r.at_end() {
            proofs.push(get_pointer(r)?);
        }
        Ok(proofs)
    })
}

/// The element list: a `Uint30` byte size, then the elements.
fn get_elts(
    r: &mut Reader<'_>,
    elt: fn(&mut Reader<'_>) -> Result<Elt, DecodeError>,
) -> Result<Vec<Elt>, DecodeError> {
    let size = r.size("stream size")?;
    r.sub(size, "stream", |r| {
        let mut elts = Vec::new();
        while !r.at_end() {
            elts.push(elt(r)?);
        }
        Ok(elts)
    })
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
                put_segments(out, segments)?;
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
            1 => {
                let size = r.size("node size")?;
                Elt::Node(r.sub(size, "node entries", |r| {
                    let mut entries = Vec::new();
                    while !r.at_end() {
                        let step = r.step()?;
                        entries.push((step, get_kh(r)?));
                    }
                    Ok(entries)
                })?)
            }
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
                let segments = r.segments()?;
                Elt::InodeExtender { length, segments, proof: r.hash()? }
            }
            tag => return Err(DecodeError::BadTag { offset, tag, what: "stream element" }),
        })
    }
}

/// V2 (`Merkle_proof_encoding.V2.Tree32.stream_proof_encoding`, `Data_encoding.Compact`).
pub mod v2 {
    use super::*;
    use crate::encoding::v2::{get_header, get_length, header, put_length};

    const DENSE_FROM: usize = 15;
    const LONG_LIST_FROM: usize = 63;

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
                if entries.len() < LONG_LIST_FROM {
                    out.push(0x80 | entries.len() as u8);
                } else {
                    out.push(0xbf);
                    out.extend_from_slice(&size_u32(body.len())?.to_be_bytes());
                }
                out.extend_from_slice(&body);
            }
            Elt::Contents(value) => {
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
            }
            Elt::InodeExtender { length, segments, proof } => {
                let (class, payload) = put_length(*length)?;
                out.push(0xe0 | class);
                out.extend_from_slice(&payload);
                put_segments(out, segments)?;
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
                    count @ 0..=14 => {
                        let mut proofs = Vec::with_capacity(usize::from(count));
                        for _ in 0..count {
                            proofs.push(get_pointer(r)?);
                        }
                        proofs
                    }
                    15 => get_pointer_list(r)?,
                    16 => get_pointers_dense(r)?,
                    _ => return Err(DecodeError::BadTag { offset, tag, what: "stream inode" }),
                };
                Elt::Inode { length, proofs }
            }
            0x80..=0xbf => {
                let count = usize::from(tag & 0x3f);
                let entry = |r: &mut Reader<'_>| -> Result<(Vec<u8>, KindedHash), DecodeError> {
                    let step = r.step()?;
                    Ok((step, get_kh(r)?))
                };
                if count < LONG_LIST_FROM {
                    let mut entries = Vec::with_capacity(count);
                    for _ in 0..count {
                        entries.push(entry(r)?);
                    }
                    Elt::Node(entries)
                } else {
                    let size = r.size("node size")?;
                    Elt::Node(r.sub(size, "node entries", |r| {
                        let mut entries = Vec::new();
                        while !r.at_end() {
                            entries.push(entry(r)?);
                        }
                        Ok(entries)
                    })?)
                }
            }
            0xc0 | 0xc1 | 0xc3 => {
                let n = match tag {
                    0xc0 => usize::from(r.u8("value size")?),
                    0xc1 => usize::from(r.u16("value size")?),
                    _ => r.size("value size")?,
                };
                Elt::Contents(r.take(n, "value")?.to_vec())
            }
            0xe0..=0xe3 => {
                let length = get_length(r, tag)?;
                let segments = r.segments()?;
                Elt::InodeExtender { length, segments, proof: r.hash()? }
            }
            _ => return Err(DecodeError::BadTag { offset, tag, what: "stream element" }),
        })
    }
}
