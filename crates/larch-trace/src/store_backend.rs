//! [`ContextRepo`] for the persistent pack store, so that the replayer and the recorder run on it.

use crate::backend::{BackendStats, ContextRepo};
use larch_core::{CommitInfo, Hash, Tree};
use larch_store::{Repo, StoreError};

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replay::{ReplayOptions, RunMeta, replay};
    use crate::{GenParams, Generator};

    #[test]
    fn a_generated_trace_replays_into_the_pack_store_with_hashes_checked() {
        let params = GenParams { blocks: 12, accounts: 300, ops_per_block: 60, ..GenParams::default() };
        let (ops, report) = Generator::new(params).unwrap().collect().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let mut repo = Repo::open(dir.path()).unwrap();
        let summary = replay(
            &mut repo,
            ops.into_iter().map(Ok::<_, std::convert::Infallible>),
            &ReplayOptions::default(),
            &RunMeta::default(),
            None,
            &mut |_| {},
        )
        .unwrap();
        assert_eq!(summary.blocks, report.blocks);
        assert_eq!(summary.commits_checked, report.blocks);
        assert!(summary.store_size_bytes.unwrap() > 0);
        assert!(summary.objects_written.unwrap() > 0);
        assert_eq!(repo.head(), Some(report.final_commit));
        repo.close().unwrap();
        assert!(larch_store::fsck(dir.path()).unwrap().is_clean());
    }
}
