//! An in-memory repository: commits of context trees, named by their Tezos commit hash.

use crate::hash::Hash;
use crate::schema::{CommitInfo, commit_hash};
use crate::tree::node::Entry;
use crate::tree::source::{MemorySource, ObjectSource};
use crate::tree::{Tree, TreeError};
use std::collections::HashMap;
use std::sync::Arc;

/// Why a repository operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RepoError {
    /// A commit's root must be a directory.
    #[error("cannot commit a contents value as a root tree")]
    RootIsContents,
    /// A parent is not a commit of this repository.
    #[error("unknown parent commit {0}")]
    UnknownParent(Hash),
    /// No commit with this hash.
    #[error("unknown commit {0}")]
    UnknownCommit(Hash),
    /// A tree operation failed.
    #[error(transparent)]
    Tree(#[from] TreeError),
}

/// What a commit records.
#[derive(Clone, Debug)]
pub struct CommitRecord {
    /// Hash of the root tree.
    pub tree_hash: Hash,
    /// The root tree, as a lazy reference into the repository's source.
    pub root: Entry,
    /// Parent commits, in the order given.
    pub parents: Vec<Hash>,
    /// Date, author and message.
    pub info: CommitInfo,
}

/// Commits held in memory. Committed trees are persisted into a [`MemorySource`], so checked-out
/// trees are lazy, exactly as with the disk store.
#[derive(Debug, Default)]
pub struct MemoryRepo {
    source: Arc<MemorySource>,
    commits: HashMap<Hash, CommitRecord>,
}

impl MemoryRepo {
    /// An empty repository.
    pub fn new() -> MemoryRepo {
        MemoryRepo::default()
    }

    /// The object source of this repository's trees.
    pub fn source(&self) -> &Arc<MemorySource> {
        &self.source
    }

    /// An empty tree whose later grafts come from this repository.
    pub fn empty_tree(&self) -> Tree {
        Tree::empty_with_source(self.source.clone() as Arc<dyn ObjectSource>)
    }

    /// Commits `tree` with `parents` and `info`; returns the Tezos commit hash. Committing the same
    /// tree, parents and info twice yields the same hash and keeps one commit.
    pub fn commit(&mut self, tree: &Tree, parents: &[Hash], info: CommitInfo) -> Result<Hash, RepoError> {
        if matches!(tree.root(), Entry::Contents(_)) {
            return Err(RepoError::RootIsContents);
        }
        if let Some(missing) = parents.iter().find(|parent| !self.commits.contains_key(parent)) {
            return Err(RepoError::UnknownParent(*missing));
        }
        let tree_hash = tree.hash();
        let hash = commit_hash(&tree_hash, parents, &info);
        let root = self.source.persist(tree.root(), &**tree.source()).map_err(TreeError::from)?;
        self.commits.insert(hash, CommitRecord { tree_hash, root, parents: parents.to_vec(), info });
        Ok(hash)
    }

    /// The tree of commit `hash`.
    pub fn checkout(&self, hash: &Hash) -> Result<Tree, RepoError> {
        let record = self.commits.get(hash).ok_or(RepoError::UnknownCommit(*hash))?;
        Ok(Tree::from_entry(record.root.clone(), self.source.clone() as Arc<dyn ObjectSource>))
    }

    /// The record of commit `hash`.
    pub fn commit_record(&self, hash: &Hash) -> Option<&CommitRecord> {
        self.commits.get(hash)
    }

    /// Number of commits.
    pub fn commit_count(&self) -> usize {
        self.commits.len()
    }
}
