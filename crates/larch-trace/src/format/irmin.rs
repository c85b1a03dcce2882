//! Irmin's replayable trace, `IrmRepBT` version 0 (spec `irmin-formats.md` §2.1–2.3): a magic,
//! an int32 big-endian version, a unit header frame, then rows, each a varint-length frame holding
//! the Repr binary encoding of one row.
//!
//! Reading follows Irmin's reader: the trace ends at end of file, and a last frame whose length or
//! payload runs past end of file also ends it (reported by [`IrminReader::truncated_tail`]). Unlike
//! Irmin, the reader accepts only canonical encodings (minimal varints, booleans `00`/`ff`, hash
//! strings in their canonical base58 form), which Irmin's writer always produces; this is what makes
//! re-writing a read trace reproduce its bytes exactly.

use super::bytes::{Fail, Input, MAX_FRAME, Output, Slice, StreamVarint, put_bytes, put_varint};
use super::{OpSink, OpSource, TraceError, TraceFormat};
use crate::op::{ContextId, MAX_PATH_BYTES, MAX_PATH_STEPS, Op, Path, Scoped};
use larch_core::Hash;
use std::io::{Read, Write};

/// The magic of Irmin's replayable trace.
pub const IRMIN_MAGIC: [u8; 8] = *b"IrmRepBT";

/// The only version of the replayable trace.
pub const IRMIN_VERSION: i32 = 0;

/// Row tags, in the declaration order of Irmin's `row` variant.
mod tag {
    pub const CHECKOUT: u64 = 0;
    pub const ADD: u64 = 1;
    pub const REMOVE: u64 = 2;
    pub const COPY: u64 = 3;
    pub const FIND: u64 = 4;
    pub const MEM: u64 = 5;
    pub const MEM_TREE: u64 = 6;
    pub const COMMIT: u64 = 7;
}

/// Irmin's `scope` variant: `Forget` is case 0, `Keep` case 1.
fn put_scope<T: Copy>(out: &mut Vec<u8>, scoped: &Scoped<T>, put: impl FnOnce(&mut Vec<u8>, T)) {
    out.push(if scoped.is_forget() { 0 } else { 1 });
    put(out, scoped.value());
}

fn put_ctx(out: &mut Vec<u8>, id: ContextId) {
    out.extend_from_slice(&id.to_be_bytes());
}

fn put_hash(out: &mut Vec<u8>, hash: Hash) {
    put_bytes(out, hash.to_base58().as_bytes());
}

fn put_path(out: &mut Vec<u8>, path: &Path) {
    put_varint(out, path.len() as u64);
    for step in path {
        put_bytes(out, step);
    }
}

fn put_bool(out: &mut Vec<u8>, value: bool) {
    out.push(if value { 0xff } else { 0x00 });
}

/// Appends the Repr encoding of `op` as an Irmin `row` (without its frame length).
pub fn encode_row(op: &Op, out: &mut Vec<u8>) {
    match op {
        Op::Checkout { commit, out: produced } => {
            out.push(tag::CHECKOUT as u8);
            put_scope(out, commit, put_hash);
            put_scope(out, produced, put_ctx);
        }
        Op::Add { path, value, input, out: produced } => {
            out.push(tag::ADD as u8);
            put_path(out, path);
            put_bytes(out, value);
            put_scope(out, input, put_ctx);
            put_scope(out, produced, put_ctx);
        }
        Op::Remove { path, input, out: produced } => {
            out.push(tag::REMOVE as u8);
            put_path(out, path);
            put_scope(out, input, put_ctx);
            put_scope(out, produced, put_ctx);
        }
        Op::Copy { from, to, input, out: produced } => {
            out.push(tag::COPY as u8);
            put_path(out, from);
            put_path(out, to);
            put_scope(out, input, put_ctx);
            put_scope(out, produced, put_ctx);
        }
        Op::Find { path, found, input }
        | Op::Mem { path, found, input }
        | Op::MemTree { path, found, input } => {
            let row_tag = match op {
                Op::Find { .. } => tag::FIND,
                Op::Mem { .. } => tag::MEM,
                _ => tag::MEM_TREE,
            };
            out.push(row_tag as u8);
            put_path(out, path);
            put_bool(out, *found);
            put_scope(out, input, put_ctx);
        }
        Op::Commit { hash, date, message, parents, input } => {
            out.push(tag::COMMIT as u8);
            put_scope(out, hash, put_hash);
            out.extend_from_slice(&date.to_be_bytes());
            put_bytes(out, message.as_bytes());
            put_varint(out, parents.len() as u64);
            for parent in parents {
                put_scope(out, parent, put_hash);
            }
            put_scope(out, input, put_ctx);
        }
    }
}

fn get_scope<T>(
    s: &mut Slice<'_>,
    get: impl FnOnce(&mut Slice<'_>) -> Result<T, Fail>,
) -> Result<Scoped<T>, Fail> {
    match s.varint("scope tag")? {
        0 => Ok(Scoped::Forget(get(s)?)),
        1 => Ok(Scoped::Keep(get(s)?)),
        _ => Err(Fail::Expected("scope tag 0 (Forget) or 1 (Keep)")),
    }
}

fn get_ctx(s: &mut Slice<'_>) -> Result<ContextId, Fail> {
    Ok(u64::from_be_bytes(s.array("int64 context id")?))
}

fn get_hash(s: &mut Slice<'_>) -> Result<Hash, Fail> {
    let bytes = s.bytes("hash string")?;
    let text = String::from_utf8_lossy(bytes);
    let hash = Hash::from_base58(&text).map_err(|err| Fail::Hash(text.chars().take(80).collect(), err))?;
    if hash.to_base58().as_bytes() != bytes {
        return Err(Fail::Expected("a hash string in canonical base58check form"));
    }
    Ok(hash)
}

fn get_path(s: &mut Slice<'_>) -> Result<Path, Fail> {
    let count = s.varint("path step count")?;
    if count > MAX_PATH_STEPS as u64 {
        return Err(Fail::Expected("a path of at most 131,072 steps"));
    }
    let mut path = Path::new();
    for _ in 0..count {
        let step = s.bytes("path step")?;
        if path.byte_len_after_push(step.len()) > MAX_PATH_BYTES {
            return Err(Fail::Expected("a path of at most 1 MiB"));
        }
        path.push(step);
    }
    Ok(path)
}

fn get_bool(s: &mut Slice<'_>) -> Result<bool, Fail> {
    match s.byte("bool")? {
        0x00 => Ok(false),
        0xff => Ok(true),
        _ => Err(Fail::Expected("bool byte 00 or ff")),
    }
}

/// Decodes one Irmin `row` from `s` (which may hold more bytes after it).
pub(crate) fn decode_row(s: &mut Slice<'_>) -> Result<Op, Fail> {
    let row_tag = s.varint("row tag")?;
    Ok(match row_tag {
        tag::CHECKOUT => Op::Checkout { commit: get_scope(s, get_hash)?, out: get_scope(s, get_ctx)? },
        tag::ADD => Op::Add {
            path: get_path(s)?,
            value: s.bytes("value")?.to_vec(),
            input: get_scope(s, get_ctx)?,
            out: get_scope(s, get_ctx)?,
        },
        tag::REMOVE => {
            Op::Remove { path: get_path(s)?, input: get_scope(s, get_ctx)?, out: get_scope(s, get_ctx)? }
        }
        tag::COPY => Op::Copy {
            from: get_path(s)?,
            to: get_path(s)?,
            input: get_scope(s, get_ctx)?,
            out: get_scope(s, get_ctx)?,
        },
        tag::FIND => Op::Find { path: get_path(s)?, found: get_bool(s)?, input: get_scope(s, get_ctx)? },
        tag::MEM => Op::Mem { path: get_path(s)?, found: get_bool(s)?, input: get_scope(s, get_ctx)? },
        tag::MEM_TREE => {
            Op::MemTree { path: get_path(s)?, found: get_bool(s)?, input: get_scope(s, get_ctx)? }
        }
        tag::COMMIT => {
            let hash = get_scope(s, get_hash)?;
            let date = i64::from_be_bytes(s.array("int64 date")?);
            let message = std::str::from_utf8(s.bytes("commit message")?)
                .map_err(|_| Fail::Expected("a UTF-8 commit message"))?
                .to_owned();
            let count = s.varint("parent count")?;
            let mut parents = Vec::with_capacity(count.min(16) as usize);
            for _ in 0..count {
                parents.push(get_scope(s, get_hash)?);
            }
            Op::Commit { hash, date, message, parents, input: get_scope(s, get_ctx)? }
        }
        other => return Err(Fail::UnknownTag(other)),
    })
}

/// Maps a slice-decoding failure of row `row` (framed at `offset`) to a [`TraceError`].
pub(crate) fn row_error(fail: Fail, offset: u64, row: u64) -> TraceError {
    match fail {
        Fail::Expected(expected) => TraceError::Malformed { offset, row, expected },
        Fail::UnknownTag(tag) => TraceError::UnknownRowTag { offset, row, tag },
        Fail::Hash(text, source) => TraceError::InvalidHash { offset, row, text, source },
    }
}

/// Streams the operations of an `IrmRepBT` trace.
pub struct IrminReader<R> {
    input: Input<R>,
    buf: Vec<u8>,
    rows: u64,
    truncated_tail: Option<u64>,
    done: bool,
}

fn header_error(offset: u64, expected: &'static str) -> TraceError {
    TraceError::BadHeader { format: TraceFormat::Irmin, offset, expected }
}

impl<R: Read> IrminReader<R> {
    /// Reads and checks the magic, version and header of the trace in `inner`.
    pub fn new(inner: R) -> Result<IrminReader<R>, TraceError> {
        let mut input = Input::new(inner, 0);
        let mut magic = [0u8; 8];
        let got = input.read_up_to(&mut magic)?;
        let found = magic.get(..got).unwrap_or(&[]);
        if found != IRMIN_MAGIC {
            if got < IRMIN_MAGIC.len() && IRMIN_MAGIC.starts_with(found) {
                return Err(header_error(got as u64, "the 8-byte magic IrmRepBT"));
            }
            return Err(TraceError::BadMagic { found: found.to_vec(), expected: "IrmRepBT" });
        }
        let mut version = [0u8; 4];
        if input.read_up_to(&mut version)? < version.len() {
            return Err(header_error(input.offset(), "an int32 version"));
        }
        let version = i32::from_be_bytes(version);
        if version != IRMIN_VERSION {
            return Err(TraceError::UnsupportedVersion {
                format: TraceFormat::Irmin,
                version: i64::from(version),
                offset: 8,
            });
        }
        match input.varint()? {
            Ok(StreamVarint::Value(0)) => {}
            Ok(StreamVarint::Value(_)) => {
                return Err(header_error(12, "an empty header frame (unit: length 0)"));
            }
            Ok(StreamVarint::Eof | StreamVarint::Partial) => {
                return Err(header_error(input.offset(), "the header frame length"));
            }
            Err(reason) => return Err(header_error(12, reason)),
        }
        Ok(IrminReader { input, buf: Vec::new(), rows: 0, truncated_tail: None, done: false })
    }

    /// Where a last, incomplete frame starts, if the trace ended inside one (Irmin's reader silently
    /// stops there; so does this one, after all complete rows).
    pub fn truncated_tail(&self) -> Option<u64> {
        self.truncated_tail
    }

    /// Rows read so far.
    pub fn rows_read(&self) -> u64 {
        self.rows
    }

    /// Bytes consumed so far.
    pub fn offset(&self) -> u64 {
        self.input.offset()
    }

    fn read_row(&mut self) -> Result<Option<Op>, TraceError> {
        let offset = self.input.offset();
        let row = self.rows;
        let len = match self.input.varint()? {
            Ok(StreamVarint::Value(len)) => len,
            Ok(StreamVarint::Eof) => return Ok(None),
            Ok(StreamVarint::Partial) => {
                self.truncated_tail = Some(offset);
                return Ok(None);
            }
            Err(expected) => return Err(TraceError::Malformed { offset, row, expected }),
        };
        if len > MAX_FRAME {
            return Err(TraceError::FrameTooLarge { offset, len, max: MAX_FRAME });
        }
        if !self.input.read_into(len, &mut self.buf)? {
            self.truncated_tail = Some(offset);
            return Ok(None);
        }
        let mut slice = Slice::new(&self.buf);
        let op = decode_row(&mut slice).map_err(|fail| row_error(fail, offset, row))?;
        if !slice.is_empty() {
            return Err(TraceError::TrailingBytes {
                offset,
                row,
                frame_len: len,
                consumed: slice.pos() as u64,
            });
        }
        self.rows += 1;
        Ok(Some(op))
    }
}

impl<R: Read> Iterator for IrminReader<R> {
    type Item = Result<Op, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let result = self.read_row();
        if !matches!(result, Ok(Some(_))) {
            self.done = true;
        }
        result.transpose()
    }
}

impl<R: Read> OpSource for IrminReader<R> {
    fn format(&self) -> TraceFormat {
        TraceFormat::Irmin
    }

    fn metadata(&self) -> &[(String, String)] {
        &[]
    }

    fn truncated_tail(&self) -> Option<u64> {
        self.truncated_tail
    }

    fn ops_read(&self) -> u64 {
        self.rows
    }

    fn offset(&self) -> u64 {
        self.input.offset()
    }
}

/// Writes operations as an `IrmRepBT` version 0 trace.
pub struct IrminWriter<W: Write> {
    output: Output<W>,
    row: Vec<u8>,
    frame: Vec<u8>,
    rows: u64,
    finished: bool,
}

impl<W: Write> IrminWriter<W> {
    /// Writes the magic, version and (empty) header to `inner`.
    pub fn new(inner: W) -> Result<IrminWriter<W>, TraceError> {
        let mut output = Output::new(inner);
        let mut head = IRMIN_MAGIC.to_vec();
        head.extend_from_slice(&IRMIN_VERSION.to_be_bytes());
        head.push(0);
        output.write(&head)?;
        Ok(IrminWriter { output, row: Vec::new(), frame: Vec::new(), rows: 0, finished: false })
    }

    /// Bytes written so far.
    pub fn bytes_written(&self) -> u64 {
        self.output.offset()
    }

    /// Flushes and returns the inner writer.
    pub fn into_inner(mut self) -> Result<W, TraceError> {
        self.output.flush()?;
        Ok(self.output.into_inner())
    }

    /// The inner writer.
    pub fn get_ref(&self) -> &W {
        self.output.get_ref()
    }
}

impl<W: Write> OpSink for IrminWriter<W> {
    fn write_op(&mut self, op: &Op) -> Result<(), TraceError> {
        if self.finished {
            return Err(TraceError::Finished);
        }
        if let Some(reason) = op.path_too_large() {
            return Err(TraceError::Unwritable { row: self.rows, reason });
        }
        self.row.clear();
        encode_row(op, &mut self.row);
        if self.row.len() as u64 > MAX_FRAME {
            return Err(TraceError::Unwritable {
                row: self.rows,
                reason: "its row encodes to more than 64 MiB",
            });
        }
        self.frame.clear();
        put_varint(&mut self.frame, self.row.len() as u64);
        self.output.write(&self.frame)?;
        self.output.write(&self.row)?;
        self.rows += 1;
        Ok(())
    }

    fn finish(&mut self) -> Result<(), TraceError> {
        self.finished = true;
        self.output.flush()
    }

    fn ops_written(&self) -> u64 {
        self.rows
    }

    fn bytes_written(&self) -> u64 {
        self.output.offset()
    }
}
