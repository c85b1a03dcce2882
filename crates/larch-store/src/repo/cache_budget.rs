//! A handle on a store's cache budget, to lower it for a while (a streamed setup, which reads
//! little) while the store itself is borrowed by someone else (a replay).

use crate::pack::reader::PackSource;
use crate::repo::Repo;
use std::sync::Arc;

/// Sets the byte budget of a store's cache of decoded objects for now, below the one it was
/// opened with ([`crate::RepoOptions::cache_bytes`]). Cloned handles act on the same cache; a
/// running garbage collection's reserve comes out of the limited budget, and its switch gives
/// the reserve back without lifting the limit.
#[derive(Clone)]
pub struct CacheBudget {
    source: Arc<PackSource>,
}

impl std::fmt::Debug for CacheBudget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CacheBudget").field("configured", &self.configured()).finish()
    }
}

impl CacheBudget {
    /// The budget the store was opened with, in bytes.
    pub fn configured(&self) -> u64 {
        self.source.reader.cache_capacity()
    }

    /// Limits the cache to `bytes` (at most the configured budget), evicting what exceeds it;
    /// `None` restores the configured budget.
    pub fn limit(&self, bytes: Option<u64>) {
        self.source.reader.set_cache_limit(bytes);
    }
}

impl Repo {
    /// A handle on this store's cache budget ([`CacheBudget`]), which stays valid once the store
    /// is wrapped ([`crate::PipelinedRepo`]).
    pub fn cache_budget(&self) -> CacheBudget {
        CacheBudget { source: self.source.clone() }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::RepoOptions;
    use larch_core::CommitInfo;

    #[test]
    fn a_limit_evicts_down_to_it_and_none_restores_the_configured_budget() {
        let dir = tempfile::tempdir().unwrap();
        let options = RepoOptions { cache_bytes: 8 << 20, ..RepoOptions::default() };
        let mut repo = Repo::open_with(dir.path(), options).unwrap();
        let mut tree = repo.empty_tree();
        for i in 0..20_000u32 {
            tree.add(&[format!("d{}", i % 500), format!("v{i}")], i.to_be_bytes().to_vec()).unwrap();
        }
        let hash = repo.commit(&tree, &[], CommitInfo::tezos(0, "c")).unwrap();
        let budget = repo.cache_budget();
        assert_eq!(budget.configured(), 8 << 20);
        // Every directory read back through the cache.
        let read = repo.checkout(&hash).unwrap();
        for d in 0..500 {
            assert!(read.mem_tree(&[format!("d{d}")]).unwrap());
            assert_eq!(read.length(&[format!("d{d}")]).unwrap(), 40);
        }
        let (full, _) = repo.source.reader.cache_usage();
        assert!(full > 256 << 10, "{full} bytes cached");
        budget.limit(Some(64 << 10));
        assert_eq!(repo.source.reader.cache_weight(), 64 << 10);
        let (limited, _) = repo.source.reader.cache_usage();
        assert!(limited <= 64 << 10, "{limited} bytes cached under a 64 KiB limit");
        // A limit above the configured budget is the configured budget; `None` restores it.
        budget.limit(Some(1 << 30));
        assert_eq!(repo.source.reader.cache_weight(), 8 << 20);
        budget.limit(Some(1 << 20));
        budget.limit(None);
        assert_eq!(repo.source.reader.cache_weight(), 8 << 20);
    }

    #[test]
    fn a_gc_takes_its_reserve_from_the_limit_and_gives_it_back_without_lifting_it() {
        let dir = tempfile::tempdir().unwrap();
        let cache: u64 = 16 << 20;
        let options = RepoOptions { cache_bytes: cache, ..RepoOptions::default() };
        let mut repo = Repo::open_with(dir.path(), options).unwrap();
        repo.set_gc_policy(crate::GcPolicy { cache_reserve_bytes: 1 << 20, ..crate::GcPolicy::default() });
        let mut tree = repo.empty_tree();
        let mut commits = Vec::new();
        for block in 0..6u8 {
            tree.add(&[format!("b{block}"), "v".to_string()], vec![block; 100]).unwrap();
            let parents: Vec<_> = commits.last().copied().into_iter().collect();
            commits.push(repo.commit(&tree, &parents, CommitInfo::tezos(i64::from(block), "c")).unwrap());
        }
        let budget = repo.cache_budget();
        budget.limit(Some(4 << 20));
        repo.gc_start(&commits[3]).unwrap();
        assert_eq!(repo.source.reader.cache_weight(), (4 << 20) - (1 << 20), "the reserve out of the limit");
        // Lifting the limit while the GC runs keeps its reserve.
        budget.limit(None);
        assert_eq!(repo.source.reader.cache_weight(), cache - (1 << 20), "the reserve kept");
        budget.limit(Some(4 << 20));
        repo.gc_wait().unwrap();
        assert_eq!(repo.source.reader.cache_weight(), 4 << 20, "the switch keeps the limit");
        budget.limit(None);
        assert_eq!(repo.source.reader.cache_weight(), cache);
    }
}
