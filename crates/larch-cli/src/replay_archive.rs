//! Archive mode during `larch replay` (`--archive-every N --archive-keep M` with the global
//! `--lower DIR|s3://BUCKET/PREFIX`): every N commits, the sealed chunks below the commit M
//! blocks behind the newest move to the lower layer ([`larch_store::Repo::archive`]), as an
//! archive node's writer does; with object storage they upload in the background meanwhile, and
//! the summary reports the uploads and the largest backlog seen.

use larch_core::{BackendStats, CommitInfo, ContextRepo, GcSummary, Hash, Tree};
use larch_remote::UploadStats;
use larch_store::{ArchiveReport, PipelinedRepo, Repo, StoreError};
use serde_json::{Value, json};
use std::collections::VecDeque;

/// A store that can archive (the plain and the pipelined writer).
pub trait Archive: ContextRepo<Error = StoreError> {
    /// Moves the sealed chunks below the one holding `commit` to the lower layer.
    fn archive_below(&mut self, commit: &Hash) -> Result<ArchiveReport, StoreError>;
}

impl Archive for Repo {
    fn archive_below(&mut self, commit: &Hash) -> Result<ArchiveReport, StoreError> {
        self.archive(commit)
    }
}

impl Archive for PipelinedRepo {
    fn archive_below(&mut self, commit: &Hash) -> Result<ArchiveReport, StoreError> {
        self.with_repo(|repo| repo.archive(commit))?
    }
}

/// When to archive.
#[derive(Clone, Copy, Debug)]
pub struct ArchiveSchedule {
    /// Archive every this many commits.
    pub every: u64,
    /// Keep in the store directory the chunks of the last this many commits.
    pub keep: u64,
}

/// What archiving did during a replay.
#[derive(Clone, Debug, Default)]
pub struct ArchiveSummary {
    /// The lower layer (a directory or an `s3://` URL).
    pub lower: String,
    /// Archive runs.
    pub runs: u64,
    /// Chunk files moved.
    pub chunks_moved: u64,
    /// Their bytes.
    pub bytes_moved: u64,
    /// The longest archive run, in seconds (it runs on the replay's thread).
    pub max_run_s: f64,
    /// Object storage: the most chunks seen waiting for their upload after a run.
    pub max_backlog: u64,
    /// Object storage: the uploads at the end (after waiting for them, `--upload-wait`).
    pub uploads: Option<UploadsSummary>,
}

/// The uploads' counters at the end of a replay.
#[derive(Clone, Debug, Default)]
pub struct UploadsSummary {
    /// Chunks uploaded and verified.
    pub uploaded: u64,
    /// Their bytes.
    pub uploaded_bytes: u64,
    /// Chunks still waiting in the spool.
    pub backlog: u64,
    /// Their bytes.
    pub backlog_bytes: u64,
    /// Failed attempts, each retried.
    pub failures: u64,
    /// The last failure, while not succeeded since.
    pub last_error: Option<String>,
}

impl From<UploadStats> for UploadsSummary {
    fn from(stats: UploadStats) -> UploadsSummary {
        UploadsSummary {
            uploaded: stats.uploaded,
            uploaded_bytes: stats.uploaded_bytes,
            backlog: stats.backlog,
            backlog_bytes: stats.backlog_bytes,
            failures: stats.failures,
            last_error: stats.last_error,
        }
    }
}

impl ArchiveSummary {
    /// The summary as JSON (the replay's `--json` output's `archive`).
    pub fn to_json(&self) -> Value {
        json!({
            "lower": self.lower,
            "runs": self.runs,
            "chunks_moved": self.chunks_moved,
            "bytes_moved": self.bytes_moved,
            "max_run_s": self.max_run_s,
            "max_backlog": self.max_backlog,
            "uploads": self.uploads.as_ref().map(|u| json!({
                "uploaded": u.uploaded,
                "uploaded_bytes": u.uploaded_bytes,
                "backlog": u.backlog,
                "backlog_bytes": u.backlog_bytes,
                "failures": u.failures,
                "last_error": u.last_error,
            })),
        })
    }
}

impl std::fmt::Display for ArchiveSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Archive mode ({}): {} runs moved {} chunks ({} bytes), longest run {:.3} s",
            self.lower, self.runs, self.chunks_moved, self.bytes_moved, self.max_run_s
        )?;
        if let Some(u) = &self.uploads {
            write!(
                f,
                "; uploads: {} chunks ({} bytes) uploaded and verified, {} waiting ({} bytes), largest \
                 backlog {}, {} failed attempts retried",
                u.uploaded, u.uploaded_bytes, u.backlog, u.backlog_bytes, self.max_backlog, u.failures
            )?;
        }
        Ok(())
    }
}

/// A [`ContextRepo`] that archives on its schedule after its commits.
pub struct Archiving<'a, R> {
    inner: &'a mut R,
    schedule: ArchiveSchedule,
    /// The last `keep + 1` commits, oldest first.
    recent: VecDeque<Hash>,
    commits: u64,
    backlog: Box<dyn Fn() -> Option<u64> + 'a>,
    /// What it did so far.
    pub summary: ArchiveSummary,
}

impl<'a, R: Archive> Archiving<'a, R> {
    /// Wraps `inner`; `backlog` gives the upload backlog (object storage only).
    pub fn new(
        inner: &'a mut R,
        schedule: ArchiveSchedule,
        lower: String,
        backlog: Box<dyn Fn() -> Option<u64> + 'a>,
    ) -> Archiving<'a, R> {
        Archiving {
            inner,
            schedule,
            recent: VecDeque::new(),
            commits: 0,
            backlog,
            summary: ArchiveSummary { lower, ..ArchiveSummary::default() },
        }
    }

    fn committed(&mut self, hash: Hash) -> Result<(), StoreError> {
        self.recent.push_back(hash);
        while self.recent.len() as u64 > self.schedule.keep + 1 {
            self.recent.pop_front();
        }
        self.commits += 1;
        if !self.commits.is_multiple_of(self.schedule.every)
            || (self.recent.len() as u64) <= self.schedule.keep
        {
            return Ok(());
        }
        let Some(target) = self.recent.front().copied() else { return Ok(()) };
        let started = std::time::Instant::now();
        let report = self.inner.archive_below(&target)?;
        let summary = &mut self.summary;
        summary.runs += 1;
        summary.chunks_moved += report.chunks_moved;
        summary.bytes_moved += report.bytes_moved;
        summary.max_run_s = summary.max_run_s.max(started.elapsed().as_secs_f64());
        if let Some(backlog) = (self.backlog)() {
            summary.max_backlog = summary.max_backlog.max(backlog);
        }
        Ok(())
    }
}

impl<R: Archive> ContextRepo for Archiving<'_, R> {
    type Error = StoreError;

    fn empty_tree(&self) -> Tree {
        self.inner.empty_tree()
    }

    fn checkout(&mut self, commit: &Hash) -> Result<Tree, StoreError> {
        self.inner.checkout(commit)
    }

    fn commit(&mut self, tree: &Tree, parents: &[Hash], info: CommitInfo) -> Result<Hash, StoreError> {
        let hash = self.inner.commit(tree, parents, info)?;
        self.committed(hash)?;
        Ok(hash)
    }

    fn commit_expected(
        &mut self,
        tree: &Tree,
        parents: &[Hash],
        info: CommitInfo,
        expected: &Hash,
    ) -> Result<Hash, StoreError> {
        let hash = self.inner.commit_expected(tree, parents, info, expected)?;
        self.committed(hash)?;
        Ok(hash)
    }

    fn wait_durable(&mut self) -> Result<(), StoreError> {
        self.inner.wait_durable()
    }

    fn unexpected_commit(error: &StoreError) -> Option<(Hash, Hash)> {
        R::unexpected_commit(error)
    }

    fn stats(&self) -> BackendStats {
        self.inner.stats()
    }

    fn gc_start(&mut self, commit: &Hash) -> Result<bool, StoreError> {
        self.inner.gc_start(commit)
    }

    fn gc_running(&self) -> bool {
        self.inner.gc_running()
    }

    fn gc_finish(&mut self, wait: bool) -> Result<Option<GcSummary>, StoreError> {
        self.inner.gc_finish(wait)
    }
}
