//! larch-varint: the one unsigned LEB128 of the workspace.
//!
//! LEB128 writes an unsigned integer 7 bits a byte, low group first; a byte's high bit says that
//! another byte follows. A `u64` takes 1 to [`MAX_LEN`] bytes. The Tezos hash pre-images
//! (`docs/tezos-context-hash.md`, Irmin's repr `Varint`), larch's pack (`docs/format.md`), its
//! traces (`docs/trace-format.md`) and snapshots (`docs/snapshot-format.md`) all use it, and the
//! last three require the shortest form.
//!
//! - [`encode`] appends to a `Vec`, [`write()`] fills a stack buffer, [`encoded_len`] counts.
//! - [`decode`] reads one integer at the start of a slice, in its shortest form only, and returns
//!   it with the bytes it took; the [`Decoder`] does the same a byte at a time, for streams.
//! - [`decode_relaxed`] also accepts longer forms (trailing zero groups), for formats that do not
//!   require the shortest one (Irmin's pack files, whose reader accepts them), with a length limit.
//!
//! Every decoder returns an [`Error`] on truncation, on overflow (more than 64 bits, or more bytes
//! than allowed: no bit is ever dropped) and, when strict, on a longer form than needed.
//!
//! ```
//! let mut out = Vec::new();
//! larch_varint::encode(&mut out, 300);
//! assert_eq!(out, [0xac, 0x02]);
//! assert_eq!(larch_varint::decode(&[0xac, 0x02, 0xff]), Ok((300, 2)));
//! assert_eq!(larch_varint::decode(&[0x80, 0x00]), Err(larch_varint::Error::NonMinimal));
//! assert_eq!(larch_varint::decode_relaxed(&[0x80, 0x00], 9), Ok((0, 2)));
//! ```
#![no_std]

extern crate alloc;

use alloc::vec::Vec;
use core::fmt;

/// The most bytes a `u64` takes: 9 groups of 7 bits, then a tenth byte holding bit 63.
pub const MAX_LEN: usize = 10;

/// Why bytes are not an unsigned LEB128 integer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Error {
    /// The bytes end inside the integer: its last byte read still has the high bit set.
    Truncated,
    /// The integer needs more than 64 bits, or more bytes than the decoder allows.
    Overflow,
    /// A longer form than needed: the integer ends with a zero group after its first byte.
    NonMinimal,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Error::Truncated => "LEB128 integer truncated",
            Error::Overflow => "LEB128 integer overflows 64 bits",
            Error::NonMinimal => "LEB128 integer not in its shortest form",
        })
    }
}

impl core::error::Error for Error {}

/// Bytes of the encoding of `value` (1 to [`MAX_LEN`]).
#[inline]
pub const fn encoded_len(value: u64) -> usize {
    let bits = (u64::BITS - (value | 1).leading_zeros()) as usize;
    bits.div_ceil(7)
}

/// Appends the encoding of `value` to `out`.
#[inline]
pub fn encode(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Writes the encoding of `value` at the start of `buf`; returns its length (the bytes after it
/// are left as they were).
#[inline]
pub fn write(buf: &mut [u8; MAX_LEN], mut value: u64) -> usize {
    let mut len = 0;
    for slot in buf.iter_mut() {
        len += 1;
        if value < 0x80 {
            *slot = value as u8;
            break;
        }
        *slot = (value as u8) | 0x80;
        value >>= 7;
    }
    len
}

/// Folds byte `index` (from 0) of an integer into `value`; `Ok(true)` when another byte follows.
#[inline(always)]
fn step(value: &mut u64, index: usize, byte: u8) -> Result<bool, Error> {
    // The tenth byte holds bit 63 only and must be the last.
    if index >= MAX_LEN - 1 && (index >= MAX_LEN || byte > 1) {
        return Err(Error::Overflow);
    }
    *value |= u64::from(byte & 0x7f) << (7 * index);
    Ok(byte & 0x80 != 0)
}

/// Decodes the integer at the start of `bytes`, in its shortest form: returns it and the bytes it
/// took (what follows is not looked at).
#[inline]
pub fn decode(bytes: &[u8]) -> Result<(u64, usize), Error> {
    // One byte (most lengths and tags) inline at the caller; longer ones out of line, which keeps
    // the callers' hot loops small.
    match bytes.first() {
        Some(&byte) if byte < 0x80 => Ok((u64::from(byte), 1)),
        _ => decode_long(bytes),
    }
}

/// [`decode`] past its one-byte case.
#[inline(never)]
fn decode_long(bytes: &[u8]) -> Result<(u64, usize), Error> {
    let mut value = 0u64;
    for (index, &byte) in bytes.iter().take(MAX_LEN).enumerate() {
        if !step(&mut value, index, byte)? {
            if byte == 0 && index > 0 {
                return Err(Error::NonMinimal);
            }
            return Ok((value, index + 1));
        }
    }
    Err(if bytes.len() >= MAX_LEN { Error::Overflow } else { Error::Truncated })
}

/// Decodes the integer at the start of `bytes` in any form of at most `max_len` bytes (capped at
/// [`MAX_LEN`]), trailing zero groups included: returns it and the bytes it took. An integer
/// still unfinished after `max_len` bytes is [`Error::Overflow`] (so `max_len = 9` reads at most
/// 63 bits, as Irmin's repr `int`).
#[inline]
pub fn decode_relaxed(bytes: &[u8], max_len: usize) -> Result<(u64, usize), Error> {
    let max_len = max_len.min(MAX_LEN);
    let mut value = 0u64;
    for (index, &byte) in bytes.iter().take(max_len).enumerate() {
        if !step(&mut value, index, byte)? {
            return Ok((value, index + 1));
        }
    }
    Err(if bytes.len() >= max_len { Error::Overflow } else { Error::Truncated })
}

/// A strict decoder fed a byte at a time, for streams: the same rules as [`decode`].
///
/// ```
/// let mut decoder = larch_varint::Decoder::new();
/// assert_eq!(decoder.push(0xac), Ok(None));
/// assert_eq!(decoder.len(), 1);
/// assert_eq!(decoder.push(0x02), Ok(Some(300)));
/// assert!(decoder.is_empty()); // ready for the next integer
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Decoder {
    value: u64,
    len: usize,
}

impl Decoder {
    /// A decoder before the first byte of an integer.
    pub const fn new() -> Decoder {
        Decoder { value: 0, len: 0 }
    }

    /// Bytes of the current integer taken so far (0 before its first byte).
    pub const fn len(&self) -> usize {
        self.len
    }

    /// Whether no byte of the current integer was taken yet.
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Takes the next byte: `Ok(Some(value))` when it ends the integer (the decoder then starts
    /// over for the next one), `Ok(None)` when another byte must follow. After an error, start
    /// over with [`Decoder::new`].
    #[inline]
    pub fn push(&mut self, byte: u8) -> Result<Option<u64>, Error> {
        let index = self.len;
        if step(&mut self.value, index, byte)? {
            self.len += 1;
            return Ok(None);
        }
        let value = self.value;
        *self = Decoder::new();
        if byte == 0 && index > 0 {
            return Err(Error::NonMinimal);
        }
        Ok(Some(value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    /// Examples of docs/tezos-context-hash.md and the DWARF specification.
    const EXAMPLES: [(u64, &[u8]); 9] = [
        (0, &[0x00]),
        (1, &[0x01]),
        (127, &[0x7f]),
        (128, &[0x80, 0x01]),
        (255, &[0xff, 0x01]),
        (300, &[0xac, 0x02]),
        (624_485, &[0xe5, 0x8e, 0x26]),
        (500_000, &[0xa0, 0xc2, 0x1e]),
        (u64::MAX, &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]),
    ];

    #[test]
    fn examples_encode_and_decode() {
        for (value, bytes) in EXAMPLES {
            let mut out = vec![0xee];
            encode(&mut out, value);
            assert_eq!(&out[1..], bytes, "encode {value}");
            let mut buf = [0u8; MAX_LEN];
            let len = write(&mut buf, value);
            assert_eq!(&buf[..len], bytes, "write {value}");
            assert_eq!(encoded_len(value), bytes.len(), "encoded_len {value}");
            assert_eq!(decode(bytes), Ok((value, bytes.len())), "decode {value}");
            assert_eq!(decode_relaxed(bytes, MAX_LEN), Ok((value, bytes.len())), "relaxed {value}");
            let mut decoder = Decoder::new();
            let (last, head) = bytes.split_last().unwrap();
            for byte in head {
                assert_eq!(decoder.push(*byte), Ok(None));
            }
            assert_eq!(decoder.len(), head.len());
            assert_eq!(decoder.push(*last), Ok(Some(value)), "decoder {value}");
            assert!(decoder.is_empty());
        }
    }

    #[test]
    fn what_follows_is_not_read() {
        assert_eq!(decode(&[0x05, 0x80]), Ok((5, 1)));
        assert_eq!(decode(&[0x80, 0x01, 0x80]), Ok((128, 2)));
    }

    #[test]
    fn truncation_is_an_error() {
        assert_eq!(decode(&[]), Err(Error::Truncated));
        assert_eq!(decode(&[0x80]), Err(Error::Truncated));
        assert_eq!(decode(&[0xff; 9]), Err(Error::Truncated));
        assert_eq!(decode_relaxed(&[], 9), Err(Error::Truncated));
        assert_eq!(decode_relaxed(&[0xff; 8], 9), Err(Error::Truncated));
    }

    #[test]
    fn overflow_is_an_error_never_dropped_bits() {
        // A tenth byte with more than bit 63, or a continuation.
        let mut bytes = [0xff; 10];
        for last in [0x02, 0x7f, 0x80, 0x81, 0xff] {
            bytes[9] = last;
            assert_eq!(decode(&bytes), Err(Error::Overflow), "{last:#x}");
            assert_eq!(decode_relaxed(&bytes, MAX_LEN), Err(Error::Overflow), "{last:#x}");
            let mut decoder = Decoder::new();
            let pushed: Result<Vec<_>, _> = bytes.iter().map(|b| decoder.push(*b)).collect();
            assert_eq!(pushed, Err(Error::Overflow));
        }
        assert_eq!(decode(&[0xff; 11]), Err(Error::Overflow));
        // A relaxed decoder's own limit: 9 bytes still going is too long.
        assert_eq!(decode_relaxed(&[0xff; 9], 9), Err(Error::Overflow));
        assert_eq!(decode_relaxed(&[0x80, 0x80, 0x00], 2), Err(Error::Overflow));
        assert_eq!(decode_relaxed(&[0x80, 0x00], 2), Ok((0, 2)));
        // 63 bits in 9 bytes is the largest relaxed value of Irmin's limit.
        let mut max63 = [0xff; 9];
        max63[8] = 0x7f;
        assert_eq!(decode_relaxed(&max63, 9), Ok((u64::MAX >> 1, 9)));
    }

    #[test]
    fn longer_forms_are_refused_when_strict_only() {
        for bytes in [&[0x80, 0x00][..], &[0xff, 0x00], &[0x81, 0x80, 0x00], &[0x80; 9]] {
            let mut long = bytes.to_vec();
            if long.len() == 9 {
                long.push(0x00);
            }
            assert_eq!(decode(&long), Err(Error::NonMinimal), "{long:x?}");
            let mut decoder = Decoder::new();
            let pushed: Result<Vec<_>, _> = long.iter().map(|b| decoder.push(*b)).collect();
            assert_eq!(pushed, Err(Error::NonMinimal));
            assert!(decode_relaxed(&long, MAX_LEN).is_ok(), "{long:x?}");
        }
        assert_eq!(decode_relaxed(&[0x81, 0x80, 0x00], 9), Ok((1, 3)));
    }

    #[test]
    fn errors_display() {
        assert_eq!(alloc::format!("{}", Error::Overflow), "LEB128 integer overflows 64 bits");
    }
}
