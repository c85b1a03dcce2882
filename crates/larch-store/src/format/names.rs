//! The names and headers of the pack's files (`docs/format.md` §3): chunk files `chunk.<seq>`
//! with their 32-byte header, GC segment files `seg.<generation>`, and the format-2 `pack` with its
//! 16-byte header.

use crate::error::{FileKind, Result, StoreError};
use crate::format::codec::PACK_HEADER_LEN;

/// Magic of a chunk file.
pub const CHUNK_MAGIC: &[u8; 8] = b"LARCHCHK";
/// Format version of a chunk file.
pub const CHUNK_VERSION: u32 = 3;
/// Bytes of a chunk file's header: its first record is at this file position.
pub const CHUNK_HEADER_LEN: u64 = 32;
/// The name of a format-2 pack, read as chunk 0.
pub const LEGACY_PACK: &str = "pack";
/// Prefix of chunk file names.
pub const CHUNK_PREFIX: &str = "chunk.";
/// The name of chunk `seq`: `chunk.` and at least 6 decimal digits.
pub fn chunk_name(seq: u32) -> String {
    format!("{CHUNK_PREFIX}{seq:06}")
}

/// The sequence number a chunk file name carries (`None` for any other name, or a number written
/// otherwise than [`chunk_name`] writes it).
pub fn parse_chunk_name(name: &str) -> Option<u32> {
    let digits = name.strip_prefix(CHUNK_PREFIX)?;
    if digits.len() < 6 || !digits.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    let seq = digits.parse().ok()?;
    (chunk_name(seq) == name).then_some(seq)
}

/// The 32-byte header of chunk `seq` whose first record has global offset `start`.
pub fn encode_chunk_header(seq: u32, start: u64) -> [u8; CHUNK_HEADER_LEN as usize] {
    let mut out = [0u8; CHUNK_HEADER_LEN as usize];
    out[..8].copy_from_slice(CHUNK_MAGIC);
    out[8..12].copy_from_slice(&CHUNK_VERSION.to_le_bytes());
    out[16..24].copy_from_slice(&u64::from(seq).to_le_bytes());
    out[24..32].copy_from_slice(&start.to_le_bytes());
    out
}

/// Decodes a chunk header read from the file `name`: returns `(seq, start)`.
pub fn decode_chunk_header(header: &[u8], name: &str) -> Result<(u32, u64)> {
    let corrupt =
        |at: u64, reason: &str| StoreError::corrupt(FileKind::Pack, at, format!("{name}: {reason}"));
    let field =
        |at: usize, len: usize| header.get(at..at + len).ok_or_else(|| corrupt(0, "truncated header"));
    if field(0, 8)? != CHUNK_MAGIC.as_slice() {
        return Err(corrupt(0, "bad chunk magic"));
    }
    let version = u32::from_le_bytes(field(8, 4)?.try_into().map_err(|_| corrupt(8, "truncated header"))?);
    if version != CHUNK_VERSION {
        return Err(StoreError::UnknownVersion {
            file: FileKind::Pack,
            found: version,
            supported: CHUNK_VERSION,
        });
    }
    if field(12, 4)? != [0u8; 4].as_slice() {
        return Err(corrupt(12, "reserved header bytes are not zero"));
    }
    let seq = u64::from_le_bytes(field(16, 8)?.try_into().map_err(|_| corrupt(16, "truncated header"))?);
    let seq = u32::try_from(seq).map_err(|_| corrupt(16, "sequence number out of range"))?;
    let start = u64::from_le_bytes(field(24, 8)?.try_into().map_err(|_| corrupt(24, "truncated header"))?);
    if start < PACK_HEADER_LEN {
        return Err(corrupt(24, &format!("start {start} below the first record offset {PACK_HEADER_LEN}")));
    }
    Ok((seq, start))
}

/// Prefix of GC segment file names.
pub const SEGMENT_PREFIX: &str = "seg.";

/// The name of the segment of GC generation `generation`: `seg.` and at least 6 decimal digits.
pub fn segment_name(generation: u64) -> String {
    format!("{SEGMENT_PREFIX}{generation:06}")
}

/// The generation a segment file name carries (`None` for any other name).
pub fn parse_segment_name(name: &str) -> Option<u64> {
    let digits = name.strip_prefix(SEGMENT_PREFIX)?;
    if digits.len() < 6 || !digits.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    let generation = digits.parse().ok()?;
    (segment_name(generation) == name).then_some(generation)
}

/// Checks the format-2 pack header: magic, then version, then the reserved bytes.
pub fn check_pack_header(header: &[u8; 16]) -> Result<()> {
    let kind = FileKind::Pack;
    if header.get(..8) != Some(crate::format::codec::PACK_MAGIC.as_slice()) {
        return Err(StoreError::corrupt(kind, 0, "bad magic"));
    }
    let version = u32::from_le_bytes([header[8], header[9], header[10], header[11]]);
    if version != crate::format::codec::FORMAT_VERSION {
        return Err(StoreError::UnknownVersion {
            file: kind,
            found: version,
            supported: crate::format::codec::FORMAT_VERSION,
        });
    }
    if header.get(12..16) != Some([0u8; 4].as_slice()) {
        return Err(StoreError::corrupt(kind, 12, "reserved header bytes are not zero"));
    }
    Ok(())
}
