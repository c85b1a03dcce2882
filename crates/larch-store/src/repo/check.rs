//! The integrity checks of a handle's published state ([`crate::check`] does the work).

use crate::check::fsck::{self, FsckReport};
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
    /// object, every hash and offset. Never stops at the first problem.
    pub fn fsck(&self) -> FsckReport {
        fsck::check(self.reader(), self.control_state(), &self.commits, &*self.files.index)
    }

    /// Counts the records of the published pack by kind, with their bytes and patch chain lengths,
    /// in one sequential pass over the record framing (no hashing, no reachability: see
    /// [`Repo::fsck`] for that). A record whose framing runs past the published end is an error.
    pub fn scan(&self) -> Result<ScanReport> {
        scan::scan(self.reader(), self.control_state(), self.commit_count() as u64, self.branches())
    }
}
