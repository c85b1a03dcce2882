//! The integrity checks of a handle's published state ([`crate::check`] does the work).

use crate::check::fsck::{self, FsckOptions, FsckProgress, FsckReport, Problem};
use crate::check::scan::{self, ScanReport};
use crate::error::FileKind;
use crate::error::{Result, StoreError};
use crate::options::RepoOptions;
use crate::repo::Repo;
use std::path::Path;

/// Checks the store at `path` (opened read-only).
pub fn fsck(path: impl AsRef<Path>) -> Result<FsckReport> {
    Ok(Repo::open_read_only(path)?.fsck())
}

/// Checks of a read-only handle's store again at most this many times when garbage collections
/// keep changing it during the check ([`Repo::fsck`]).
const FSCK_RERUNS: u32 = 3;

impl Repo {
    /// Checks the whole store (as of this handle's published state): every commit, every reachable
    /// object, every hash and offset, and the control file (a damaged spare slot or confirmation
    /// record, a confirmed state no slot holds). Never stops at the first problem.
    ///
    /// A read-only handle beside a writer that collects garbage: when a GC retires files of the
    /// handle's state during the check (its layout followed the GC: no missing file is reported),
    /// the state checked is gone; the store is checked again as it is now, through a new handle, up
    /// to three times.
    pub fn fsck(&self) -> FsckReport {
        self.fsck_with(&FsckOptions::default())
    }

    /// [`Repo::fsck`] with its memory bounded by `options` (the records reached and not checked
    /// yet held in memory; the rest wait in a temporary file).
    pub fn fsck_with(&self, options: &FsckOptions) -> FsckReport {
        self.fsck_with_progress(options, &mut |_| {})
    }

    /// [`Repo::fsck_with`], telling `progress` how far the check is as it goes (a few hundred
    /// times at most; each check of the store again, after a GC changed it, starts from 0).
    pub fn fsck_with_progress(
        &self,
        options: &FsckOptions,
        progress: &mut dyn FnMut(FsckProgress),
    ) -> FsckReport {
        let epoch = self.reader().layout().epoch();
        let mut report = self.fsck_once(options, progress);
        if self.writable || self.reader().layout().epoch() == epoch {
            return report;
        }
        // The files are already layered over the lower directory, if any.
        let repo_options = RepoOptions { lower: None, ..self.options.clone() };
        for _ in 0..FSCK_RERUNS {
            // A GC's deletion between reading `control` and opening a file: read it again, as
            // `Repo::open_read_only` does.
            let mut opened =
                Repo::open_files(self.files.clone(), false, repo_options.clone(), self.path.as_deref());
            for _ in 0..8 {
                if !matches!(opened, Err(StoreError::NeedsRecovery { missing_file: true, .. })) {
                    break;
                }
                opened =
                    Repo::open_files(self.files.clone(), false, repo_options.clone(), self.path.as_deref());
            }
            let fresh = match opened {
                Ok(fresh) => fresh,
                Err(e) => {
                    report.problems.push(Problem {
                        file: FileKind::Control,
                        offset: 0,
                        hash: None,
                        parent: None,
                        what: format!(
                            "a garbage collection changed the store during the check, and opening its new state \
                             failed: {e}"
                        ),
                    });
                    return report;
                }
            };
            let epoch = fresh.reader().layout().epoch();
            report = fresh.fsck_once(options, progress);
            if fresh.reader().layout().epoch() == epoch {
                break;
            }
        }
        report
    }

    /// [`Repo::fsck_with`] of this handle's state, as it is.
    fn fsck_once(&self, options: &FsckOptions, progress: &mut dyn FnMut(FsckProgress)) -> FsckReport {
        let mut report = fsck::check(
            self.reader(),
            self.control_state(),
            &self.commits,
            &*self.files.index,
            options,
            progress,
        );
        // A reader beside a live writer, or a writer whose publisher thread may be writing a slot
        // now (pipelined), may read a slot while it is being written.
        let live = self.publisher.is_some() || (!self.writable && !super::open::no_writer(&*self.files.dir));
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
