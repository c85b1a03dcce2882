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
//! The V1 and V2 encoders and decoders are `Tree32`'s ([`super::v1`], [`super::v2`]), generic over
//! the crate-private `Form` that names these differences, so decoding is as strict as for `Tree32`
//! (sizes checked against the bytes left before anything is allocated, nesting bounded by
//! [`crate::model::MAX_NESTING`], unknown tags and trailing bytes are errors).

use super::Form;
use crate::error::{DecodeError, EncodeError};
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

/// The binary context's forms (`Merkle_proof_encoding.{V1,V2}.Tree2`).
pub(crate) struct Tree2;

impl Form for Tree2 {
    const BUCKETS: u8 = 2;
    const SPARSE: bool = false;
    const V2_INODE_TAG_MAX: u8 = 0x03;
    const V2_LONG_LIST: u8 = 0x83;
    const SEGMENTS_WHAT: &'static str = "binary extender segment list";

    fn pack_segments(segments: &[u8]) -> Result<Vec<u8>, EncodeError> {
        segments_pack(segments)
    }

    fn unpack_segments(bytes: &[u8]) -> Option<Vec<u8>> {
        segments_unpack(bytes)
    }

    /// Left (index 0), right (index 1) or both.
    fn check_pointers<T>(proofs: &[(u8, T)]) -> Result<(), EncodeError> {
        match proofs {
            [(0, _), (1, _)] | [(0, _)] | [(1, _)] => Ok(()),
            [] => Err(EncodeError::NotBinary("an inode without pointers")),
            _ => Err(EncodeError::NotBinary("inode indices other than 0 and 1")),
        }
    }

    /// Both slots empty is an error.
    fn check_slots<T>(proofs: &[(u8, T)], offset: usize) -> Result<(), DecodeError> {
        if proofs.is_empty() {
            return Err(DecodeError::Invalid { offset, what: "binary inode with two empty slots" });
        }
        Ok(())
    }
}

/// V1 (`Merkle_proof_encoding.V1.Tree2`, plain `Data_encoding`).
pub mod v1 {
    use super::Tree2;
    use crate::encoding::v1::{decode_in, encode_in};
    use crate::error::{DecodeError, EncodeError};
    use crate::types::Proof;
    use alloc::vec::Vec;

    /// Encodes `proof` in V1 `Tree2`.
    pub fn encode(proof: &Proof) -> Result<Vec<u8>, EncodeError> {
        encode_in::<Tree2>(proof)
    }

    /// Decodes a V1 `Tree2` proof; the whole input must be one proof.
    pub fn decode(bytes: &[u8]) -> Result<Proof, DecodeError> {
        decode_in::<Tree2>(bytes)
    }
}

/// V2 (`Merkle_proof_encoding.V2.Tree2`, `Data_encoding.Compact`).
pub mod v2 {
    use super::Tree2;
    use crate::encoding::v2::{decode_in, encode_in};
    use crate::error::{DecodeError, EncodeError};
    use crate::types::Proof;
    use alloc::vec::Vec;

    /// Encodes `proof` in V2 `Tree2`.
    pub fn encode(proof: &Proof) -> Result<Vec<u8>, EncodeError> {
        encode_in::<Tree2>(proof)
    }

    /// Decodes a V2 `Tree2` proof; the whole input must be one proof.
    pub fn decode(bytes: &[u8]) -> Result<Proof, DecodeError> {
        decode_in::<Tree2>(bytes)
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
