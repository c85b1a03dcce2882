//! larch-snapshot: portable snapshots of one commit of a larch store.
//!
//! [`export`] streams the full tree of one commit, with its commit info and parent hashes, into one
//! file; [`import`] rebuilds a new store from it whose head is that commit, with the same hash,
//! after checking every hash the file claims. Both run in memory bounded by constants (the
//! back-reference window and the stack limit), not by the tree. The format is specified byte by
//! byte in `docs/snapshot-format.md`; `scripts/snapshot_reader.py` is an independent reader.
//!
//! ```
//! use larch_core::CommitInfo;
//! use larch_store::Repo;
//!
//! let dir = tempfile::tempdir()?;
//! let mut repo = Repo::open(dir.path().join("a"))?;
//! let mut tree = repo.empty_tree();
//! tree.add(&["data", "version"], b"genesis".to_vec())?;
//! let commit = repo.commit(&tree, &[], CommitInfo::tezos(1530374852, "Genesis"))?;
//! let mut file = Vec::new();
//! larch_snapshot::export(&repo, None, &mut file, Default::default(), &mut |_| {})?;
//! let summary = larch_snapshot::import(&file[..], &dir.path().join("b"), &mut |_| {})?;
//! assert_eq!(summary.commit, commit);
//! let imported = Repo::open_read_only(dir.path().join("b"))?;
//! assert_eq!(imported.head(), Some(commit));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod error;
mod export;
pub mod format;
mod import;
pub mod records;

pub use error::{Location, Result, SnapshotError};
pub use export::{ExportOptions, ExportSummary};
pub use import::{Decoded, NullSink, Sink, decode};

use larch_core::Hash;
use larch_store::{DEFAULT_BRANCH, Repo, RepoOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// Where an export or import is: reported every few thousand records and at the end.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Progress {
    /// Objects (numbered records) so far.
    pub objects: u64,
    /// Bytes of the record stream so far.
    pub stream_bytes: u64,
    /// Bytes of the snapshot file so far.
    pub file_bytes: u64,
}

/// Records of a snapshot, by kind, and what they hold.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Records of every kind (commit and end included).
    pub records: u64,
    /// Contents records.
    pub contents: u64,
    /// Flat directory records.
    pub flat: u64,
    /// Inode `Values` records.
    pub values: u64,
    /// Inode `Tree` records.
    pub tree: u64,
    /// Contents written inline in directories.
    pub inline: u64,
    /// Back-references to objects written earlier (shared subtrees and values written once).
    pub back_references: u64,
    /// Bytes of contents values (inline and records).
    pub value_bytes: u64,
    /// Bytes of entry names.
    pub name_bytes: u64,
    /// Bytes of the pre-images hashed (import and verify only: the BLAKE2b work of checking).
    pub hashed_bytes: u64,
}

impl Counts {
    /// Objects: contents, directory and inode records.
    pub fn objects(&self) -> u64 {
        self.contents + self.flat + self.values + self.tree
    }
}

/// Exports commit `commit` of `repo` (its head when `None`) to `out`; returns what was written.
pub fn export<W: Write + Send>(
    repo: &Repo,
    commit: Option<Hash>,
    out: W,
    options: ExportOptions,
    progress: &mut dyn FnMut(Progress),
) -> Result<ExportSummary> {
    export::export(repo, commit, out, options, progress).map(|(summary, _)| summary)
}

/// What an import built.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImportSummary {
    /// The commit, now the head of the new store.
    pub commit: Hash,
    /// Its root tree.
    pub tree: Hash,
    /// Its parents (absent from the new store).
    pub parents: Vec<Hash>,
    /// Records read, by kind.
    pub counts: Counts,
    /// Bytes of the record stream.
    pub stream_bytes: u64,
    /// Bytes of the snapshot file.
    pub file_bytes: u64,
    /// Bytes of the new store's pack.
    pub store_bytes: u64,
    /// Build directories of the same target left by imports that died, removed before this one.
    pub stale_removed: Vec<PathBuf>,
}

fn io_error<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> SnapshotError + 'a {
    move |source| SnapshotError::Io { op, path: path.to_path_buf(), source }
}

/// Imports the snapshot read from `input` into a new store at `store` (which must not exist).
/// The store is built in a temporary sibling directory and renamed to `store` only once every
/// hash has been checked and the commit published; on any failure the temporary directory is
/// removed, so no store that looks complete is left behind.
pub fn import<R: Read>(input: R, store: &Path, progress: &mut dyn FnMut(Progress)) -> Result<ImportSummary> {
    if store.exists() {
        return Err(SnapshotError::TargetExists(store.to_path_buf()));
    }
    let parent = match store.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
        _ => PathBuf::from("."),
    };
    // Builds of this target killed midway (their process gone, no writer in them) are removed.
    let stale_removed = larch_store::remove_stale_builds(store)?;
    let temporary = larch_store::build_dir(store);
    if temporary.exists() {
        std::fs::remove_dir_all(&temporary).map_err(io_error("removing", &temporary))?;
    }
    let result = import_into(input, &temporary, progress);
    match result {
        Ok(mut summary) => {
            summary.stale_removed = stale_removed;
            std::fs::rename(&temporary, store).map_err(io_error("renaming the imported store to", store))?;
            if let Ok(dir) = std::fs::File::open(&parent) {
                dir.sync_all().map_err(io_error("syncing", &parent))?;
            }
            Ok(summary)
        }
        Err(error) => {
            let _ = std::fs::remove_dir_all(&temporary);
            Err(error)
        }
    }
}

fn import_into<R: Read>(input: R, path: &Path, progress: &mut dyn FnMut(Progress)) -> Result<ImportSummary> {
    // The new store's cache is not read during an import: keep it small.
    let options = RepoOptions { cache_bytes: 4 << 20, ..RepoOptions::default() };
    let mut repo = Repo::open_with(path, options)?;
    let mut writer = repo.bulk_writer()?;
    let decoded = decode(input, &mut writer, progress)?;
    let hash = writer.commit(Some(DEFAULT_BRANCH), decoded.tree, &decoded.parents, decoded.info.clone())?;
    // `hash` is `decoded.commit`: both are `schema::commit_hash` of the same verified values.
    let store_bytes = repo.stats().pack_bytes;
    repo.close()?;
    Ok(ImportSummary {
        commit: hash,
        tree: decoded.tree.0,
        parents: decoded.parents,
        counts: decoded.counts,
        stream_bytes: decoded.stream_bytes,
        file_bytes: decoded.file_bytes,
        store_bytes,
        stale_removed: Vec::new(),
    })
}

/// Verifies the snapshot read from `input` without writing anything: every frame, record, rule and
/// hash, as an import does.
pub fn verify<R: Read>(input: R, progress: &mut dyn FnMut(Progress)) -> Result<Decoded> {
    decode(input, &mut NullSink::default(), progress)
}
