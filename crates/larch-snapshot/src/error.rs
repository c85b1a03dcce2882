//! Typed errors of snapshot export and import: every problem with a snapshot's bytes names where
//! it is (the file offset of the frame, the offset in the decoded record stream, and the object).

use larch_core::Hash;
use larch_store::StoreError;
use std::path::PathBuf;

/// Where a record is in a snapshot, for errors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Location {
    /// Index of the record in the stream (0 = the first record after the header).
    pub record: u64,
    /// What the record is ("contents", "directory", "inode-values", "inode-tree", "commit", "end",
    /// or "record" when its tag is unknown).
    pub kind: &'static str,
    /// Offset of the record's first byte in the decoded record stream.
    pub stream_offset: u64,
    /// File offset of the frame that holds the record's first byte.
    pub frame_offset: u64,
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} record #{} at stream offset {} (frame at file offset {})",
            self.kind, self.record, self.stream_offset, self.frame_offset
        )
    }
}

/// Why a snapshot export or import failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SnapshotError {
    /// Reading or writing the snapshot file, or a directory, failed.
    #[error("{op} {} failed: {source}", path.display())]
    Io {
        /// What was being done.
        op: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The system's error.
        #[source]
        source: std::io::Error,
    },
    /// The file does not start with the snapshot magic.
    #[error("not a larch snapshot (bad magic at offset 0)")]
    NotASnapshot,
    /// The file is a snapshot of a version this build does not read.
    #[error("snapshot format version {found}; this larch reads version {supported}")]
    UnknownVersion {
        /// The version found.
        found: u32,
        /// The version this build reads and writes.
        supported: u32,
    },
    /// The header or a frame is damaged (checksum, lengths, compressed data).
    #[error("corrupt snapshot at file offset {offset}: {reason}")]
    Corrupt {
        /// File offset of the header or frame.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
    /// The file ends before the snapshot does.
    #[error("truncated snapshot: the file ends at offset {offset}, inside {what}")]
    Truncated {
        /// The file's length.
        offset: u64,
        /// What was being read (the header, a frame, or which record).
        what: String,
    },
    /// A record does not decode or breaks the format's rules.
    #[error("invalid {at}: {reason}")]
    Invalid {
        /// The record.
        at: Location,
        /// What is wrong.
        reason: String,
    },
    /// A record hashes to something other than what the snapshot claims (a forged or damaged
    /// snapshot whose checksums were recomputed).
    #[error("hash mismatch in {at}: the snapshot claims {claimed}, its bytes hash to {computed}")]
    HashMismatch {
        /// The record.
        at: Location,
        /// The hash the snapshot states.
        claimed: Hash,
        /// The hash computed from the bytes.
        computed: Hash,
    },
    /// The object to export is too large for the snapshot format's limits.
    #[error("cannot export: {0}")]
    TooLarge(String),
    /// The store being exported contradicts itself (run `larch fsck`).
    #[error("corrupt store: {0}")]
    CorruptStore(String),
    /// The target of an import already exists.
    #[error("{} already exists: import creates a new store", .0.display())]
    TargetExists(PathBuf),
    /// The store has no commit to export (no head, and none named).
    #[error("the store has no head commit; name one")]
    NoHead,
    /// A store operation failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Reading the exported tree failed.
    #[error(transparent)]
    Load(#[from] larch_core::LoadError),
}

impl SnapshotError {
    /// The location of the offending record, when the error is about one.
    pub fn location(&self) -> Option<Location> {
        match self {
            SnapshotError::Invalid { at, .. } | SnapshotError::HashMismatch { at, .. } => Some(*at),
            _ => None,
        }
    }
}

/// Result of snapshot operations.
pub type Result<T, E = SnapshotError> = std::result::Result<T, E>;
