//! [`ContextRepo`] for the persistent pack store, so that the recorder, the replayer and
//! importers run on it.

use crate::{Repo, StoreError};
use larch_core::{BackendStats, CommitInfo, ContextRepo, Hash, Tree};

impl ContextRepo for Repo {
    type Error = StoreError;

    fn empty_tree(&self) -> Tree {
        Repo::empty_tree(self)
    }

    fn checkout(&mut self, commit: &Hash) -> Result<Tree, StoreError> {
        Repo::checkout(self, commit)
    }

    fn commit(&mut self, tree: &Tree, parents: &[Hash], info: CommitInfo) -> Result<Hash, StoreError> {
        Repo::commit(self, tree, parents, info)
    }

    /// Cache counters, objects and commits written, the encoded bytes appended, and the published
    /// size of the pack and the index (the control file adds a few hundred bytes).
    fn stats(&self) -> BackendStats {
        let stats = Repo::stats(self);
        BackendStats {
            cache_hits: Some(stats.cache_hits),
            cache_misses: Some(stats.cache_misses),
            objects_written: Some(stats.objects_written + stats.commits_written),
            object_bytes_written: Some(stats.bytes_written),
            store_size_bytes: Some(stats.pack_bytes + stats.index_bytes),
        }
    }
}
