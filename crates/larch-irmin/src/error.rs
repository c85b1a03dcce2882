//! The typed errors of the irmin-pack reader: every one names the file and the offset involved.

use larch_core::Hash;
use std::path::PathBuf;

/// Why reading or converting an irmin-pack store failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IrminError {
    /// An I/O operation on a file of the store failed.
    #[error("{file}: {op} at offset {offset}: {source}")]
    Io {
        /// The file.
        file: PathBuf,
        /// Byte offset in the file.
        offset: u64,
        /// What was being done ("open", "read", "metadata").
        op: &'static str,
        /// The OS error.
        source: std::io::Error,
    },
    /// The bytes of a file do not decode as the format says they must.
    #[error("{file}: corrupt at offset {offset}: {what}")]
    Corrupt {
        /// The file.
        file: PathBuf,
        /// Byte offset in the file where decoding failed.
        offset: u64,
        /// What was wrong.
        what: String,
    },
    /// `store.control` (or a volume's control file) holds a version this reader does not support.
    #[error("{file}: unsupported control-file version {version:?} (supported: 00000003 to 00000005)")]
    UnsupportedVersion {
        /// The control file.
        file: PathBuf,
        /// The version string found (lossy).
        version: String,
    },
    /// A control file's Adler-32 checksum does not match its payload.
    #[error("{file}: checksum mismatch: stored {stored:#x}, computed {computed:#x}")]
    Checksum {
        /// The control file.
        file: PathBuf,
        /// The stored checksum.
        stored: u64,
        /// The checksum of the payload.
        computed: u64,
    },
    /// A global pack offset that no file of the store covers: collected by Irmin's GC (and not
    /// archived in a lower volume), or past the end of the pack.
    #[error("pack offset {offset} is not readable: {reason}")]
    Unreadable {
        /// The global offset.
        offset: u64,
        /// Collected, or past the end.
        reason: &'static str,
    },
    /// An object's recomputed hash differs from the hash Irmin stored with it.
    #[error("{what} at pack offset {offset} ({file}): Irmin stored hash {stored}, larch computes {computed}")]
    HashMismatch {
        /// "contents", "node", "inode" or "commit".
        what: &'static str,
        /// The file holding the object.
        file: PathBuf,
        /// Global pack offset of the object.
        offset: u64,
        /// The hash Irmin recorded (entry header).
        stored: Hash,
        /// The hash larch computes from the decoded value.
        computed: Hash,
    },
    /// A reference says an object has one hash, the object it points to has another.
    #[error(
        "reference to pack offset {offset} ({file}) expects hash {expected}, the object there has {found}"
    )]
    WrongTarget {
        /// The file holding the target.
        file: PathBuf,
        /// Global offset of the target.
        offset: u64,
        /// The hash the reference carries.
        expected: Hash,
        /// The hash in the target's header.
        found: Hash,
    },
    /// No commit with this hash in the store's index.
    #[error("no commit {0} in the store's index")]
    UnknownCommit(Hash),
    /// The commit is listed in the index but its record was collected by Irmin's GC.
    #[error(
        "commit {hash} (pack offset {offset}) was collected by Irmin's GC: only commits from the last GC point on can be read"
    )]
    CommitCollected {
        /// The commit.
        hash: Hash,
        /// Its pack offset.
        offset: u64,
    },
    /// The store's index lists no commit at all.
    #[error("the store has no commit")]
    Empty,
    /// A child is referenced by hash only; with minimal indexing Irmin does not index such
    /// objects, so it cannot be located.
    #[error(
        "{file}: object at pack offset {offset} references a child by hash only ({hash}); it cannot be located"
    )]
    HashAddress {
        /// The file holding the referencing object.
        file: PathBuf,
        /// Offset of the referencing object.
        offset: u64,
        /// The referenced hash.
        hash: Hash,
    },
    /// The sink a tree was streamed into refused an object.
    #[error("writing the object read at pack offset {offset}: {source}")]
    Sink {
        /// The Irmin offset of the object being written.
        offset: u64,
        /// The sink's error.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The larch tree being exported could not be read.
    #[error("reading the object {hash} of the tree being exported: {source}")]
    Source {
        /// The object's hash.
        hash: Hash,
        /// The source's error.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// Directories nested deeper than the reader accepts (a guard against crafted stores).
    #[error("directories nested deeper than {limit} levels below pack offset {offset}")]
    TooDeep {
        /// The offset of the node at the limit.
        offset: u64,
        /// The limit.
        limit: usize,
    },
}

/// Result with [`IrminError`].
pub type Result<T, E = IrminError> = std::result::Result<T, E>;

impl IrminError {
    /// A decoding failure in `file` at `offset`.
    pub fn corrupt(file: impl Into<PathBuf>, offset: u64, what: impl Into<String>) -> IrminError {
        IrminError::Corrupt { file: file.into(), offset, what: what.into() }
    }
}
