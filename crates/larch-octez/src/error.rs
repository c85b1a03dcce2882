//! The typed errors of the snapshot reader: each names the archive member and the offset involved.

use larch_core::Hash;
use std::path::PathBuf;

/// Why reading an Octez snapshot archive failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OctezError {
    /// The archive itself could not be read: an I/O error, a truncated archive, a bad tar header.
    #[error("snapshot archive: {what} at byte {offset} (member {member:?}): {source}")]
    Archive {
        /// The member being read, or `"(header)"` for a tar header.
        member: String,
        /// Byte offset in the archive where it failed.
        offset: u64,
        /// What was being done.
        what: &'static str,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A member's bytes do not decode as Octez writes them.
    #[error("snapshot member {member:?}: corrupt at byte {offset} of the member: {what}")]
    Corrupt {
        /// The member.
        member: String,
        /// Byte offset in the member.
        offset: u64,
        /// What was wrong.
        what: String,
    },
    /// `snapshot_version.json` names a version this reader does not read.
    #[error("snapshot version {found}: larch reads Octez snapshots of version {supported} only")]
    UnsupportedVersion {
        /// The version found.
        found: u64,
        /// The version supported.
        supported: u64,
    },
    /// A member the format requires is absent.
    #[error("snapshot member {member:?} is missing (the archive ended at byte {end})")]
    Missing {
        /// The member.
        member: &'static str,
        /// Where the archive ended.
        end: u64,
    },
    /// A member appears twice.
    #[error("snapshot member {member:?} appears twice (again at byte {offset})")]
    Duplicate {
        /// The member.
        member: String,
        /// Offset of the second copy's header.
        offset: u64,
    },
    /// The archive ends without the end-of-archive blocks: it was cut at a member boundary.
    #[error("snapshot archive truncated: it ends at byte {end} without the end-of-archive marker")]
    Truncated {
        /// Where it ended.
        end: u64,
    },
    /// Two members disagree (metadata.json against block_data).
    #[error("snapshot members disagree: {what}")]
    Inconsistent {
        /// What disagrees.
        what: String,
    },
    /// Writing the context's files failed.
    #[error("{path}: {op}: {source}")]
    Write {
        /// The file or directory.
        path: PathBuf,
        /// What was being done.
        op: &'static str,
        /// The OS error.
        source: std::io::Error,
    },
    /// The imported context's commit is not the one the snapshot's block data records.
    #[error("the context's commit is {found}, the snapshot's block data records context {expected}")]
    ContextMismatch {
        /// The hash `block_data` records.
        expected: Hash,
        /// The commit the context holds.
        found: Hash,
    },
}

/// Result with [`OctezError`].
pub type Result<T, E = OctezError> = std::result::Result<T, E>;
