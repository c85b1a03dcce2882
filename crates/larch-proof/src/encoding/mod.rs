//! Octez's binary encodings of tree proofs (`Merkle_proof_encoding`, `Tree32`, spec §5): V1 (plain
//! `Data_encoding`) and V2 (`Data_encoding.Compact`); the binary tree's `Tree2` forms of both in
//! [`tree2`]. Decoding is strict: every size is checked
//! against the bytes left before anything is allocated, nesting is bounded by
//! [`crate::model::MAX_NESTING`] levels, and trailing bytes are an error.
//!
//! `Tree32` and `Tree2` share every tag and layout but for the few places the crate-private `Form`
//! names: one V1 and one V2 encoder and decoder serve both.

pub mod stream;
pub mod tree2;
pub mod v1;
pub mod v2;

use crate::error::{DecodeError, EncodeError};
use crate::hash::{HASH_LEN, Hash, INODE_BUCKETS};
use crate::model::MAX_NESTING;
use alloc::vec::Vec;

/// What the `Tree32` and `Tree2` forms of Octez's encodings write differently; everything else,
/// every tag and layout, they share. Implemented by [`Tree32`] and [`tree2::Tree2`].
pub(crate) trait Form {
    /// The slots of an inode's dense pointer array: its buckets.
    const BUCKETS: u8;
    /// Whether an inode's pointers may be written as a sparse list (`Tree32`: V1 tags the choice,
    /// V2 counts the pointers in the inode's tag); `Tree2` always writes both slots, untagged.
    const SPARSE: bool;
    /// V2: the last inode tag (`0b0pppppLL` in `Tree32`, `0b000000LL` in `Tree2`).
    const V2_INODE_TAG_MAX: u8;
    /// V2: the long form's list tag (`80|n` counts up to `n` = its low bits, exclusive).
    const V2_LONG_LIST: u8;
    /// What a bad extender segment list is called in a decode error.
    const SEGMENTS_WHAT: &'static str;

    /// Packs extender segments.
    fn pack_segments(segments: &[u8]) -> Result<Vec<u8>, EncodeError>;
    /// Unpacks extender segments; `None` if `bytes` is not a valid packing.
    fn unpack_segments(bytes: &[u8]) -> Option<Vec<u8>>;
    /// Refuses, before any slot is written, pointers this form cannot write as its slots.
    fn check_pointers<T>(proofs: &[(u8, T)]) -> Result<(), EncodeError>;
    /// Refuses decoded slots this form does not allow (the slots start at `offset`).
    fn check_slots<T>(proofs: &[(u8, T)], offset: usize) -> Result<(), DecodeError>;

    /// V2: the pointer count of a dense inode's tag (`Tree32`: 16; `Tree2` has no count).
    fn v2_dense_count() -> u8 {
        if Self::SPARSE { 16 } else { 0 }
    }
}

/// The 32-ary context's forms (`Merkle_proof_encoding.{V1,V2}.Tree32`).
pub(crate) struct Tree32;

impl Form for Tree32 {
    const BUCKETS: u8 = INODE_BUCKETS;
    const SPARSE: bool = true;
    const V2_INODE_TAG_MAX: u8 = 0x7f;
    const V2_LONG_LIST: u8 = 0xbf;
    const SEGMENTS_WHAT: &'static str = "extender segment list";

    fn pack_segments(segments: &[u8]) -> Result<Vec<u8>, EncodeError> {
        segments_pack(segments)
    }

    fn unpack_segments(bytes: &[u8]) -> Option<Vec<u8>> {
        segments_unpack(bytes)
    }

    fn check_pointers<T>(_: &[(u8, T)]) -> Result<(), EncodeError> {
        Ok(())
    }

    fn check_slots<T>(_: &[(u8, T)], _: usize) -> Result<(), DecodeError> {
        Ok(())
    }
}

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

    /// Extender segments: u8 byte length and the list packed as `F` packs it.
    pub(crate) fn segments<F: Form>(&mut self) -> Result<Vec<u8>, DecodeError> {
        let n = self.u8("segments length")?;
        let offset = self.pos;
        let bytes = self.take(usize::from(n), "segments")?;
        F::unpack_segments(bytes).ok_or(DecodeError::Invalid { offset, what: F::SEGMENTS_WHAT })
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

    /// A `Uint30` byte size, then items read by `item` until exactly those bytes are consumed.
    pub(crate) fn sized_list<T>(
        &mut self,
        size_what: &'static str,
        list_what: &'static str,
        mut item: impl FnMut(&mut Reader<'a>) -> Result<T, DecodeError>,
    ) -> Result<Vec<T>, DecodeError> {
        let size = self.size(size_what)?;
        self.sub(size, list_what, |r| {
            let mut items = Vec::new();
            while !r.at_end() {
                items.push(item(r)?);
            }
            Ok(items)
        })
    }

    /// `count` items read by `item` (the count comes from a tag: a few bits, it cannot make us
    /// allocate much).
    pub(crate) fn counted<T>(
        &mut self,
        count: usize,
        mut item: impl FnMut(&mut Reader<'a>) -> Result<T, DecodeError>,
    ) -> Result<Vec<T>, DecodeError> {
        let mut items = Vec::with_capacity(count);
        for _ in 0..count {
            items.push(item(self)?);
        }
        Ok(items)
    }

    /// An inode's `F::BUCKETS` slots in order, each read by `slot` (`None`: empty), as the
    /// pointers of the slots that are not empty.
    pub(crate) fn slots<F: Form, T>(
        &mut self,
        mut slot: impl FnMut(&mut Reader<'a>) -> Result<Option<T>, DecodeError>,
    ) -> Result<Vec<(u8, T)>, DecodeError> {
        let offset = self.pos;
        let mut proofs = Vec::new();
        for index in 0..F::BUCKETS {
            if let Some(child) = slot(self)? {
                proofs.push((index, child));
            }
        }
        F::check_slots(&proofs, offset)?;
        Ok(proofs)
    }

    /// What `read` reads where no empty slot may stand: its `None` (an empty slot, tag `empty`)
    /// is an error at the offset it started from.
    pub(crate) fn required<T>(
        &mut self,
        empty: u8,
        read: impl FnOnce(&mut Reader<'a>) -> Result<Option<T>, DecodeError>,
    ) -> Result<T, DecodeError> {
        let offset = self.pos;
        read(self)?.ok_or(DecodeError::BadTag { offset, tag: empty, what: "inode tree" })
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

/// Writes an inode's pointers (sorted by index) as all `F::BUCKETS` slots in order: each child by
/// `put`, each empty slot as the byte `empty`.
pub(crate) fn put_slots<F: Form, T>(
    out: &mut Vec<u8>,
    proofs: &[(u8, T)],
    empty: u8,
    mut put: impl FnMut(&mut Vec<u8>, &T) -> Result<(), EncodeError>,
) -> Result<(), EncodeError> {
    let mut slot = 0u8;
    for (index, child) in proofs {
        if *index < slot || *index >= F::BUCKETS {
            return Err(EncodeError::BadIndex { index: *index });
        }
        while slot < *index {
            out.push(empty);
            slot += 1;
        }
        put(out, child)?;
        slot += 1;
    }
    while slot < F::BUCKETS {
        out.push(empty);
        slot += 1;
    }
    Ok(())
}

/// Extender segments packed as `F` packs them, after their u8 byte length.
pub(crate) fn put_segments<F: Form>(out: &mut Vec<u8>, segments: &[u8]) -> Result<(), EncodeError> {
    let packed = F::pack_segments(segments)?;
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
