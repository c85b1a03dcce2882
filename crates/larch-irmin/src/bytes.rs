//! A bounded cursor over bytes read from a file: every read is checked against the buffer's end
//! and reports the file offset where it failed.

use crate::error::{IrminError, Result};
use larch_core::Hash;
use std::path::Path;

/// The most bytes of a Repr `int`: 9 groups of 7 bits hold OCaml's 63-bit integers.
const IRMIN_VARINT_MAX_LEN: usize = 9;

/// Reads Repr-encoded values from `buf`, which holds the bytes of `file` starting at `base`.
pub(crate) struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
    base: u64,
    file: &'a Path,
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(buf: &'a [u8], base: u64, file: &'a Path) -> Cursor<'a> {
        Cursor { buf, pos: 0, base, file }
    }

    /// The file offset of the next byte.
    pub(crate) fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    /// The file these bytes come from.
    pub(crate) fn path(&self) -> &'a Path {
        self.file
    }

    pub(crate) fn position(&self) -> usize {
        self.pos
    }

    pub(crate) fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }

    pub(crate) fn fail(&self, what: impl Into<String>) -> IrminError {
        IrminError::corrupt(self.file, self.offset(), what)
    }

    pub(crate) fn raw(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        let end = self.pos.checked_add(n).filter(|end| *end <= self.buf.len());
        match end.and_then(|end| self.buf.get(self.pos..end).map(|s| (s, end))) {
            Some((slice, end)) => {
                self.pos = end;
                Ok(slice)
            }
            None => Err(self.fail(format!("truncated {what}: {n} bytes needed, {} left", self.remaining()))),
        }
    }

    pub(crate) fn byte(&mut self, what: &str) -> Result<u8> {
        Ok(self.raw(1, what)?.first().copied().unwrap_or_default())
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N]> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.raw(N, what)?);
        Ok(out)
    }

    /// A Repr `int` (LEB128, at most 9 bytes for a 63-bit value). Longer forms than needed are
    /// read, as Irmin's own reader does (`docs/irmin-import.md` requires only the 9-byte bound).
    pub(crate) fn varint(&mut self, what: &str) -> Result<u64> {
        let rest = self.buf.get(self.pos..).unwrap_or_default();
        match larch_varint::decode_relaxed(rest, IRMIN_VARINT_MAX_LEN) {
            Ok((value, len)) => {
                self.pos += len;
                Ok(value)
            }
            Err(larch_varint::Error::Overflow) => Err(IrminError::corrupt(
                self.file,
                self.offset(),
                format!("{what}: varint longer than 9 bytes"),
            )),
            // Truncated (the relaxed decoder never reports a longer form): the missing byte is
            // the first one after the buffer.
            Err(_) => {
                self.pos = self.buf.len();
                Err(self.fail(format!("truncated {what}: 1 bytes needed, 0 left")))
            }
        }
    }

    /// A varint that must fit `usize` and be at most `max`.
    pub(crate) fn varint_at_most(&mut self, max: u64, what: &str) -> Result<usize> {
        let start = self.offset();
        let value = self.varint(what)?;
        if value > max {
            return Err(IrminError::corrupt(self.file, start, format!("{what} {value} exceeds {max}")));
        }
        usize::try_from(value).map_err(|_| IrminError::corrupt(self.file, start, format!("{what} too large")))
    }

    /// A Repr `int63`/`int64`: 8 bytes big-endian, as unsigned (negative values are refused).
    pub(crate) fn int63(&mut self, what: &str) -> Result<u64> {
        let start = self.offset();
        let value = i64::from_be_bytes(self.array::<8>(what)?);
        u64::try_from(value).map_err(|_| IrminError::corrupt(self.file, start, format!("{what} is negative")))
    }

    /// A signed 8-byte big-endian integer.
    pub(crate) fn int64(&mut self, what: &str) -> Result<i64> {
        Ok(i64::from_be_bytes(self.array::<8>(what)?))
    }

    pub(crate) fn int32(&mut self, what: &str) -> Result<u32> {
        Ok(u32::from_be_bytes(self.array::<4>(what)?))
    }

    pub(crate) fn hash(&mut self, what: &str) -> Result<Hash> {
        Ok(Hash(self.array::<32>(what)?))
    }

    /// A Repr `string`: varint length (at most what is left) and bytes.
    pub(crate) fn string(&mut self, what: &str) -> Result<&'a [u8]> {
        let len = self.varint_at_most(self.remaining() as u64, what)?;
        self.raw(len, what)
    }
}

/// Adler-32 (zlib's, initial value 1), the checksum of Irmin's control files.
pub(crate) fn adler32(bytes: &[u8]) -> u32 {
    const MOD: u32 = 65521;
    let (mut a, mut b) = (1u32, 0u32);
    // 5552 is zlib's NMAX: the largest block whose sums cannot overflow 32 bits.
    for block in bytes.chunks(5552) {
        for byte in block {
            a += u32::from(*byte);
            b += a;
        }
        a %= MOD;
        b %= MOD;
    }
    (b << 16) | a
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adler32_of_known_strings() {
        // zlib.adler32 values.
        assert_eq!(adler32(b""), 1);
        assert_eq!(adler32(b"Wikipedia"), 0x11E6_0398);
        let long = vec![0xffu8; 100_000];
        let (mut a, mut b) = (1u64, 0u64);
        for byte in &long {
            a = (a + u64::from(*byte)) % 65521;
            b = (b + a) % 65521;
        }
        assert_eq!(u64::from(adler32(&long)), (b << 16) | a);
    }

    #[test]
    fn varint_bounds() {
        let file = Path::new("f");
        let mut cursor = Cursor::new(&[0xe8, 0x07, 0x80], 10, file);
        assert_eq!(cursor.varint("v").unwrap_or(0), 1000);
        assert!(matches!(cursor.varint("v"), Err(IrminError::Corrupt { offset: 13, .. })));
        let long = [0xffu8; 12];
        let mut cursor = Cursor::new(&long, 0, file);
        assert!(matches!(cursor.varint("v"), Err(IrminError::Corrupt { offset: 0, .. })));
        // Nine bytes still going, the buffer ending there: too long, not truncated.
        let mut cursor = Cursor::new(&long[..9], 0, file);
        let err = cursor.varint("v").err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains("longer than 9 bytes"), "{err}");
        let mut cursor = Cursor::new(&long[..5], 7, file);
        let err = cursor.varint("v").err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains("truncated v: 1 bytes needed, 0 left"), "{err}");
        // The largest 63-bit value, and a longer form than needed (Irmin reads both).
        let mut max = [0xffu8; 9];
        max[8] = 0x7f;
        assert_eq!(Cursor::new(&max, 0, file).varint("v").ok(), Some(u64::MAX >> 1));
        let mut cursor = Cursor::new(&[0x85, 0x80, 0x00, 0x07], 0, file);
        assert_eq!(cursor.varint("v").ok(), Some(5));
        assert_eq!(cursor.varint("v").ok(), Some(7));
    }
}
