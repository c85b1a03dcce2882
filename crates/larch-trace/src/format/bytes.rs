//! Byte-level helpers shared by both formats: LEB128 varints (canonical only), a bounds-checked
//! slice decoder, and a streaming input that tracks its offset and never allocates more than the
//! data actually present.

use super::TraceError;
use std::io::{BufRead, BufReader, Read, Write};

/// Largest frame (Irmin row) or chunk (larch) payload accepted: 64 MiB.
pub const MAX_FRAME: u64 = 64 << 20;

/// Appends the unsigned LEB128 encoding of `value` (Repr's `int`, Irmin's `Var_int`).
pub(crate) use larch_varint::encode as put_varint;

/// Appends a varint length then the bytes.
pub(crate) fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// Why a slice decode failed, at which position of the slice.
#[derive(Debug)]
pub(crate) enum Fail {
    /// The data ends (or is invalid) where this was expected.
    Expected(&'static str),
    /// A row tag no operation has.
    UnknownTag(u64),
    /// A commit hash string that does not parse.
    Hash(String, larch_core::HashParseError),
}

/// What a reader expected where a varint is invalid (a truncated one is reported by the caller).
fn varint_expected(err: larch_varint::Error) -> &'static str {
    match err {
        larch_varint::Error::NonMinimal => "a canonical varint (no trailing zero group)",
        larch_varint::Error::Overflow | larch_varint::Error::Truncated => "a varint of at most 64 bits",
    }
}

/// A bounds-checked cursor over a decoded payload.
pub(crate) struct Slice<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Slice<'a> {
    /// A cursor at the start of `data`.
    pub(crate) fn new(data: &'a [u8]) -> Slice<'a> {
        Slice { data, pos: 0 }
    }

    /// Bytes consumed so far.
    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    /// Whether every byte was consumed.
    pub(crate) fn is_empty(&self) -> bool {
        self.pos >= self.data.len()
    }

    /// One byte.
    pub(crate) fn byte(&mut self, what: &'static str) -> Result<u8, Fail> {
        let byte = *self.data.get(self.pos).ok_or(Fail::Expected(what))?;
        self.pos += 1;
        Ok(byte)
    }

    /// Exactly `len` bytes.
    pub(crate) fn take(&mut self, len: u64, what: &'static str) -> Result<&'a [u8], Fail> {
        let len = usize::try_from(len).map_err(|_| Fail::Expected(what))?;
        let end = self.pos.checked_add(len).ok_or(Fail::Expected(what))?;
        let bytes = self.data.get(self.pos..end).ok_or(Fail::Expected(what))?;
        self.pos = end;
        Ok(bytes)
    }

    /// Exactly `N` bytes as an array.
    pub(crate) fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], Fail> {
        let bytes = self.take(N as u64, what)?;
        bytes.try_into().map_err(|_| Fail::Expected(what))
    }

    /// A canonical LEB128 varint.
    #[inline]
    pub(crate) fn varint(&mut self, what: &'static str) -> Result<u64, Fail> {
        let rest = self.data.get(self.pos..).unwrap_or_default();
        match larch_varint::decode(rest) {
            Ok((value, len)) => {
                self.pos += len;
                Ok(value)
            }
            Err(larch_varint::Error::Truncated) => Err(Fail::Expected(what)),
            Err(err) => Err(Fail::Expected(varint_expected(err))),
        }
    }

    /// A varint length then that many bytes.
    pub(crate) fn bytes(&mut self, what: &'static str) -> Result<&'a [u8], Fail> {
        let len = self.varint(what)?;
        self.take(len, what)
    }
}

/// The outcome of reading a varint from a stream.
pub(crate) enum StreamVarint {
    /// A complete varint.
    Value(u64),
    /// End of data before its first byte.
    Eof,
    /// End of data inside it.
    Partial,
}

/// A buffered input that counts the bytes consumed.
pub(crate) struct Input<R> {
    inner: BufReader<R>,
    offset: u64,
}

fn io_error(offset: u64, source: std::io::Error) -> TraceError {
    TraceError::Io { offset, source }
}

impl<R: Read> Input<R> {
    /// Wraps `inner`; its offset starts at `offset`.
    pub(crate) fn new(inner: R, offset: u64) -> Input<R> {
        Input { inner: BufReader::with_capacity(64 << 10, inner), offset }
    }

    /// Bytes consumed so far (the offset of the next byte).
    pub(crate) fn offset(&self) -> u64 {
        self.offset
    }

    /// The next byte, or `None` at end of data.
    pub(crate) fn byte(&mut self) -> Result<Option<u8>, TraceError> {
        loop {
            match self.inner.fill_buf() {
                Ok(buf) => {
                    let Some(&byte) = buf.first() else {
                        return Ok(None);
                    };
                    self.inner.consume(1);
                    self.offset += 1;
                    return Ok(Some(byte));
                }
                Err(err) if err.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(err) => return Err(io_error(self.offset, err)),
            }
        }
    }

    /// A canonical varint; `Err` only for I/O errors and invalid varints (`what` names it).
    pub(crate) fn varint(&mut self) -> Result<Result<StreamVarint, &'static str>, TraceError> {
        let mut decoder = larch_varint::Decoder::new();
        loop {
            let Some(byte) = self.byte()? else {
                return Ok(Ok(if decoder.is_empty() { StreamVarint::Eof } else { StreamVarint::Partial }));
            };
            match decoder.push(byte) {
                Ok(None) => {}
                Ok(Some(value)) => return Ok(Ok(StreamVarint::Value(value))),
                Err(err) => return Ok(Err(varint_expected(err))),
            }
        }
    }

    /// Reads up to `len` bytes into `buf` (cleared first), growing it only as data arrives; returns
    /// whether all `len` bytes were there.
    pub(crate) fn read_into(&mut self, len: u64, buf: &mut Vec<u8>) -> Result<bool, TraceError> {
        buf.clear();
        let start = self.offset;
        let got = (&mut self.inner).take(len).read_to_end(buf).map_err(|err| io_error(start, err))?;
        self.offset += got as u64;
        Ok(got as u64 == len)
    }

    /// Fills `out` completely; returns how many bytes were read (less than its length at EOF).
    pub(crate) fn read_up_to(&mut self, out: &mut [u8]) -> Result<usize, TraceError> {
        let mut filled = 0;
        while let Some(rest) = out.get_mut(filled..) {
            if rest.is_empty() {
                break;
            }
            match self.inner.read(rest) {
                Ok(0) => break,
                Ok(n) => {
                    filled += n;
                    self.offset += n as u64;
                }
                Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
                Err(err) => return Err(io_error(self.offset, err)),
            }
        }
        Ok(filled)
    }
}

/// A writer that counts the bytes written, mapping errors to [`TraceError::Io`].
pub(crate) struct Output<W: Write> {
    inner: W,
    offset: u64,
}

impl<W: Write> Output<W> {
    /// Wraps `inner`.
    pub(crate) fn new(inner: W) -> Output<W> {
        Output { inner, offset: 0 }
    }

    /// Bytes written so far.
    pub(crate) fn offset(&self) -> u64 {
        self.offset
    }

    /// Writes all of `bytes`.
    pub(crate) fn write(&mut self, bytes: &[u8]) -> Result<(), TraceError> {
        self.inner.write_all(bytes).map_err(|err| io_error(self.offset, err))?;
        self.offset += bytes.len() as u64;
        Ok(())
    }

    /// Flushes the inner writer.
    pub(crate) fn flush(&mut self) -> Result<(), TraceError> {
        self.inner.flush().map_err(|err| io_error(self.offset, err))
    }

    /// The inner writer.
    pub(crate) fn into_inner(self) -> W {
        self.inner
    }

    /// The inner writer, borrowed.
    pub(crate) fn get_ref(&self) -> &W {
        &self.inner
    }
}
