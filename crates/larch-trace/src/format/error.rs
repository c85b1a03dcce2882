//! The error of every trace reader, writer and tool: typed, with the byte offset (and the row index,
//! counted from 0 over the operations of the trace) where the problem was found.

use super::TraceFormat;
use larch_core::{HashParseError, TreeError};
use std::path::PathBuf;

/// Why reading, writing, converting or analysing a trace failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TraceError {
    /// The error happened in this file.
    #[error("trace file {}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// What went wrong in it.
        #[source]
        source: Box<TraceError>,
    },
    /// A file could not be opened or created.
    #[error("cannot open {}", path.display())]
    Open {
        /// The file.
        path: PathBuf,
        /// The system error.
        #[source]
        source: std::io::Error,
    },
    /// Reading or writing failed.
    #[error("I/O error at byte offset {offset}")]
    Io {
        /// Offset of the byte being read or written.
        offset: u64,
        /// The system error.
        #[source]
        source: std::io::Error,
    },
    /// The file does not start with the magic of a known (or the expected) format.
    #[error("bad magic {found:02x?} at offset 0: expected {expected}")]
    BadMagic {
        /// The first bytes of the file (at most 8).
        found: Vec<u8>,
        /// The magic(s) accepted.
        expected: &'static str,
    },
    /// The format version is not one this build reads.
    #[error("unsupported {format} version {version} at offset {offset}")]
    UnsupportedVersion {
        /// The format.
        format: TraceFormat,
        /// The version found.
        version: i64,
        /// Offset of the version field.
        offset: u64,
    },
    /// The file ends (or is malformed) inside its header.
    #[error("{format} header truncated or malformed at offset {offset}: expected {expected}")]
    BadHeader {
        /// The format.
        format: TraceFormat,
        /// Where the header stops making sense.
        offset: u64,
        /// What was expected there.
        expected: &'static str,
    },
    /// A frame (Irmin row) or chunk (larch) announces more bytes than any valid one holds.
    #[error("frame at offset {offset} announces {len} bytes, more than the limit of {max}")]
    FrameTooLarge {
        /// Offset of the frame.
        offset: u64,
        /// The announced length.
        len: u64,
        /// The largest length accepted.
        max: u64,
    },
    /// A row or record starts with a tag no operation has.
    #[error("unknown row tag {tag} in row {row} at offset {offset}")]
    UnknownRowTag {
        /// Offset of the row (of its frame for Irmin traces).
        offset: u64,
        /// Index of the row.
        row: u64,
        /// The tag.
        tag: u64,
    },
    /// An Irmin row frame is longer than the row it holds (Irmin's "expected to take N bytes").
    #[error("row {row} at offset {offset}: its frame holds {frame_len} bytes but the row takes {consumed}")]
    TrailingBytes {
        /// Offset of the frame.
        offset: u64,
        /// Index of the row.
        row: u64,
        /// Length of the frame's payload.
        frame_len: u64,
        /// Bytes the row's decoding consumed.
        consumed: u64,
    },
    /// A commit hash string is not a valid base58check context hash (`Co…`).
    #[error("row {row} at offset {offset}: invalid commit hash {text:?}")]
    InvalidHash {
        /// Offset of the row.
        offset: u64,
        /// Index of the row.
        row: u64,
        /// The string found (lossily decoded, at most 80 characters).
        text: String,
        /// Why it is invalid.
        #[source]
        source: HashParseError,
    },
    /// A row or record does not decode.
    #[error("row {row} at offset {offset} is malformed: expected {expected}")]
    Malformed {
        /// Offset of the row.
        offset: u64,
        /// Index of the row.
        row: u64,
        /// What was expected where decoding failed.
        expected: &'static str,
    },
    /// A larch trace ends before its end-of-trace record.
    #[error("larch trace truncated at offset {offset}: expected {expected}")]
    Truncated {
        /// Where the data stops.
        offset: u64,
        /// What was expected there.
        expected: &'static str,
    },
    /// A checksum of a larch trace does not match its data.
    #[error("{what} at offset {offset}: crc32 mismatch (stored {stored:08x}, computed {computed:08x})")]
    ChecksumMismatch {
        /// Offset of the checksummed block.
        offset: u64,
        /// Which block.
        what: &'static str,
        /// The checksum stored in the file.
        stored: u32,
        /// The checksum of the data read.
        computed: u32,
    },
    /// A count recorded in a larch trace does not match what was read.
    #[error("{what} at offset {offset}: recorded {recorded}, found {actual}")]
    CountMismatch {
        /// Offset of the block holding the count.
        offset: u64,
        /// Which count.
        what: &'static str,
        /// The recorded count.
        recorded: u64,
        /// The count found.
        actual: u64,
    },
    /// Data follows the end-of-trace record of a larch trace.
    #[error("data after the end-of-trace record at offset {offset}")]
    TrailingData {
        /// Offset of the first extra byte.
        offset: u64,
    },
    /// An operation cannot be written (for example it encodes to more than a frame may hold).
    #[error("operation {row} cannot be written: {reason}")]
    Unwritable {
        /// Index of the operation.
        row: u64,
        /// Why.
        reason: &'static str,
    },
    /// A write after [`super::OpSink::finish`].
    #[error("trace writer already finished")]
    Finished,
    /// The operations are inconsistent (for example they read a context id never produced).
    #[error("row {row}: {reason}")]
    InvalidTrace {
        /// Index of the row.
        row: u64,
        /// What is inconsistent.
        reason: String,
    },
    /// Applying an operation to an in-memory tree failed.
    #[error("row {row}: tree operation failed")]
    Tree {
        /// Index of the row.
        row: u64,
        /// The tree error.
        #[source]
        source: TreeError,
    },
}

impl TraceError {
    /// Attaches the file the error happened in (unless already attached).
    pub fn in_file(self, path: &std::path::Path) -> TraceError {
        match self {
            TraceError::File { .. } | TraceError::Open { .. } => self,
            other => TraceError::File { path: path.to_path_buf(), source: Box::new(other) },
        }
    }

    /// The error itself, without the [`TraceError::File`] wrapper.
    pub fn root(&self) -> &TraceError {
        match self {
            TraceError::File { source, .. } => source.root(),
            other => other,
        }
    }
}
