//! The commit index file (docs/format.md §4): 44-byte entries (hash, offset, checksum).

use crate::error::{FileKind, Result, StoreError};
use crate::format::codec::FORMAT_VERSION;
use larch_core::Hash;

/// Magic of the index header.
pub const INDEX_MAGIC: &[u8; 8] = b"LARCHIDX";
/// Length of the index header.
pub const INDEX_HEADER_LEN: u64 = 16;
/// Length of one entry.
pub const ENTRY_LEN: usize = 44;

/// The index header bytes.
pub fn header() -> [u8; INDEX_HEADER_LEN as usize] {
    let mut out = [0u8; INDEX_HEADER_LEN as usize];
    out[..8].copy_from_slice(INDEX_MAGIC);
    out[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
    out
}

/// Checks the index header.
pub fn check_header(bytes: &[u8]) -> Result<()> {
    if bytes.get(..8) != Some(INDEX_MAGIC.as_slice()) {
        return Err(StoreError::corrupt(FileKind::Index, 0, "bad magic"));
    }
    let version = bytes.get(8..12).and_then(|v| v.try_into().ok()).map(u32::from_le_bytes);
    if version != Some(FORMAT_VERSION) {
        return Err(StoreError::UnknownVersion {
            file: FileKind::Index,
            found: version.unwrap_or_default(),
            supported: FORMAT_VERSION,
        });
    }
    if bytes.get(12..16) != Some([0u8; 4].as_slice()) {
        return Err(StoreError::corrupt(FileKind::Index, 12, "reserved header bytes are not zero"));
    }
    Ok(())
}

/// Appends the entry of a commit.
pub fn encode_entry(out: &mut Vec<u8>, hash: &Hash, offset: u64) {
    let start = out.len();
    out.extend_from_slice(hash.as_bytes());
    out.extend_from_slice(&offset.to_le_bytes());
    let crc = crc32fast::hash(out.get(start..).unwrap_or_default());
    out.extend_from_slice(&crc.to_le_bytes());
}

/// Decodes the entries in `bytes`, which start at file offset `base`.
pub fn decode_entries(bytes: &[u8], base: u64) -> Result<Vec<(Hash, u64)>> {
    if !bytes.len().is_multiple_of(ENTRY_LEN) {
        return Err(StoreError::corrupt(FileKind::Index, base, "length is not a whole number of entries"));
    }
    let mut out = Vec::with_capacity(bytes.len() / ENTRY_LEN);
    for (i, entry) in bytes.chunks_exact(ENTRY_LEN).enumerate() {
        let at = base + (i * ENTRY_LEN) as u64;
        let (data, crc) = entry.split_at(40);
        let (hash, offset) = data.split_at(32);
        let stored = u32::from_le_bytes(
            crc.try_into().map_err(|_| StoreError::corrupt(FileKind::Index, at, "short"))?,
        );
        if crc32fast::hash(data) != stored {
            return Err(StoreError::corrupt(FileKind::Index, at, "checksum mismatch"));
        }
        let hash =
            Hash::from_slice(hash).map_err(|_| StoreError::corrupt(FileKind::Index, at, "bad hash"))?;
        let offset = u64::from_le_bytes(
            offset.try_into().map_err(|_| StoreError::corrupt(FileKind::Index, at, "short"))?,
        );
        out.push((hash, offset));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Golden bytes of the index header and of an entry (docs/format.md §4; checksum computed
    /// independently with Python's `zlib.crc32`). A change here is a format change.
    #[test]
    fn golden_bytes_of_the_header_and_an_entry() {
        let hex = |bytes: &[u8]| bytes.iter().map(|byte| format!("{byte:02x}")).collect::<String>();
        assert_eq!(hex(&header()), "4c415243484944580200000000000000");
        let mut entry = Vec::new();
        encode_entry(&mut entry, &Hash([0xab; 32]), 0x1000);
        assert_eq!(
            hex(&entry),
            concat!(
                "abababababababababababababababababababababababababababababababab",
                "0010000000000000",
                "f5b9cd24"
            )
        );
        assert_eq!(decode_entries(&entry, 16).ok(), Some(vec![(Hash([0xab; 32]), 0x1000)]));
    }
}
