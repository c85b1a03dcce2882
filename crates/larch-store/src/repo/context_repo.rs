//! [`ContextRepo`] for the persistent pack store, so that the recorder, the replayer and
//! importers run on it.

use crate::gc::report::GcReport;
use crate::{Repo, StoreError};
use larch_core::{BackendStats, CommitInfo, ContextRepo, GcSummary, Hash, Tree};

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

    fn wait_durable(&mut self) -> Result<(), StoreError> {
        Repo::wait_durable(self)
    }

    /// Cache counters, objects and commits written, the encoded bytes appended, and the size of
    /// the store's files on disk ([`Repo::disk_bytes`]; the published size of the pack and the
    /// index if the directory cannot be listed).
    fn stats(&self) -> BackendStats {
        let stats = Repo::stats(self);
        BackendStats {
            cache_hits: Some(stats.cache_hits),
            cache_misses: Some(stats.cache_misses),
            cache_bytes: Some(stats.cache_bytes),
            objects_read_ahead: Some(stats.nodes_read_ahead),
            objects_written: Some(stats.objects_written + stats.commits_written),
            object_bytes_written: Some(stats.bytes_written),
            store_size_bytes: Some(self.disk_bytes().unwrap_or(stats.pack_bytes + stats.index_bytes)),
        }
    }

    fn gc_start(&mut self, commit: &Hash) -> Result<bool, StoreError> {
        Repo::gc_start(self, commit).map(|()| true)
    }

    fn gc_running(&self) -> bool {
        Repo::gc_running(self)
    }

    /// An abandoned GC (`StoreError::GcAbandoned`: the store is unchanged) is reported as such,
    /// not as an error, so that a replay goes on.
    fn gc_finish(&mut self, wait: bool) -> Result<Option<GcSummary>, StoreError> {
        let report = if wait { Repo::gc_wait(self) } else { Repo::gc_finish(self) };
        match report {
            Ok(report) => Ok(report.as_ref().map(summary)),
            Err(StoreError::GcAbandoned(_)) => {
                Ok(Some(GcSummary { abandoned: true, ..GcSummary::default() }))
            }
            Err(err) => Err(err),
        }
    }
}

/// The replayer's view of a [`GcReport`].
fn summary(report: &GcReport) -> GcSummary {
    GcSummary {
        total_s: report.total_time.as_secs_f64(),
        switch_pause_s: report.switch_pause.as_secs_f64(),
        disk_before: report.disk_before,
        disk_after: report.disk_after,
        disk_peak: report.disk_peak,
        copied_bytes: report.copied_bytes,
        abandoned: false,
        // A report that includes its GC's first slice (the only one that marks) is that GC's: the
        // report of `gc_wait` merges the slices it ran and carries the last one's index.
        slice: if report.marks > 0 { 0 } else { report.slice },
        mark_s: report.mark_time.as_secs_f64(),
        window_bytes: report.window_bytes,
        window_summarised_bytes: report.window_summarised_bytes,
    }
}
