//! larch-store: the persistent store of larch. An append-only pack (stored as chunk files, each a
//! range of global offsets: `layout`) of objects that point at their
//! children by offset and carry their hashes (a rewritten directory or inode is usually stored as a
//! patch of its previous version), a commit index, and a control file that atomically publishes
//! each commit; lazy reads through a byte-bounded cache of decoded nodes; one writer and many
//! readers; an integrity checker. The format is specified in `docs/format.md`, the commit protocol
//! in `docs/store.md`.
//!
//! The public API is small: [`Repo`] (open, checkout, commit, branches, log, reload, stats, scan,
//! fsck, garbage collection with [`GcOptions`] and [`GcPolicy`], reporting [`GcReport`] and
//! [`GcProgress`], archive mode with [`ArchiveReport`]), [`PipelinedRepo`] (commits on a commit
//! thread), [`BulkWriter`] (imports), [`RepoOptions`] with [`SyncPolicy`], [`StoreError`],
//! [`fsck`] and its report, and [`plan_recovery`]. [`RecordKind`] names the record kinds the
//! scan and fsck reports count; [`INLINE_MAX`] is the largest value stored inside its directory's
//! record.
//!
//! The source is layered, each folder importing only those below it (checked by
//! `tests/layers.rs`; `docs/architecture.md`): `format` (bytes), `io` (the storage seam), `pack`
//! (the offset space, reader and cache), `commit` (the encoder), `switch` (the control file),
//! `gc`, `check`, then `repo.rs` and its `repo/` files (the writer and readers), and `recovery`.
//! Everything below `repo` is private; the `fault-injection` feature exposes the test surface as
//! one module, `testing`.
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

mod check;
mod commit;
mod error;
mod format;
mod gc;
mod io;
mod options;
mod pack;
mod recovery;
mod repo;
mod switch;
#[cfg(feature = "fault-injection")]
pub mod testing;

pub use check::fsck::{
    AbsentParent, DEFAULT_FSCK_PENDING, FsckOptions, FsckProgress, FsckReport, FsckStats, KindStats, Problem,
};
pub use check::scan::ScanReport;
pub use commit::writer::WriteCounts;
pub use error::{FileKind, Result, StoreError};
pub use format::codec::{INLINE_MAX, RecordKind};
pub use format::published::{PublishedState, published_state};
pub use gc::archive::ArchiveReport;
pub use gc::policy::{GcOptions, GcPolicy};
pub use gc::report::{GcPhase, GcProgress, GcReport};
pub use io::dirs::{LOWER_MARKER, StoreId};
pub use io::layered::LowerLayer;
pub use io::map_budget::MapBudget;
pub use io::staging::{build_dir, remove_stale_builds};
pub use io::storage::{Directory, Layers, Storage};
pub use options::{
    CommitDetails, DEFAULT_CACHE_BYTES, DEFAULT_CHUNK_BYTES, DEFAULT_MMAP_BUDGET, DEFAULT_OPEN_FILES,
    RepoOptions, StoreStats, SyncPolicy, SyncPolicyParseError,
};
pub use recovery::plan::{
    FoundCommit, RecoveryPlan, plan_recovery, plan_recovery_layered, plan_recovery_with,
};
pub use repo::bulk::{BulkTarget, BulkWriter};
pub use repo::cache_budget::CacheBudget;
pub use repo::check::fsck;
pub use repo::pipeline::{PIPELINE_MAX_DEPTH, PipelinedRepo};
pub use repo::{DEFAULT_BRANCH, History, Repo};

/// The identity of the store directory `store` (its `larch-id` file), `None` when it has none;
/// when it has none and `create`, a new one is drawn and written durably (the first written
/// wins). A lower layer records it to refuse any other store (`docs/format.md` §3.1).
pub fn store_identity(store: &std::path::Path, create: bool) -> Result<Option<StoreId>> {
    io::dirs::ensure_store_id(store, create)
}

/// The hash of a tree about to be committed, its dirty subtrees hashed on two threads when it has
/// enough of them (what [`Repo::commit`] does; exposed for benchmarks). Same result as
/// [`larch_core::Tree::hash`].
pub fn parallel_tree_hash(tree: &larch_core::Tree) -> larch_core::Hash {
    commit::hashing::tree_hash(tree)
}
