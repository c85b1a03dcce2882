//! The repository seam of the replayer and the recorder: what a context store must offer to run a
//! trace. Implemented here for the in-memory repository; the pack store implements it too.

use larch_core::{CommitInfo, Hash, MemoryRepo, RepoError, Tree};

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
}
