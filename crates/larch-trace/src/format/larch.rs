//! larch's own trace format, version 1 (`docs/trace-format.md`): a checksummed header with free-form
//! metadata, chunks of compact operation records each with a crc32, and an end-of-trace record with
//! the operation, commit and chunk counts, so that truncation and corruption are both detected.

use super::bytes::{Input, MAX_FRAME, Output, Slice, StreamVarint, put_bytes, put_varint};
use super::irmin::row_error;
use super::larch_record::{CodecState, decode_op, encode_op, path_budget};
use super::{OpSink, OpSource, TraceError, TraceFormat};
use crate::op::Op;
use std::io::{Read, Write};

/// The magic of larch traces.
pub const LARCH_MAGIC: [u8; 8] = *b"LARCHTRC";

/// The version this build reads and writes.
pub const LARCH_VERSION: u16 = 1;

/// Largest header accepted: 1 MiB.
pub const MAX_HEADER: u64 = 1 << 20;

/// Block kind of a chunk of operations.
const CHUNK: u8 = b'C';
/// Block kind of the end-of-trace record.
const END: u8 = b'E';

/// A chunk is closed after a commit once it holds this many bytes.
const CHUNK_TARGET: usize = 64 << 10;
/// A chunk is closed, whatever the last operation, once it holds this many bytes.
const CHUNK_SOFT_MAX: usize = 1 << 20;

/// Free-form header metadata: (key, value) pairs in file order.
pub type Metadata = Vec<(String, String)>;

fn header_error(offset: u64, expected: &'static str) -> TraceError {
    TraceError::BadHeader { format: TraceFormat::Larch, offset, expected }
}

fn truncated(offset: u64, expected: &'static str) -> TraceError {
    TraceError::Truncated { offset, expected }
}

/// Encodes the metadata block of the header.
fn encode_metadata(metadata: &[(String, String)]) -> Vec<u8> {
    let mut out = Vec::new();
    put_varint(&mut out, metadata.len() as u64);
    for (key, value) in metadata {
        put_bytes(&mut out, key.as_bytes());
        put_bytes(&mut out, value.as_bytes());
    }
    out
}

fn decode_metadata(bytes: &[u8]) -> Result<Metadata, &'static str> {
    let mut s = Slice::new(bytes);
    let fail = |_| "metadata: a count then UTF-8 key/value strings";
    let count = s.varint("metadata count").map_err(fail)?;
    let mut metadata = Vec::new();
    for _ in 0..count {
        let key =
            String::from_utf8(s.bytes("metadata key").map_err(fail)?.to_vec()).map_err(|_| "UTF-8 keys")?;
        let value = String::from_utf8(s.bytes("metadata value").map_err(fail)?.to_vec())
            .map_err(|_| "UTF-8 values")?;
        metadata.push((key, value));
    }
    if !s.is_empty() {
        return Err("metadata filling the header exactly");
    }
    Ok(metadata)
}

/// Streams the operations of a larch trace, checking every checksum and the final counts.
pub struct LarchReader<R> {
    input: Input<R>,
    metadata: Metadata,
    chunk: Vec<u8>,
    chunk_offset: u64,
    chunk_pos: usize,
    chunk_left: u64,
    state: CodecState,
    ops: u64,
    commits: u64,
    chunks: u64,
    done: bool,
}

impl<R: Read> LarchReader<R> {
    /// Reads and checks the magic, version and header of the trace in `inner`.
    pub fn new(inner: R) -> Result<LarchReader<R>, TraceError> {
        let mut input = Input::new(inner, 0);
        let mut crc = crc32fast::Hasher::new();
        let mut magic = [0u8; 8];
        let got = input.read_up_to(&mut magic)?;
        let found = magic.get(..got).unwrap_or(&[]);
        if found != LARCH_MAGIC {
            if got < LARCH_MAGIC.len() && LARCH_MAGIC.starts_with(found) {
                return Err(header_error(got as u64, "the 8-byte magic LARCHTRC"));
            }
            return Err(TraceError::BadMagic { found: found.to_vec(), expected: "LARCHTRC" });
        }
        crc.update(&magic);
        let mut version = [0u8; 2];
        if input.read_up_to(&mut version)? < version.len() {
            return Err(header_error(input.offset(), "a u16 version"));
        }
        crc.update(&version);
        let version = u16::from_le_bytes(version);
        if version != LARCH_VERSION {
            return Err(TraceError::UnsupportedVersion {
                format: TraceFormat::Larch,
                version: i64::from(version),
                offset: 8,
            });
        }
        let len = match input.varint()? {
            Ok(StreamVarint::Value(len)) => len,
            Ok(_) => return Err(header_error(input.offset(), "the header length")),
            Err(reason) => return Err(header_error(10, reason)),
        };
        if len > MAX_HEADER {
            return Err(TraceError::FrameTooLarge { offset: 10, len, max: MAX_HEADER });
        }
        let mut header = Vec::new();
        if !input.read_into(len, &mut header)? {
            return Err(header_error(input.offset(), "the header bytes"));
        }
        let mut len_bytes = Vec::new();
        put_varint(&mut len_bytes, len);
        crc.update(&len_bytes);
        crc.update(&header);
        let mut stored = [0u8; 4];
        if input.read_up_to(&mut stored)? < stored.len() {
            return Err(header_error(input.offset(), "the header crc32"));
        }
        let (stored, computed) = (u32::from_le_bytes(stored), crc.finalize());
        if stored != computed {
            return Err(TraceError::ChecksumMismatch { offset: 0, what: "header", stored, computed });
        }
        let metadata = decode_metadata(&header).map_err(|expected| header_error(10, expected))?;
        Ok(LarchReader {
            input,
            metadata,
            chunk: Vec::new(),
            chunk_offset: 0,
            chunk_pos: 0,
            chunk_left: 0,
            state: CodecState::default(),
            ops: 0,
            commits: 0,
            chunks: 0,
            done: false,
        })
    }

    /// The header metadata.
    pub fn metadata(&self) -> &[(String, String)] {
        &self.metadata
    }

    /// Operations read so far.
    pub fn ops_read(&self) -> u64 {
        self.ops
    }

    /// Bytes consumed so far.
    pub fn offset(&self) -> u64 {
        self.input.offset()
    }

    /// A varint of a block header: truncation and invalid varints are errors.
    fn block_varint(&mut self, expected: &'static str) -> Result<u64, TraceError> {
        let offset = self.input.offset();
        match self.input.varint()? {
            Ok(StreamVarint::Value(value)) => Ok(value),
            Ok(_) => Err(truncated(self.input.offset(), expected)),
            Err(reason) => Err(TraceError::Malformed { offset, row: self.ops, expected: reason }),
        }
    }

    fn crc32(&mut self, expected: &'static str) -> Result<u32, TraceError> {
        let mut stored = [0u8; 4];
        if self.input.read_up_to(&mut stored)? < stored.len() {
            return Err(truncated(self.input.offset(), expected));
        }
        Ok(u32::from_le_bytes(stored))
    }

    /// Reads the next block; returns `false` after the end-of-trace record.
    fn next_block(&mut self) -> Result<bool, TraceError> {
        let offset = self.input.offset();
        let mut header = Vec::new();
        match self.input.byte()? {
            None => Err(truncated(offset, "a chunk or the end-of-trace record")),
            Some(CHUNK) => {
                let count = self.block_varint("the chunk's operation count")?;
                let len = self.block_varint("the chunk's length")?;
                if len > MAX_FRAME {
                    return Err(TraceError::FrameTooLarge { offset, len, max: MAX_FRAME });
                }
                let payload_offset = self.input.offset();
                if !self.input.read_into(len, &mut self.chunk)? {
                    return Err(truncated(self.input.offset(), "the rest of a chunk"));
                }
                let stored = self.crc32("a chunk's crc32")?;
                header.push(CHUNK);
                put_varint(&mut header, count);
                put_varint(&mut header, len);
                let mut crc = crc32fast::Hasher::new();
                crc.update(&header);
                crc.update(&self.chunk);
                let computed = crc.finalize();
                if stored != computed {
                    return Err(TraceError::ChecksumMismatch { offset, what: "chunk", stored, computed });
                }
                if count == 0 {
                    return Err(TraceError::Malformed {
                        offset,
                        row: self.ops,
                        expected: "a chunk of at least one operation",
                    });
                }
                self.chunk_offset = payload_offset;
                self.chunk_pos = 0;
                self.chunk_left = count;
                self.state = CodecState::reading_chunk(self.chunk.len());
                self.chunks += 1;
                Ok(true)
            }
            Some(END) => {
                let ops = self.block_varint("the end record's operation count")?;
                let commits = self.block_varint("the end record's commit count")?;
                let chunks = self.block_varint("the end record's chunk count")?;
                let stored = self.crc32("the end record's crc32")?;
                header.push(END);
                for count in [ops, commits, chunks] {
                    put_varint(&mut header, count);
                }
                let computed = crc32fast::hash(&header);
                if stored != computed {
                    return Err(TraceError::ChecksumMismatch {
                        offset,
                        what: "end record",
                        stored,
                        computed,
                    });
                }
                for (what, recorded, actual) in [
                    ("operation count", ops, self.ops),
                    ("commit count", commits, self.commits),
                    ("chunk count", chunks, self.chunks),
                ] {
                    if recorded != actual {
                        return Err(TraceError::CountMismatch { offset, what, recorded, actual });
                    }
                }
                let extra = self.input.offset();
                if self.input.byte()?.is_some() {
                    return Err(TraceError::TrailingData { offset: extra });
                }
                Ok(false)
            }
            Some(_) => {
                Err(TraceError::Malformed { offset, row: self.ops, expected: "block kind 'C' or 'E'" })
            }
        }
    }

    fn read_op(&mut self) -> Result<Option<Op>, TraceError> {
        while self.chunk_left == 0 {
            if self.chunk_pos != self.chunk.len() {
                let offset = self.chunk_offset + self.chunk_pos as u64;
                return Err(TraceError::Malformed {
                    offset,
                    row: self.ops,
                    expected: "the chunk to end after its ops",
                });
            }
            if !self.next_block()? {
                return Ok(None);
            }
        }
        let offset = self.chunk_offset + self.chunk_pos as u64;
        let rest = self.chunk.get(self.chunk_pos..).unwrap_or(&[]);
        let mut slice = Slice::new(rest);
        let op = decode_op(&mut slice, &mut self.state).map_err(|fail| row_error(fail, offset, self.ops))?;
        self.chunk_pos += slice.pos();
        self.chunk_left -= 1;
        self.ops += 1;
        if matches!(op, Op::Commit { .. }) {
            self.commits += 1;
        }
        Ok(Some(op))
    }
}

impl<R: Read> Iterator for LarchReader<R> {
    type Item = Result<Op, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let result = self.read_op();
        if !matches!(result, Ok(Some(_))) {
            self.done = true;
        }
        result.transpose()
    }
}

impl<R: Read> OpSource for LarchReader<R> {
    fn format(&self) -> TraceFormat {
        TraceFormat::Larch
    }

    fn metadata(&self) -> &[(String, String)] {
        &self.metadata
    }

    fn truncated_tail(&self) -> Option<u64> {
        None
    }

    fn ops_read(&self) -> u64 {
        self.ops
    }

    fn offset(&self) -> u64 {
        self.input.offset()
    }
}

/// Writes operations as a larch trace. [`OpSink::finish`] must be called: it writes the
/// end-of-trace record, without which readers report the trace as truncated.
pub struct LarchWriter<W: Write> {
    output: Output<W>,
    chunk: Vec<u8>,
    chunk_ops: u64,
    state: CodecState,
    ops: u64,
    commits: u64,
    chunks: u64,
    finished: bool,
}

impl<W: Write> LarchWriter<W> {
    /// Writes the magic, version and a header holding `metadata` to `inner`.
    pub fn new(inner: W, metadata: &[(String, String)]) -> Result<LarchWriter<W>, TraceError> {
        let body = encode_metadata(metadata);
        if body.len() as u64 > MAX_HEADER {
            return Err(TraceError::Unwritable { row: 0, reason: "the header metadata exceeds 1 MiB" });
        }
        let mut head = LARCH_MAGIC.to_vec();
        head.extend_from_slice(&LARCH_VERSION.to_le_bytes());
        put_bytes(&mut head, &body);
        let crc = crc32fast::hash(&head);
        head.extend_from_slice(&crc.to_le_bytes());
        let mut output = Output::new(inner);
        output.write(&head)?;
        Ok(LarchWriter {
            output,
            chunk: Vec::new(),
            chunk_ops: 0,
            state: CodecState::default(),
            ops: 0,
            commits: 0,
            chunks: 0,
            finished: false,
        })
    }

    /// Flushes and returns the inner writer (call [`OpSink::finish`] first for a complete trace).
    pub fn into_inner(mut self) -> Result<W, TraceError> {
        self.output.flush()?;
        Ok(self.output.into_inner())
    }

    /// The inner writer.
    pub fn get_ref(&self) -> &W {
        self.output.get_ref()
    }

    fn flush_chunk(&mut self) -> Result<(), TraceError> {
        if self.chunk_ops == 0 {
            return Ok(());
        }
        let mut header = vec![CHUNK];
        put_varint(&mut header, self.chunk_ops);
        put_varint(&mut header, self.chunk.len() as u64);
        let mut crc = crc32fast::Hasher::new();
        crc.update(&header);
        crc.update(&self.chunk);
        let crc = crc.finalize();
        self.output.write(&header)?;
        self.output.write(&self.chunk)?;
        self.output.write(&crc.to_le_bytes())?;
        self.chunk.clear();
        self.chunk_ops = 0;
        self.state = CodecState::default();
        self.chunks += 1;
        Ok(())
    }
}

impl<W: Write> OpSink for LarchWriter<W> {
    fn write_op(&mut self, op: &Op) -> Result<(), TraceError> {
        if self.finished {
            return Err(TraceError::Finished);
        }
        if let Some(reason) = op.path_too_large() {
            return Err(TraceError::Unwritable { row: self.ops, reason });
        }
        let before = self.chunk.len();
        encode_op(op, &mut self.state, &mut self.chunk);
        let over_budget = self.state.path_bytes() > path_budget(self.chunk.len());
        if (self.chunk.len() > CHUNK_SOFT_MAX || over_budget) && self.chunk_ops > 0 {
            // Start a new chunk with this operation (encoded against a fresh state).
            self.chunk.truncate(before);
            self.flush_chunk()?;
            encode_op(op, &mut self.state, &mut self.chunk);
        }
        if self.chunk.len() as u64 > MAX_FRAME {
            self.chunk.clear();
            self.state = CodecState::default();
            return Err(TraceError::Unwritable { row: self.ops, reason: "it encodes to more than 64 MiB" });
        }
        self.chunk_ops += 1;
        self.ops += 1;
        let is_commit = matches!(op, Op::Commit { .. });
        if is_commit {
            self.commits += 1;
        }
        if (is_commit && self.chunk.len() >= CHUNK_TARGET) || self.chunk.len() >= CHUNK_SOFT_MAX {
            self.flush_chunk()?;
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<(), TraceError> {
        if self.finished {
            return Ok(());
        }
        self.flush_chunk()?;
        let mut end = vec![END];
        for count in [self.ops, self.commits, self.chunks] {
            put_varint(&mut end, count);
        }
        let crc = crc32fast::hash(&end);
        end.extend_from_slice(&crc.to_le_bytes());
        self.output.write(&end)?;
        self.finished = true;
        self.output.flush()
    }

    fn ops_written(&self) -> u64 {
        self.ops
    }

    fn bytes_written(&self) -> u64 {
        self.output.offset() + self.chunk.len() as u64
    }
}
