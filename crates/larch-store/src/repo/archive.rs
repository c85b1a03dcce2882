//! Archive mode on the writer: moving sealed chunks to the lower directory and publishing the
//! archive flag (the mechanics are in [`crate::gc::archive`]).

use crate::error::{Result, StoreError};
use crate::format::control::FLAG_ARCHIVE;
use crate::gc::archive::{ArchiveReport, clean_up, is_pack_file, move_file, pack_io};
use crate::repo::Repo;
use larch_core::Hash;
use std::io::ErrorKind;
use std::time::Instant;

impl Repo {
    /// Archive mode: moves every sealed chunk file wholly below the chunk holding `commit` to the
    /// lower directory (`docs/store.md` *Archive mode*). Nothing is collected: every commit stays
    /// readable, through this handle and any other. Staged commits are published first; the first
    /// move of a store publishes the archive flag before any upper copy is unlinked. Each chunk:
    /// copy to `chunk.<seq>.tmp` in the lower directory, `fdatasync`, rename, `fsync` of the lower
    /// directory, unlink of the upper copy; this handle then reads the lower copy. Chunks already
    /// moved are counted, not copied again.
    ///
    /// Refused with [`StoreError::ReadOnly`] on a reader, [`StoreError::ArchiveRefused`] when the
    /// store was opened without a lower directory, [`StoreError::UnknownCommit`] for a commit not
    /// in the store.
    pub fn archive(&mut self, commit: &Hash) -> Result<ArchiveReport> {
        let started = Instant::now();
        if !self.writable {
            return Err(StoreError::ReadOnly);
        }
        if self.poisoned {
            return Err(StoreError::Poisoned);
        }
        let Some((upper, lower)) =
            self.files.dir.layers().map(|(upper, lower)| (upper.clone(), lower.clone()))
        else {
            return Err(StoreError::ArchiveRefused(
                "the store was opened without a lower directory (RepoOptions::lower, --lower DIR)".into(),
            ));
        };
        let offset = *self.commits.get(commit).ok_or(StoreError::UnknownCommit(*commit))?;
        self.flush()?;
        let layout = self.source.reader.layout().clone();
        let (commit_chunk, _) = layout.chunk_before(offset + 1);
        let first = layout.first_seq();
        let mut report = ArchiveReport { commit_chunk, ..ArchiveReport::default() };
        let mut to_move = Vec::new();
        for (seq, (name, _, _)) in (first..).zip(layout.chunk_files(self.state.pack_end)) {
            if seq >= commit_chunk {
                break;
            }
            match upper.open(&name, false) {
                Ok(_) => to_move.push((seq, name)),
                Err(e) if e.kind() == ErrorKind::NotFound => report.chunks_already_lower += 1,
                Err(e) => return Err(pack_io(&name, "open", e)),
            }
        }
        if !to_move.is_empty() && self.state.flags & FLAG_ARCHIVE == 0 {
            self.publish_archive_flag()?;
            report.flag_published = true;
        }
        for (seq, name) in &to_move {
            report.bytes_moved += move_file(&*upper, &*lower, name)?;
            report.chunks_moved += 1;
            // Release the unlinked upper copy: this handle reads the lower one from now on.
            layout.reopen_chunk(*seq)?;
        }
        if !to_move.is_empty() {
            upper.sync().map_err(|e| pack_io("store directory", "sync", e))?;
        }
        let names = upper.list().map_err(|e| pack_io("store directory", "list", e))?;
        report.upper_chunks = names.iter().filter(|name| is_pack_file(name)).count() as u64;
        report.elapsed = started.elapsed();
        Ok(report)
    }

    /// Publishes the current state with the archive flag set (no new commit). A failure poisons
    /// the handle, as any failed publish does.
    fn publish_archive_flag(&mut self) -> Result<()> {
        let mut state = self.state.clone();
        state.flags |= FLAG_ARCHIVE;
        if let Err(e) = self.write_switch(&mut state) {
            self.poisoned = true;
            return Err(e);
        }
        self.state = state;
        Ok(())
    }

    /// The writer's open in archive mode: [`clean_up`], then reopens the chunks whose upper copy
    /// it removed (so that this handle reads the lower copies).
    pub(crate) fn archive_clean_up(&mut self) -> Result<()> {
        let layout = self.source.reader.layout().clone();
        for seq in clean_up(&*self.files.dir, self.state.flags, layout.head().0)? {
            layout.reopen_chunk(seq)?;
        }
        Ok(())
    }

    /// Whether the store is in archive mode (its published state carries the archive flag: chunk
    /// files may be in the lower directory).
    pub fn is_archived(&self) -> bool {
        self.state.flags & FLAG_ARCHIVE != 0
    }
}
