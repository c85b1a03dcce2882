//! larch-store: the persistent store of larch. An append-only pack (stored as chunk files, each a
//! range of global offsets: `layout`) of objects that point at their
//! children by offset and carry their hashes (a rewritten directory or inode is usually stored as a
//! patch of its previous version), a commit index, and a control file that atomically publishes
//! each commit; lazy reads through a byte-bounded cache of decoded nodes; one writer and many
//! readers; an integrity checker. The format is specified in `docs/format.md`, the commit protocol
//! in `docs/store.md`.
//!
//! The public API is small: [`Repo`] (open, checkout, commit, branches, log, reload, stats, scan,
//! fsck, garbage collection: `gc`, `gc_start`/`gc_finish`/`gc_wait` with [`GcReport`] and
//! [`GcProgress`], `gc_with`/`gc_start_with` with [`GcOptions`] and the segment compaction policy
//! [`GcPolicy`] (`docs/store.md`, *Garbage collection*), `gc_mark`: the mark phase alone,
//! [`GcMark`], and `archive`: archive mode, moving sealed chunk files to a lower directory,
//! [`ArchiveReport`]) with [`RepoOptions`] and
//! [`SyncPolicy`], [`StoreError`], [`fsck`] and its report. The codec, patches, GC segment files
//! (`segment`), commit index, control file, cache and writer are private; the storage seam and the
//! fault-injecting backend are public only with the `fault-injection` feature, for tests.
//!
//! ```
//! use larch_core::CommitInfo;
//! use larch_store::Repo;
//!
//! let dir = tempfile::tempdir()?;
//! let mut repo = Repo::open(dir.path())?;
//! let mut tree = repo.empty_tree();
//! tree.add(&["data", "version"], b"genesis".to_vec())?;
//! let commit = repo.commit(&tree, &[], CommitInfo::tezos(1530374852, "Genesis"))?;
//! repo.close()?;
//! let reader = Repo::open_read_only(dir.path())?;
//! let tree = reader.checkout(&commit)?;
//! assert_eq!(tree.find(&["data", "version"])?.unwrap().as_bytes(), b"genesis");
//! assert!(reader.fsck().is_clean());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#[cfg(feature = "fault-injection")]
pub mod archive;
#[cfg(not(feature = "fault-injection"))]
mod archive;
mod bulk;
#[cfg(feature = "fault-injection")]
pub mod codec;
#[cfg(not(feature = "fault-injection"))]
mod codec;
mod context_repo;
#[cfg(feature = "fault-injection")]
pub mod control;
#[cfg(not(feature = "fault-injection"))]
mod control;
mod error;
#[cfg(feature = "fault-injection")]
pub mod fault;
mod fsck;
mod gc;
mod gc_children;
mod gc_mark;
mod gc_policy;
mod gc_roots;
mod gc_worker;
mod graveyard;
mod hashing;
#[cfg(feature = "fault-injection")]
pub mod index;
#[cfg(not(feature = "fault-injection"))]
mod index;
#[cfg(feature = "fault-injection")]
pub mod layout;
#[cfg(not(feature = "fault-injection"))]
mod layout;
mod open;
mod options;
mod pack;
#[cfg(feature = "fault-injection")]
pub mod patch;
#[cfg(not(feature = "fault-injection"))]
mod patch;
mod pipeline;
mod prefetch;
mod publish;
mod publisher;
mod recover;
mod repo;
mod scan;
#[cfg(feature = "fault-injection")]
pub mod segment;
#[cfg(not(feature = "fault-injection"))]
mod segment;
#[cfg(feature = "fault-injection")]
pub mod storage;
#[cfg(not(feature = "fault-injection"))]
mod storage;
mod switch;
mod writer;

pub use archive::ArchiveReport;
pub use bulk::{BulkTarget, BulkWriter};
pub use codec::{INLINE_MAX, RecordKind};
pub use error::{FileKind, Result, StoreError};
pub use fsck::{AbsentParent, FsckReport, FsckStats, KindStats, Problem, fsck};
pub use gc::{GcPhase, GcProgress, GcReport};
pub use gc_mark::{GcMark, MarkBounds};
pub use gc_policy::{GcOptions, GcPolicy};
pub use options::{
    CommitDetails, DEFAULT_CHUNK_BYTES, RepoOptions, StoreStats, SyncPolicy, SyncPolicyParseError,
};
pub use pack::{DEFAULT_CACHE_BYTES, RECENT_IN_MEMORY, RECENT_INODES_IN_MEMORY};
pub use pipeline::{PIPELINE_MAX_DEPTH, PipelinedRepo};
#[cfg(feature = "fault-injection")]
pub use recover::plan_recovery_files;
pub use recover::{FoundCommit, RecoveryPlan, plan_recovery, plan_recovery_with};
pub use repo::{DEFAULT_BRANCH, History, Repo};
pub use scan::ScanReport;
pub use writer::WriteCounts;

/// The hash of a tree about to be committed, its dirty subtrees hashed on two threads when it has
/// enough of them (what [`Repo::commit`] does; exposed for benchmarks). Same result as
/// [`larch_core::Tree::hash`].
pub fn parallel_tree_hash(tree: &larch_core::Tree) -> larch_core::Hash {
    hashing::tree_hash(tree)
}
