//! Octez's binary encodings of tree proofs (`Merkle_proof_encoding`, `Tree32`, spec §5): V1 (plain
//! `Data_encoding`) and V2 (`Data_encoding.Compact`); the binary tree's `Tree2` forms of both in
//! [`tree2`]. Decoding is strict: every size is checked
//! against the bytes left before anything is allocated, nesting is bounded by
//! [`crate::model::MAX_NESTING`] levels, and trailing bytes are an error.

pub mod stream;
pub mod tree2;
pub mod v1;
pub mod v2;

use crate::error::{DecodeError, EncodeError};
use crate::hash::{HASH_LEN, Hash, INODE_BUCKETS};
use crate::model::MAX_NESTING;
use alloc::vec::Vec;

/// `Data_encoding`'s `Uint30` bound on dynamic sizes.
const UINT30_MAX: u32 = (1 << 30) - 1;

/// A cursor over input bytes, with the offset of every error.
pub(crate) struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    end: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Reader<'a> {
        Reader { bytes, pos: 0, end: bytes.len() }
    }

    pub(crate) fn offset(&self) -> usize {
        self.pos
    }

    pub(crate) fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], DecodeError> {
        let start = self.pos;
        let stop = start.checked_add(n).filter(|stop| *stop <= self.end);
        match stop.and_then(|stop| self.bytes.get(start..stop)) {
            Some(slice) => {
                self.pos = start + n;
                Ok(slice)
            }
            None => Err(DecodeError::Truncated { offset: start, what }),
        }
    }

    pub(crate) fn u8(&mut self, what: &'static str) -> Result<u8, DecodeError> {
        Ok(self.take(1, what)?.first().copied().unwrap_or_default())
    }

    fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], DecodeError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N, what)?);
        Ok(out)
    }

    pub(crate) fn u16(&mut self, what: &'static str) -> Result<u16, DecodeError> {
        Ok(u16::from_be_bytes(self.array(what)?))
    }

    pub(crate) fn i16(&mut self, what: &'static str) -> Result<i16, DecodeError> {
        Ok(i16::from_be_bytes(self.array(what)?))
    }

    pub(crate) fn u32(&mut self, what: &'static str) -> Result<u32, DecodeError> {
        Ok(u32::from_be_bytes(self.array(what)?))
    }

    /// A `Uint30` size header.
    pub(crate) fn size(&mut self, what: &'static str) -> Result<usize, DecodeError> {
        let offset = self.pos;
        let n = self.u32(what)?;
        if n > UINT30_MAX {
            return Err(DecodeError::Invalid { offset, what: "size above 2^30 - 1" });
        }
        Ok(n as usize)
    }

    /// A non-negative `int64`.
    pub(crate) fn length_i64(&mut self, what: &'static str) -> Result<u64, DecodeError> {
        let offset = self.pos;
        let n = i64::from_be_bytes(self.array(what)?);
        u64::try_from(n).map_err(|_| DecodeError::Invalid { offset, what: "negative length" })
    }

    pub(crate) fn hash(&mut self) -> Result<Hash, DecodeError> {
        Ok(Hash(self.array::<HASH_LEN>("hash")?))
    }

    /// A step: u8 length and bytes.
    pub(crate) fn step(&mut self) -> Result<Vec<u8>, DecodeError> {
        let n = self.u8("step length")?;
        Ok(self.take(usize::from(n), "step")?.to_vec())
    }

    /// Extender segments: u8 byte length and the 5-bit packed list.
    pub(crate) fn segments(&mut self) -> Result<Vec<u8>, DecodeError> {
        let n = self.u8("segments length")?;
        let offset = self.pos;
        let bytes = self.take(usize::from(n), "segments")?;
        segments_unpack(bytes).ok_or(DecodeError::Invalid { offset, what: "extender segment list" })
    }

    /// Runs `f` on the next `size` bytes only, which it must consume exactly.
    pub(crate) fn sub<T>(
        &mut self,
        size: usize,
        what: &'static str,
        f: impl FnOnce(&mut Reader<'a>) -> Result<T, DecodeError>,
    ) -> Result<T, DecodeError> {
        let start = self.pos;
        let stop = start
            .checked_add(size)
            .filter(|stop| *stop <= self.end)
            .ok_or(DecodeError::Truncated { offset: start, what })?;
        let saved_end = self.end;
        self.end = stop;
        let out = f(self)?;
        if self.pos != stop {
            return Err(DecodeError::Invalid {
                offset: self.pos,
                what: "list size does not match its elements",
            });
        }
        self.end = saved_end;
        Ok(out)
    }

    pub(crate) fn at_end(&self) -> bool {
        self.pos >= self.end
    }

    pub(crate) fn finish(&self) -> Result<(), DecodeError> {
        if self.pos != self.bytes.len() {
            return Err(DecodeError::TrailingBytes { offset: self.pos });
        }
        Ok(())
    }
}

/// Nesting budget of a decoder or encoder: one level per nested tree or inode.
pub(crate) fn deeper_decode(nesting: usize, offset: usize) -> Result<usize, DecodeError> {
    nesting.checked_sub(1).ok_or(DecodeError::TooDeep { offset, limit: MAX_NESTING })
}

pub(crate) fn deeper_encode(nesting: usize) -> Result<usize, EncodeError> {
    nesting.checked_sub(1).ok_or(EncodeError::TooDeep { limit: MAX_NESTING })
}

pub(crate) fn put_step(out: &mut Vec<u8>, step: &[u8]) -> Result<(), EncodeError> {
    let len = u8::try_from(step.len()).map_err(|_| EncodeError::StepTooLong { len: step.len() })?;
    out.push(len);
    out.extend_from_slice(step);
    Ok(())
}

pub(crate) fn put_segments(out: &mut Vec<u8>, segments: &[u8]) -> Result<(), EncodeError> {
    let packed = segments_pack(segments)?;
    let len = u8::try_from(packed.len()).map_err(|_| EncodeError::BadSegments)?;
    out.push(len);
    out.extend_from_slice(&packed);
    Ok(())
}

/// A `Uint30` size for a list body or value.
pub(crate) fn size_u32(len: usize) -> Result<u32, EncodeError> {
    u32::try_from(len)
        .ok()
        .filter(|n| *n <= UINT30_MAX)
        .ok_or(EncodeError::TooLarge { what: "list or value" })
}

pub(crate) fn length_i64(length: u64) -> Result<i64, EncodeError> {
    i64::try_from(length).map_err(|_| EncodeError::TooLarge { what: "inode length" })
}

/// Packs extender segments 5 bits each, most significant first, closed by a 1 bit and zero
/// padding to a byte boundary.
pub fn segments_pack(segments: &[u8]) -> Result<Vec<u8>, EncodeError> {
    let bits = segments.len() * 5 + 1;
    let mut out = alloc::vec![0u8; bits.div_ceil(8)];
    let mut put = |position: usize| {
        if let Some(byte) = out.get_mut(position / 8) {
            *byte |= 0x80 >> (position % 8);
        }
    };
    for (k, segment) in segments.iter().enumerate() {
        if *segment >= INODE_BUCKETS {
            return Err(EncodeError::BadSegments);
        }
        for bit in 0..5 {
            if segment & (0x10 >> bit) != 0 {
                put(k * 5 + bit);
            }
        }
    }
    put(segments.len() * 5);
    Ok(out)
}

/// Unpacks a segment list; `None` if it is not a valid packing.
pub fn segments_unpack(bytes: &[u8]) -> Option<Vec<u8>> {
    let last = *bytes.last()?;
    if last == 0 {
        return None;
    }
    let bits = bytes.len() * 8 - 1 - last.trailing_zeros() as usize;
    if !bits.is_multiple_of(5) {
        return None;
    }
    let bit =
        |position: usize| bytes.get(position / 8).is_some_and(|byte| byte & (0x80 >> (position % 8)) != 0);
    Some((0..bits / 5).map(|k| (0..5).fold(0u8, |acc, b| (acc << 1) | u8::from(bit(k * 5 + b)))).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_examples_from_spec() {
        assert_eq!(segments_pack(&[5, 7]).ok(), Some(alloc::vec![0x29, 0xe0]));
        assert_eq!(segments_pack(&[0, 1, 0, 31]).ok(), Some(alloc::vec![0x00, 0x41, 0xf8]));
        assert_eq!(
            segments_pack(&[1, 2, 3, 4, 5, 6, 7, 8]).ok(),
            Some(alloc::vec![0x08, 0x86, 0x42, 0x98, 0xe8, 0x80])
        );
        for segments in [&[][..], &[5, 7], &[0, 1, 0, 31], &[31; 40]] {
            let packed = segments_pack(segments).unwrap_or_default();
            assert_eq!(segments_unpack(&packed).as_deref(), Some(segments));
        }
        assert_eq!(segments_unpack(&[]), None);
        assert_eq!(segments_unpack(&[0x29, 0x00]), None);
        assert_eq!(segments_unpack(&[0x29, 0xf0]), None, "9 bits before the terminator");
        assert!(segments_pack(&[32]).is_err());
    }
}
