//! Record tags and limits of the record stream (`docs/snapshot-format.md` §4), shared by the
//! exporter and the importer.

/// A contents value of more than [`INLINE_MAX`] bytes (numbered).
pub const TAG_CONTENTS: u8 = 1;
/// A flat directory (numbered).
pub const TAG_FLAT: u8 = 2;
/// An inode `Values` leaf (numbered).
pub const TAG_VALUES: u8 = 3;
/// An inode `Tree` (numbered).
pub const TAG_TREE: u8 = 4;
/// The commit (once, last before the end).
pub const TAG_COMMIT: u8 = 5;
/// The end of the stream.
pub const TAG_END: u8 = 6;

/// Entry target: a sub-directory, by reference.
pub const ENTRY_NODE: u8 = 0;
/// Entry target: contents inline.
pub const ENTRY_INLINE: u8 = 1;
/// Entry target: a contents record, by reference.
pub const ENTRY_CONTENTS: u8 = 2;
/// Entry tag flag: the name is stored hex-packed (see [`is_hex_name`]).
pub const ENTRY_HEX: u8 = 4;

/// Whether a name is written hex-packed: an even number ≥ 2 of lowercase hex digits (Tezos
/// contract ids, key and script hashes), written as the bytes they spell, half the size.
pub fn is_hex_name(name: &[u8]) -> bool {
    name.len() >= 2
        && name.len().is_multiple_of(2)
        && name.iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Appends the bytes the hex name `name` spells (two digits per byte).
pub fn pack_hex(name: &[u8], out: &mut Vec<u8>) {
    let digit = |b: u8| if b <= b'9' { b.wrapping_sub(b'0') } else { b.wrapping_sub(b'a' - 10) };
    out.extend(name.chunks_exact(2).map(|pair| (digit(pair[0]) << 4) | digit(pair[1])));
}

/// Appends the lowercase hex digits of `bytes`.
pub fn unpack_hex(bytes: &[u8], out: &mut Vec<u8>) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for byte in bytes {
        out.push(DIGITS[usize::from(byte >> 4)]);
        out.push(DIGITS[usize::from(byte & 15)]);
    }
}

/// The exporter writes a value of at most this many bytes inline (a reader accepts both forms).
pub const INLINE_MAX: usize = 32;
/// The longest name accepted (Tezos names are at most a few dozen bytes).
pub const NAME_MAX: u64 = 4096;
/// The longest inline value accepted (the exporter writes at most [`INLINE_MAX`] inline): with
/// [`NAME_MAX`], bounds one directory record to 256 × 8 KiB in memory.
pub const INLINE_ACCEPTED_MAX: u64 = 4096;
/// The longest contents record accepted.
pub const CONTENTS_MAX: u64 = 64 << 20;
/// The longest commit author or message accepted.
pub const TEXT_MAX: u64 = 1 << 20;
/// The most parents a commit may have.
pub const PARENTS_MAX: u64 = 1024;
/// The most objects an importer keeps on its stack (unconsumed children): bounds memory against
/// a pathologically deep tree.
pub const STACK_MAX: usize = 1 << 20;

/// A short name of a record tag, for errors.
pub fn tag_name(tag: u8) -> &'static str {
    match tag {
        TAG_CONTENTS => "contents",
        TAG_FLAT => "directory",
        TAG_VALUES => "inode-values",
        TAG_TREE => "inode-tree",
        TAG_COMMIT => "commit",
        TAG_END => "end",
        _ => "record",
    }
}

/// Appends `value` as unsigned LEB128.
pub use larch_varint::encode as write_leb128;
