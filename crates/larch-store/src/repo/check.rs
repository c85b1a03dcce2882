//! The integrity checks of a handle's published state ([`crate::check`] does the work).

use crate::check::fsck::{self, FsckOptions, FsckReport};
use crate::check::scan::{self, ScanReport};
use crate::error::Result;
use crate::repo::Repo;
use std::path::Path;

/// Checks the store at `path` (opened read-only).
pub fn fsck(path: impl AsRef<Path>) -> Result<FsckReport> {
    Ok(Repo::open_read_only(path)?.fsck())
}

impl Repo {
    /// Checks the whole store (as of this handle's published state): every commit, every reachable
    /// object, every hash and offset, and the control file (a damaged spare slot or confirmation
    /// record, a confirmed state no slot holds). Never stops at the first problem.
    pub fn fsck(&self) -> FsckReport {
        self.fsck_with(&FsckOptions::default())
    }

    /// [`Repo::fsck`] with its memory bounded by `options` (the records reached and not checked
    /// yet held in memory; the rest wait in a temporary file).
    pub fn fsck_with(&self, options: &FsckOptions) -> FsckReport {
        let mut report =
            fsck::check(self.reader(), self.control_state(), &self.commits, &*self.files.index, options);
        // A reader beside a live writer, or a writer whose publisher thread may be writing a slot
        // now (pipelined), may read a slot while it is being written.
        let live = self.publisher.is_some()
            || (!self.writable && self.path.as_deref().is_none_or(|path| !super::open::no_writer(path)));
        let control = crate::check::control::control_problems(&*self.files.control, live);
        report.problems.splice(0..0, control);
        report
    }

    /// Counts the records of the published pack by kind, with their bytes and patch chain lengths,
    /// in one sequential pass over the record framing (no hashing, no reachability: see
    /// [`Repo::fsck`] for that). A record whose framing runs past the published end is an error.
    pub fn scan(&self) -> Result<ScanReport> {
        scan::scan(self.reader(), self.control_state(), self.commit_count() as u64, self.branches())
    }
}
