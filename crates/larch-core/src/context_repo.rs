//! The context-repository seam: what a versioned context store offers to the code that drives it
//! (the trace recorder, the replayer, importers). Implemented here for the in-memory repository;
//! the pack store (`larch-store`) implements it too.

use crate::{CommitInfo, Hash, MemoryRepo, RepoError, Tree};

/// A versioned context store: check out a commit as a tree, commit a tree.
pub trait ContextRepo {
    /// The store's error.
    type Error: std::error::Error + Send + Sync + 'static;

    /// An empty tree whose grafts and lazy loads use this store (the genesis context).
    fn empty_tree(&self) -> Tree;

    /// The tree of commit `commit`.
    fn checkout(&mut self, commit: &Hash) -> Result<Tree, Self::Error>;

    /// Commits `tree` with `parents` and `info`; returns the commit hash.
    fn commit(&mut self, tree: &Tree, parents: &[Hash], info: CommitInfo) -> Result<Hash, Self::Error>;

    /// The store's counters, sampled by the replayer after every commit. Stores that keep no
    /// counters leave this default, which reports every figure as unknown.
    fn stats(&self) -> BackendStats {
        BackendStats::default()
    }
}

/// Counters a store reports to the replayer's statistics. Every field is optional: `None` means
/// the store does not measure it. Counters are cumulative since the store was opened; sizes are
/// current values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct BackendStats {
    /// Object reads served from a cache.
    pub cache_hits: Option<u64>,
    /// Object reads that had to go to disk (or the backing source).
    pub cache_misses: Option<u64>,
    /// Objects (contents, nodes, inodes, commits) written.
    pub objects_written: Option<u64>,
    /// Bytes of the objects written (their encoded size, before any file-level overhead).
    pub object_bytes_written: Option<u64>,
    /// Size of the store on disk, in bytes.
    pub store_size_bytes: Option<u64>,
}

impl ContextRepo for MemoryRepo {
    type Error = RepoError;

    fn empty_tree(&self) -> Tree {
        MemoryRepo::empty_tree(self)
    }

    fn checkout(&mut self, commit: &Hash) -> Result<Tree, RepoError> {
        MemoryRepo::checkout(self, commit)
    }

    fn commit(&mut self, tree: &Tree, parents: &[Hash], info: CommitInfo) -> Result<Hash, RepoError> {
        MemoryRepo::commit(self, tree, parents, info)
    }

    fn stats(&self) -> BackendStats {
        let (nodes, contents) = self.source().object_counts();
        BackendStats {
            objects_written: Some((nodes + contents + self.commit_count()) as u64),
            ..BackendStats::default()
        }
    }
}
