//! The checksums of an uploaded chunk (`<name>.sums`, `docs/object-storage.md`): the chunk's length
//! and a BLAKE2b-256 of each block of [`BLOCK_BYTES`], so that every range read is verified, and
//! a BLAKE2b-256 of all that. Written after the chunk was uploaded and read back whole: its presence
//! says the chunk's object is complete and verified.
//!
//! It also carries the chunk's first [`HEAD_BYTES`] bytes (its header): a store's open reads the
//! header of every chunk, which then costs no range request, and none at all once the checksum
//! object is in the local cache directory.
//!
//! Bytes (little-endian): `LARCHSUM` (8), version `1` (u32), block size (u32), length (u64), head
//! length `h` (u32), the chunk's first `h` bytes, the block digests (32 bytes each,
//! `ceil(length / block size)` of them), BLAKE2b-256 of everything before (32).

/// The bytes of a block: the unit of range reads, of the disk cache and of verification.
pub const BLOCK_BYTES: u32 = 256 << 10;

/// The bytes of a chunk's beginning kept in its checksum object (a chunk header is 32 bytes).
pub const HEAD_BYTES: usize = 64;

/// Suffix of a chunk's checksum object.
pub const SUMS_SUFFIX: &str = ".sums";

const MAGIC: &[u8; 8] = b"LARCHSUM";
const HEADER: usize = 8 + 4 + 4 + 8 + 4;
const DIGEST: usize = 32;

/// BLAKE2b-256 of `bytes`.
pub fn digest(bytes: &[u8]) -> [u8; DIGEST] {
    let hash = blake2b_simd::Params::new().hash_length(DIGEST).hash(bytes);
    let mut out = [0u8; DIGEST];
    out.copy_from_slice(hash.as_bytes());
    out
}

/// A chunk's length and block digests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sums {
    /// The chunk's length in bytes.
    pub len: u64,
    /// The block size.
    pub block: u32,
    /// The chunk's first bytes (at most [`HEAD_BYTES`]).
    pub head: Vec<u8>,
    /// The digest of each block, in order.
    pub digests: Vec<[u8; DIGEST]>,
}

impl Sums {
    /// The sums of `bytes` in blocks of `block` bytes.
    pub fn of(bytes: &[u8], block: u32) -> Sums {
        let digests = bytes.chunks(block.max(1) as usize).map(digest).collect();
        let head = bytes.get(..HEAD_BYTES.min(bytes.len())).unwrap_or_default().to_vec();
        Sums { len: bytes.len() as u64, block: block.max(1), head, digests }
    }

    /// The number of blocks.
    pub fn blocks(&self) -> u64 {
        self.len.div_ceil(u64::from(self.block))
    }

    /// The byte range of block `index`.
    pub fn range(&self, index: u64) -> std::ops::Range<u64> {
        let start = index * u64::from(self.block);
        start..(start + u64::from(self.block)).min(self.len)
    }

    /// Whether `bytes` are block `index`.
    pub fn check(&self, index: u64, bytes: &[u8]) -> bool {
        let expected = usize::try_from(index).ok().and_then(|i| self.digests.get(i));
        let range = self.range(index);
        expected.is_some_and(|expected| {
            bytes.len() as u64 == range.end - range.start && digest(bytes) == *expected
        })
    }

    /// The encoded bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER + DIGEST * (self.digests.len() + 1));
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&1u32.to_le_bytes());
        out.extend_from_slice(&self.block.to_le_bytes());
        out.extend_from_slice(&self.len.to_le_bytes());
        out.extend_from_slice(&(self.head.len() as u32).to_le_bytes());
        out.extend_from_slice(&self.head);
        for d in &self.digests {
            out.extend_from_slice(d);
        }
        let total = digest(&out);
        out.extend_from_slice(&total);
        out
    }

    /// Decodes [`Sums::encode`]'s bytes; `None` when they are not well formed or their own
    /// digest does not match.
    pub fn decode(bytes: &[u8]) -> Option<Sums> {
        let (body, total) = bytes.split_at_checked(bytes.len().checked_sub(DIGEST)?)?;
        if digest(body) != *total || body.get(..8)? != MAGIC || body.get(8..12)? != 1u32.to_le_bytes() {
            return None;
        }
        let block = u32::from_le_bytes(body.get(12..16)?.try_into().ok()?);
        let len = u64::from_le_bytes(body.get(16..24)?.try_into().ok()?);
        let head_len = u32::from_le_bytes(body.get(24..28)?.try_into().ok()?) as usize;
        if head_len > HEAD_BYTES || head_len as u64 > len {
            return None;
        }
        let head = body.get(HEADER..HEADER + head_len)?.to_vec();
        let rest = body.get(HEADER + head_len..)?;
        if block == 0
            || rest.len() % DIGEST != 0
            || (rest.len() / DIGEST) as u64 != len.div_ceil(u64::from(block))
        {
            return None;
        }
        let digests = rest.chunks_exact(DIGEST).filter_map(|d| d.try_into().ok()).collect();
        Some(Sums { len, block, head, digests })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_round_trip_and_catch_damage() {
        let bytes: Vec<u8> = (0..10_000u32).map(|i| (i * 7) as u8).collect();
        let sums = Sums::of(&bytes, 4096);
        assert_eq!((sums.blocks(), sums.range(2)), (3, 8192..10_000));
        let encoded = sums.encode();
        assert_eq!(encoded.len(), HEADER + HEAD_BYTES + 32 * 4);
        assert_eq!(sums.head, bytes[..HEAD_BYTES].to_vec());
        assert_eq!(Sums::decode(&encoded), Some(sums.clone()));
        assert!(sums.check(2, &bytes[8192..]));
        assert!(!sums.check(2, &bytes[8191..]));
        assert!(!sums.check(3, &[]));
        for at in [0, 13, 40, encoded.len() - 1] {
            let mut damaged = encoded.clone();
            damaged[at] ^= 1;
            assert_eq!(Sums::decode(&damaged), None, "byte {at}");
        }
        assert_eq!(Sums::decode(&encoded[..encoded.len() - 1]), None);
        let empty = Sums::of(&[], 4096);
        assert_eq!(Sums::decode(&empty.encode()).map(|s| s.blocks()), Some(0));
    }
}
