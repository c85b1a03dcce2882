//! Typed errors of the store: every I/O failure and every corruption names its file, offset and
//! operation.

use larch_core::{Hash, ObjectKey, StoreId, TreeError};
use std::fmt;
use std::path::PathBuf;

/// The files of a store directory (see `docs/format.md` §1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FileKind {
    /// `control`: the published state.
    Control,
    /// `pack`: the objects.
    Pack,
    /// `commits`: the commit index.
    Index,
    /// `lock`: not used since format version 2 (the writer locks the store directory itself); an
    /// empty `lock` file left by version 1 is ignored.
    Lock,
    /// `seg.<gen>`: the live records of a range collected by garbage collection
    /// (docs/gc-design.md §3.3).
    Segment,
}

impl FileKind {
    /// The file's name inside the store directory.
    pub fn file_name(self) -> &'static str {
        match self {
            FileKind::Control => "control",
            FileKind::Pack => "pack",
            FileKind::Index => "commits",
            FileKind::Lock => "lock",
            FileKind::Segment => "seg",
        }
    }
}

impl fmt::Display for FileKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.file_name())
    }
}

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// An I/O operation on a store file failed.
    #[error("{op} of {file} at offset {offset} failed: {source}")]
    Io {
        /// The file.
        file: FileKind,
        /// Where in the file.
        offset: u64,
        /// What was being done ("read", "write", "sync", "replace", "open", ...).
        op: &'static str,
        /// The system's error.
        #[source]
        source: std::io::Error,
    },
    /// A file's bytes do not decode, or fail their checksum.
    #[error("corrupt {file} at offset {offset}: {reason}")]
    Corrupt {
        /// The file.
        file: FileKind,
        /// The offset of the damaged record or field.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
    /// A file the published state names is not there (`what`: "chunk" or "segment"): damage, or,
    /// for a reader, a GC's deletion between its reading `control` and opening the file.
    #[error("{name}: missing {what} file ({detail})")]
    MissingFile {
        /// The kind of the file.
        file: FileKind,
        /// "chunk" or "segment".
        what: &'static str,
        /// The file's name.
        name: String,
        /// Where it was looked for.
        detail: String,
    },
    /// A chunk file (or a format-2 `pack`) that is there could not be opened, or its header read:
    /// at a handle's open, on a reader's reload, or again after the bounded set of open files
    /// (`RepoOptions::open_files`) closed its descriptor; e.g. `EMFILE` when the process is out of
    /// descriptors. The system's failure, not the store's: a handle's open returns it rather
    /// than falling back to the control file's older slot.
    #[error("{op} of {name} failed: {source}")]
    OpenFile {
        /// The file's name.
        name: String,
        /// What was being done ("open", "reopen", "read header", "stat").
        op: &'static str,
        /// The system's error.
        #[source]
        source: std::io::Error,
    },
    /// The directory holds no store.
    #[error("{} is not a larch store: {reason}", path.display())]
    NotAStore {
        /// The directory.
        path: PathBuf,
        /// Why not.
        reason: String,
    },
    /// The store was written by an unknown format version.
    #[error("{file} has format version {found}; this larch reads version {supported}")]
    UnknownVersion {
        /// The file.
        file: FileKind,
        /// The version found.
        found: u32,
        /// The version this build reads and writes.
        supported: u32,
    },
    /// Another writer holds the store.
    #[error("the store {} is already open for writing by another handle or process", path.display())]
    Locked {
        /// The store directory.
        path: PathBuf,
    },
    /// A global pack offset that no file of the pack's layout holds (below its first chunk, or in
    /// space a garbage collection removed).
    #[error("pack offset {offset} is in no file of the store's layout")]
    Unmapped {
        /// The global offset.
        offset: u64,
    },
    /// A write was attempted through a read-only handle.
    #[error("the store is open read-only")]
    ReadOnly,
    /// A durability step failed earlier; the handle refuses work until the store is reopened.
    #[error("an earlier sync or publish failed; reopen the store")]
    Poisoned,
    /// A pipelined writer's commit thread wrote another commit than the one hashed before it
    /// (a bug: the tree changed in between).
    #[error("the commit thread wrote commit {actual}, not {expected} as hashed before it")]
    CommitMismatch {
        /// The hash returned to the caller.
        expected: Hash,
        /// The hash of the commit written.
        actual: Hash,
    },
    /// A commit made with [`ContextRepo::commit_expected`](larch_core::ContextRepo::commit_expected)
    /// has another hash than the one expected: the tree (or parents, or info) differ from those of
    /// the expected commit. The commit was written; nothing after it is.
    #[error("commit {actual} was made where commit {expected} was expected (its tree differs)")]
    UnexpectedCommit {
        /// The hash the caller expected.
        expected: Hash,
        /// The hash of the commit made.
        actual: Hash,
    },
    /// No commit with this hash.
    #[error("unknown commit {0}")]
    UnknownCommit(Hash),
    /// A parent of a new commit is not in the store.
    #[error("unknown parent commit {0}")]
    UnknownParent(Hash),
    /// No branch with this name.
    #[error("unknown branch {0:?}")]
    UnknownBranch(String),
    /// A branch name must be 1 to 255 bytes.
    #[error("invalid branch name {0:?}")]
    InvalidBranchName(String),
    /// A commit's root must be a directory.
    #[error("cannot commit a contents value as a root tree")]
    RootIsContents,
    /// A record would exceed the format's limits.
    #[error("object too large for the format: {0}")]
    TooLarge(String),
    /// A tree to commit refers to an object at a key outside this store's published pack (a part
    /// of another store's tree grafted into this one).
    #[error("the tree refers to object {hash} at key {key}, outside this store")]
    ForeignReference {
        /// The key.
        key: u64,
        /// The object's hash.
        hash: Hash,
    },
    /// An object given to a [`BulkWriter`](crate::BulkWriter) breaks the format's rules (entries
    /// not sorted, too many, a key that is not an earlier record); nothing was written for it.
    #[error("invalid object for the bulk writer: {0}")]
    BulkInput(String),
    /// The store's published state cannot be used as it is (both control slots damaged, the
    /// control file missing beside a pack that holds data, or the published state not present in
    /// the pack); `larch recover` finds the newest complete commit.
    #[error(
        "{}: {reason}; run `larch recover {}` to find the newest complete commit (add `--apply` to publish it)",
        path.display(),
        path.display()
    )]
    NeedsRecovery {
        /// The store directory.
        path: PathBuf,
        /// What is wrong.
        reason: String,
        /// Whether the cause is a missing file the published state names
        /// ([`StoreError::MissingFile`]): a reader opening beside a GC reads `control` again.
        missing_file: bool,
    },
    /// A read-only handle's view belongs to a timeline the store has left: a recovery or a writer's
    /// fallback to the older control slot went back to an older state since the handle opened (the
    /// slot's lineage changed, or a commit it knows is no longer at its offset). Its commit map and
    /// offsets may name other records now; nothing was read from them. Reopen the store.
    #[error(
        "the store {} went back to an older state since this handle opened it ({reason}); reopen the store",
        path.display()
    )]
    Rewound {
        /// The store directory (empty for a store opened on in-memory files).
        path: PathBuf,
        /// What showed it.
        reason: String,
    },
    /// `larch recover --apply` ([`RecoveryPlan::apply`](crate::RecoveryPlan::apply)) was refused:
    /// the control file changed since the plan was made (a writer published, or opened and
    /// repaired it, meanwhile). Nothing was written; planning again sees the new state.
    #[error(
        "{}: the control file changed since recovery was planned (a writer published meanwhile); nothing was \
         written: run `larch recover {}` again",
        path.display(),
        path.display()
    )]
    StalePlan {
        /// The store directory.
        path: PathBuf,
    },
    /// `larch recover` found no layout of the store's files to recover from (no valid control
    /// slot, and the chunk and segment files present do not form one): the reason says what is
    /// missing.
    #[error("the store {} cannot be recovered: {reason}", path.display())]
    Unrecoverable {
        /// The store directory.
        path: PathBuf,
        /// What is missing or damaged.
        reason: String,
    },
    /// A file is shorter than the published state says.
    #[error(
        "{file} is shorter than published: {len} bytes needed at offset {offset}, the file has {file_len} bytes"
    )]
    Truncated {
        /// The file.
        file: FileKind,
        /// Where the read started.
        offset: u64,
        /// Bytes needed there.
        len: u64,
        /// The file's length.
        file_len: u64,
    },
    /// An operation on the store directory itself failed (create, list, lock, sync).
    #[error("{op} of the store directory {} failed: {source}", path.display())]
    Directory {
        /// The directory.
        path: PathBuf,
        /// What was being done.
        op: &'static str,
        /// The system's error.
        #[source]
        source: std::io::Error,
    },
    /// A load asked this store for a key of another store (a tree of another repository or store
    /// read through this one): the position means nothing here, so nothing is read.
    #[error("key {key} belongs to another store than this one ({store})")]
    OtherStoreKey {
        /// The key asked for.
        key: ObjectKey,
        /// This store's identity.
        store: StoreId,
    },
    /// A [`BulkWriter`](crate::BulkWriter) was given a key returned by an earlier bulk writer of
    /// the same handle that was dropped (or failed) before it published: its records were never
    /// published, and the space they took may hold other records now.
    #[error("key {key} is of a bulk writer dropped before it published its records")]
    UnpublishedBulkKey {
        /// The key given.
        key: ObjectKey,
    },
    /// A tree operation (often a lazy load) failed.
    #[error(transparent)]
    Tree(#[from] TreeError),
    /// An object was asked for at a global offset that garbage collection removed (it lies in a
    /// collected range but in no run of the segment that replaced it).
    #[error("the object at offset {offset} was removed by garbage collection (generation {gc_generation})")]
    CollectedObject {
        /// The object's global offset.
        offset: u64,
        /// The GC generation whose segment does not hold it.
        gc_generation: u64,
    },
    /// A commit was asked for (checkout, details, history, a parent) that garbage collection
    /// removed: it is older than the oldest kept commit.
    #[error(
        "commit {commit} was removed by garbage collection (generation {gc_generation}); the oldest kept \
         commit is {oldest_kept}"
    )]
    Collected {
        /// The collected commit.
        commit: Hash,
        /// The store's GC generation.
        gc_generation: u64,
        /// The oldest kept commit (the last GC's commit).
        oldest_kept: Hash,
    },
    /// A garbage collection ran but could not switch; the store is unchanged (its segment was
    /// removed). The reason says why (a late root into collected space, a worker failure).
    #[error("garbage collection abandoned: {0}")]
    GcAbandoned(String),
    /// A garbage collection (or its mark) was refused: the reason says why (an unknown commit,
    /// bounds out of order, ...).
    #[error("garbage collection refused: {0}")]
    GcRefused(String),
    /// The store's chunk files have moved to a lower directory (archive mode: its control slot
    /// carries the archive flag), and it was opened without one.
    #[error(
        "the store {} keeps chunk files in a lower directory (archive mode): open it with `--lower DIR` (RepoOptions::lower)",
        path.display()
    )]
    NeedsLower {
        /// The store directory.
        path: PathBuf,
    },
    /// An archive move (or the lower directory given at open) was refused: the reason says why
    /// (no lower directory, the lower directory is the store directory, ...).
    #[error("archive refused: {0}")]
    ArchiveRefused(String),
    /// The lower directory given at open does not serve this store: its `larch-lower` marker names
    /// another store, or it has none and holds files that are not chunk files (another store's
    /// directory). Nothing in it was touched (`docs/format.md` §3.1).
    #[error(
        "the lower directory {} is refused for the store {}: {reason}; nothing in it was touched",
        lower.display(),
        store.display()
    )]
    ForeignLower {
        /// The store directory.
        store: PathBuf,
        /// The lower directory given.
        lower: PathBuf,
        /// What identifies it as another store's.
        reason: String,
    },
}

impl StoreError {
    /// An I/O error on `file` at `offset` during `op`.
    pub(crate) fn io(file: FileKind, offset: u64, op: &'static str, source: std::io::Error) -> StoreError {
        StoreError::Io { file, offset, op, source }
    }

    /// A corruption of `file` at `offset`.
    pub(crate) fn corrupt(file: FileKind, offset: u64, reason: impl Into<String>) -> StoreError {
        StoreError::Corrupt { file, offset, reason: reason.into() }
    }
}

/// Result of store operations.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;
