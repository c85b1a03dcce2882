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

    /// Commits `tree` like [`commit`](ContextRepo::commit), for a caller that knows the hash the
    /// commit must have (a node checking the context hash of a block header, a replay checking
    /// its trace). Returns the commit hash, which the caller compares with `expected`. A store
    /// may instead return `expected` at once and compute the hash later, beside the caller: a
    /// commit whose hash then differs fails a later call (and nothing after it is committed).
    /// The default commits and returns the hash.
    fn commit_expected(
        &mut self,
        tree: &Tree,
        parents: &[Hash],
        info: CommitInfo,
        expected: &Hash,
    ) -> Result<Hash, Self::Error> {
        let _ = expected;
        self.commit(tree, parents, info)
    }

    /// If `error` is a later call's report that a commit made with
    /// [`commit_expected`](ContextRepo::commit_expected) had another hash: the expected hash and
    /// the commit's. A store that checks hashes beside its caller says so here, so that the caller
    /// can name the commit at fault; the default: `None`.
    fn unexpected_commit(error: &Self::Error) -> Option<(Hash, Hash)> {
        let _ = error;
        None
    }

    /// Waits until every commit returned so far is durable. Stores whose `commit` returns only
    /// once durable (or that keep nothing) leave this default, which returns at once; a store that
    /// publishes commits beside the caller (larch's `--sync pipelined`) waits for the last one, so
    /// that a replay's wall time includes it.
    fn wait_durable(&mut self) -> Result<(), Self::Error> {
        Ok(())
    }

    /// The store's counters, sampled by the replayer after every commit. Stores that keep no
    /// counters leave this default, which reports every figure as unknown.
    fn stats(&self) -> BackendStats {
        BackendStats::default()
    }

    /// Starts a garbage collection that keeps `commit`, every commit written after it and what
    /// they reach (replays with `--gc-every`). Returns `false`, doing nothing, when the store does
    /// not collect garbage: the default.
    fn gc_start(&mut self, _commit: &Hash) -> Result<bool, Self::Error> {
        Ok(false)
    }

    /// Whether a garbage collection started by [`ContextRepo::gc_start`] has not finished yet.
    fn gc_running(&self) -> bool {
        false
    }

    /// Finishes a garbage collection whose work is done (or, with `wait`, waits for it first) and
    /// returns what it did, once; `None` when none finished.
    fn gc_finish(&mut self, _wait: bool) -> Result<Option<GcSummary>, Self::Error> {
        Ok(None)
    }
}

/// What a finished garbage collection reports to the replayer.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct GcSummary {
    /// Wall time from its start to its switch, in seconds.
    pub total_s: f64,
    /// Time the writer spent in the switch, in seconds.
    pub switch_pause_s: f64,
    /// Bytes of the store's files when it started.
    pub disk_before: u64,
    /// Bytes of the store's files after the switch (and the deletions done so far).
    pub disk_after: u64,
    /// The largest size of the store's files observed while it ran.
    pub disk_peak: u64,
    /// Live bytes copied out of the collected files.
    pub copied_bytes: u64,
    /// Whether the GC was abandoned (the store unchanged; e.g. the writer reused an object the
    /// GC was about to collect): its other fields are then zero.
    #[cfg_attr(feature = "serde", serde(default))]
    pub abandoned: bool,
    /// The slice's index within a sliced GC (0: the first, an unsliced GC, or the slices waited for
    /// together from the first: the whole GC); a later slice
    /// only returns more of the same GC's disk.
    #[cfg_attr(feature = "serde", serde(default))]
    pub slice: u32,
    /// Time of its mark phase (finding the live records), in seconds.
    #[cfg_attr(feature = "serde", serde(default))]
    pub mark_s: f64,
    /// Bytes of the records whose pointers were its roots (its commit to the end of the store).
    #[cfg_attr(feature = "serde", serde(default))]
    pub window_bytes: u64,
    /// Of these, the bytes whose roots came from an earlier GC's summary instead of a read.
    #[cfg_attr(feature = "serde", serde(default))]
    pub window_summarised_bytes: u64,
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
    /// Bytes the cache holds now (its estimate of the decoded objects' memory).
    #[cfg_attr(feature = "serde", serde(default))]
    pub cache_bytes: Option<u64>,
    /// Objects read into the cache ahead of their use, by a thread of the store's own.
    #[cfg_attr(feature = "serde", serde(default))]
    pub objects_read_ahead: Option<u64>,
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
